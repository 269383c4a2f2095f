"""A path whose id holds an encoded slash (``%2F``) is no route, rather than another route.

WSGI hands the application the path decoded (PEP 3333's ``PATH_INFO``), so ``/v1/posts/{id}%2Fcomments``
reached Falcon as ``/v1/posts/{id}/comments``: a client that encodes an id it was given (as it should) was
routed to another operation than the one it called, chosen by the id. The scope of the operation matched
was checked, so no key could do more than it may; but an id is data, and must not pick the operation,
here any more than on the platform (docs/decisions.md, "Caller input never steers the platform"). No id
or name of ours holds a slash, so such a path answers 404 (the API's saying why; a dashboard address, its
"no page" page), as Apache's default (``AllowEncodedSlashes Off``) does. gunicorn gives the path as it was
sent in ``RAW_URI``; a server that does not is not checked.
"""

from __future__ import annotations

from typing import Any

import falcon
import falcon.inspect

from adapters.http.head_router import HeadAsGetRouter

ENCODED_SLASH = "the path holds an encoded slash (%2F), which no id or name has: no route"


def has_encoded_slash(raw_uri: str) -> bool:
    """True when the path of ``raw_uri`` (the request target as sent, its query apart) holds ``%2F``."""
    if "%2f" not in raw_uri and "%2F" not in raw_uri:
        return False  # every request but a few: no copy made
    path = raw_uri.partition("?")[0]
    return "%2f" in path or "%2F" in path


class NoEncodedSlashRouter(HeadAsGetRouter):
    def find(self, uri: str, req: falcon.Request | None = None) -> Any:  # (Falcon's type is private)
        if req is not None and has_encoded_slash(req.env.get("RAW_URI", "")):
            if uri.startswith("/v1/"):
                raise falcon.HTTPNotFound(description=ENCODED_SLASH)
            return None  # no route: a dashboard address opened in a browser gets its "no page" page
        return super().find(uri, req)


# ``falcon.inspect`` (the route table the OpenAPI test reads) walks the service's router as the one it extends.
falcon.inspect.register_router(NoEncodedSlashRouter)(falcon.inspect.inspect_compiled_router)
