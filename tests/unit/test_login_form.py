"""What the platform's login form takes as the browser types it (``adapters/platform/login_form.py``), without
a browser: newlines dropped as a single-line input drops them, every other key WebDriver would press instead
of typing refused naming the field, and the browser's own refusal of a field told in its words, bounded."""

from __future__ import annotations

import pytest

from adapters.platform.login_form import not_submitted, typeable
from community_api.errors import InvalidRequest


@pytest.mark.parametrize(("text", "typed"), [("a\r\nb\n", "ab"), ("sand\rbox", "sandbox"), ("é ü 漢", "é ü 漢")])
def test_newlines_are_dropped_as_the_input_drops_them(text: str, typed: str) -> None:
    assert typeable(text, "password") == typed


@pytest.mark.parametrize("text", ["sand\tbox", "\x00", "\x1b[A", "del\x7f", "\ue000", "enter\ue007", "\ue05d"])
def test_what_webdriver_would_press_rather_than_type_is_refused(text: str) -> None:
    with pytest.raises(InvalidRequest, match="password holds a control character") as refused:
        typeable(text, "password")
    assert refused.value.details == {"field": "password"}


def test_a_private_use_character_past_webdrivers_keys_is_typed() -> None:
    assert typeable("\ue05e", "password") == "\ue05e"


@pytest.mark.parametrize("kind", ["email", "password"])
def test_the_browsers_refusal_of_a_field_names_it_in_its_words_bounded(kind: str) -> None:
    refused = not_submitted({"type": kind, "message": "  Please include an '@'. " + "x" * 1000})
    assert refused.details == {"field": kind}
    assert refused.message == f"the platform's login form does not take this {kind}: Please include an '@'. " + "x" * (
        300 - len("Please include an '@'. ")
    )
    assert not_submitted({"type": kind}).message == f"the platform's login form does not take this {kind}"


@pytest.mark.parametrize("kind", ["text", None, 5])
def test_a_refusal_of_another_field_names_none(kind: object) -> None:
    refused = not_submitted({"type": kind, "message": "no"})
    assert refused.details == {} and "these credentials" in refused.message
