"""OAuth clients for MCP connectors: dynamic registration (RFC 7591) and the checks of an authorization
request (OAuth 2.1 §4.1.1, PKCE RFC 7636, resource indicators RFC 8707). Tokens are in ``oauth.py``.

Rules:
- registration is open (MCP clients register themselves) but throttled: 20 per client address per hour
  (an IPv6 address counted by its /64, as sign-in counts it). A client that no person approves within a
  day (``UNAPPROVED_CLIENT_LIFETIME``) is forgotten, and at most ``MAX_UNAPPROVED_CLIENTS`` wait for an
  approval at once: strangers from many addresses could otherwise fill the disk with registrations of up
  to 20 kB each that nobody ever uses. An approved client is kept for good;
- every client is public (``token_endpoint_auth_method: none``): it proves itself with PKCE, never with
  a secret; a request for a secret-based method is answered with ``none``, as RFC 7591 §3.2.1 allows;
- metadata we do not understand is ignored (RFC 7591 §2), but redirect URIs are strict: 1 to 10, no
  fragment, ``https``, ``http`` on a loopback host only (RFC 8252 §7.3), or a private-use scheme of a
  native app (RFC 8252 §7.1); nothing that a browser would run or read locally; a plain host and port
  (no user info, spaces or separators: the origin goes into the consent page's CSP);
- a redirect URI is matched exactly, character for character, with one registered for the client;
- an authorization request must use ``response_type=code`` and PKCE with ``S256`` (``plain`` is refused);
  ``resource``, when given, must name this service's MCP endpoint (else ``invalid_target``); an unknown
  scope is ``invalid_scope`` (``offline_access`` is ignored: refresh tokens are always issued).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from urllib.parse import SplitResult, urlsplit

import attrs

from community_api.errors import ServiceError
from community_api.ids import new_id
from community_api.model import AuditEvent
from community_api.oauth_model import OAuthClient
from community_api.ports import Clock, KeyStore
from community_api.readable import is_readable
from community_api.scopes import ALL_SCOPES, DEFAULT_SCOPES
from community_api.sign_in_guard import client_key

REGISTRATION_WINDOW = timedelta(hours=1)
MAX_REGISTRATIONS_PER_ADDRESS = 20
UNAPPROVED_CLIENT_LIFETIME = timedelta(days=1)
MAX_UNAPPROVED_CLIENTS = 1000
MAX_REDIRECT_URIS = 10
MAX_URI_LENGTH = 2000
MAX_CLIENT_NAME = 100
MAX_STATE = 1000
DEFAULT_CLIENT_NAME = "MCP client"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
# Schemes a browser would act on itself rather than hand to a native app.
# A redirect URI must be one a browser returns to: https, http on loopback, or a native app's private-use
# scheme (RFC 8252 §7.1; real MCP clients use ones like ``cursor://``). Refused by name: schemes that run
# or read something in the page, the schemes a browser hands to another program (WHATWG HTML's safelisted
# schemes of ``registerProtocolHandler``), and those it shows as source or keeps for itself.
_FORBIDDEN_SCHEMES = frozenset(
    {
        "javascript",
        "data",
        "file",
        "vbscript",
        "about",
        "blob",
        "ftp",
        "ws",
        "wss",
        "bitcoin",
        "ftps",
        "geo",
        "im",
        "irc",
        "ircs",
        "magnet",
        "mailto",
        "matrix",
        "mms",
        "news",
        "nntp",
        "openpgp4fpr",
        "sftp",
        "sip",
        "sips",
        "sms",
        "smsto",
        "ssh",
        "tel",
        "urn",
        "webcal",
        "wtai",
        "xmpp",
        "view-source",
        "intent",
        "android-app",
        "chrome",
        "chrome-extension",
        "chrome-search",
        "chrome-untrusted",
        "edge",
        "brave",
        "opera",
        "vivaldi",
        "moz-extension",
        "resource",
        "jar",
        "filesystem",
        "callto",
        "facetime",
        "skype",
        "market",
        "itms",
        "itms-apps",
        "itms-services",
        "fax",
        "mid",
        "cid",
    }
)
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")
# A host and port only: no user info, and nothing that could end a header value or a CSP source list.
_NETLOC = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?")
_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")  # base64url of a SHA-256, unpadded
IGNORED_SCOPES = frozenset({"offline_access"})


class OAuthError(ServiceError):
    """A refusal in OAuth's own terms: ``error`` is the RFC 6749 / 7591 / 8707 error code
    (``invalid_request``, ``invalid_client``, ``invalid_grant``, ``invalid_scope``, ``invalid_target``,
    ``unsupported_response_type``, ``invalid_redirect_uri``, ``invalid_client_metadata`` …) and the
    message its ``error_description``. The web adapter answers it in OAuth's format."""

    code = "invalid_request"

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description, error=error)
        self.error = error


