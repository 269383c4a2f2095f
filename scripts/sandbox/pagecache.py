"""A bounded cache of rendered feed answers, so a repeated feed request skips the sort, the serialization
and the JSON encoding (a page of 30 posts is about 30 KB of JSON: most of a request's CPU).

The cache itself knows nothing of the world: the callers (``pages.py``) put into the key everything an
answer depends on, the sandbox's change counter included (``Sandbox.changes``, bumped under the lock by
every change to the world and every control action), so an entry made before a change is never found
again. ``Sandbox.changed`` also empties the cache, which only frees the memory sooner.

The gateway has an LRU map of the same shape (``adapters/platform/bounded_cache.py``); the stand-in keeps
its own because it imports nothing of the service it stands in front of.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

SIZE = 512  # 30 pages × a few viewers × a few sorts; about 30 KB each, so at most some 15 MB


@dataclass(frozen=True, slots=True)
class Rendered:
    """An answer as it goes on the wire: the body is sent with ``resp.data``, never re-encoded."""

    status: int
    content_type: str
    data: bytes


class PageCache:
    """A least-recently-used map of keys to ``Rendered`` answers, safe to share between threads."""

    def __init__(self, size: int = SIZE) -> None:
        self._size = size
        self._entries: OrderedDict[Hashable, Rendered] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> Rendered | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: Hashable, answer: Rendered) -> None:
        with self._lock:
            self._entries[key] = answer
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
