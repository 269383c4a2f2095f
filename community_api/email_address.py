"""One account, one email, however it is written.

A browser sends an ``<input type="email">`` whose domain is outside ASCII in its IDNA form: Chromium submits
``max@bücher.example`` as ``max@xn--bcher-kva.example``. An account made with one form (the command line,
``POST /v1/accounts``) was therefore never found by a sign-in with the other (the dashboard): the person
was told "wrong email or password". Every email is compared by ``email_key``, which writes the domain as
browsers do (UTS #46, non-transitional: ``straße`` stays ß, ``xn--strae-oqa``) and folds case.

The local part outside ASCII (``josé@…``) is compared in NFC, as RFC 6532 §3.1 asks of internationalised
addresses: keyboards write ``é`` as one character or as ``e`` and a combining accent, and a person typing
their address on another device must still be one account. NFC, not NFKC: a full-width ``ｊｏｓｅ`` is
another mailbox, not another way of writing ``jose``.
"""

from __future__ import annotations

import unicodedata

import idna


def ascii_domain(domain: str) -> str | None:
    """``domain`` (an email's, or any host name) as requests carry it, in lower case: an ASCII one as it is,
    another in its IDNA form (UTS #46, non-transitional, as browsers map it; not Python's own IDNA 2003 codec,
    which makes ``straße`` ``strasse``); None when it has no IDNA form (an empty label, a character IDNA
    refuses)."""
    if domain.isascii():
        return domain.lower()
    try:
        return idna.encode(domain, uts46=True).decode("ascii")
    except idna.IDNAError:
        return None


def email_key(email: str) -> str:
    """What emails are compared by (the stores' unique key, the sign-in guard's bounds): trimmed, its local
    part in NFC and its domain in its ASCII form (``ascii_domain``), case folded. An address whose domain
    has no such form is only trimmed, put in NFC and folded: the account rules refuse it before it is kept."""
    local, at, domain = unicodedata.normalize("NFC", email.strip()).rpartition("@")
    ascii_form = ascii_domain(domain) if at else None
    return (f"{local}@{ascii_form}" if ascii_form is not None else f"{local}{at}{domain}").casefold()
