"""The sandbox as a real process: ``python -m scripts.sandbox`` under gunicorn."""

from __future__ import annotations

import os
import signal
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.sandbox.server import sandbox_server

BROWSER_UA = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Chrome/130.0 Safari/537.36"}


@pytest.mark.slow
def test_serves_until_sigterm():
    with sandbox_server("--seed", "3") as (base, proc):
        assert requests.get(f"{base}/login", timeout=5).status_code == 200
        blocked = requests.get(f"{base}/api2/self", timeout=5)  # python-requests: not a browser
        assert blocked.status_code == 403 and "Request blocked" in blocked.text
        with requests.Session() as s:
            s.headers.update(BROWSER_UA)
            s.cookies.set("aws-waf-token", s.get(f"{base}/__fw/challenge", timeout=5).json()["token"])
            r = s.post(f"{base}/api2/auth/login", json={"email": "alice@sandbox.test", "password": "sandbox"},
                       timeout=5)
            assert r.status_code == 200 and "auth_token" in s.cookies
            state = s.get(f"{base}/__sandbox/state", timeout=5).json()
            assert state["seed"] == 3
            urls = [f"{base}/_next/data/{state['buildId']}/builders-club.json?group=builders-club&p={p}"
                    for p in range(1, 31)]
            cookies = s.cookies.get_dict()
            with ThreadPoolExecutor(30) as pool:  # 30 pages at once, as the browser does
                codes = list(pool.map(lambda u: requests.get(u, headers=BROWSER_UA, cookies=cookies,
                                                             timeout=10).status_code, urls))
            assert codes == [200] * 30
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(15) == 0
