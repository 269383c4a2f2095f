"""A digest of a community through the Community Data API: the new posts of each group, and the
conversations waiting for the account's reply. It only reads: a key with the default scopes plus
``dms:read`` is enough (without ``dms:read`` it leaves the inbox out and says so).

    CDA_URL=http://127.0.0.1:8000 CDA_KEY=cda_… python scripts/examples/digest.py --since 24h

It meets the API's refusals as ``api_client.py`` says: a 429 is waited out for its ``Retry-After``, a
401 or a ``connection_expired`` is reported with what to do.
"""

from __future__ import annotations

import argparse
import sys
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import requests

from scripts.examples.api_client import ApiError, request, session_from_environment

SHOWN = 20  # conversations listed; the rest are counted


def call(
    session: requests.Session,
    url: str,
    params: dict[str, str] | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """GET ``url`` and answer its JSON (a 429 waited out)."""
    return request(session, "GET", url, params=params, sleep=sleep).json()


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
            author = f"@{post['author']['handle']}" if post.get("author") else "author unknown"
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
    found = session_from_environment()
    if found is None:
        parser.error("set CDA_URL (the service, e.g. http://127.0.0.1:8000) and CDA_KEY (an API key)")
    session, base = found
    try:
        lines = digest(session, base, args.since, args.pages, args.group)
    except ApiError as error:
        print(f"digest: {error}", file=sys.stderr)
        return 1
    except requests.RequestException as error:
        print(f"digest: cannot reach {base}: {error}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
