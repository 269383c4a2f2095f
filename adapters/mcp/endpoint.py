"""``POST /v1/mcp``: the remote MCP server (Streamable HTTP, stateless, JSON responses) behind our own
authentication and error format.

A request flows: Falcon resource → Bearer key checked and counted (``adapters/http/auth.bearer_key``, the
same code as every REST route; 401 before any MCP code runs) → body read with our size and media checks →
the session manager held open on this thread's own event loop, given a2wsgi's ASGI scope (``bridge.py``)
→ a tool handler, which runs the core use case inline (``server.py``). The request never leaves its thread.

GET and DELETE answer 405 at once (Falcon's default responder, our JSON body): in stateless mode there is
no server-to-client stream to open and no session to end, and a GET would otherwise never end. OPTIONS is
the CORS preflight of a browser-based client, answered for the origins the transport allows.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any
from urllib.parse import urlsplit

import falcon
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from adapters.http.auth import CONNECTION_HEADER, bearer_key, resource_url
from adapters.http.body import MAX_DATA_BODY, UnsupportedMediaType, read_raw, refuse_content_coding
from adapters.http.errors import error_body
from adapters.http.host_check import host_name, is_loopback, read_host
from adapters.http.operation_resources import refuse_idempotency_key
from adapters.mcp import envelope
from adapters.mcp.bridge import SessionManagers
from adapters.mcp.server import CALLER_ENVIRON_KEY, Caller, build_server
from adapters.settings import LOOPBACK_HOSTS, Settings
from community_api.deps import Deps
from community_api.errors import Forbidden

PATH = "/v1/mcp"
# As REST's data operations: escaped, the longest arguments the core takes come to about 245 KB.
MAX_BODY = MAX_DATA_BODY

# MCP's own refusals that are not JSON-RPC documents (plain text or empty), as our error codes.
_CODE_BY_STATUS = {
    400: "invalid_request",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "payload_too_large",
    415: "unsupported_media_type",
    421: "misdirected_request",
}
_HOP_BY_HOP = frozenset({"content-length", "connection", "transfer-encoding"})


def security_settings(settings: Settings) -> TransportSecuritySettings:
    """DNS-rebinding protection: the Host must be one we serve; a browser's Origin must be one of them, or
    one of ``COMMUNITY_API_MCP_ALLOWED_ORIGINS``."""
    hosts = [host.lower() for host in settings.mcp_allowed_hosts]
    # The hosts the REST host rule serves besides loopback are served here too: an operator who named the
    # service's host there would otherwise find REST answering and MCP refusing with 421.
    hosts += [host for host in _any_port(settings.allowed_hosts) if host not in hosts]
    if settings.public_url:
        public_host = urlsplit(settings.public_url).netloc.lower()  # the Host is compared in lower case
        if public_host and public_host not in hosts:
            hosts.append(public_host)
    hosts += [absolute for host in hosts if (absolute := _absolute(host)) and absolute not in hosts]
    hosts += _portless(hosts)
    origins = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
    # A browser writes an Origin's scheme and host in lower case (an origin has no path to keep as written).
    origins += [origin.lower() for origin in settings.mcp_allowed_origins if origin.lower() not in origins]
    origins += _portless(origins)
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def serves_every_loopback_host(settings: Settings) -> bool:
    """Whether every loopback host the REST host rule serves is served here too. Without a public URL that
    rule serves any loopback name or address (``127.0.0.0/8``, ``[::ffff:127.0.0.1]``, names under
    ``localhost``: ``adapters/http/host_check``), while the transport's list names hosts one by one and cannot
    name a range: an agent given ``http://127.0.0.2:8000/v1/mcp`` got 421 where REST answered. So while the
    list holds the loopback defaults, a Host the rule served as loopback is served (docs/decisions.md, "The
    hosts REST serves are the MCP endpoint's too"). ``MCP_ALLOWED_HOSTS`` set without them, or a public URL
    (the rule is off then), leaves the list alone to judge."""
    hosts = {host.lower() for host in settings.mcp_allowed_hosts}
    return not settings.public_url and set(LOOPBACK_HOSTS) <= hosts


def _absolute(host: str) -> str | None:
    """The same host entry with its name written absolute (``localhost.:*``, RFC 1034 §3.1), as the REST
    host rule reads ``Host: localhost.``; None for an address, which has no such form."""
    name, colon, port = host.rpartition(":") if host.count(":") == 1 else (host, "", "")
    if not name or name.endswith(".") or name.startswith("["):
        return None
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return f"{name}.{colon}{port}"
    return None


def _any_port(allowed_hosts: tuple[str, ...]) -> list[str]:
    """``COMMUNITY_API_ALLOWED_HOSTS`` in the MCP list's form: a name without a port is any port, as the REST
    host rule reads it (``box.lan`` → ``box.lan:*``); ``host:port`` stays as written."""
    entries = [host.strip().lower() for host in allowed_hosts]
    return [entry if host_name(entry) != entry else f"{entry}:*" for entry in entries]  # no port written: any


def _portless(entries: list[str]) -> list[str]:
    """``localhost:*`` means any port, the scheme's own included, which a ``Host`` or ``Origin`` leaves out
    (``localhost``, ``http://localhost``): the MCP transport matches ``:*`` only against a written port."""
    return [entry[:-2] for entry in entries if entry.endswith(":*") and entry[:-2] not in entries]


def origin_allowed(origin: str, allowed: list[str]) -> bool:
    """The MCP transport's own rule for an ``Origin``: listed as it is, or under a ``:*`` entry with any
    port."""
    return origin in allowed or any(
        entry.endswith(":*") and origin.startswith(entry[:-1]) and origin[len(entry) - 1 :].isdigit()
        for entry in allowed
    )


# Its tools take an ``idempotencyKey`` argument; a header would be kept for no call.
NO_IDEMPOTENCY_HEADER = (
    "the MCP endpoint keeps no Idempotency-Key header, so a retry under it would act again: create_post, "
    "create_comment and send_dm take an idempotencyKey argument"
)
# CORS for a browser-based MCP client on an allowed origin. Credentials are the Bearer header, never a
# cookie, so no ``Allow-Credentials``; the headers a client must read (the 401's resource metadata, the
# protocol version) are exposed.
CORS_ALLOW_HEADERS = "Authorization, Content-Type, Accept, Mcp-Protocol-Version, Mcp-Session-Id, X-Community-Connection"
CORS_EXPOSE_HEADERS = "WWW-Authenticate, Mcp-Session-Id, Mcp-Protocol-Version, X-Request-Id"


def _read_body(req: falcon.Request) -> bytes:
    refuse_content_coding(req)
    media = (req.content_type or "").split(";")[0].strip().lower()
    if media != "application/json":
        raise UnsupportedMediaType("send MCP messages as application/json")
    return read_raw(req, limit=MAX_BODY)


def _is_json(body: bytes) -> bool:
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


class McpResource:
    def __init__(self, deps: Deps, settings: Settings) -> None:
        self.deps = deps
        self.settings = settings
        server = build_server(deps)
        security = security_settings(settings)
        self.origins = security.allowed_origins
        self.every_loopback = serves_every_loopback_host(settings)
        self.bridge = SessionManagers(
            lambda: StreamableHTTPSessionManager(
                server,
                json_response=True,
                stateless=True,
                security_settings=security,
                max_request_body_size=MAX_BODY,
            )
        )

    def _cors(self, req: falcon.Request, resp: falcon.Response) -> bool:
        """CORS headers for an allowed ``Origin``, on every answer (errors too: without them the browser
        hides the answer from the page); whether the request came from one. The transport refuses others."""
        origin = req.get_header("Origin")
        resp.append_header("Vary", "Origin")
        if origin is None or not origin_allowed(origin, self.origins):
            return False
        resp.set_header("Access-Control-Allow-Origin", origin)
        resp.set_header("Access-Control-Expose-Headers", CORS_EXPOSE_HEADERS)
        return True

    def _transport_host(self, host: str) -> str:
        """The Host as the transport's DNS-rebinding check is to read it: in lower case, since a host name is
        case-insensitive (RFC 9110 §4.2.3) as the REST host rule reads it and the transport compares it as
        written; and a loopback host that rule has served (``127.0.0.2:8000``, ``mcp.localhost:8000``) as
        ``localhost`` on the same port, a name the list holds (``serves_every_loopback_host``). Only the
        transport reads this copy of the request."""
        host = host.lower()
        if self.every_loopback:
            read, name = read_host(host)  # as the REST rule read it: a final dot dropped
            if is_loopback(name):
                return "localhost" + read[len(name) :]
        return host

    def on_options(self, req: falcon.Request, resp: falcon.Response) -> None:
        """The preflight of a browser-based client: its origin must be allowed. Without an ``Origin`` it is
        no preflight (a browser always sends one): answered as any route answers OPTIONS."""
        if req.get_header("Origin") is None:
            resp.append_header("Vary", "Origin")
            resp.set_header("Allow", "POST")  # as Falcon's own OPTIONS answer: OPTIONS itself left out
            return
        if not self._cors(req, resp):
            raise Forbidden(
                "this web origin may not call the MCP endpoint (the operator lists browser clients' origins in "
                "COMMUNITY_API_MCP_ALLOWED_ORIGINS)"
            )
        resp.set_header("Access-Control-Allow-Methods", "POST")
        resp.set_header("Access-Control-Allow-Headers", CORS_ALLOW_HEADERS)
        resp.set_header("Access-Control-Max-Age", "600")
        resp.status = falcon.HTTP_204

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        self._cors(req, resp)
        # API keys, and OAuth access tokens issued for this endpoint (connector keys).
        key = bearer_key(self.deps, req, resource=resource_url(self.settings, req))
        refuse_idempotency_key(req, NO_IDEMPOTENCY_HEADER)
        raw = _read_body(req)
        refused = envelope.refusal(raw)
        if refused is not None:
            resp.status = falcon.HTTP_400
            resp.media = refused
            return
        environ: dict[str, Any] = dict(req.env)
        # The body was read here (size limit, chunked uploads): the ASGI side gets it whole.
        environ["CONTENT_LENGTH"] = str(len(raw))
        environ.pop("HTTP_TRANSFER_ENCODING", None)
        # A media type is case-insensitive (RFC 9110 §8.3.1), and _read_body took it as such; the transport
        # compares it as written and answered ``Application/JSON`` 415. JSON has one encoding (RFC 8259 §8.1).
        environ["CONTENT_TYPE"] = "application/json"
        if "HTTP_HOST" in environ:
            environ["HTTP_HOST"] = self._transport_host(environ["HTTP_HOST"])
        environ[CALLER_ENVIRON_KEY] = Caller(key, req.get_header(CONNECTION_HEADER), req)
        answer = self.bridge.handle(environ, raw)
        resp.status = answer.status
        for name, value in answer.headers:
            if name.lower() not in _HOP_BY_HOP:
                resp.set_header(name, value)
        body = answer.body
        if answer.status == 400:
            body = envelope.tidy(body)
        if answer.status >= 400 and not _is_json(body):
            # Host, Origin or Accept refusals come back as plain text: give them our error body.
            message = body.decode("utf-8", "replace").strip() or falcon.code_to_http_status(answer.status)
            body = error_body(_CODE_BY_STATUS.get(answer.status, "invalid_request"), message).encode()
            resp.content_type = falcon.MEDIA_JSON
        resp.data = body


def add_mcp_route(app: falcon.App, deps: Deps, settings: Settings) -> McpResource:
    """Mount ``POST /v1/mcp``; answers the resource so that tests can close its session managers."""
    resource = McpResource(deps, settings)
    app.add_route(PATH, resource)
    return resource
