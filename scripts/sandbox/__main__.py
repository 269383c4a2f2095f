"""``python -m scripts.sandbox --bind 127.0.0.1:PORT [--seed N]``: serve the stand-in with gunicorn.

One worker process (the state lives in its memory) with several threads (``gthread``): a browser fetches
about 30 pages at once. Prints ``sandbox listening on http://HOST:PORT`` when ready; runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gunicorn.app.base import BaseApplication

from scripts.sandbox.state import DAY


class _Server(BaseApplication):
    def __init__(self, options: dict[str, Any], seed: int, firewall_ttl: float) -> None:
        self.options = options
        self.seed = seed
        self.firewall_ttl = firewall_ttl
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        from scripts.sandbox.app import create_app

        return create_app(self.seed, firewall_ttl=self.firewall_ttl)


def _when_ready(server: Any) -> None:
    for listener in server.LISTENERS:
        host, port = listener.sock.getsockname()[:2]
        print(f"sandbox listening on http://{host}:{port}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m scripts.sandbox", description=__doc__)
    parser.add_argument("--bind", default="127.0.0.1:8700", help="HOST:PORT (default %(default)s)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--firewall-ttl", type=float, default=DAY, help="seconds a firewall token lives")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    options = {
        "bind": args.bind, "workers": 1, "worker_class": "gthread", "threads": args.threads,
        "timeout": 120, "graceful_timeout": 3, "keepalive": 5, "loglevel": args.log_level,
        "accesslog": None, "errorlog": "-", "when_ready": _when_ready, "preload_app": True,
    }
    _Server(options, args.seed, args.firewall_ttl).run()
    sys.exit(0)


if __name__ == "__main__":
    main()
