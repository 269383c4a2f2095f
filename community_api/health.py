"""Whether the service can serve (``GET /readyz``): each collaborator is asked, and each answers None
(ready) or a short reason an operator can act on. Nothing secret is ever part of a reason."""

from __future__ import annotations

import logging
from collections.abc import Callable

import attrs

from community_api.deps import Deps

log = logging.getLogger(__name__)


@attrs.frozen
class Readiness:
    checks: dict[str, str]  # name -> "ok" or the reason it is not

    @property
    def ready(self) -> bool:
        return all(state == "ok" for state in self.checks.values())


def readiness(deps: Deps) -> Readiness:
    """The database accepts a write, the throttles' storage answers, a browser can be had."""
    answers = {
        "database": _asked(deps.store.ready),
        "throttle": _asked(deps.throttle.ready) or _asked(deps.pace.ready),
        "browser": _asked(deps.gateway.ready),
    }
    return Readiness({name: problem or "ok" for name, problem in answers.items()})


def _asked(check: Callable[[], str | None]) -> str | None:
    """A check that raises is not ready either. The answer names only the exception's class (its message
    might carry a path or a URL with credentials); the log has the whole of it."""
    try:
        return check()
    except Exception as error:  # noqa: BLE001 - any failure of a check means "not ready"
        log.warning("readiness check %s failed", getattr(check, "__qualname__", check), exc_info=True)
        return f"the check failed ({type(error).__name__})"
