"""What the command-line tests share: running ``community-api`` as an operator would, in a fresh process with
only the settings a test gives it."""

from __future__ import annotations

import os
import subprocess
import sys

from scripts.processes import ROOT

SECRET = "cli-test-secret-" + "s" * 40
PLATFORM = {"COMMUNITY_API_PLATFORM_URL": "http://127.0.0.1:9"}  # nothing there: these tests never link


def run(*args: str, stdin: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``community-api ARGS`` with ``stdin`` piped in and no ``COMMUNITY_API_*`` setting but ``env``'s."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("COMMUNITY_API_")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "adapters.cli", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=60,
    )
