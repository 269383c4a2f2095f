"""Settings from the environment: the read pace, and where the throttles keep their state."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from adapters.platform.browser import chrome_options
from adapters.settings import SETTING_NAMES, SettingsError, load_settings
from adapters.throttle.mmap_limits_storage import DEFAULT_CAPACITY, parse_uri

BASE = {"COMMUNITY_API_MODE": "test"}


def test_the_throttles_live_in_a_mapped_file_of_their_own_beside_the_database() -> None:
    settings = load_settings({**BASE, "COMMUNITY_API_DB": "/srv/api/community-api.sqlite3"})
    # Not the database itself: the read pace writes on every read, which would refresh every key cache.
    assert settings.throttle_uri == "mmap:///srv/api/community-api.throttle.mmap"
    assert load_settings({**BASE, "COMMUNITY_API_DB": "/srv/db"}).throttle_uri == "mmap:///srv/db.throttle.mmap"
    odd = load_settings({**BASE, "COMMUNITY_API_DB": "/srv/my api?/db.sqlite3"})
    assert parse_uri(odd.throttle_uri) == ("/srv/my api?/db.throttle.mmap", DEFAULT_CAPACITY)
    # Its windows must hold a whole minute of reads when the pace is larger than the default capacity.
    fast = load_settings({**BASE, "COMMUNITY_API_DB": "/srv/db", "COMMUNITY_API_PLATFORM_READS_PER_MINUTE": "600"})
    assert fast.throttle_uri == "mmap:///srv/db.throttle.mmap?capacity=600"
    writes = {"COMMUNITY_API_DB": "/srv/db", "COMMUNITY_API_PLATFORM_WRITES_PER_MINUTE": "300"}
    assert load_settings({**BASE, **writes}).throttle_uri == "mmap:///srv/db.throttle.mmap?capacity=300"
    redis = load_settings({**BASE, "COMMUNITY_API_THROTTLE_STORAGE": "redis://127.0.0.1:6379/0"})
    assert redis.throttle_uri == "redis://127.0.0.1:6379/0"


def test_the_read_pace_is_a_setting_of_at_least_one() -> None:
    assert load_settings(BASE).platform_reads_per_minute == 60
    assert load_settings({**BASE, "COMMUNITY_API_PLATFORM_READS_PER_MINUTE": "120"}).platform_reads_per_minute == 120
    most = {**BASE, "COMMUNITY_API_PLATFORM_READS_PER_MINUTE": "65536"}  # the throttle file's windows hold as much
    assert load_settings(most).platform_reads_per_minute == 65536
    for bad in ("0", "-3", "fast", "65537"):
        with pytest.raises(SettingsError):
            load_settings({**BASE, "COMMUNITY_API_PLATFORM_READS_PER_MINUTE": bad})


def test_the_write_pace_is_a_setting_of_at_least_one() -> None:
    assert load_settings(BASE).platform_writes_per_minute == 20
    assert load_settings({**BASE, "COMMUNITY_API_PLATFORM_WRITES_PER_MINUTE": "5"}).platform_writes_per_minute == 5
    for bad in ("0", "-3", "1.5", "often", "65537"):
        with pytest.raises(SettingsError, match="PLATFORM_WRITES_PER_MINUTE|not a number"):
            load_settings({**BASE, "COMMUNITY_API_PLATFORM_WRITES_PER_MINUTE": bad})


def test_the_browser_trusts_only_the_certificate_keys_it_is_given() -> None:
    assert load_settings(BASE).browser_trusted_spki == ()
    spki = "44Vy9wbXFEzxcccfXv4gs0Zlb7SjUg+FL5EcmCnEgOY="
    given = load_settings({**BASE, "COMMUNITY_API_BROWSER_TRUSTED_SPKI": f" {spki} ,{spki}"})
    assert given.browser_trusted_spki == (spki, spki)
    longer = "A" * 48  # 36 bytes: base64, but no SHA-256
    for bad in ("yes", "*", spki[:-2], "not base64!" * 4, spki + "==", "é" + spki[1:], longer):
        with pytest.raises(SettingsError, match="BROWSER_TRUSTED_SPKI"):
            load_settings({**BASE, "COMMUNITY_API_BROWSER_TRUSTED_SPKI": bad})
    flags = chrome_options("/tmp/profile", given.browser_trusted_spki).arguments
    assert f"--ignore-certificate-errors-spki-list={spki},{spki}" in flags
    assert not any(flag.startswith("--ignore-certificate-errors") and "spki" not in flag for flag in flags)
    assert not any("spki" in flag for flag in chrome_options("/tmp/profile").arguments)


def test_browser_origins_of_mcp_clients_are_web_origins() -> None:
    assert load_settings(BASE).mcp_allowed_origins == ()
    given = load_settings(
        {
            **BASE,
            "COMMUNITY_API_MCP_ALLOWED_ORIGINS": " https://agent.example.com, http://localhost:*,http://[::1]:6274",
        }
    )
    assert given.mcp_allowed_origins == ("https://agent.example.com", "http://localhost:*", "http://[::1]:6274")
    for bad in (
        "*",
        "agent.example.com",
        "https://agent.example.com/",
        "https://a.example/mcp",
        "ftp://a.example",
        "https://a.example:port",
        "https://user@a.example",
        "https://a.example?x=1",
        "https://:443",
        "https://[app.example.com]",  # before: a raw ValueError from urlsplit, a traceback at start
        # Before, kept as written: a browser's Origin never matched them.
        "https://app.example.com:",
        "https://app..example.com",
        "https://bücher.example",
    ):
        with pytest.raises(SettingsError, match="MCP_ALLOWED_ORIGINS"):
            load_settings({**BASE, "COMMUNITY_API_MCP_ALLOWED_ORIGINS": bad})


def test_an_idle_browser_is_closed_after_15_minutes_unless_the_setting_says_otherwise() -> None:
    assert load_settings(BASE).browser_idle_seconds == 900
    assert load_settings({**BASE, "COMMUNITY_API_BROWSER_IDLE_SECONDS": "0"}).browser_idle_seconds == 0
    assert load_settings({**BASE, "COMMUNITY_API_BROWSER_IDLE_SECONDS": "120.5"}).browser_idle_seconds == 120.5
    for bad in ("-1", "nan", "soon"):
        with pytest.raises(SettingsError, match="BROWSER_IDLE_SECONDS|not a number"):
            load_settings({**BASE, "COMMUNITY_API_BROWSER_IDLE_SECONDS": bad})


@pytest.mark.parametrize(
    ("name", "suggested"),
    [
        ("TRUSTED_PROXY", "COMMUNITY_API_TRUSTED_PROXIES"),
        ("PUBLICURL", "COMMUNITY_API_PUBLIC_URL"),
        ("PLATFORM_READS_PER_MIN", "COMMUNITY_API_PLATFORM_READS_PER_MINUTE"),
        ("DATABASE", None),
    ],
)
def test_a_setting_the_service_does_not_know_is_refused_naming_it(name: str, suggested: str | None) -> None:
    """A misspelt name used to be ignored without a word: behind a proxy, ``TRUSTED_PROXY`` left every
    client counted as the proxy's address by the sign-in throttle, and the operator believed it set."""
    with pytest.raises(SettingsError) as refused:
        load_settings({**BASE, f"COMMUNITY_API_{name}": "x"})
    message = str(refused.value)
    assert f"COMMUNITY_API_{name}" in message and len(message.splitlines()) == 1
    if suggested:
        assert f"did you mean {suggested}?" in message


