"""The fixtures of the unit tests: ``world``, ``ready`` and ``connector`` (``world_support.py``), and
``mcp``, the service behind its MCP endpoint (``test_mcp_world.McpWorld``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from community_api.scopes import ALL_SCOPES
from tests.unit.test_mcp_world import McpWorld
from tests.unit.world_support import Ready, World, build_world


@pytest.fixture
def world() -> World:
    return build_world()


@pytest.fixture
def ready(world: World) -> Ready:
    browser = world.sign_up()
    connection = world.link(browser)
    key = world.mint(browser, scopes=ALL_SCOPES)["secret"]
    return Ready(world, browser, connection, key)


@pytest.fixture
def connector(world: World) -> Any:
    """A registered OAuth client (``tests/unit/oauth_support.Connector``)."""
    from tests.unit.oauth_support import Connector

    registered = Connector(world)
    assert registered.register().status_code == 201
    return registered


@pytest.fixture
def mcp() -> Iterator[McpWorld]:
    built = McpWorld.build()
    yield built
    built.close()
