"""Names a person reads hold no control characters and no bidirectional overrides: key names, account
emails and OAuth client names are refused with the field named (``invalid_client_metadata`` for the
registration of a client)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.world_support import PASSWORD, World

UNREADABLE = ["NUL\x00", "new\nline", "bell\x07", "evil\u202eppA", "iso\u2066late", "tab\tname", "del\x7f"]


@pytest.mark.parametrize("name", UNREADABLE)
def test_a_key_name_that_cannot_be_read_is_refused(world: World, name: str) -> None:
    browser = world.sign_up()
    result = world.client.simulate_post("/v1/keys", json={"name": name}, headers=browser.headers())
    assert result.status_code == 400 and result.json["error"]["details"]["field"] == "name"
    assert (
        world.client.simulate_post("/v1/keys", json={"name": "Grüße, ключ 🔑"}, headers=browser.headers()).status_code
        == 201
    )  # any script or symbol is fine


@pytest.mark.parametrize("email", ["ow\x07ner@example.com", "\u202eowner@example.com", "owner@exam\x00ple.com"])
def test_an_email_that_cannot_be_read_is_refused(world: World, email: str) -> None:
    result = world.client.simulate_post("/v1/accounts", json={"email": email, "password": PASSWORD})
    assert result.status_code == 400 and result.json["error"]["details"]["field"] == "email"


@pytest.mark.parametrize("name", UNREADABLE)
def test_a_client_name_that_cannot_be_read_is_refused(connector: Any, name: str) -> None:
    result = connector.register(client_name=name)
    assert result.status_code == 400 and result.json["error"] == "invalid_client_metadata", result.text


def test_the_published_pattern_says_what_is_readable_says() -> None:
    """Schemas carry ``READABLE_PATTERN`` (a label, a key name, a client name): the same rule, character by
    character, over the first 12,288 code points and the bidirectional controls."""
    import re

    from community_api.readable import READABLE_PATTERN, is_readable

    pattern = re.compile(READABLE_PATTERN)
    for code in [*range(0x3000), *range(0x2000, 0x2070), 0xFEFF, 0x1F600]:
        assert bool(pattern.fullmatch(chr(code))) == is_readable(chr(code)), hex(code)
    assert all(pattern.fullmatch(name) is None for name in UNREADABLE)