@pytest.mark.parametrize("name", SETTING_NAMES)
def test_a_setting_whose_bytes_are_not_utf8_is_refused_naming_it_not_its_value(name: str) -> None:
    """Python reads such bytes of the environment as lone surrogates; a secret of them failed with a
    traceback as it was first encoded (the CLI's ``accounts list``, ``serve``'s workers)."""
    value = "s3cret-" * 6 + "\udcff"  # what Python makes of b"s3cret-...\xff"
    with pytest.raises(SettingsError) as refused:
        load_settings({**BASE, f"COMMUNITY_API_{name}": value})
    message = str(refused.value)
    assert message == f"COMMUNITY_API_{name} is not UTF-8 text: set it again"


def test_the_previous_secret_is_kept_apart_and_never_the_secret_itself() -> None:
    assert load_settings({**BASE, "COMMUNITY_API_SECRET": "new" * 12}).previous_secret == ""
    changing = load_settings({**BASE, "COMMUNITY_API_SECRET": "new" * 12, "COMMUNITY_API_PREVIOUS_SECRET": "old" * 12})
    assert (changing.secret, changing.previous_secret) == ("new" * 12, "old" * 12)
    with pytest.raises(SettingsError) as refused:  # the old one left in SECRET: nothing would change
        load_settings({**BASE, "COMMUNITY_API_SECRET": "same" * 9, "COMMUNITY_API_PREVIOUS_SECRET": "same" * 9})
    assert str(refused.value).startswith("COMMUNITY_API_PREVIOUS_SECRET is the same as COMMUNITY_API_SECRET")
    assert "same" * 9 not in str(refused.value)


