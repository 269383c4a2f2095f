"""Serving the MCP session manager (an ASGI app) from a WSGI worker.

The session manager only answers while its ``run()`` context is open (else "Task group is not
initialized"), and WSGI has no lifespan to open it in. So each thread that serves MCP requests owns an
event loop with a session manager held open on it, and runs that loop itself, one request at a time, while
it serves a request (``loop.run_until_complete``); between requests the loop is idle and costs nothing.

An earlier version held one loop per process on a daemon thread and handed each request over to it, and
each tool call on to a worker thread (the handler blocks on the store and the platform, which must not
stall a loop that other requests share): four thread hand-overs per call. With a loop per thread, the loop
serves only the request of its own thread, so the tool handler runs inline (``server.py``) and a request
never leaves its thread. Measured (``scripts/bench/mcp_vs_rest.py``), a ``whoami`` tool call went from 2.5 to 1.8 ms
in process and from 3.4 to 2.9 ms of worker CPU under gunicorn on the handshake-era wire, and from 1.5 to
1.0 ms and 2.5 to 1.8 ms on the 2026-07-28 wire.

Loops are made lazily, at the first MCP request of a thread, never at import or app creation: under
``gunicorn --preload`` the app is built in the master and forked, and a loop (its selector) must not be
shared with a fork. The process id is checked so that a forked copy makes its own.

The request is bridged with a2wsgi's ``build_scope`` (the ASGI scope of a WSGI environ, which keeps the
environ as ``scope["wsgi_environ"]``) but not with its ``ASGIMiddleware``, which runs the app on a loop
thread of its own and moves every ASGI message across: here the body is already read and the answer is one
JSON document (stateless mode, JSON responses).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable
from typing import Any

import attrs
from a2wsgi.asgi import build_scope
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager


@attrs.frozen
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


async def exchange(app: Any, scope: Any, body: bytes) -> Answer:
    """Run one request through an ASGI app with a body read in full, collecting the answer."""
    responded = asyncio.Event()
    delivered = False
    start: dict[str, Any] = {}
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        # As a server would: the client counts as gone only once the answer has been sent.
        await responded.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            start.update(message)
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                responded.set()

    try:
        await app(scope, receive, send)
    finally:
        responded.set()
    if not start:
        raise RuntimeError("the MCP session manager sent no answer")
    headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in start.get("headers", [])]
    return Answer(int(start["status"]), headers, b"".join(chunks))


_WIND_DOWN_STEPS = 20


class _ThreadLoop:
    """A session manager held open on an event loop that its thread runs while serving a request."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self.manager = manager
        self.pid = os.getpid()
        self.lock = threading.Lock()  # held while the loop runs: by its thread, or by close()
        self.loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        ready = asyncio.Event()
        self._held = self.loop.create_task(self._hold_open(ready))
        self.loop.run_until_complete(ready.wait())
        if self._held.done():
            failure = None if self._held.cancelled() else self._held.exception()
            self.loop.close()
            raise RuntimeError("the MCP session manager did not start") from failure

    async def _hold_open(self, ready: asyncio.Event) -> None:
        try:
            async with self.manager.run():
                ready.set()
                await self._stop.wait()
        finally:
            ready.set()  # a failure to start is read from the task

    def serve(self, scope: Any, body: bytes) -> Answer | None:
        """The answer, or None if this loop was closed meanwhile (``close()`` from another thread)."""
        with self.lock:
            if self.loop.is_closed():
                return None
            return self.loop.run_until_complete(self._exchange(scope, body))

    async def _exchange(self, scope: Any, body: bytes) -> Answer:
        answer = await exchange(self.manager.handle_request, scope, body)
        # The request's server task is still winding down (closing its streams): let it finish before the
        # loop stops, so that nothing of this request waits for the next one.
        me = asyncio.current_task()
        for _ in range(_WIND_DOWN_STEPS):
            if all(task is me or task is self._held for task in asyncio.all_tasks()):
                break
            await asyncio.sleep(0)
        return answer

    def close(self) -> None:
        with self.lock:
            if self.loop.is_closed():
                return
            if self.pid == os.getpid():

                async def finish() -> None:
                    self._stop.set()
                    with contextlib.suppress(BaseException):
                        await self._held

                self.loop.run_until_complete(finish())
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()


class SessionManagers:
    """One session manager per thread that serves MCP requests, each held open on that thread's loop."""

    def __init__(self, make_manager: Callable[[], StreamableHTTPSessionManager]) -> None:
        # A session manager runs once: a fresh one per thread and process (and after close()).
        self._make_manager = make_manager
        self._local = threading.local()
        self._lock = threading.Lock()
        self._loops: list[_ThreadLoop] = []

    def handle(self, environ: dict[str, Any], body: bytes) -> Answer:
        """Serve one request (its environ, and its body already read) on this thread and answer it.

        A WSGI server's threads run no event loop of their own. Called from one that does (async code), the
        thread's loop cannot run inside that one: asyncio's RuntimeError says so (drive the app from a
        worker thread instead, as ``tests/unit/test_mcp_world.py`` does with ``anyio.to_thread``)."""
        scope = build_scope(environ)  # type: ignore[arg-type]  # a2wsgi's Environ is a TypedDict
        while True:
            answer = self._thread_loop().serve(scope, body)
            if answer is not None:
                return answer

    def _thread_loop(self) -> _ThreadLoop:
        held: _ThreadLoop | None = getattr(self._local, "loop", None)
        if held is not None and held.pid == os.getpid() and not held.loop.is_closed():
            return held
        fresh = _ThreadLoop(self._make_manager())
        self._local.loop = fresh
        with self._lock:
            pid = os.getpid()
            self._loops = [loop for loop in self._loops if loop.pid == pid and not loop.loop.is_closed()]
            self._loops.append(fresh)
        return fresh

    def close(self) -> None:
        """Close the session managers and loops of this process (tests; a worker's exit ends them anyway)."""
        with self._lock:
            loops, self._loops = self._loops, []
        for loop in loops:
            loop.close()

    @property
    def running(self) -> bool:
        """Whether a session manager is open in this process."""
        pid = os.getpid()
        with self._lock:
            return any(loop.pid == pid and not loop.loop.is_closed() for loop in self._loops)
