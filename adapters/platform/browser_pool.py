"""Headless Chromium browsers and the bounded pool that keeps one warm per connection.

- One browser per connection id, so each keeps its own cookie jar (session and firewall token) and
  build id. Calls for one connection are serialised on a lock of their own (a page runs one script at a
  time); calls for other connections run in parallel.
- At most ``size`` browsers live at once: starting one more first closes the least recently used idle
  browser; when every browser is busy, the start waits a bounded time, then gives up.
- A browser that crashed or hung is ``discard``ed by the caller and started afresh on the next use.

Local browsers are Debian's Chromium driven by Debian's chromedriver with explicit paths, so Selenium
Manager never runs (it would try to download a driver). Each gets a fresh temporary profile, removed
when the browser is closed. With ``remote_url`` the browsers come from a Selenium Grid instead.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

from adapters.metrics import BROWSER_CRASHES, BROWSER_EVICTIONS, BROWSER_STARTS, BROWSERS_LIVE

log = logging.getLogger(__name__)

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# Checked on this stack (DESIGN §8): headless without a sandbox or GPU, and without Chromium's own
# background traffic (component updates, sync, first-run pages) that would only cost time and memory.
# Chromium 15x also preloads the address bar's drop-down (a WebUI page in a renderer of its own, which
# even works while our pages fetch) and keeps a spare renderer ready for the next site: neither is ever
# used here. Without them a browser has 7 processes instead of 9, about 50 MiB less PSS, and uses 10–25%
# less CPU for 30 feed pages (measured with scripts/bench/feed.py). chromedriver merges this
# --disable-features with its own; a Chromium that knows none of these features ignores them.
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-features=WebUIOmniboxPopup,WebUIOmniboxAimPopup,SpareRendererForSitePerProcess",
)

# The first tab opens about:blank. Left to itself it opens the new-tab page, which loads the default
# search engine's start page from the internet (Debian's Chromium: start.duckduckgo.com): a request to a
# third party at every browser start, and where that host does not resolve, chromedriver's first
# navigation waited ~5 s for it (the "cold outliers" of docs/performance.md).
STARTUP_PREFS = {
    "session.restore_on_startup": 4,  # open the URLs below
    "session.startup_urls": ["about:blank"],
    "homepage": "about:blank",
    "homepage_is_newtabpage": False,
}

START_SECONDS = 30.0  # the most a browser may take to start and show its first (blank) page
DriverFactory = Callable[[], WebDriver]


class BrowserFailure(Exception):
    """The browser (or its driver) failed: crashed, hung, or could not start."""


class PoolBusy(Exception):
    """No browser could be had in time: every one is busy, or the pool is closed."""


class Browser:
    """A driver and what the gateway knows about its page.

    ``on_origin``: a page of the platform is loaded and its firewall script has run. ``token``: the
    ``auth_token`` cookie set in it. ``build_id``: the Next.js build id read from the last page loaded.
    """

    def __init__(self, driver: WebDriver, cleanup: Callable[[], None] | None = None) -> None:
        self.driver = driver
        self._cleanup = cleanup
        self.on_origin = False
        self.token: str | None = None
        self.build_id: str | None = None
        # Chromium's own processes, known while its driver lives: ended by PID if the driver dies first.
        self._started = [(pid, _start_time(pid)) for pid in self.pids()]

    def _driver_process(self) -> subprocess.Popen[bytes] | None:
        process = getattr(getattr(self.driver, "service", None), "process", None)
        return process if isinstance(process, subprocess.Popen) else None

    def pids(self) -> list[int]:
        """The PIDs of the Chromium browser processes (children of the local chromedriver); [] when the
        browser is remote or already gone."""
        process = self._driver_process()
        return _children(process.pid) if process is not None else []

    def quit(self) -> None:
        """Close the browser whatever state it is in; never raises.

        A local driver that has already ended (a stop signal sent to the whole process group, as a
        terminal's Ctrl-C or ``systemctl stop`` do, reaches chromedriver as well as the worker) is not
        asked to quit: every request to it would be refused and retried, warnings and all. Its Chromium
        processes are ended by PID instead, those that are still the ones it started."""
        process = self._driver_process()
        if process is not None and process.poll() is not None:
            for pid, started in self._started:
                if started is not None and _start_time(pid) == started:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGTERM)
        else:
            try:
                self.driver.quit()
            except Exception:  # a dead browser cannot be closed politely; that is fine
                log.debug("quitting a browser failed", exc_info=True)
                service = getattr(self.driver, "service", None)
                with contextlib.suppress(Exception):
                    if service is not None:
                        service.stop()
        if self._cleanup is not None:
            self._cleanup()
            self._cleanup = None


def _start_time(pid: int) -> str | None:
    """When the process started (field 22 of /proc/PID/stat): with the PID, it names one process, not
    whichever later reuses its number."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _children(parent: int) -> list[int]:
    """PIDs whose parent is ``parent``, read from /proc (Linux)."""
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[1] == str(parent):
            found.append(int(entry))
    return sorted(found)


def chrome_options(user_data_dir: str | None, trusted_spki: tuple[str, ...] = ()) -> webdriver.ChromeOptions:
    """``trusted_spki``: certificate keys trusted besides the system's (the stand-in's self-signed one), by
    the SHA-256 of their SubjectPublicKeyInfo. Chromium honours the flag only with a profile directory of
    its own. Never ``--ignore-certificate-errors``: any other certificate still fails."""
    options = webdriver.ChromeOptions()
    for flag in FLAGS:
        options.add_argument(flag)
    if user_data_dir is not None:
        options.add_argument(f"--user-data-dir={user_data_dir}")
    if trusted_spki:
        options.add_argument(f"--ignore-certificate-errors-spki-list={','.join(trusted_spki)}")
    options.add_experimental_option("prefs", STARTUP_PREFS)
    return options


def local_browser(timeout: float, trusted_spki: tuple[str, ...] = ()) -> Browser:
    """Debian's Chromium with a fresh profile directory (removed when the browser is closed)."""
    profile = tempfile.mkdtemp(prefix="cda-chromium-")
    options = chrome_options(profile, trusted_spki)
    options.binary_location = CHROMIUM
    try:
        driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
        ready_driver(driver, timeout)
    except Exception:
        shutil.rmtree(profile, ignore_errors=True)
        raise
    return Browser(driver, cleanup=lambda: shutil.rmtree(profile, ignore_errors=True))


def remote_browser(remote_url: str, timeout: float, trusted_spki: tuple[str, ...] = ()) -> Browser:
    """A browser from a Selenium Grid; the node keeps its own profiles, so no profile flag is passed."""
    driver = webdriver.Remote(command_executor=remote_url, options=chrome_options(None, trusted_spki))
    ready_driver(driver, timeout)
    return Browser(driver)


def ready_driver(driver: WebDriver, timeout: float) -> None:
    """Settle a new driver's first navigation and set its time-outs (every browser goes through here)."""
    # chromedriver's first navigation waits for the first tab's own pending one (see STARTUP_PREFS):
    # settle it here, with a wait of its own, so that it never eats into the time allowed for a platform
    # page.
    try:
        driver.set_page_load_timeout(max(START_SECONDS, timeout))
        driver.get("about:blank")
    except Exception:
        with contextlib.suppress(Exception):
            driver.quit()
        raise
    # The in-page fetches stop themselves after ``timeout``; the script time-out is a little longer so
    # that a fetch that timed out still reports back, and only a hung page trips Selenium's time-out.
    driver.set_script_timeout(timeout + 5)
    driver.set_page_load_timeout(timeout)


class _Slot:
    __slots__ = ("browser", "key", "lock", "users")

    def __init__(self, key: str) -> None:
        self.key = key
        self.lock = threading.Lock()
        self.browser: Browser | None = None
        self.users = 0  # threads holding or waiting for ``lock``


class Lease:
    """The caller's hold on one connection's browser, for the length of one gateway call."""

    def __init__(self, pool: BrowserPool, slot: _Slot) -> None:
        self._pool = pool
        self._slot = slot

    def browser(self) -> Browser:
        """The connection's browser, started if there is none (``BrowserFailure`` if it cannot start)."""
        if self._slot.browser is None:
            self._pool._start(self._slot)
        assert self._slot.browser is not None
        return self._slot.browser

    def discard(self) -> None:
        """Close the browser (it crashed or hung); the next ``browser()`` starts a fresh one."""
        self._pool._discard(self._slot)


class BrowserPool:
    def __init__(self, factory: Callable[[], Browser], size: int, wait: float) -> None:
        if size < 1:
            raise ValueError("the pool needs room for at least one browser")
        self._factory = factory
        self._size = size
        self._wait = wait
        self._cond = threading.Condition()
        self._slots: OrderedDict[str, _Slot] = OrderedDict()  # least recently used first
        self._live = 0  # browsers running or starting
        self._closed = False

    @contextlib.contextmanager
    def lease(self, key: str) -> Iterator[Lease]:
        with self._cond:
            if self._closed:
                raise PoolBusy("the browser pool is closed")
            slot = self._slots.get(key)
            if slot is None:
                slot = self._slots[key] = _Slot(key)
            self._slots.move_to_end(key)
            slot.users += 1
        try:
            if not slot.lock.acquire(timeout=self._wait):
                raise PoolBusy("the browser of this connection is busy with earlier calls")
            try:
                yield Lease(self, slot)
            finally:
                slot.lock.release()
        finally:
            with self._cond:
                slot.users -= 1
                if slot.users == 0 and slot.browser is None and self._slots.get(key) is slot:
                    del self._slots[key]
                self._cond.notify_all()

    def pids(self, key: str) -> list[int]:
        with self._cond:
            slot = self._slots.get(key)
            browser = slot.browser if slot is not None else None
        return browser.pids() if browser is not None else []

    def live(self) -> int:
        """How many browsers are running or starting."""
        with self._cond:
            return self._live

    def close(self) -> None:
        """Quit every browser. Calls still running fail; later calls are refused."""
        with self._cond:
            self._closed = True
            browsers = [s.browser for s in self._slots.values() if s.browser is not None]
            for slot in self._slots.values():
                slot.browser = None
            self._slots.clear()
            BROWSERS_LIVE.dec(self._live)
            self._live = 0
            self._cond.notify_all()
        for browser in browsers:
            browser.quit()

    # -- used by Lease, with the slot's lock held ----------------------------------------------------
    def _start(self, slot: _Slot) -> None:
        evicted: list[Browser] = []
        deadline = time.monotonic() + self._wait
        with self._cond:
            while True:
                if self._closed:
                    raise PoolBusy("the browser pool is closed")
                if self._live < self._size:
                    break
                victim = next((s for s in self._slots.values()
                               if s is not slot and s.users == 0 and s.browser is not None), None)
                if victim is not None:
                    assert victim.browser is not None
                    evicted.append(victim.browser)
                    victim.browser = None
                    del self._slots[victim.key]
                    self._live -= 1
                    BROWSERS_LIVE.dec()
                    BROWSER_EVICTIONS.inc()
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise PoolBusy(f"all {self._size} browsers are busy")
                self._cond.wait(remaining)
            self._live += 1
            BROWSERS_LIVE.inc()
        # The evicted browsers close while the new one starts (closing one takes 0.1-0.5 s, mostly
        # waiting for its processes to end); both are done before this call returns.
        closing = []
        for old in evicted:
            log.info("closing the least recently used browser (pool of %d)", self._size)
            closing.append(threading.Thread(target=old.quit, name="close-evicted-browser", daemon=True))
            closing[-1].start()
        try:
            browser = self._factory()
        except Exception as error:
            with self._cond:
                self._live -= 1
                BROWSERS_LIVE.dec()
                self._cond.notify_all()
            raise BrowserFailure(f"the browser could not start: {type(error).__name__}") from error
        finally:
            for thread in closing:
                thread.join()
        BROWSER_STARTS.inc()
        with self._cond:
            if not self._closed:
                slot.browser = browser
                return
        browser.quit()
        raise PoolBusy("the browser pool is closed")

    def _discard(self, slot: _Slot) -> None:
        with self._cond:
            browser, slot.browser = slot.browser, None
            if browser is not None and not self._closed:
                self._live -= 1
                BROWSERS_LIVE.dec()
                BROWSER_CRASHES.inc()
            self._cond.notify_all()
        if browser is not None:
            browser.quit()
