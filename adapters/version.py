"""The installed version of the service (the package's metadata), as ``community-api --version`` and the MCP
server's ``serverInfo`` tell it."""

from __future__ import annotations

from importlib import metadata

DISTRIBUTION = "community-data-api"


def service_version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # run from a tree that was never installed
        return "0"
