"""Real-browser test helpers: run a Solara app offline and drive it with headless Chromium.

WHY: SolaraViz pages can fail in ways Python-side tests never see (the front end stuck on
"Loading app" when the CDN is unreachable, blank plots with ipyvue 3, JavaScript errors). These
helpers start ``solara run`` on a free local port and open the page in Debian's Chromium through
Playwright (no Playwright browser download), so tests check what a user really sees.

Offline by construction: the server's CDN is pointed at a local stub that answers 404 to
everything (and records what was asked), so every front-end file must come from the proxy cache
filled by ``.ci/solara_assets.sh``; the browser aborts (and records) every request that leaves
127.0.0.1. Set up once with ``.ci/browser_deps.sh`` and ``.ci/solara_assets.sh``. Not a test
module: imported by ``tests/project/test_browser_*.py``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
# Flags measured to keep Debian Chromium quiet and self-contained offline (notes/stack.md).
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
LOADING_TEXT = "Loading app"


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def solara_executable() -> Path:
    """The ``solara`` script next to the running interpreter, else the repo's ``.venv`` one."""
    beside = Path(sys.executable).parent / "solara"
    return beside if beside.exists() else REPO_ROOT / ".venv" / "bin" / "solara"


@dataclass
class SolaraServer:
    """A running ``solara run`` process: its URL, process handle, log file and CDN misses.

    ``cdn_misses`` lists the front-end paths the server tried to fetch from the (stub) CDN
    because they were not in its proxy cache; empty means everything was served offline.
    """

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    cdn_misses: list[str] = field(default_factory=list)

    def log_tail(self, n_chars: int = 4000) -> str:
        """Last characters of the server's combined stdout/stderr, for failure messages."""
        try:
            return self.log_path.read_text(errors="replace")[-n_chars:]
        except OSError:
            return "<no log>"