def test_the_readme_lists_every_setting_and_no_other() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    rows = re.findall(r"^\| (`[A-Z_]+`(?:, `[A-Z_]+`)*) \|", readme, re.M)
    documented = {name for row in rows for name in re.findall(r"`([A-Z_]+)`", row)}
    assert documented == set(SETTING_NAMES)


def test_the_usage_flush_interval_is_a_finite_number_of_seconds() -> None:
    assert load_settings(BASE).usage_flush_seconds == 1
    assert load_settings({**BASE, "COMMUNITY_API_USAGE_FLUSH_SECONDS": "0"}).usage_flush_seconds == 0
    assert load_settings({**BASE, "COMMUNITY_API_USAGE_FLUSH_SECONDS": "3600"}).usage_flush_seconds == 3600
    for bad in ("-1", "nan", "inf", "soon", "86401"):
        with pytest.raises(SettingsError, match="USAGE_FLUSH_SECONDS|not a number"):
            load_settings({**BASE, "COMMUNITY_API_USAGE_FLUSH_SECONDS": bad})


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("BROWSER_POOL_SIZE", "four", "a whole number"),
        ("BROWSER_POOL_SIZE", "2.5", "a whole number"),
        ("BROWSER_IDLE_SECONDS", "15m", "a number"),
        ("USAGE_FLUSH_SECONDS", "", "a number"),
        ("PLATFORM_READS_PER_MINUTE", "1e3", "a whole number"),
        ("PLATFORM_WRITES_PER_MINUTE", "lots", "a whole number"),
    ],
)
def test_a_setting_that_is_not_a_number_is_named(name: str, value: str, said: str) -> None:
    """Before, the refusal said "a numeric setting is not a number" and left the operator to find which."""
    with pytest.raises(SettingsError) as refused:
        load_settings({**BASE, f"COMMUNITY_API_{name}": value})
    assert str(refused.value) == f"COMMUNITY_API_{name} must be {said}, not {value!r}"


@pytest.mark.parametrize("name", ["PLATFORM_URL", "PLATFORM_API_URL", "PUBLIC_URL", "SELENIUM_REMOTE_URL"])
@pytest.mark.parametrize(
    "value",
    [
        "api.example.com",  # no scheme: OAuth metadata would name "api.example.com/oauth/token"
        "ftp://api.example.com",
        "https://",
        "https://api.example.com?x=1",
        "https://api.example.com/#top",
        "https://user:pass@api.example.com",
        "https://api.example.com:0",
        "https://api.example.com:99999",
        "https://api example.com",
        "https://api.example.com/a b",  # a space anywhere: no URL a request carries
        "https://[api.example.com]",  # before: urlsplit's ValueError, a traceback instead of this message
        "https://[::1",
        # Before, kept as written; a public URL so written matched no Origin or Host a browser sends.
        "https://api.example.com:",
        "https://api..example.com",
        "https://bücher.example",
    ],
)
def test_a_url_setting_that_is_no_base_url_is_refused_at_start(name: str, value: str) -> None:
    """Before, any text was taken: a PUBLIC_URL without its scheme made every OAuth URL wrong, a mistyped
    PLATFORM_URL was first met as a failing sign-in."""
    with pytest.raises(SettingsError, match=f"COMMUNITY_API_{name} must be a URL such as https://"):
        load_settings({**BASE, f"COMMUNITY_API_{name}": value})


