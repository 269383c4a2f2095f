"""One headless Chromium browser: started locally or on a Selenium Grid, bounded in every wait, and ended
whatever state it is in.

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
import time
from collections.abc import Callable

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.client_config import ClientConfig
from selenium.webdriver.remote.webdriver import WebDriver

from adapters.platform import procfs
from adapters.platform.orphans import profile_prefix

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
QUIT_SECONDS = 5.0  # the most a polite quit may wait for the driver's answer
END_SECONDS = 3.0  # the most Chromium is given to end when asked by signal, before it is forced
MIN_COMMAND_SECONDS = 1.0  # a driver command is never given less (a deadline that has just passed)
DriverFactory = Callable[[], WebDriver]


class BrowserFailure(Exception):
    """The browser (or its driver) failed: crashed, hung, or could not start."""


class Browser:
    """A driver and what the gateway knows about its page.

    ``on_origin``: a page of the platform is loaded and its firewall script has run. ``token``: the
    ``auth_token`` cookie set in it. ``build_id``: the Next.js build id read from the last page loaded.
    ``scripts`` and ``carried``: the scripts run in the page since it was loaded, and the characters of
    their answers (the page keeps them: ``page_fetch.RELOAD_AFTER_BYTES``).
    """

    def __init__(self, driver: WebDriver, cleanup: Callable[[], None] | None = None) -> None:
        self.driver = driver
        self._cleanup = cleanup
        self.on_origin = False
        self.token: str | None = None
        self.build_id: str | None = None
        self.scripts = 0
        self.carried = 0
        # Chromium's own processes, known while its driver lives: ended by PID if the driver dies first.
        self._started = [(pid, procfs.start_time(pid)) for pid in self.pids()]

    def _driver_process(self) -> subprocess.Popen[bytes] | None:
        process = getattr(getattr(self.driver, "service", None), "process", None)
        return process if isinstance(process, subprocess.Popen) else None

    def pids(self) -> list[int]:
        """The PIDs of the Chromium browser processes (children of the local chromedriver); [] when the
        browser is remote or already gone."""
        process = self._driver_process()
        return procfs.children(process.pid) if process is not None else []

    def limit(self, seconds: float) -> None:
        """Wait at most ``seconds`` for the driver's answer to each command from now on."""
        limit_commands(self.driver, seconds)

    def quit(self, polite: bool = True) -> None:
        """Close the browser whatever state it is in; never raises.

        ``polite``: ask the driver to quit, as for a browser that works (evicted, or at shutdown). A
        browser discarded because it failed or hung is not asked: a driver that stopped answering would
        hold the caller again (Selenium's own shutdown request to it has no time-out). A local one is
        ended by PID; a Grid's session is ended with a bounded request.

        A local driver that has already ended (a stop signal sent to the whole process group, as a
        terminal's Ctrl-C or ``systemctl stop`` do, reaches chromedriver as well as the worker) is not
        asked to quit either: every request to it would be refused and retried, warnings and all. Its
        Chromium processes are ended by PID, those that are still the ones it started."""
        process = self._driver_process()
        # Chromium and every helper process under it, known now: once Chromium's main process has gone,
        # its helpers are no longer found under it, and one still ending may write to the profile.
        family = self._family() if process is not None else []
        if process is None or (polite and process.poll() is None):
            self.limit(QUIT_SECONDS)
            try:
                self.driver.quit()
            except Exception:  # a dead browser cannot be closed politely; that is fine
                log.debug("quitting a browser failed", exc_info=True)
        if process is not None:
            self._end(process, family)
        if self._cleanup is not None:
            self._cleanup()
            self._cleanup = None

    def _ours(self) -> list[int]:
        """The Chromium processes its driver started that still run (the same PID and start time)."""
        return [pid for pid, started in self._started if started is not None and procfs.start_time(pid) == started]

    def _family(self) -> list[tuple[int, str | None]]:
        """(PID, start time) of the Chromium its driver started and of every process under it."""
        mains = self._ours()
        pids = mains + [pid for main in mains for pid in procfs.descendants(main)]
        return [(pid, procfs.start_time(pid)) for pid in pids]

    def _end(self, process: subprocess.Popen[bytes], family: list[tuple[int, str | None]]) -> None:
        """End what is left of a local browser by PID: the Chromium its driver started (asked first, so
        that it ends its own helper processes and stops writing to its profile, then forced, helpers
        included), then the driver. Only then is its profile removed (``quit``)."""
        for pid in self._ours():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)

        def left() -> list[int]:
            return [pid for pid, started in family if procfs.running(pid) and procfs.start_time(pid) == started]

        deadline = time.monotonic() + END_SECONDS
        while (still := left()) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in still:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if process.poll() is None:
            with contextlib.suppress(OSError):
                process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(END_SECONDS)


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


