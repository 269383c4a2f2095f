"""How one answer of the platform is read (``Resp``) and what each status becomes (``raise_for_status``):
the table a reader of PLATFORM.md would write, status by status, with the variants of the same answer that
a tolerant reader must take alike (a media type's case, white space around a body, JSON sent as text)."""

from __future__ import annotations

import pytest

from adapters.platform.platform_answers import RequestRefused, Resp, raise_for_status
from community_api.errors import (
    ConnectionExpired,
    Forbidden,
    InvalidRequest,
    NotFound,
    PlatformError,
    PlatformUnavailable,
    RateLimited,
    ServiceError,
)

JSON = "application/json; charset=utf-8"
BLOCK_PAGE = "<h1>403 ERROR</h1>Request blocked."


@pytest.mark.parametrize("content_type", ["text/html; charset=utf-8", "Text/HTML; charset=UTF-8", "TEXT/HTML"])
def test_the_firewalls_block_page_is_known_whatever_the_case_of_its_media_type(content_type: str) -> None:
    """Media types are case-insensitive (RFC 9110 §8.3.1): a block page is one however a proxy spells it."""
    page = Resp(403, content_type, BLOCK_PAGE)
    assert page.is_html and page.blocked
    with pytest.raises(PlatformError, match="firewall"):
        raise_for_status(page, "post x")


@pytest.mark.parametrize(
    "resp",
    [
        Resp(403, JSON, '{"message": "cannot post to this label"}'),  # the platform's own refusal
        Resp(404, "text/html", "<h1>404</h1>"),  # an HTML page, but not the firewall's 403
        Resp(200, "text/html", "<html></html>"),
    ],
)
def test_only_an_html_403_is_the_firewalls_block_page(resp: Resp) -> None:
    """A blocked request never reached the platform, so it is asked again once the firewall token is renewed;
    anything else did reach it, and asking again could do a write twice."""
    assert not resp.blocked


@pytest.mark.parametrize("body", ["", " ", "\n", " \r\n\t ", b"", b"\n  "])
def test_white_space_alone_is_an_answer_with_nothing_in_it(body: str | bytes) -> None:
    """PLATFORM.md: an expired session may answer 200 "with an empty body"; a newline is no more of an answer."""
    resp = Resp(200, JSON, body)
    assert resp.is_blank and resp.may_mean_expired
    with pytest.raises(PlatformError, match="nothing in it"):
        resp.json()


@pytest.mark.parametrize("body", ["{}", " {} ", "0", b"[]"])
def test_an_answer_with_something_in_it_is_not_blank(body: str | bytes) -> None:
    resp = Resp(200, JSON, body)
    assert not resp.is_blank and not resp.may_mean_expired


@pytest.mark.parametrize("status", [400, 403, 404, 429, 500])
def test_not_permitted_means_not_a_member_only_in_a_401(status: int) -> None:
    """Only the platform's 401 "action not permitted" says "not a member of that group"; the same words with
    another status are that status's refusal (a 403 is a refusal, never an unknown post)."""
    resp = Resp(status, JSON, '{"message": "Action not permitted"}')
    assert not resp.not_a_member
    assert Resp(401, JSON, '{"message": "Action not permitted"}').not_a_member


@pytest.mark.parametrize(
    ("content_type", "body", "expected"),
    [
        ("text/plain", '[{"id": 1}]', [{"id": 1}]),  # JSON sent as text: a list
        ("text/plain", '{"id": 1}', {"id": 1}),
        ("text/plain", '  \n {"id": 1}', {"id": 1}),  # white space before it
        ("", b'\n[{"id": 1}]', [{"id": 1}]),
        ("Application/JSON", '"a string"', "a string"),  # a JSON media type however it is spelled
        ("APPLICATION/JSON; charset=utf-8", "42", 42),
        ("application/problem+json", "null", None),
    ],
)
def test_json_is_read_when_the_media_type_or_the_body_says_it_is_json(
    content_type: str, body: str | bytes, expected: object
) -> None:
    assert Resp(200, content_type, body).json() == expected


@pytest.mark.parametrize(("content_type", "body"), [("text/html", "<html></html>"), ("text/plain", "ok")])
def test_something_other_than_json_is_a_platform_error(content_type: str, body: str) -> None:
    with pytest.raises(PlatformError, match="something other than JSON"):
        Resp(200, content_type, body).json()