@pytest.mark.parametrize("name", ["PUBLIC_URL", "MCP_ALLOWED_ORIGINS", "ALLOWED_HOSTS", "MCP_ALLOWED_HOSTS"])
def test_a_host_name_outside_ascii_is_refused_with_the_form_requests_carry(name: str) -> None:
    """Browsers and HTTP clients send a name outside ASCII in its IDNA form, in Host and in Origin: one kept
    as written matched neither, and every request was refused with advice to set the very setting."""
    value = "bücher.example" if name.endswith("HOSTS") else "https://bücher.example"
    with pytest.raises(SettingsError, match="written in its ASCII form, as requests carry it: xn--bcher-kva.example$"):
        load_settings({**BASE, f"COMMUNITY_API_{name}": value})
    ascii_value = value.replace("bücher", "xn--bcher-kva")
    assert load_settings({**BASE, f"COMMUNITY_API_{name}": ascii_value})
    # ß is kept, as browsers map it (UTS #46 non-transitional), not made "ss" as Python's own codec does.
    with pytest.raises(SettingsError, match="as requests carry it: xn--strae-oqa.example$"):
        load_settings({**BASE, f"COMMUNITY_API_{name}": value.replace("bücher", "straße")})


def test_url_settings_keep_their_path_and_lose_a_trailing_slash() -> None:
    """The platform's and the Grid's URLs may have a path; the service's own public URL is an origin."""
    settings = load_settings(
        {
            **BASE,
            "COMMUNITY_API_PLATFORM_URL": "https://www.example-community.com/",
            "COMMUNITY_API_PUBLIC_URL": " https://api.example.com:8443/ ",
            "COMMUNITY_API_SELENIUM_REMOTE_URL": "http://[::1]:4444/wd/hub",
        }
    )
    assert settings.platform_url == "https://www.example-community.com"
    assert settings.platform_api_url == "https://www.example-community.com/api2"
    assert settings.public_url == "https://api.example.com:8443"
    assert settings.selenium_remote_url == "http://[::1]:4444/wd/hub"
    assert load_settings(BASE).public_url == "" and load_settings(BASE).selenium_remote_url == ""


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ALLOWED_HOSTS", "https://api.example.com"),
        ("ALLOWED_HOSTS", "api.example.com/"),
        ("ALLOWED_HOSTS", "api example.com"),
        ("ALLOWED_HOSTS", "api.example.com:*"),  # any port is the MCP list's form only
        ("ALLOWED_HOSTS", "api.example.com:http"),
        ("ALLOWED_HOSTS", "::1"),  # an IPv6 address goes in brackets, as in a Host header
        ("ALLOWED_HOSTS", "."),  # no name at all once its final dot is read
        ("ALLOWED_HOSTS", "api..example.com"),
        ("ALLOWED_HOSTS", ".example.com"),  # not a pattern: Django's wildcard form matches nothing here
        ("ALLOWED_HOSTS", "[api.example.com]"),  # brackets hold an IPv6 address
        ("ALLOWED_HOSTS", "[::g]:8000"),
        ("ALLOWED_HOSTS", "api.example.com:"),  # a colon with no port: no client sends that Host
        ("MCP_ALLOWED_HOSTS", "[::1]:"),
        ("MCP_ALLOWED_HOSTS", "localhost:*, https://api.example.com"),
        ("MCP_ALLOWED_HOSTS", "user@api.example.com"),
    ],
)
def test_a_host_list_entry_that_is_no_host_is_refused_naming_it(name: str, value: str) -> None:
    """Before, such an entry was kept and matched no Host header: every request answered 400 with advice
    to set the very setting the operator had set."""
    with pytest.raises(SettingsError, match=f"COMMUNITY_API_{name} lists host names .*, not '"):
        load_settings({**BASE, f"COMMUNITY_API_{name}": value})