# Where Chromium puts its single-instance socket, under the temporary folder (its folder's name as Debian's
# Chromium makes it, six random characters), and the most a Unix socket's path may hold (``sun_path``
# with its final NUL).
_SINGLETON_SOCKET = "org.chromium.Chromium.XXXXXX/SingletonSocket"
_SOCKET_PATH_MAX = 107


def _socket_fits(folder: str) -> bool:
    """Whether Chromium can make its socket with ``folder`` as its temporary folder."""
    return len(os.path.join(folder, _SINGLETON_SOCKET)) <= _SOCKET_PATH_MAX


def driver_environment(profile: str) -> dict[str, str] | None:
    """chromedriver's environment, which Chromium inherits: its temporary folder is the browser's own profile
    folder, so that what the two leave there goes with the profile.

    Each browser makes two folders in the temporary folder: chromedriver a ``scoped_dir``, Chromium one
    for its single-instance socket. Both remove them when they end normally, but not when ended by
    signal, as a browser that failed or hung is (``Browser.quit``), or by the stop signal a terminal or
    systemd sends the whole process group: two folders left in ``/tmp`` per such browser, for ever. In the
    profile they are removed with it, and by the master's sweep of abandoned profiles.

    Chromium aborts when its socket's path does not fit a Unix socket address ("Socket path too long"):
    where a profile's path is too long for that (a long ``TMPDIR``), the temporary folder is left as it
    is (None: the process's own environment)."""
    if not _socket_fits(profile):
        return None
    return {**os.environ, "TMPDIR": profile}


def temp_folder_problem() -> str | None:
    """Why no local browser could start in this process's temporary folder (``TMPDIR``), or None: where
    even the folder itself is too long for Chromium's socket (``driver_environment``), every start aborts,
    and all ``/readyz`` could say is that no browser started. ``serve`` asks it before it starts."""
    folder = tempfile.gettempdir()
    if _socket_fits(folder):
        return None
    most = _SOCKET_PATH_MAX - len(_SINGLETON_SOCKET) - 1
    return (
        f"TMPDIR ({folder}) is {len(folder)} characters long: Chromium makes its socket in it and aborts when "
        f"the socket's path is longer than a Unix socket address allows ({_SOCKET_PATH_MAX} bytes); set TMPDIR "
        f"to a folder of at most {most} characters, such as /tmp"
    )


def local_browser(timeout: float, trusted_spki: tuple[str, ...] = ()) -> Browser:
    """Debian's Chromium with a fresh profile directory (removed when the browser is closed), which is also
    its temporary folder (``driver_environment``)."""
    profile = tempfile.mkdtemp(prefix=profile_prefix())
    options = chrome_options(profile, trusted_spki)
    options.binary_location = CHROMIUM
    try:
        service = Service(executable_path=CHROMEDRIVER, env=driver_environment(profile))
        driver = webdriver.Chrome(service=service, options=options)
        ready_driver(driver, timeout)
    except Exception:
        shutil.rmtree(profile, ignore_errors=True)
        raise
    return Browser(driver, cleanup=lambda: shutil.rmtree(profile, ignore_errors=True))


def remote_browser(remote_url: str, timeout: float, trusted_spki: tuple[str, ...] = ()) -> Browser:
    """A browser from a Selenium Grid; the node keeps its own profiles, so no profile flag is passed."""
    # A Grid with no free slot queues a new session for minutes: the start is bounded like a local one.
    config = ClientConfig(remote_server_addr=remote_url, timeout=int(START_SECONDS))
    driver = webdriver.Remote(
        command_executor=remote_url, options=chrome_options(None, trusted_spki), client_config=config
    )
    ready_driver(driver, timeout)
    return Browser(driver)


def limit_commands(driver: WebDriver, seconds: float) -> None:
    """Wait at most ``seconds`` for the driver's answer to each command from now on. Selenium's own default
    is no limit at all: a driver that stops answering would hold its caller for ever."""
    config = getattr(getattr(driver, "command_executor", None), "client_config", None)
    if config is not None:
        config.timeout = max(seconds, MIN_COMMAND_SECONDS)


def ready_driver(driver: WebDriver, timeout: float) -> None:
    """Settle a new driver's first navigation and set its time-outs (every browser goes through here)."""
    limit_commands(driver, START_SECONDS + 5)
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
