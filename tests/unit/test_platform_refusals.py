"""What the platform's refusals become: its 429 is our ``rate_limited`` with its own wait, never a 502;
a request the browser would not make is our bug (500 with its cause logged), never an outage."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from adapters.platform.platform_answers import RequestRefused, Resp, platform_retry_after, raise_for_status
from community_api.errors import Forbidden, PlatformError, PlatformUnavailable, RateLimited

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("120", 120),
        ("0", 1),
        (None, 60),
        ("", 60),
        ("soon", 60),
        ("-5", 60),
        ("1.5", 60),
        ("Tue, 24 Nov 2026 12:01:30 GMT", 90),
        ("Tue, 24 Nov 2026 11:00:00 GMT", 1),
        ("999999999", 86400),
        ("²", 60),  # a digit to str.isdigit(), not to int(): a header read as Latin-1 may hold it
        ("\u0663", 60),  # an Arabic-Indic three: the header's digits are ASCII
        # A date whose zone is unknown ("-0000", RFC 5322) cannot be compared with the clock: no usable wait.
        ("Tue, 24 Nov 2026 12:01:30 -0000", 60),
    ],
)
def test_the_platforms_retry_after_is_used_else_60_seconds(header: str | None, seconds: int) -> None:
    assert platform_retry_after(header, NOW) == seconds


def test_a_wait_until_a_date_is_rounded_up_never_ending_before_the_date() -> None:
    half_past = NOW.replace(microsecond=500_000)  # 89.5 s before 12:01:30
    assert platform_retry_after("Tue, 24 Nov 2026 12:01:30 GMT", half_past) == 90


def test_the_firewalls_block_page_is_a_platform_failure_and_the_platforms_own_403_a_refusal() -> None:
    """Its HTML "Request blocked" page (PLATFORM.md) says the request never reached the platform: not that
    the account may not do this, which the platform's JSON 403 says."""
    blocked = Resp(status=403, content_type="text/html; charset=utf-8", body="<title>Request blocked</title>")
    with pytest.raises(PlatformError, match="firewall"):
        raise_for_status(blocked, "post x")
    refused = Resp(status=403, content_type="application/json", body='{"message": "cannot post to this label"}')
    with pytest.raises(Forbidden, match="cannot post to this label"):
        raise_for_status(refused, "post x")


def test_a_429_is_rate_limited_with_the_platforms_wait() -> None:
    resp = Resp(status=429, content_type="application/json", body='{"message": "slow down"}', retry_after="42")
    with pytest.raises(RateLimited) as refused:
        raise_for_status(resp, "post x")
    assert refused.value.retry_after == 42 and refused.value.details["source"] == "platform"
    with pytest.raises(RateLimited) as default:
        raise_for_status(Resp(status=429, content_type="text/html", body="<h1>429</h1>"), "post x")
    assert default.value.retry_after == 60


def test_a_request_the_browser_refused_is_a_defect_not_an_outage() -> None:
    refused = Resp(status=0, content_type="", body="", error="refused: Failed to parse URL from http://a b")
    with pytest.raises(RequestRefused):
        raise_for_status(refused, "comment x")
    with pytest.raises(PlatformUnavailable):
        raise_for_status(Resp(status=0, content_type="", body="", error="Failed to fetch"), "comment x")