@pytest.mark.parametrize("body", ['["message", "x"]', '"message"', "42", "null", '{"message": 42}', "{"])
def test_an_answer_without_a_message_text_has_none(body: str) -> None:
    """``message()`` reads the platform's ``{"message": "…"}`` and nothing else: a list, a bare string or a
    number in its place is no message (and no crash while a refusal is being read)."""
    assert Resp(400, JSON, body).message() == ""


def test_a_long_message_is_cut_to_300_characters() -> None:
    """The platform's words reach our clients in error messages: bounded, so a huge one cannot swell them."""
    resp = Resp(400, JSON, '{"message": " %s "}' % ("x" * 5000))
    assert resp.message() == "x" * 300
    with pytest.raises(InvalidRequest) as refused:
        raise_for_status(resp, "post x")
    assert refused.value.message == "x" * 300


@pytest.mark.parametrize("status", [200, 201, 204, 299])
def test_a_2xx_is_no_error(status: int) -> None:
    raise_for_status(Resp(status, JSON, ""), "post x")


REFUSAL = '{"message": "nope"}'


@pytest.mark.parametrize(
    ("resp", "error", "message"),
    [
        # A redirect is no answer to an api2 call (fetch follows those the platform sends): never a success.
        (Resp(301, "text/html", ""), PlatformError, "unexpected answer from the platform (301)"),
        (Resp(304, JSON, ""), PlatformError, "unexpected answer from the platform (304)"),
        (Resp(150, JSON, ""), PlatformError, "unexpected answer from the platform (150)"),
        (Resp(400, JSON, REFUSAL), InvalidRequest, "nope"),
        (Resp(400, JSON, "{}"), InvalidRequest, "the platform refused the request (400)"),
        (Resp(422, "text/html", "<h1>422</h1>"), InvalidRequest, "the platform refused the request (422)"),
        (Resp(401, JSON, '{"message": "action not permitted"}'), NotFound, "post x not found"),
        (Resp(401, JSON, REFUSAL), ConnectionExpired, None),
        (Resp(401, JSON, REFUSAL, session_alive=True), Forbidden, "nope"),
        (Resp(401, JSON, "", session_alive=True), Forbidden, "the platform does not allow this"),
        (Resp(403, JSON, REFUSAL), Forbidden, "nope"),
        (Resp(403, JSON, ""), Forbidden, "the platform does not allow this"),
        (Resp(404, JSON, REFUSAL), NotFound, "post x not found"),
        (Resp(429, JSON, REFUSAL), RateLimited, None),
        (Resp(500, JSON, REFUSAL), PlatformError, "the platform failed to answer (500)"),
        (Resp(502, "text/html", "<h1>502</h1>"), PlatformError, "the platform failed to answer (502)"),
        (Resp(599, JSON, ""), PlatformError, "the platform failed to answer (599)"),
        (Resp(0, "", "", error="timeout"), PlatformUnavailable, "the platform did not answer in time"),
        (Resp(0, "", "", error="Failed to fetch"), PlatformUnavailable, "the platform could not be reached"),
        (Resp(0, "", ""), PlatformUnavailable, "the platform could not be reached"),
        # A network failure whose words hold "refused" is still the platform out of reach, not a URL of ours.
        (Resp(0, "", "", error="net::ERR_CONNECTION_REFUSED"), PlatformUnavailable, "could not be reached"),
        (Resp(0, "", "", error="connection refused: reset"), PlatformUnavailable, "could not be reached"),
        (Resp(0, "", "", error="timed out"), PlatformUnavailable, "could not be reached"),
    ],
)
def test_each_status_is_the_error_a_client_can_act_on(
    resp: Resp, error: type[ServiceError], message: str | None
) -> None:
    with pytest.raises(error) as raised:
        raise_for_status(resp, "post x")
    assert type(raised.value) is error
    if message is not None:
        assert message in raised.value.message


def test_only_a_url_the_browser_would_not_parse_is_our_defect() -> None:
    with pytest.raises(RequestRefused, match="refused: Invalid URL"):
        raise_for_status(Resp(0, "", "", error="refused: Invalid URL"), "post x")
