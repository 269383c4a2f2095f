"""What the platform's login form takes, as the browser types it (``PlatformClient.login``).

The gateway signs in by typing into the login page's ``#email`` and ``#password`` and clicking its submit
button, as a person would (the firewall's token comes from the page's script). Two things of the browser's
own stand between a caller's credentials and the platform, and each is answered as the caller's input,
before or instead of a time-out: what WebDriver cannot type as itself, and a form the browser itself keeps
back because a field breaks the form's rules (``page_scripts.LOGIN_STATE`` reports it).
"""

from __future__ import annotations

import re

from community_api.errors import InvalidRequest

# WebDriver types some characters as keys rather than as themselves: a newline presses Enter (the form is
# sent before the password is typed), a tab moves to the next field, U+E000-U+E05D are its named keys
# (Backspace, Enter, ...) and other control characters are dropped. The platform's email and password
# inputs cannot hold a newline anyway (HTML strips newlines from a single-line input's value), so newlines
# are dropped as the input would; the others cannot be typed as themselves, and are refused.
_NEWLINES = str.maketrans("", "", "\r\n")
_UNTYPEABLE = re.compile("[\x00-\x1f\x7f\ue000-\ue05d]")
_BROWSER_WORDS = 300  # of the browser's message about a field, at most


def typeable(text: str, field: str) -> str:
    """``text`` as the login form's ``field`` would hold it once typed, or a refusal (``_UNTYPEABLE``)."""
    text = text.translate(_NEWLINES)
    if _UNTYPEABLE.search(text):
        raise InvalidRequest(
            f"the {field} holds a control character, which cannot be typed into the platform's login form: "
            "link the account with a sessionToken instead",
            field=field,
        )
    return text


def not_submitted(invalid: dict[str, object]) -> InvalidRequest:
    """The browser kept the login form back: a field breaks the form's own rules (``LOGIN_STATE``). Nothing
    reached the platform, and waiting would only end in a time-out: it is the caller's input."""
    field = "email" if invalid.get("type") == "email" else "password" if invalid.get("type") == "password" else ""
    words = str(invalid.get("message") or "").strip()[:_BROWSER_WORDS]
    if not field:
        return InvalidRequest("the platform's login form does not take these credentials as written")
    # The browser's words for an email repeat it (the caller's own); for a password they never repeat it.
    return InvalidRequest(
        f"the platform's login form does not take this {field}" + (f": {words}" if words else ""), field=field
    )
