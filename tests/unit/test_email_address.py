"""How emails are compared (``community_api.email_address``): one account for one address, however it is
written, and two for two addresses that only look alike. The sign-up and sign-in tests in
``test_api_management.py`` show the same through the API; this table holds the rules themselves."""

from __future__ import annotations

import pytest

from community_api.email_address import ascii_domain, email_key


@pytest.mark.parametrize(
    ("domain", "written"),
    [
        ("Example.COM", "example.com"),  # a Host header's name and an email's domain compare in lower case
        ("example.com", "example.com"),
        ("Bücher.Example", "xn--bcher-kva.example"),  # as a browser's email field and Host header send it
        ("straße.example", "xn--strae-oqa.example"),  # UTS #46 non-transitional: ß kept, not "strasse"
        ("bücher..example", None),  # an empty label has no IDNA form
        ("bü\u200dcher.example", None),  # a joiner IDNA refuses there
    ],
)
def test_a_domain_is_written_as_requests_carry_it(domain: str, written: str | None) -> None:
    assert ascii_domain(domain) == written


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("Max@Example.COM", "max@example.com"),
        ("  max@example.com ", "max@example.com"),  # what a form field carries around it
        ("max@Bücher.example", "MAX@xn--bcher-kva.example"),
        ("jos\u00e9@example.com", "JOSE\u0301@example.com"),  # é as one character, or e and an accent (NFC)
        # Case folded, not merely lowered: an address with ß typed in capitals has no ß to type (MASSE).
        ("maße@example.com", "MASSE@example.com"),
    ],
)
def test_one_address_however_it_is_written(one: str, other: str) -> None:
    assert email_key(one) == email_key(other)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("max@straße.example", "max@strasse.example"),  # two domains on the DNS since IDNA 2008
        ("jose@example.com", "\uff4a\uff4f\uff53\uff45@example.com"),  # NFC, not NFKC: full width is another
        ("max@example.com", "max@example.co"),
    ],
)
def test_two_addresses_that_only_look_alike(one: str, other: str) -> None:
    assert email_key(one) != email_key(other)