def test_host_lists_take_names_ports_and_bracketed_addresses() -> None:
    hosts = "api.example.com, api.example.com:8443,[::1]:8000,10.0.0.7"
    assert load_settings({**BASE, "COMMUNITY_API_ALLOWED_HOSTS": hosts}).allowed_hosts == (
        "api.example.com",
        "api.example.com:8443",
        "[::1]:8000",
        "10.0.0.7",
    )
    mcp = load_settings({**BASE, "COMMUNITY_API_MCP_ALLOWED_HOSTS": "api.example.com:*,localhost:8000"})
    assert mcp.mcp_allowed_hosts == ("api.example.com:*", "localhost:8000")


def test_host_lists_are_kept_as_the_host_checks_compare_them() -> None:
    """In lower case, a name written absolute without its final dot: the checks read the Host header so,
    and an entry written otherwise would have matched no request at all."""
    hosts = "API.Internal., proxy.internal.:8443, [::1]:8000"
    assert load_settings({**BASE, "COMMUNITY_API_ALLOWED_HOSTS": hosts}).allowed_hosts == (
        "api.internal",
        "proxy.internal:8443",
        "[::1]:8000",
    )
    mcp = load_settings({**BASE, "COMMUNITY_API_MCP_ALLOWED_HOSTS": "Dev.Example.com.:*"})
    assert mcp.mcp_allowed_hosts == ("dev.example.com:*",)


def test_the_public_url_is_written_as_browsers_write_an_origin() -> None:
    settings = load_settings({**BASE, "COMMUNITY_API_PUBLIC_URL": "HTTPS://API.Example.COM:8443/"})
    assert settings.public_url == "https://api.example.com:8443"


def test_the_public_url_is_an_origin_without_a_path() -> None:
    """The dashboard links to /keys and OAuth's well-known documents sit at the host's root: served under
    a path, they would all be wrong. Refused at start instead of half working."""
    with pytest.raises(SettingsError, match="COMMUNITY_API_PUBLIC_URL is the service's origin"):
        load_settings({**BASE, "COMMUNITY_API_PUBLIC_URL": "https://example.com/community"})


@pytest.mark.parametrize("value", ["", " ", ":memory:", "file:db.sqlite3?mode=memory"])
def test_the_database_is_a_file(value: str) -> None:
    """Before, an empty COMMUNITY_API_DB (a systemd environment file's ``COMMUNITY_API_DB=``) ended
    ``serve`` in a traceback."""
    with pytest.raises(SettingsError, match="COMMUNITY_API_DB names the SQLite database file"):
        load_settings({**BASE, "COMMUNITY_API_DB": value})
    assert load_settings(BASE).db == "./var/community-api.sqlite3"


