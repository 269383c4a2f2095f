"""The platform pace's rules that every ``PlatformPace`` shares: the window, and how a refusal reads.

A refusal is ``RateLimited`` with ``details.reason``: ``platform_hold`` (the platform itself answered 429
and asked the account to wait), ``read_pace`` (our own read budget of the platform account is spent) or
``write_pace`` (its write budget: posts, comments, deletions and DMs).
"""

from __future__ import annotations

import math

from community_api.errors import RateLimited

WINDOW_SECONDS = 60
DEFAULT_READS_PER_MINUTE = 60  # about what others saw before the platform answered 429 (PLATFORM.md)
# Others saw 25 to 30 writes a minute pass before the platform answered 429 (PLATFORM.md): kept below the
# lower figure, since a write refused by the platform's anti-spam may cost the account more than a wait.
DEFAULT_WRITES_PER_MINUTE = 20


def held_refusal(seconds: float) -> RateLimited:
    retry_after = max(1, math.ceil(seconds))
    return RateLimited(
        f"The platform asked this connected account to slow down; its calls are held for {retry_after} s.",
        retry_after=retry_after,
        reason="platform_hold",
    )


def pace_refusal(retry_after: int, reads_per_minute: int) -> RateLimited:
    return RateLimited(
        f"This connected account has used its {reads_per_minute} platform reads a minute (each request to the "
        f"platform is one: a feed page one, a post with its comments two, a list of groups one and one per "
        f"group); retry in {retry_after} s.",
        retry_after=retry_after,
        reason="read_pace",
    )


def write_pace_refusal(retry_after: int, writes_per_minute: int) -> RateLimited:
    return RateLimited(
        f"This connected account has used its {writes_per_minute} platform writes a minute (a post, a comment, "
        f"a deletion or a DM is one; a DM opening a conversation two); retry in {retry_after} s.",
        retry_after=retry_after,
        reason="write_pace",
    )
