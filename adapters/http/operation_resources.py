"""The data API's REST routes, generated from the operation registry, and the helpers every JSON route uses."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

import falcon

from adapters.commands import unknown_names
from adapters.http.auth import api_actor
from adapters.http.body import MAX_DATA_BODY, read_json, refuse_body
from adapters.http.errors import kept_error_answer
from adapters.operation import Operation
from adapters.operations import OPERATIONS
from adapters.wire import dumps, encode
from community_api.access import Actor
from community_api.deps import Deps
from community_api.errors import InvalidRequest
from community_api.idempotency import run_once


def query(req: falcon.Request, allowed: Iterable[str]) -> dict[str, str | None]:
    """The query parameters a route takes, each at most once; any other name is refused, so a typo such
    as ``page=3`` is not silently ignored."""
    allowed = tuple(allowed)
    unknown = set(req.params) - set(allowed)
    if unknown:
        said, shown = unknown_names(unknown)
        raise InvalidRequest(f"unknown query parameter: {said}", unknown=shown, allowed=list(allowed))
    values: dict[str, str | None] = {}
    for name in allowed:
        value = req.params.get(name)
        if isinstance(value, list):
            raise InvalidRequest(f"{name} may be given once", parameter=name)
        values[name] = value
    return values


NOT_KEPT_HERE = (
    "this route keeps no Idempotency-Key, so a retry under it would act again: only creating a post, a comment "
    "or a DM keeps one"
)


def refuse_idempotency_key(req: falcon.Request, message: str = NOT_KEPT_HERE) -> None:
    """A POST that keeps no ``Idempotency-Key`` refuses one rather than ignore it: its client believes a
    retry safe (minting twice leaves a live key whose secret nobody saw)."""
    if req.get_header("Idempotency-Key") is not None:
        raise InvalidRequest(message)


def name_the_parameter(refusal: InvalidRequest, in_query: Iterable[tuple[str, str]]) -> None:
    """A refusal that names a value REST takes in the query names it as a ``parameter``, spelt as in the
    query, as every refusal of a query value does (the core names what it checks a ``field``: it does not
    know where REST puts it; an MCP call's arguments are all fields)."""
    field = refusal.details.get("field")
    for arg, name in in_query:
        if arg == field:
            refusal.details = {"parameter": name, **{k: v for k, v in refusal.details.items() if k != "field"}}


def send_json(resp: falcon.Response, value: object, status: int = 200) -> None:
    resp.status = status
    resp.content_type = falcon.MEDIA_JSON
    resp.data = encode(value)


class OperationRoute:
    """One path of the data API: a responder for each operation of the registry (``adapters/operations.py``)
    at that path, so that adding an operation is one entry there and one use case in the core.

    Each responder does what the hand-written resources did, in the same order (so the same error comes
    first): check the key and its scope, refuse unknown or repeated query parameters, read the JSON body
    of a POST (or refuse one sent to another method), call the operation with the path's and the query's
    values as they came (the core parses and checks them, for MCP too) and the body as the client sent it,
    then answer: JSON, 201 at most once per ``Idempotency-Key`` for a creation, or 204.
    """

    def __init__(self, deps: Deps, operations: Iterable[Operation]) -> None:
        self.deps = deps
        for operation in operations:
            # Where each argument comes from is worked out here, once, not on every request.
            wanted = operation.query_args()
            plan = (operation.path_args(), wanted, tuple(name for _, name in wanted))
            # Falcon finds responders by name; a method with no operation here answers 405.
            setattr(self, f"on_{operation.http.method.lower()}", functools.partial(self._serve, operation, plan))

    def _serve(
        self,
        operation: Operation,
        plan: tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...], tuple[str, ...]],
        req: falcon.Request,
        resp: falcon.Response,
        **path: str,
    ) -> None:
        in_path, in_query, query_names = plan
        actor = api_actor(self.deps, req, operation.scope)
        args: dict[str, Any] = {arg: path[name] for arg, name in in_path}
        values = query(req, query_names)
        args.update({arg: values[name] for arg, name in in_query if values[name] is not None})
        try:
            if operation.http.method == "POST":
                body, raw = read_json(req, limit=MAX_DATA_BODY)
                self._create_once(
                    req, resp, actor, raw, lambda: operation.execute(self.deps, actor, args, body, text=True)
                )
                return
            refuse_body(req, query_names)
            result = operation.execute(self.deps, actor, args, None, text=True)
        except InvalidRequest as refusal:
            name_the_parameter(refusal, in_query)
            raise
        if operation.http.status == 204:
            resp.status = falcon.HTTP_204
            return
        send_json(resp, result, status=operation.http.status)

    def _create_once(
        self, req: falcon.Request, resp: falcon.Response, actor: Actor, raw: bytes, make: Callable[[], object]
    ) -> None:
        """Answer 201 with what ``make`` created, at most once per ``Idempotency-Key``."""
        fingerprint = b"\n".join([req.method.encode(), req.relative_uri.encode(), (actor.connection.id).encode(), raw])
        answer = run_once(
            self.deps.store,
            self.deps.clock,
            account_id=actor.key.account_id,
            idempotency_key=req.get_header("Idempotency-Key"),
            request_fingerprint=fingerprint,
            act=lambda: dumps(make()),
            render_error=functools.partial(kept_error_answer, req),
        )
        resp.status = answer.status
        resp.content_type = falcon.MEDIA_JSON
        resp.text = answer.body
        if answer.replayed:
            resp.set_header("Idempotent-Replayed", "true")


def add_operation_routes(app: falcon.App, deps: Deps) -> None:
    """Every data operation of the registry, as its REST route."""
    by_path: dict[str, list[Operation]] = {}
    for operation in OPERATIONS:
        by_path.setdefault(operation.http.path, []).append(operation)
    for path, operations in by_path.items():
        app.add_route(path, OperationRoute(deps, operations))
