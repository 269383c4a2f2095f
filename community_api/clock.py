"""The real clock. Tests pass their own (or freeze this one with freezegun)."""

from __future__ import annotations

from datetime import UTC, datetime


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)
