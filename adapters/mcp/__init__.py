"""The remote MCP server at ``POST /v1/mcp``: one tool per Implemented data route, calling the same core
use cases as the REST routes (both generated from ``adapters/operations.py``), served from WSGI workers
(``endpoint.py``, ``bridge.py``)."""

from adapters.mcp.endpoint import McpResource, add_mcp_route

__all__ = ["McpResource", "add_mcp_route"]
