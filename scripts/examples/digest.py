"""A digest of a community through the Community Data API: the new posts of each group, and the
conversations waiting for the account's reply. It only reads: a key with the default scopes plus
``dms:read`` is enough (without ``dms:read`` it leaves the inbox out and says so).

    CDA_URL=http://127.0.0.1:8000 CDA_KEY=cda_… python scripts/examples/digest.py --since 24h

It is also how a script should meet the API's answers:
- 429 ``rate_limited`` is waited out for its ``Retry-After`` (the pace keeps the platform account safe: a
  retry sooner is refused again), a few times at most, then reported;
- 409 ``connection_expired``: the account's owner must link the platform account again; retrying is no use;
- every other error is ``{"error": {"code", "message", "details"}}``: print the message, it says what to do.
Only ``requests`` is needed. Its settings are not named ``COMMUNITY_API_…``: the service refuses a variable of
that prefix it does not know, and a shell may run both.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import requests

WAITS = 3  # times a 429 is waited out before the script gives up
SHOWN = 20  # conversations listed; the rest are counted
LONGEST_WAIT = 120  # seconds: a longer Retry-After is reported rather than slept through


class ApiError(Exception):
    """An answer of the API that is not a success: its status, error code and message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{code} ({status}): {message}")
        self.status, self.code, self.message = status, code, message


def call(
    session: requests.Session,
    url: str,
    params: dict[str, str] | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """GET ``url`` and answer its JSON, waiting out a 429 for its ``Retry-After`` (``WAITS`` times at most)."""
    for attempt in range(WAITS + 1):
        answer = session.get(url, params=params, timeout=60)
        if answer.ok:
            return answer.json()
        try:
            error = answer.json()["error"]
            code, message = str(error["code"]), str(error["message"])
        except (ValueError, KeyError, TypeError):  # not the API's error body: a proxy's page, say
            code, message = "http_error", answer.text[:200]
        wait = int(answer.headers.get("Retry-After", "0") or 0)
        if answer.status_code != 429 or attempt == WAITS or wait > LONGEST_WAIT:
            raise ApiError(answer.status_code, code, message)
        print(f"digest: waiting {max(wait, 1)} s. {message}", file=sys.stderr, flush=True)
        sleep(max(wait, 1))
    raise AssertionError("unreachable")  # pragma: no cover


def digest(session: requests.Session, base: str, since: str, pages: int, groups: list[str]) -> list[str]:
    """The digest's lines."""
    me = call(session, f"{base}/v1/whoami")
    lines = [f"As @{me['handle']} ({me['name']}), since {since}:"]
    slugs = groups or [group["slug"] for group in call(session, f"{base}/v1/groups")["groups"]]
    for slug in slugs:
        # The slug is a path segment: encoded, so that no name can reach another route.
        feed = call(
            session,
            f"{base}/v1/groups/{urllib.parse.quote(slug, safe='')}/posts",
            {"since": since, "sort": "newest", "pages": str(pages)},
        )
        posts = feed["posts"]
        more = (
            ""
            if feed["stoppedEarly"] or feed["pagesFetched"] < pages
            else f" (in the first {count(pages, 'page')}: there may be more)"
        )
        lines.append(f"{slug}: {count(len(posts), 'new post')}{more}")
        for post in posts:
            author = f"@{post['author']['handle']}" if post.get("author") else "you"
            lines.append(f"  - {post['title']} — {author}, {count(post['commentCount'], 'comment')}  {post['url']}")
    try:
        waiting, cursor = [], None
        for _ in range(4):  # up to 20 inbox pages: 5 scanned a call
            inbox = call(session, f"{base}/v1/dms", {"awaitingReply": "true", **({"cursor": cursor} if cursor else {})})
            waiting += inbox["conversations"]
            cursor = inbox["nextCursor"]
            if cursor is None:
                break
    except ApiError as error:
        if error.code != "forbidden":
            raise
        lines.append("Inbox left out: this key lacks dms:read (mint one with it to see conversations)")
        return lines
    lines.append(f"Waiting for your reply: {count(len(waiting), 'conversation')}")
    for conversation in waiting[:SHOWN]:
        last = (conversation.get("lastMessage") or {}).get("content", "")
        text = " ".join(last.split())
        lines.append(f"  - @{conversation['with']['handle']}: {text[:80]}{'…' if len(text) > 80 else ''}")
    if len(waiting) > SHOWN:
        lines.append(f"  … and {len(waiting) - SHOWN} more")
    if cursor is not None:
        lines.append(f"  (the inbox goes on past these: GET /v1/dms?awaitingReply=true&cursor={cursor})")
    return lines


def count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="New posts of each group, and the conversations awaiting a reply.")
    parser.add_argument("--since", default="24h", help="24h, 7d or a date YYYY-MM-DD (default 24h)")
    parser.add_argument("--pages", type=int, default=3, help="feed pages read per group, 1 to 30 (default 3)")
    parser.add_argument("--group", action="append", default=[], help="a group's slug or id (default: every group)")
    args = parser.parse_args(argv)
    base, key = os.environ.get("CDA_URL", "").rstrip("/"), os.environ.get("CDA_KEY", "")
    if not base or not key:
        parser.error("set CDA_URL (the service, e.g. http://127.0.0.1:8000) and CDA_KEY")
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {key}"
    try:
        lines = digest(session, base, args.since, args.pages, args.group)
    except ApiError as error:
        hint = {
            "unauthorized": " (the key is unknown, revoked or rotated: the dashboard's Account page says which)",
            "connection_expired": " (link the platform account again on the dashboard's Connections page)",
        }.get(error.code, "")
        print(f"digest: {error}{hint}", file=sys.stderr)
        return 1
    except requests.RequestException as error:
        print(f"digest: cannot reach {base}: {error}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