@contextlib.contextmanager
def _not_found_cdn(misses: list[str]) -> Iterator[str]:
    """Serve 404 for every path on a free local port, appending each path to ``misses``.

    WHY: solara retries a CDN fetch that cannot connect (1 + 2 + 4 s of back-off) but gives up
    at once on a 4xx answer, so a 404 stub makes a missing asset fail fast and visibly.
    """

    class NotFound(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            misses.append(self.path)
            self.send_error(404, "offline test CDN: not in the local proxy cache")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=httpd.serve_forever, name="not-found-cdn", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/npm/"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _kill_group(process: subprocess.Popen[bytes], *, grace_s: float = 10.0) -> None:
    """SIGTERM the server's process group, then SIGKILL it if it does not exit in time."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=grace_s)


@contextlib.contextmanager
def solara_server(
    app_path: str | os.PathLike[str],
    *,
    port: int,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 90.0,
    offline: bool = True,
    production: bool = True,
) -> Iterator[SolaraServer]:
    """Run ``solara run APP --host 127.0.0.1 --port PORT --production`` until the block exits.

    Waits until ``GET /`` answers 200 (the server has imported the app), then yields a
    :class:`SolaraServer`. On exit the whole process group is terminated (solara may spawn
    children). ``offline=True`` points ``SOLARA_ASSETS_CDN`` at a local 404 stub, so a front-end
    file missing from the proxy cache fails at once (and shows in ``cdn_misses``) instead of
    being fetched from the internet.

    Raises:
        ValueError: ``port`` or ``timeout_s`` out of range, or the app file does not exist.
        RuntimeError: the server exits early or does not answer within ``timeout_s``.
    """
    app = Path(app_path)
    if not app.is_file():
        msg = f"app_path={str(app)!r} is not a file; expected a Solara app .py file"
        raise ValueError(msg)
    if not 0 < port < 65536:
        msg = f"port={port} is out of range; allowed 1..65535"
        raise ValueError(msg)
    if timeout_s <= 0:
        msg = f"timeout_s={timeout_s} must be > 0 seconds"
        raise ValueError(msg)
    solara = solara_executable()
    if not solara.exists():
        msg = f"solara executable {str(solara)!r} not found; install solara in the venv"
        raise RuntimeError(msg)

    cmd = [str(solara), "run", str(app.resolve()), "--host", "127.0.0.1", "--port", str(port)]
    cmd.append("--no-open")
    if production:
        cmd.append("--production")
    full_env = dict(os.environ)
    full_env["SOLARA_TELEMETRY_MIXPANEL_ENABLE"] = "False"
    full_env["PYTHONUNBUFFERED"] = "1"
    misses: list[str] = []
    with contextlib.ExitStack() as stack:
        if offline:
            # the proxy is off by default inside VS Code/Colab terminals; the cache needs it on
            full_env["SOLARA_ASSETS_PROXY"] = "True"
            full_env["SOLARA_ASSETS_CDN"] = stack.enter_context(_not_found_cdn(misses))
        full_env.update(env or {})
        log_file = tempfile.NamedTemporaryFile(  # noqa: SIM115 - lives as long as the server
            prefix=f"solara-{port}-", suffix=".log", delete=False
        )
        log_path = Path(log_file.name)
        stack.callback(log_path.unlink, missing_ok=True)
        process = subprocess.Popen(
            cmd,
            cwd=REPO_ROOT,
            env=full_env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # own process group, so we can kill all of it
        )
        log_file.close()
        stack.callback(_kill_group, process)  # runs before the CDN stub stops
        server = SolaraServer(
            url=f"http://127.0.0.1:{port}/", process=process, log_path=log_path, cdn_misses=misses
        )
        try:
            _wait_until_answers(server, timeout_s=timeout_s)
            yield server
        except BaseException:
            # pytest shows captured stderr of a failing test: the server's view of the failure
            print(f"--- solara server log ({log_path}) ---\n{server.log_tail()}", file=sys.stderr)
            raise


def _wait_until_answers(server: SolaraServer, *, timeout_s: float) -> None:
    """Poll ``GET /`` until it answers 200; raise RuntimeError if solara dies or times out."""
    deadline = time.monotonic() + timeout_s
    while True:
        if server.process.poll() is not None:
            msg = f"solara exited with code {server.process.returncode}:\n{server.log_tail()}"
            raise RuntimeError(msg)
        try:
            with urllib.request.urlopen(server.url, timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            msg = f"solara did not answer on {server.url} in {timeout_s} s:\n{server.log_tail()}"
            raise RuntimeError(msg)
        time.sleep(0.25)


@dataclass
class BrowserPage:
    """A Playwright page plus what went wrong in it while the test ran."""

    page: Any  # playwright.sync_api.Page (kept Any so importing this module needs no playwright)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    blocked_requests: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        """All errors, failed and blocked requests, in one list (empty when all is well)."""
        return (
            [f"console: {m}" for m in self.console_errors]
            + [f"pageerror: {m}" for m in self.page_errors]
            + [f"failed: {m}" for m in self.failed_requests]
            + [f"blocked: {m}" for m in self.blocked_requests]
        )


@contextlib.contextmanager
def chromium_page(
    *,
    headless: bool = True,
    viewport: tuple[int, int] = (1280, 900),
    block_external: bool = True,
    default_timeout_ms: float = 30_000,
    executable_path: str | os.PathLike[str] = CHROMIUM,
) -> Iterator[BrowserPage]:
    """Open one page in Debian Chromium through Playwright's sync API.

    Console messages of type ``error``, uncaught page errors and failed requests are collected
    into the returned :class:`BrowserPage`. With ``block_external`` every request to a host
    other than 127.0.0.1/localhost is aborted and recorded, which proves the page works offline.

    Raises:
        ValueError: ``executable_path`` does not exist or ``viewport`` is not positive.
    """
    exe = Path(executable_path)
    if not exe.exists():
        msg = f"executable_path={str(exe)!r} does not exist; install Debian chromium"
        raise ValueError(msg)
    if min(viewport) <= 0:
        msg = f"viewport={viewport} must be two positive pixel sizes"
        raise ValueError(msg)
    from playwright.sync_api import sync_playwright  # imported late: optional dependency

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(exe), headless=headless, args=list(CHROMIUM_ARGS)
        )
        try:
            context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
            page = context.new_page()
            page.set_default_timeout(default_timeout_ms)
            result = BrowserPage(page=page)

            def on_console(message: Any) -> None:
                if message.type == "error":
                    location = message.location or {}
                    result.console_errors.append(f"{message.text} @ {location.get('url', '?')}")

            page.on("console", on_console)
            page.on("pageerror", lambda exc: result.page_errors.append(str(exc)))
            page.on(
                "requestfailed",
                lambda req: result.failed_requests.append(f"{req.url} ({req.failure})"),
            )
            if block_external:

                def keep_local(route: Any) -> None:
                    host = urllib.parse.urlsplit(route.request.url).hostname or ""
                    if route.request.url.startswith(("data:", "blob:")) or host in (
                        "127.0.0.1",
                        "localhost",
                    ):
                        route.continue_()
                    else:
                        result.blocked_requests.append(route.request.url)
                        route.abort()

                page.route("**/*", keep_local)
            yield result
        finally:
            browser.close()


def wait_for_solara_app(page: Any, *, timeout_ms: float = 60_000, grid: bool = True) -> None:
    """Block until Solara's loader ("Loading app") is gone and the app's widgets are shown.

    Solara first shows a loader page; the app is there once a Vuetify button is visible and the
    loader has left the DOM. SolaraViz puts its components in a draggable grid whose code
    (vue-grid-layout) loads later through require.js, so with ``grid`` we also wait for the first
    grid item. Raises Playwright's TimeoutError otherwise.
    """
    page.wait_for_selector(".v-application .v-btn", state="visible", timeout=timeout_ms)
    page.wait_for_selector(f"text={LOADING_TEXT}", state="detached", timeout=timeout_ms)
    if grid:
        page.wait_for_selector(".vue-grid-item", state="visible", timeout=timeout_ms)
