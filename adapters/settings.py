"""Settings from ``COMMUNITY_API_*`` environment variables (DESIGN §3). The CLI sets the same variables
from its flags, so gunicorn workers read one source of truth."""

from __future__ import annotations

import base64
import difflib
import ipaddress
import math
import os
import re
import urllib.parse
from collections.abc import Mapping

import attrs

from adapters.throttle.mmap_limits_storage import DEFAULT_CAPACITY, MAX_CAPACITY
from community_api.email_address import ascii_domain
from community_api.pace import DEFAULT_READS_PER_MINUTE, DEFAULT_WRITES_PER_MINUTE

PREFIX = "COMMUNITY_API_"
MODES = ("production", "demo", "test")
DEFAULT_DB = "./var/community-api.sqlite3"
# Every setting, without its prefix. Any other ``COMMUNITY_API_*`` variable is refused: a misspelt name
# (``TRUSTED_PROXY``) would otherwise be ignored without a word while the operator believes it set.
SETTING_NAMES = (
    "MODE",
    "DB",
    "SECRET",
    "PREVIOUS_SECRET",
    "PLATFORM_URL",
    "PLATFORM_API_URL",
    "THROTTLE_STORAGE",
    "SELENIUM_REMOTE_URL",
    "BROWSER_POOL_SIZE",
    "BROWSER_IDLE_SECONDS",
    "BROWSER_TRUSTED_SPKI",
    "SIGNUP",
    "MCP_ALLOWED_HOSTS",
    "MCP_ALLOWED_ORIGINS",
    "USAGE_FLUSH_SECONDS",
    "PUBLIC_URL",
    "PLATFORM_READS_PER_MINUTE",
    "PLATFORM_WRITES_PER_MINUTE",
    "TRUSTED_PROXIES",
    "ALLOWED_HOSTS",
    "METRICS_TOKEN",
)
MAX_USAGE_FLUSH_SECONDS = 3600.0
# The MCP endpoint's hosts by default: the loopback names the transport's list can name. Left so (unless a public
# URL is set), the endpoint serves every loopback host the REST host rule serves (``adapters/mcp/endpoint``).
LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")


class SettingsError(Exception):
    """A setting is missing or wrong; the message is one line for the operator."""


@attrs.frozen
class Settings:
    mode: str = "production"
    db: str = DEFAULT_DB
    secret: str = ""
    # The secret before ``secret``, while it changes: platform sessions sealed under it still open, until
    # ``community-api reseal`` seals them under the new one (docs/deployment.md, "Changing the secret").
    previous_secret: str = ""
    platform_url: str = "http://127.0.0.1:8700"
    platform_api_url: str = "http://127.0.0.1:8700/api2"
    throttle_storage: str = ""  # empty: a mapped file beside the database above (``throttle_uri``)
    selenium_remote_url: str = ""
    browser_pool_size: int = 4
    # Seconds after which a browser nobody used is closed, giving its memory back (0: kept until evicted).
    browser_idle_seconds: float = 900.0
    signup: bool = False
    mcp_allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    # Web pages of other origins (``scheme://host[:port]``, ``:*`` any port) whose scripts may call the MCP
    # endpoint (CORS): a browser-based MCP client. The service's own hosts always may.
    mcp_allowed_origins: tuple[str, ...] = ()
    usage_flush_seconds: float = 1.0
    public_url: str = ""
    # Platform requests a minute per platform account (PLATFORM.md: about 60 reads a minute before 429s).
    platform_reads_per_minute: int = DEFAULT_READS_PER_MINUTE
    # Platform writes a minute per platform account (PLATFORM.md: 25 to 30 before 429s; kept below).
    platform_writes_per_minute: int = DEFAULT_WRITES_PER_MINUTE
    # Reverse proxies whose X-Forwarded-For is believed (addresses or networks); none by default.
    trusted_proxies: tuple[str, ...] = ()
    # Hosts served besides loopback when no PUBLIC_URL is set (``adapters/http/host_check.py``).
    allowed_hosts: tuple[str, ...] = ()
    # Certificate keys the browser trusts besides the system's (base64 SHA-256 of a SubjectPublicKeyInfo):
    # the stand-in's self-signed certificate in the demo and the tests. Empty in production.
    browser_trusted_spki: tuple[str, ...] = ()
    # A scraper presents it as ``Authorization: Bearer …`` to read ``/metrics`` from elsewhere than loopback.
    metrics_token: str = ""

    @property
    def throttle_uri(self) -> str:
        """The ``limits`` storage of the DM throttle and the platform read pace. By default a memory-mapped
        file beside the database (``community-api.sqlite3`` → ``community-api.throttle.mmap``), shared by
        every worker of the host: the read pace writes on every data read, which costs a transaction on
        SQLite and a few microseconds there (``adapters/throttle/mmap_limits_storage.py``). Its windows
        hold up to 128 entries, or the read or write pace when that is larger."""
        if self.throttle_storage:
            return self.throttle_storage
        root, _ = os.path.splitext(os.path.abspath(self.db))
        uri = "mmap://" + urllib.parse.quote(root + ".throttle.mmap")
        largest = max(self.platform_reads_per_minute, self.platform_writes_per_minute)
        if largest > DEFAULT_CAPACITY:
            uri += f"?capacity={largest}"
        return uri


