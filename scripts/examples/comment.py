"""Comment on a post exactly once, however the network behaves, through the Community Data API.

    CDA_URL=http://127.0.0.1:8000 CDA_KEY=cda_… python scripts/examples/comment.py POST_ID "Thanks, this helped!"

The request carries an ``Idempotency-Key``, made once for this comment and written first (on standard error),
so that a run cut short can be finished with ``--idempotency-key KEY`` and never comment twice:
- no answer (a time-out, a dropped connection) or a 409 whose ``details.reason`` is ``in_progress``: the same
  request is sent again under the same key, a few times; the service answers the first outcome again
  (``Idempotent-Replayed: true``) rather than commenting a second time;
- an error with ``details.outcomeUnknown``: the platform may have published it; the script stops and says to
  look at the post first (a new key would publish a second comment);
- any other refusal is reported by its code and message (``api_client.py``; a 429 is waited out).
It needs a key with ``comments:write``, and it publishes as the connected account: try it on your own post.
"""

from __future__ import annotations

import argparse
import sys
import time
import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any

import requests

from scripts.examples.api_client import ApiError, request, session_from_environment

PAUSES = (2, 5, 10)  # seconds before each new try of the same request: four tries in all


class Unfinished(Exception):
    """No try got an answer: whether the comment exists is for the next run under the same key to learn."""


def comment(
    session: requests.Session,
    base: str,
    post_id: str,
    content: str,
    *,
    parent: str | None,
    key: str,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[dict[str, Any], bool]:
    """The comment made (or made by an earlier try under ``key``), and whether it was answered again."""
    url = f"{base}/v1/posts/{urllib.parse.quote(post_id, safe='')}/comments"  # a path segment: encoded
    body = {"content": content} | ({"parentId": parent} if parent else {})
    for pause in (*PAUSES, None):
        try:
            answer = request(session, "POST", url, json=body, headers={"Idempotency-Key": key}, sleep=sleep)
            return answer.json(), answer.headers.get("Idempotent-Replayed") == "true"
        except (requests.Timeout, requests.ConnectionError) as error:
            why = f"no answer ({type(error).__name__})"
        except ApiError as error:
            if error.details.get("reason") != "in_progress":
                raise
            why = "the first try is still in progress"
        if pause is None:
            break
        print(f"{why}: trying again in {pause} s under the same Idempotency-Key", file=sys.stderr, flush=True)
        sleep(pause)
    raise Unfinished(
        f"no answer after {len(PAUSES) + 1} tries; run again with --idempotency-key {key} to finish it: it will not"
        " comment twice"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Comment on a post exactly once, retries included.")
    parser.add_argument("post_id", help="the post's id (32 hexadecimal characters)")
    parser.add_argument("content", help="the comment's text")
    parser.add_argument("--parent", help="the id of the comment to reply to (default: the post itself)")
    parser.add_argument("--idempotency-key", help="the key an earlier run of this comment wrote (default: a new one)")
    args = parser.parse_args(argv)
    found = session_from_environment()
    if found is None:
        parser.error("set CDA_URL (the service, e.g. http://127.0.0.1:8000) and CDA_KEY (an API key)")
    session, base = found
    key = args.idempotency_key or uuid.uuid4().hex
    print(f"Idempotency-Key: {key}", file=sys.stderr, flush=True)
    try:
        made, replayed = comment(session, base, args.post_id, args.content, parent=args.parent, key=key)
    except ApiError as error:
        look = " It may have been published: look at the post before commenting again." * bool(
            error.details.get("outcomeUnknown")
        )
        print(f"comment: {error}{look}", file=sys.stderr)
        return 1
    except Unfinished as error:
        print(f"comment: {error}", file=sys.stderr)
        return 1
    print(f"Commented: {made['id']}" + (" (made by an earlier run: answered again, not posted twice)" * replayed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
