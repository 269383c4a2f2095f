"""The MCP server: lists the tools a key may use and runs tool calls through the core.

Built on the low-level ``mcp.server.lowlevel.Server`` rather than ``MCPServer``: the tool list depends on
the caller's key, the input schemas are written from the core's limits (``oneOf`` for ``to`` xor
``conversationId``), and failures are answered as tool errors carrying our error body — all three fight
``MCPServer``'s signature-derived schemas and its own error wrapping.

Who is calling reaches a handler through the WSGI environ: the HTTP endpoint authenticates the key before
any MCP code runs and puts a ``Caller`` in the environ, which a2wsgi hands on as ``scope["wsgi_environ"]``.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping
from typing import Any, cast

import attrs
import falcon
import mcp_types as types
from mcp.server.caching import CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from adapters.commands import repeatable
from adapters.http.errors import error_body, kept_error_answer, log_service_error
from adapters.http.request_log import log_error
from adapters.mcp.arguments import ArgumentChecker
from adapters.metrics import MCP_TOOL_CALLS
from adapters.operation import Operation
from adapters.operations import OPERATIONS, OPERATIONS_BY_NAME
from adapters.storage_failure import CODE as STORAGE_CODE
from adapters.storage_failure import STORAGE_RETRY_AFTER, storage_failure, storage_message
from adapters.version import service_version
from adapters.wire import data_and_text, dumps
from community_api.access import Actor, actor_for
from community_api.deps import Deps
from community_api.errors import NotFound, ServiceError
from community_api.idempotency import run_once
from community_api.keys import UNAUTHORIZED_MESSAGE
from community_api.model import ApiKey

log = logging.getLogger(__name__)

CALLER_ENVIRON_KEY = "community_api.mcp.caller"

INSTRUCTIONS = (
    "Tools of the Community Data API. Every tool acts as one connected account of a community platform: "
    "reads show what that account sees, writes publish, delete and message as that account. Start with "
    "whoami and list_groups. Calls act one at a time on the platform: a few at once wait their turn, more "
    "are refused as rate_limited (details.reason busy). A failed call is a tool error whose text is JSON "
    '{"error": {"code", "message", "details"}}: invalid_request (fix the arguments), forbidden (the key '
    "lacks details.requiredScope), not_found, rate_limited (wait details.retryAfter seconds), "
    "connection_expired (the account must be re-linked by its owner), platform_unavailable and "
    "service_unavailable (retry later, after details.retryAfter seconds when it is given; after a write, "
    "look first whether it was done)."
)


@attrs.frozen
class Caller:
    """The authenticated key of one MCP request, the connection it asked for, and the HTTP request that
    carries it (for its log lines: ``adapters/http/request_log.py``)."""

    key: ApiKey
    connection: str | None  # the X-Community-Connection header, as on REST
    request: falcon.Request


def caller_of(ctx: ServerRequestContext[Any, Any]) -> Caller | None:
    scope = getattr(ctx.request, "scope", None)
    environ = scope.get("wsgi_environ") if isinstance(scope, Mapping) else None
    caller = environ.get(CALLER_ENVIRON_KEY) if isinstance(environ, Mapping) else None
    return caller if isinstance(caller, Caller) else None


# A CallToolResult in its wire form, as ``CallToolResult.model_dump(by_alias=True, exclude_none=True)`` gives
# it (``resultType`` is dropped again for handshake-era clients). The runner takes a dict result as it is and
# checks it against the protocol version's result schema on the way out (``mcp.server.runner``): building
# the pydantic model first would only add a dump of all the structured content (0.3 ms for a 3-page feed).
ToolResult = dict[str, Any]


def error_result(code: str, message: str, details: Mapping[str, Any] | None = None) -> ToolResult:
    # The same body as a REST error, so an agent reads one format whichever way it came.
    text = error_body(code, message, dict(details or {}))
    return {"content": [{"type": "text", "text": text}], "isError": True, "resultType": "complete"}


def _outcome(result: ToolResult) -> str:
    """``ok``, or the error code of a result that is an error (a replayed one included)."""
    if not result.get("isError"):
        return "ok"
    try:
        return str(json.loads(result["content"][0]["text"])["error"]["code"])
    except (KeyError, IndexError, TypeError, ValueError):
        return "internal_error"


def success_result(payload: Any, text: str | None = None) -> ToolResult:
    """``payload``: JSON-ready data; ``text``: its JSON text when it is already written."""
    if text is None:
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    # The JSON text as well as structured content: clients of older protocol versions read only content.
    content = [{"type": "text", "text": text}]
    return {"content": content, "structuredContent": payload, "isError": False, "resultType": "complete"}


class ToolRunner:
    """Runs one tool call: scope and connection (core ``actor_for``), arguments, the use case, the answer.

    Synchronous on purpose: the use cases block on the store and the platform. It runs inline on the
    request's own thread, whose event loop serves no other request (``bridge.py``): no thread hand-over.
    """

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self._checkers = {spec.name: ArgumentChecker(spec.input_schema, spec.core_refusal) for spec in OPERATIONS}

    def call(self, caller: Caller, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        spec = OPERATIONS_BY_NAME.get(name)
        tool = spec.name if spec else "unknown"  # a client picks the name: keep the metric's labels bounded
        request = caller.request
        request.context.tool = tool  # for the request's log line
        try:
            if spec is None:
                # The name is the client's: repeated only when it could be a typo, never 200 KB of it.
                said = f"no tool named {name}" if repeatable(name) else "no such tool"
                raise NotFound(said, allowed=sorted(OPERATIONS_BY_NAME))
            # The same order as a REST resource: who (scope, connection) before what (arguments).
            actor = actor_for(self.deps.store, caller.key, spec.scope, caller.connection)
            request.context.connection_id = actor.connection.id  # for the request's log line
            arguments = self._checkers[spec.name].check(arguments)
            if not spec.creates:
                result = success_result(
                    *data_and_text(spec.execute(self.deps, actor, arguments, spec.body_of(arguments), text=False))
                )
            else:
                result = self._create_once(spec, actor, arguments, request)
        except ServiceError as error:
            MCP_TOOL_CALLS.labels(tool, error.code).inc()
            log_service_error(request, error, tool=tool)
            return error_result(error.code, error.message, error.details)
        except Exception as error:
            cause = storage_failure(error)
            if cause is not None:  # not a bug: the box cannot write (adapters/storage_failure.py)
                message = storage_message(cause, changes=spec is not None and spec.http.method != "GET")
                log_error(request, 503, STORAGE_CODE, message, error, tool=tool)
                MCP_TOOL_CALLS.labels(tool, STORAGE_CODE).inc()
                return error_result(STORAGE_CODE, message, {"retryAfter": STORAGE_RETRY_AFTER})
            log.exception("MCP tool %s failed", tool)
            log_error(request, 500, "internal_error", "unexpected error", error, tool=tool)
            MCP_TOOL_CALLS.labels(tool, "internal_error").inc()
            return error_result("internal_error", "the service failed to handle this call")
        MCP_TOOL_CALLS.labels(tool, _outcome(result)).inc()
        return result

    def _create_once(
        self, spec: Operation, actor: Actor, arguments: Mapping[str, Any], request: falcon.Request
    ) -> ToolResult:
        """Act at most once per ``idempotencyKey``, with the core's rules for REST's Idempotency-Key."""
        body = {name: value for name, value in arguments.items() if name != "idempotencyKey"}

        canonical = json.dumps(body, sort_keys=True, ensure_ascii=False)
        answer = run_once(
            self.deps.store,
            self.deps.clock,
            account_id=actor.key.account_id,
            idempotency_key=arguments.get("idempotencyKey"),
            request_fingerprint="\n".join(["mcp", spec.name, actor.connection.id, canonical]).encode(),
            act=lambda: dumps(spec.execute(self.deps, actor, body, spec.body_of(body), text=False)),
            render_error=functools.partial(kept_error_answer, request, tool=spec.name),
        )
        payload = json.loads(answer.body)
        if not 200 <= answer.status < 300:
            error = payload["error"]
            return error_result(error["code"], error["message"], error["details"])
        return success_result(payload, answer.body)


def _listed(spec: Operation) -> types.Tool:
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.input_schema,
        output_schema=spec.output_schema,
        annotations=spec.annotations,
    )


def build_server(deps: Deps) -> Server[Any]:
    runner = ToolRunner(deps)
    listed = [(spec, _listed(spec)) for spec in OPERATIONS]

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        caller = caller_of(ctx)
        granted = set(caller.key.scopes) if caller else set()
        # A tool whose scope the key lacks is not offered: an agent should not plan with it.
        return types.ListToolsResult(tools=[tool for spec, tool in listed if spec.scope in granted])

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> ToolResult:
        caller = caller_of(ctx)
        if caller is None:
            return error_result("unauthorized", UNAUTHORIZED_MESSAGE)
        # Inline, blocking: this loop serves this one request only (bridge.py), so nothing waits behind it.
        return runner.call(caller, params.name, params.arguments or {})

    def input_schema(name: str) -> Mapping[str, Any] | None:
        spec = OPERATIONS_BY_NAME.get(name)
        return spec.input_schema if spec else None

    return Server(
        "community-api",
        version=service_version(),
        title="Community Data API",
        instructions=INSTRUCTIONS,
        # The list depends on the key's scopes: a client must not share it across keys.
        cache_hints={"tools/list": CacheHint(ttl_ms=0, scope="private")},
        # Known without listing, so a 2026 request's Mcp-Param check does not run tools/list again.
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        # Declared as answering a CallToolResult; a dict in its wire form is accepted as well (see ToolResult).
        on_call_tool=cast(Any, call_tool),
    )