def _bool(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise SettingsError(f"{PREFIX}{name} must be true or false, not {value!r}")


def _refuse_unknown(env: Mapping[str, str]) -> None:
    for variable in sorted(env):
        name = variable[len(PREFIX) :]
        if variable.startswith(PREFIX) and name not in SETTING_NAMES:
            close = difflib.get_close_matches(name, SETTING_NAMES, n=1, cutoff=0.6)
            hint = f" (did you mean {PREFIX}{close[0]}?)" if close else ""
            raise SettingsError(f"{variable} is not a setting of this service{hint}; the settings are in the README")


def is_utf8_text(value: str) -> bool:
    """Can ``value`` be written as UTF-8? Not when Python read bytes that are not UTF-8 (from the environment,
    the command line) and kept them as lone surrogates, which fail wherever the text is encoded."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    _refuse_unknown(env)

    def get(name: str, default: str = "") -> str:
        assert name in SETTING_NAMES, name  # a new setting is listed, so that it is not refused
        value = env.get(PREFIX + name, default)
        if not is_utf8_text(value):  # not repeated: it may be the secret (it failed later, with a traceback)
            raise SettingsError(f"{PREFIX}{name} is not UTF-8 text: set it again")
        return value

    mode = get("MODE", "production")
    if mode not in MODES:
        raise SettingsError(f"{PREFIX}MODE must be one of {', '.join(MODES)}, not {mode!r}")
    secret = get("SECRET")
    if mode == "production" and len(secret) < 32:
        raise SettingsError(
            f"{PREFIX}SECRET must be set to at least 32 random characters "
            "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
        )
    previous_secret = get("PREVIOUS_SECRET")
    if previous_secret and previous_secret == secret:
        raise SettingsError(
            f"{PREFIX}PREVIOUS_SECRET is the same as {PREFIX}SECRET: the new secret goes in {PREFIX}SECRET, "
            "the one it replaces in PREVIOUS_SECRET"
        )

    def whole(name: str, default: str) -> int:
        value = get(name, default)
        try:
            return int(value)
        except ValueError:
            raise SettingsError(f"{PREFIX}{name} must be a whole number, not {value!r}") from None

    def real(name: str, default: str) -> float:
        value = get(name, default)
        try:
            return float(value)
        except ValueError:
            raise SettingsError(f"{PREFIX}{name} must be a number, not {value!r}") from None

    pool = whole("BROWSER_POOL_SIZE", "4")
    idle = real("BROWSER_IDLE_SECONDS", "900")
    flush = real("USAGE_FLUSH_SECONDS", "1")
    reads_per_minute = whole("PLATFORM_READS_PER_MINUTE", str(DEFAULT_READS_PER_MINUTE))
    writes_per_minute = whole("PLATFORM_WRITES_PER_MINUTE", str(DEFAULT_WRITES_PER_MINUTE))
    if pool < 1:
        raise SettingsError(f"{PREFIX}BROWSER_POOL_SIZE must be at least 1")
    if not idle >= 0:  # (not NaN either)
        raise SettingsError(f"{PREFIX}BROWSER_IDLE_SECONDS must be 0 (never) or more")
    if not (math.isfinite(flush) and 0 <= flush <= MAX_USAGE_FLUSH_SECONDS):
        raise SettingsError(
            f"{PREFIX}USAGE_FLUSH_SECONDS must be from 0 (write at once) to {MAX_USAGE_FLUSH_SECONDS:.0f}"
        )
    if not 1 <= reads_per_minute <= MAX_CAPACITY:
        raise SettingsError(f"{PREFIX}PLATFORM_READS_PER_MINUTE must be from 1 to {MAX_CAPACITY}")
    if not 1 <= writes_per_minute <= MAX_CAPACITY:
        raise SettingsError(f"{PREFIX}PLATFORM_WRITES_PER_MINUTE must be from 1 to {MAX_CAPACITY}")
    defaults = Settings()
    platform_url = _url("PLATFORM_URL", get("PLATFORM_URL", defaults.platform_url), required=True)
    hosts = _hosts("MCP_ALLOWED_HOSTS", get("MCP_ALLOWED_HOSTS"), any_port=True)
    return Settings(
        mode=mode,
        db=_db_path(get("DB", defaults.db)),
        secret=secret or "insecure-demo-secret-do-not-use-in-production",
        previous_secret=previous_secret,
        platform_url=platform_url,
        platform_api_url=_url("PLATFORM_API_URL", get("PLATFORM_API_URL")) or platform_url + "/api2",
        throttle_storage=get("THROTTLE_STORAGE"),
        selenium_remote_url=_url("SELENIUM_REMOTE_URL", get("SELENIUM_REMOTE_URL")),
        browser_pool_size=pool,
        browser_idle_seconds=idle,
        signup=_bool("SIGNUP", get("SIGNUP", "false")),
        mcp_allowed_hosts=hosts or defaults.mcp_allowed_hosts,
        mcp_allowed_origins=_origins(get("MCP_ALLOWED_ORIGINS")),
        usage_flush_seconds=flush,
        public_url=_origin("PUBLIC_URL", get("PUBLIC_URL")),
        platform_reads_per_minute=reads_per_minute,
        platform_writes_per_minute=writes_per_minute,
        trusted_proxies=_proxies(get("TRUSTED_PROXIES")),
        allowed_hosts=_hosts("ALLOWED_HOSTS", get("ALLOWED_HOSTS")),
        browser_trusted_spki=_spki_list(get("BROWSER_TRUSTED_SPKI")),
        metrics_token=_metrics_token(get("METRICS_TOKEN")),
    )


def _db_path(value: str) -> str:
    """A file: each thread of each worker opens its own connection to it (no ``:memory:``, no URI)."""
    if not value.strip() or value.strip() == ":memory:" or value.startswith("file:"):
        raise SettingsError(f"{PREFIX}DB names the SQLite database file (unset: {DEFAULT_DB}), not {value!r}")
    # ``~/…`` as the shell would have read it (a systemd environment file or a quoted value is not expanded):
    # once here, so that every command, the throttle's file beside it and the start-up line name one path.
    return os.path.expanduser(value)


_NOTHING = urllib.parse.SplitResult("", "", "", "", "")


def _split(url: str) -> urllib.parse.SplitResult:
    """``urlsplit``, with a text it refuses (``https://[foo]``, ``https://[::1``: brackets that hold no IPv6
    address) read as naming no host, so the setting is refused by its own message rather than a traceback."""
    try:
        return urllib.parse.urlsplit(url)
    except ValueError:
        return _NOTHING


def _port_ok(parts: urllib.parse.SplitResult) -> bool:
    try:
        return parts.port is None or parts.port > 0
    except ValueError:  # not a number, or past 65535
        return False


def _url(name: str, value: str, *, required: bool = False) -> str:
    """A base URL (empty: not set, unless ``required``): ``http(s)://host[:port][/path]``, without a query, a
    fragment or a user; its trailing slash dropped. Checked at start, so that a typo is not first met as a
    failing request."""
    url = value.strip().rstrip("/")
    if not url and not required:
        return ""
    parts = _split(url)
    plain = not ("?" in url or "#" in url or "@" in parts.netloc)  # no query, fragment or user
    if not (
        parts.scheme in ("http", "https") and _names_a_host(parts) and plain and _port_ok(parts) and " " not in url
    ):
        raise SettingsError(
            f"{PREFIX}{name} must be a URL such as https://host.example.com, not {value!r}{_ascii_hint(parts)}"
        )
    return url


def _origin(name: str, value: str) -> str:
    """The service's public origin: a base URL without a path. The service answers at the root of its host
    (its pages link to ``/keys``, OAuth's well-known paths are at the root), so a path could only be wrong."""
    url = _url(name, value)
    if not url:
        return ""
    parts = _split(url)
    if parts.path:
        raise SettingsError(
            f"{PREFIX}{name} is the service's origin, https://host[:port], without a path (the service is "
            f"served at the root of its host), not {value!r}"
        )
    # Written as browsers write an origin (RFC 6454 §6.1: scheme and host in lower case): it is compared with
    # the Origin and Host they send, and ``https://`` is what makes the cookies Secure.
    return f"{parts.scheme}://{parts.netloc.lower()}"


# A DNS name or IPv4 address: dot-separated labels, maybe written absolute (a final dot). "." or "a..b" names no host.
_HOST_NAME = re.compile(r"(?:[a-z0-9_-]+\.)*[a-z0-9_-]+\.?")


def _host_name_ok(written: str, hostname: str) -> bool:
    """Whether a host entry's name (``urlsplit``'s hostname, in lower case) names a host: a DNS name, an IPv4
    address, or an IPv6 address in brackets."""
    if written.startswith("["):
        try:
            ipaddress.IPv6Address(hostname)
        except ValueError:
            return False
        return True
    return bool(_HOST_NAME.fullmatch(hostname))


def _names_a_host(parts: urllib.parse.SplitResult) -> bool:
    """Whether a URL's authority names a host as requests carry it (``_host_name_ok``), with a port of digits
    if a colon is written: ``https://example.com:`` is no origin a browser sends."""
    written = parts.netloc.rpartition("@")[2]
    return bool(parts.hostname) and not written.endswith(":") and _host_name_ok(written, parts.hostname or "")


def _ascii_hint(parts: urllib.parse.SplitResult) -> str:
    """For a host name written outside ASCII (``é.example``): the form Host and Origin headers carry it in
    (``xn--9ca.example``, IDNA), which is what the setting is compared with."""
    name = parts.hostname or ""
    if name.isascii():
        return ""
    ascii_name = ascii_domain(name)  # as browsers map a name (UTS #46: ``straße`` keeps its ß)
    if ascii_name is None:
        return "; a host name outside ASCII is written in its ASCII (xn--) form"
    return f"; a host name outside ASCII is written in its ASCII form, as requests carry it: {ascii_name}"


def _hosts(name: str, value: str, *, any_port: bool = False) -> tuple[str, ...]:
    """Host names as a Host header carries them: ``host`` or ``host:port`` (``host:*``: any port, where
    ``any_port``); an IPv6 address in brackets."""
    hosts = tuple(part.strip() for part in value.split(",") if part.strip())
    for host in hosts:
        written = host[:-2] + ":1" if any_port and host.endswith(":*") else host
        parts = _split("//" + written)
        # ``api.example.com:`` (no port after its colon) matches no Host a client sends for that host
        if not (parts.netloc == written and _names_a_host(parts) and "@" not in written and _port_ok(parts)):
            example = "api.example.com, api.example.com:8443" + (" or api.example.com:*" if any_port else "")
            raise SettingsError(f"{PREFIX}{name} lists host names ({example}), not {host!r}{_ascii_hint(parts)}")
    return tuple(_plain_host(host) for host in hosts)


def _plain_host(host: str) -> str:
    """A host entry as the checks compare it: in lower case, a name written absolute (its final dot, RFC 1034
    §3.1) without it, as they read the Host header (``API.Example.com.:8443`` → ``api.example.com:8443``)."""
    host = host.lower()
    if host.startswith("["):
        return host
    name, colon, port = host.partition(":")
    return (name[:-1] if name.endswith(".") and len(name) > 1 else name) + colon + port


def _origins(value: str) -> tuple[str, ...]:
    """Web origins as a browser sends them: ``http(s)://host`` with an optional port (``:*`` any port), no
    path, no trailing slash."""
    origins = tuple(part.strip() for part in value.split(",") if part.strip())
    for origin in origins:
        written = origin[:-2] + ":1" if origin.endswith(":*") else origin
        parts = _split(written)
        plain = written == f"{parts.scheme}://{parts.netloc}" and "@" not in parts.netloc
        if not (_port_ok(parts) and plain and parts.scheme in ("http", "https") and _names_a_host(parts)):
            raise SettingsError(
                f"{PREFIX}MCP_ALLOWED_ORIGINS lists web origins such as https://app.example.com or "
                f"http://localhost:*, not {origin!r}{_ascii_hint(parts)}"
            )
    return origins


def _metrics_token(value: str) -> str:
    token = value.strip()
    if token and (len(token) < 32 or not token.isascii() or not token.isprintable() or " " in token):
        raise SettingsError(f"{PREFIX}METRICS_TOKEN must be at least 32 printable ASCII characters without spaces")
    return token


def _spki_list(value: str) -> tuple[str, ...]:
    hashes = tuple(part.strip() for part in value.split(",") if part.strip())
    for spki in hashes:
        try:
            digest = base64.b64decode(spki, validate=True)
        except ValueError:  # binascii.Error, or a character outside ASCII (``é``)
            digest = b""
        if len(digest) != 32:
            raise SettingsError(
                f"{PREFIX}BROWSER_TRUSTED_SPKI lists base64 SHA-256 hashes of certificate keys "
                f"(44 characters each), not {spki!r}"
            )
    return hashes


def _proxies(value: str) -> tuple[str, ...]:
    proxies = tuple(part.strip() for part in value.split(",") if part.strip())
    for proxy in proxies:
        try:
            network = ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            raise SettingsError(f"{PREFIX}TRUSTED_PROXIES must list addresses or networks, not {value!r}") from None
        host = proxy.split("/")[0]
        if "/" in proxy and ipaddress.ip_address(host) != network.network_address:
            # ``10.0.0.1/8``: read as all of 10.0.0.0/8, every host of which could then name any client in
            # X-Forwarded-For, where the operator may have meant the one proxy. Neither is guessed.
            raise SettingsError(
                f"{PREFIX}TRUSTED_PROXIES: {proxy} has host bits set: write {network} for the whole network,"
                f" or {host} for the one proxy"
            )
    return proxies