class RegistrationThrottled(OAuthError):
    """Too many registrations from one address, or waiting for an approval; ``retry_after`` in seconds."""

    code = "rate_limited"

    def __init__(
        self, retry_after: int, description: str = "too many client registrations from this address; try again later"
    ) -> None:
        super().__init__("invalid_request", description)
        self.retry_after = retry_after


@attrs.frozen
class AuthorizationParams:
    """The parameters of an authorization request (OAuth 2.1 §4.1.1) as the client sent them, by their OAuth
    names: each one at most once (the page refuses a repeated one), None when absent. Unchecked: that is
    ``check_client_redirect`` and ``check_authorization_request``."""

    response_type: str | None = None
    client_id: str | None = None
    redirect_uri: str | None = None
    state: str | None = None
    code_challenge: str | None = None
    code_challenge_method: str | None = None
    scope: str | None = None
    resource: str | None = None


AUTHORIZATION_PARAMS = tuple(attrs.fields_dict(AuthorizationParams))


@attrs.frozen
class AuthorizationRequest:
    """A checked authorization request, ready for the consent page."""

    client: OAuthClient
    redirect_uri: str  # as sent, or the client's only one when none was (OAuth 2.1 §4.1.1)
    redirect_uri_sent: bool  # whether the request named it: then the token request must repeat it
    state: str | None
    code_challenge: str
    requested_scopes: tuple[str, ...]
    resource: str


def _has_unsafe_characters(uri: str) -> bool:
    """Spaces or control characters, which no redirect URI may hold (registered or asked for)."""
    return any(c.isspace() or not c.isprintable() for c in uri)


def _split_uri(uri: str) -> SplitResult | None:
    """``urlsplit``, or None for a text it refuses: brackets that hold no IPv6 address (``https://[x]/cb``,
    ``http://[::1/cb``) make it raise ValueError, which a client's text must not turn into a 500."""
    try:
        return urlsplit(uri)
    except ValueError:
        return None


def _port_ok(parts: SplitResult) -> bool:
    """No port, or one from 1 to 65535 (no browser goes to port 0 or 99999: urlsplit raises on the latter)."""
    try:
        port = parts.port
    except ValueError:
        return False
    return port is None or port >= 1


def check_redirect_uri(uri: str) -> str:
    """The URI if a client may register it, else ``OAuthError(invalid_redirect_uri)``."""
    if not isinstance(uri, str) or not uri or len(uri) > MAX_URI_LENGTH:
        raise OAuthError("invalid_redirect_uri", f"each redirect URI must be a string of 1 to {MAX_URI_LENGTH}")
    if _has_unsafe_characters(uri):
        raise OAuthError("invalid_redirect_uri", "a redirect URI must not contain spaces or control characters")
    parts = _split_uri(uri)
    if parts is None:
        raise OAuthError("invalid_redirect_uri", f"a redirect URI's brackets hold an IPv6 address only: {uri}")
    scheme = parts.scheme
    if parts.fragment or "#" in uri:
        raise OAuthError("invalid_redirect_uri", "a redirect URI must not have a fragment")
    if not _SCHEME.fullmatch(scheme) or scheme in _FORBIDDEN_SCHEMES:
        raise OAuthError("invalid_redirect_uri", f"redirect URI scheme not allowed: {uri}")
    if scheme in ("http", "https") and not (_NETLOC.fullmatch(parts.netloc) and _port_ok(parts)):
        raise OAuthError("invalid_redirect_uri", f"a redirect URI needs a plain host (and port): {uri}")
    if scheme == "http" and parts.hostname not in LOOPBACK_HOSTS:
        raise OAuthError("invalid_redirect_uri", "http redirect URIs are allowed on a loopback host only")
    if scheme not in ("http", "https") and not (parts.netloc or parts.path):
        raise OAuthError("invalid_redirect_uri", f"a private-use redirect URI needs a path: {uri}")
    return uri


