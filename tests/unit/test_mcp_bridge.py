"""The bridge from a WSGI worker to the MCP session manager (``adapters/mcp/bridge.py``): one request run
through an ASGI app as a server would run it, and one session manager per thread and process, opened again
after ``close()`` and never shared with a forked child."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import falcon.testing
import pytest

from adapters.mcp.bridge import SessionManagers, exchange
from tests.unit.test_mcp_world import McpWorld


@pytest.fixture
def world() -> Iterator[McpWorld]:
    built = McpWorld.build()
    yield built
    built.close()


def test_an_answer_sent_in_parts_is_whole_and_the_client_leaves_only_after_the_last() -> None:
    """The client counts as gone (``http.disconnect``) once the whole answer is sent, not before: an app
    that listens for a disconnect while it answers must not take the request for abandoned."""
    heard: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        assert (await receive())["body"] == b"asked"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"one ", "more_body": True})
        listening = asyncio.ensure_future(receive())
        await asyncio.sleep(0.05)
        heard.append("gone before the end" if listening.done() else "still there")
        await send({"type": "http.response.body", "body": b"two", "more_body": False})
        heard.append((await listening)["type"])

    answer = asyncio.run(exchange(app, {"type": "http"}, b"asked"))
    assert (answer.status, answer.headers, answer.body) == (200, [("content-type", "text/plain")], b"one two")
    assert heard == ["still there", "http.disconnect"]


def test_an_app_that_answers_nothing_is_a_clear_failure() -> None:
    async def silent(scope: Any, receive: Any, send: Any) -> None:
        return None

    with pytest.raises(RuntimeError, match="sent no answer"):
        asyncio.run(exchange(silent, {"type": "http"}, b""))


class _BrokenManager:
    """A session manager whose ``run()`` fails, as one whose task group cannot start would."""

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        raise OSError("no room for another task group")
        yield


def test_a_session_manager_that_does_not_start_says_so() -> None:
    managers = SessionManagers(lambda: _BrokenManager())  # type: ignore[arg-type, return-value]
    environ = falcon.testing.create_environ("/v1/mcp", method="POST")
    with pytest.raises(RuntimeError, match="did not start") as failed:
        managers.handle(environ, b"{}")
    assert isinstance(failed.value.__cause__, OSError)
    assert not managers.running


def test_a_thread_whose_manager_was_closed_is_served_by_a_new_one(world: McpWorld) -> None:
    """``close()`` ends every thread's session manager; a thread that served before and serves again gets
    a fresh one (in a thread of its own here, so that a thread stuck on the closed one fails the test)."""
    answers: list[str] = []
    closed = threading.Event()

    def serve_twice() -> None:
        answers.append(world.ok("whoami", {})["handle"])
        closed.wait(10)
        answers.append(world.ok("whoami", {})["handle"])

    thread = threading.Thread(target=serve_twice, daemon=True)
    thread.start()
    while not answers and thread.is_alive():
        thread.join(0.01)
    world.resource.bridge.close()
    assert not world.resource.bridge.running
    closed.set()
    thread.join(10)
    assert not thread.is_alive() and answers == ["alice", "alice"]
    assert world.resource.bridge.running


def _in_child(world: McpWorld, told: multiprocessing.Queue[object]) -> None:
    try:
        bridge = world.resource.bridge
        told.put(("running before its first request", bridge.running))
        inherited = bridge._local.loop
        told.put(("served", world.ok("whoami", {})["handle"]))
        told.put(("on a loop of its own", bridge._local.loop is not inherited))
    except Exception as error:  # noqa: BLE001 - reported to the parent, which fails the test
        told.put(("error", repr(error)))


@pytest.mark.slow
def test_a_forked_child_serves_on_a_loop_of_its_own(world: McpWorld) -> None:
    """Under ``gunicorn --preload`` a worker is a fork of a process that may have served: an event loop (its
    selector) must not be shared with the fork."""
    assert world.ok("whoami", {})["handle"] == "alice"
    ctx = multiprocessing.get_context("fork")
    told: multiprocessing.Queue[object] = ctx.Queue()
    child = ctx.Process(target=_in_child, args=(world, told))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    assert [told.get(timeout=5) for _ in range(3)] == [
        ("running before its first request", False),
        ("served", "alice"),
        ("on a loop of its own", True),
    ]
    assert world.ok("whoami", {})["handle"] == "alice"  # the parent's own loop still serves