def test_a_database_under_home_is_read_as_the_shell_would(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Before, the store opened ``~/db.sqlite3`` under the home folder, while the commands that read a database
    looked for it under a folder named ``~`` ("no database at"), as did the throttle's file beside it."""
    monkeypatch.setenv("HOME", str(tmp_path))
    settings = load_settings({**BASE, "COMMUNITY_API_DB": "~/db.sqlite3"})
    assert settings.db == str(tmp_path / "db.sqlite3")
    assert parse_uri(settings.throttle_uri)[0] == str(tmp_path / "db.throttle.mmap")


@pytest.mark.parametrize(
    ("proxies", "network", "host", "one"),
    [("10.0.0.1/8", "10.0.0.0/8", "10.0.0.1", "/32"), ("fd00::5/64", "fd00::/64", "fd00::5", "/128")],
)
def test_a_proxy_network_with_host_bits_is_refused_not_widened(proxies: str, network: str, host: str, one: str) -> None:
    """Before, ``10.0.0.1/8`` was taken as all of 10.0.0.0/8: every host there could name any client."""
    with pytest.raises(SettingsError) as refused:
        load_settings({**BASE, "COMMUNITY_API_TRUSTED_PROXIES": f"127.0.0.1, {proxies}"})
    assert str(refused.value) == (
        f"COMMUNITY_API_TRUSTED_PROXIES: {proxies} has host bits set: write {network} for the whole network,"
        f" or {host} for the one proxy"
    )
    kept = load_settings({**BASE, "COMMUNITY_API_TRUSTED_PROXIES": f"{network}, {host}, {host}{one}"})
    assert kept.trusted_proxies == (network, host, f"{host}{one}")


def test_an_empty_platform_url_is_refused_and_an_empty_api_url_follows_it() -> None:
    with pytest.raises(SettingsError, match="COMMUNITY_API_PLATFORM_URL must be a URL"):
        load_settings({**BASE, "COMMUNITY_API_PLATFORM_URL": ""})  # before: named PLATFORM_API_URL's '/api2'
    derived = load_settings(
        {**BASE, "COMMUNITY_API_PLATFORM_URL": "https://www.example.com", "COMMUNITY_API_PLATFORM_API_URL": " "}
    )
    assert derived.platform_api_url == "https://www.example.com/api2"


def test_production_needs_a_secret_of_32_characters_or_more() -> None:
    production = {"COMMUNITY_API_MODE": "production", "COMMUNITY_API_PLATFORM_URL": "https://platform.example"}
    for short in ("", "s" * 31):
        with pytest.raises(SettingsError, match="SECRET must be set to at least 32 random characters"):
            load_settings({**production, "COMMUNITY_API_SECRET": short})
    assert load_settings({**production, "COMMUNITY_API_SECRET": "s" * 32}).secret == "s" * 32


@pytest.mark.parametrize(
    ("written", "read"),
    [("true", True), ("1", True), ("yes", True), ("on", True), (" TRUE ", True), ("Off", False), ("", False)],
)
def test_a_yes_or_no_setting_reads_the_usual_words(written: str, read: bool) -> None:
    assert load_settings({**BASE, "COMMUNITY_API_SIGNUP": written}).signup is read


def test_a_yes_or_no_setting_refuses_other_words() -> None:
    with pytest.raises(SettingsError, match="SIGNUP must be true or false, not 'sometimes'"):
        load_settings({**BASE, "COMMUNITY_API_SIGNUP": "sometimes"})


def test_the_throttles_file_beside_a_relative_database_is_named_by_its_whole_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every worker and command names one file, whatever folder it was started from."""
    monkeypatch.chdir(tmp_path)
    settings = load_settings({**BASE, "COMMUNITY_API_DB": "var/api.sqlite3"})
    assert parse_uri(settings.throttle_uri)[0] == str(tmp_path.resolve() / "var" / "api.throttle.mmap")


def test_the_browser_pool_holds_one_browser_at_least() -> None:
    assert load_settings({**BASE, "COMMUNITY_API_BROWSER_POOL_SIZE": "1"}).browser_pool_size == 1
    with pytest.raises(SettingsError, match="BROWSER_POOL_SIZE must be at least 1"):
        load_settings({**BASE, "COMMUNITY_API_BROWSER_POOL_SIZE": "0"})


def test_the_mcp_endpoint_serves_the_loopback_names_when_no_host_is_listed() -> None:
    loopback = ("127.0.0.1:*", "localhost:*", "[::1]:*")
    assert load_settings(BASE).mcp_allowed_hosts == loopback
    assert load_settings({**BASE, "COMMUNITY_API_MCP_ALLOWED_HOSTS": " , "}).mcp_allowed_hosts == loopback