def _redirect_uris(instance: object, attribute: attrs.Attribute[list[str]], value: list[str]) -> None:
    if not 1 <= len(value) <= MAX_REDIRECT_URIS:
        raise OAuthError("invalid_redirect_uri", f"redirect_uris must list 1 to {MAX_REDIRECT_URIS} URIs")
    for uri in value:
        check_redirect_uri(uri)


def _readable(instance: object, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    if value is not None and not is_readable(value):
        # Shown on the consent page: a right-to-left override could make it read as another name.
        raise OAuthError(
            "invalid_client_metadata", "client_name may not hold control characters or bidirectional overrides"
        )


def _including(wanted: str) -> Callable[[object, attrs.Attribute[list[str] | None], list[str] | None], None]:
    def check(instance: object, attribute: attrs.Attribute[list[str] | None], value: list[str] | None) -> None:
        if value is not None and wanted not in value:
            raise OAuthError("invalid_client_metadata", f"{attribute.name} must include {wanted}")

    return check


@attrs.frozen
class ClientMetadata:
    """What this service reads of a client's RFC 7591 §2 metadata, by RFC 7591's names; the rest is ignored,
    as §2 says. A broken rule is an ``OAuthError`` in RFC 7591's terms (``invalid_redirect_uri`` or
    ``invalid_client_metadata``)."""

    redirect_uris: list[str] = attrs.field(validator=_redirect_uris)
    client_name: str | None = attrs.field(default=None, validator=_readable)
    # Only the code flow is served: a client may list more, but must list it.
    grant_types: list[str] | None = attrs.field(default=None, validator=_including("authorization_code"))
    response_types: list[str] | None = attrs.field(default=None, validator=_including("code"))

    @property
    def display_name(self) -> str:
        """The name the consent page shows: spaces folded, at most ``MAX_CLIENT_NAME`` characters."""
        return " ".join((self.client_name or "").split())[:MAX_CLIENT_NAME] or DEFAULT_CLIENT_NAME


def register_client(store: KeyStore, clock: Clock, metadata: ClientMetadata, client_address: str) -> OAuthClient:
    """Register a public client. Open, but at most ``MAX_REGISTRATIONS_PER_ADDRESS`` an hour from one
    address, and at most ``MAX_UNAPPROVED_CLIENTS`` waiting for a person's approval (those waiting longer
    than ``UNAPPROVED_CLIENT_LIFETIME`` are forgotten first): counted and written in one step, so
    registrations sent at once cannot pass either bound."""
    now = clock.now()
    subject = f"addr:{client_key(client_address)}"  # an IPv6 client by its /64, as sign-in counts it
    client = OAuthClient(
        id=new_id("ocl"),
        name=metadata.display_name,
        redirect_uris=tuple(dict.fromkeys(metadata.redirect_uris)),
        created_at=now,
    )
    with store.unit_of_work() as uow:
        if uow.attempts.count_attempts("oauth.client_registered", subject, now - REGISTRATION_WINDOW) >= (
            MAX_REGISTRATIONS_PER_ADDRESS
        ):
            raise RegistrationThrottled(int(REGISTRATION_WINDOW.total_seconds()))
        uow.oauth.forget_unapproved_oauth_clients(now - UNAPPROVED_CLIENT_LIFETIME)
        waiting = uow.oauth.count_unapproved_oauth_clients() >= MAX_UNAPPROVED_CLIENTS
        if not waiting:
            uow.oauth.add_oauth_client(client)
            uow.attempts.add_attempt("oauth.client_registered", subject, now)
            uow.audit.add_audit(AuditEvent(at=now, event="oauth.client_registered", subject=subject, detail=client.id))
        uow.commit()  # the clients forgotten above stay forgotten either way
    if waiting:
        raise RegistrationThrottled(
            int(REGISTRATION_WINDOW.total_seconds()),
            f"{MAX_UNAPPROVED_CLIENTS} registered clients are waiting for a person's approval; try again later",
        )
    return client


def check_client_redirect(store: KeyStore, client_id: str | None, redirect_uri: str | None) -> tuple[OAuthClient, str]:
    """The client and its redirect URI, exactly as registered. A failure here must be shown to the person,
    never sent to the redirect URI (RFC 6749 §4.1.2.1): it is not known to belong to the client."""
    client = store.get_oauth_client(client_id) if client_id else None
    if client is None:
        raise OAuthError("invalid_client", "unknown client_id: the application must register again")
    if redirect_uri is None and len(client.redirect_uris) == 1:
        return client, client.redirect_uris[0]
    if redirect_uri is None or not any(_same_redirect(uri, redirect_uri) for uri in client.redirect_uris):
        raise OAuthError("invalid_request", "redirect_uri is not one the application registered")
    return client, redirect_uri


def _same_redirect(registered: str, asked: str) -> bool:
    """Exact string match, except the port of an ``http`` loopback URI: a native app listens on whatever
    port the system gives it at the time, so any port is taken there (RFC 8252 §7.3; RFC 9700 §4.1.3).
    Scheme, host, path and query still match exactly, and the token request repeats the URI as asked."""
    if asked == registered:
        return True
    mine, theirs = _split_uri(registered), _split_uri(asked)
    if mine is None or theirs is None:
        return False
    if mine.scheme != "http" or mine.hostname not in LOOPBACK_HOSTS or not _NETLOC.fullmatch(theirs.netloc):
        return False
    if _has_unsafe_characters(asked) or "#" in asked:
        return False
    try:
        port = theirs.port
    except ValueError:  # not a number, or past 65535
        return False
    if port == 0:
        return False

    def without_port(parts: SplitResult) -> tuple[str, ...]:
        host = parts.netloc.rpartition(":")[0] if parts.port is not None else parts.netloc
        return parts.scheme, host, parts.path, parts.query

    return without_port(mine) == without_port(theirs)


def parse_scopes(value: str | None) -> tuple[str, ...]:
    """Requested scope names in canonical order; none asked for gives the default read scopes."""
    names = [n for n in (value or "").split() if n not in IGNORED_SCOPES]
    if not names:
        return DEFAULT_SCOPES
    unknown = sorted({n for n in names if n not in ALL_SCOPES})
    if unknown:
        raise OAuthError("invalid_scope", f"unknown scope: {', '.join(unknown)}")
    return tuple(s for s in ALL_SCOPES if s in names)


def check_authorization_request(
    client: OAuthClient, redirect_uri: str, params: AuthorizationParams, resource: str
) -> AuthorizationRequest:
    """Check the rest of an authorization request whose client and redirect URI passed
    ``check_client_redirect``; a failure here is sent back to the redirect URI. ``resource`` is this
    service's MCP endpoint, the only resource tokens are issued for."""
    if params.response_type != "code":
        raise OAuthError("unsupported_response_type", "response_type must be code")
    challenge = params.code_challenge
    if not challenge:
        raise OAuthError("invalid_request", "PKCE is required: send code_challenge with code_challenge_method=S256")
    if params.code_challenge_method != "S256":
        raise OAuthError("invalid_request", "code_challenge_method must be S256 (plain is not accepted)")
    if not _CHALLENGE.fullmatch(challenge):
        raise OAuthError("invalid_request", "code_challenge must be the base64url SHA-256 of the verifier")
    state = params.state
    if state is not None and len(state) > MAX_STATE:
        raise OAuthError("invalid_request", f"state is longer than {MAX_STATE} characters")
    asked = params.resource
    if asked is not None and not same_resource(asked, resource):
        raise OAuthError("invalid_target", f"this server issues tokens only for {resource}")
    return AuthorizationRequest(
        client=client,
        redirect_uri=redirect_uri,
        redirect_uri_sent=params.redirect_uri is not None,
        state=state,
        code_challenge=challenge,
        requested_scopes=parse_scopes(params.scope),
        resource=resource,
    )


def same_resource(asked: str, resource: str) -> bool:
    """RFC 8707 resource comparison: exact, except that scheme and host are case-insensitive and a
    trailing slash is ignored (clients canonicalise URLs differently)."""

    def canonical(parts: SplitResult) -> tuple[str, str, str, str, str]:
        return parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), parts.query, parts.fragment

    mine, theirs = _split_uri(resource), _split_uri(asked)
    return mine is not None and theirs is not None and canonical(theirs) == canonical(mine)
