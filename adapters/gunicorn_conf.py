"""gunicorn's configuration for the service (``gunicorn --config python:adapters.gunicorn_conf``).

It makes ``/metrics`` count every worker: ``prometheus_client``'s multiprocess mode keeps each process's
values in files under ``PROMETHEUS_MULTIPROC_DIR``, and that variable must be set before any worker imports
the library. This module is read by gunicorn's master before it loads the app or forks, so the variable set
here is what every worker inherits.

The folder is made fresh for each run (stale files from an earlier run would add old counts), in shared
memory when there is some (``/dev/shm``); a folder the
operator names in ``PROMETHEUS_MULTIPROC_DIR`` is used instead, emptied of the library's files first
(``adapters/metrics_folder.py``: ``serve`` refuses a folder that holds other ``.db`` files). When a
worker ends, its live gauges are dropped (``mark_process_dead``); when the master ends, a folder made here
is removed.

It also makes the master end the browsers of a worker killed outright (``adapters/platform/orphans.py``):
the master adopts what a dead worker leaves, and ends its browsers when it learns the worker ended. And
each worker answers the requests gunicorn cannot read in the service's JSON error shape
(``adapters/http/server_errors.py``), and stops fast on SIGQUIT or SIGINT without the threaded worker's
hang (``adapters/worker_quit.py``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from adapters.metrics_folder import stale_metrics_files

# gunicorn 25.1+ opens a control socket (for ``gunicornc``) at one path per user, $XDG_RUNTIME_DIR/gunicorn.ctl
# or ~/.gunicorn/gunicorn.ctl: a second service on the host takes it over from the first, so commands reach
# the wrong one, and removes it when it stops. The service is run by its signals (docs/deployment.md).
# Older gunicorn ignores the name.
control_socket_disable = True

# The folder made here is in shared memory where the system has it (Linux's /dev/shm, a tmpfs), not on
# disk: prometheus_client makes its files sparse and writes them through a mapping, so on a full disk the
# first write of a new label's value to a page without a block would be SIGBUS, the worker killed
# mid-request (as the throttles' file was: docs/decisions.md, "A full disk is an outage, not a bug").
# The files are small (a few pages per worker), and memory does not fill when the disk does.
SHARED_MEMORY = "/dev/shm"  # noqa: S108 - only ever a parent for mkdtemp (a private folder, mode 0700)


def _fresh_metrics_folder() -> str:
    shared = os.path.isdir(SHARED_MEMORY) and os.access(SHARED_MEMORY, os.W_OK | os.X_OK)
    return tempfile.mkdtemp(prefix="community-api-metrics-", dir=SHARED_MEMORY if shared else None)


_MADE_HERE = not os.environ.get("PROMETHEUS_MULTIPROC_DIR")
if _MADE_HERE:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = _fresh_metrics_folder()
else:
    Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).mkdir(parents=True, exist_ok=True)
    for stale in stale_metrics_files(os.environ["PROMETHEUS_MULTIPROC_DIR"]):  # the library's files only
        stale.unlink()


def on_starting(server: Any) -> None:
    from adapters.platform.orphans import become_subreaper, remove_abandoned_profiles

    if not become_subreaper():
        server.log.warning("could not adopt orphaned processes: browsers of a killed worker would outlive it")
    removed = remove_abandoned_profiles()  # left by a service that was killed outright
    if removed:
        server.log.warning("removed %d browser profiles whose browsers had ended", removed)


def post_worker_init(worker: Any) -> None:
    from adapters import worker_quit
    from adapters.http.server_errors import answer_in_json

    answer_in_json()  # requests gunicorn cannot read are answered in our JSON error shape, not HTML
    worker_quit.install(worker)  # a Ctrl-C cannot hang a threaded worker (see the module)


def child_exit(server: Any, worker: Any) -> None:
    from prometheus_client import multiprocess

    from adapters.platform.orphans import end_orphaned_browsers, remove_abandoned_profiles

    multiprocess.mark_process_dead(worker.pid)
    ended = end_orphaned_browsers(os.getpid())
    # Profiles whose Chromium ended but were not removed (the worker was killed while closing them).
    profiles = ended.profiles + remove_abandoned_profiles()
    if ended.drivers or profiles:
        server.log.warning(
            "worker %s ended without closing its browsers: ended %d drivers and their %d processes, "
            "removed %d profiles",
            worker.pid,
            ended.drivers,
            ended.processes,
            profiles,
        )


def on_exit(server: Any) -> None:
    if _MADE_HERE:
        shutil.rmtree(os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)
