"""A hardened Playwright browser server: Chromium on a CPU host, used by pools elsewhere.

Run one per CPU host (or several, one Chromium each)::

    python -m verl_asyncweb.browser_server --host 0.0.0.0 --port 4000 [--executable PATH] [--deterministic-clock]

It prints its websocket endpoint, ``ws://HOST:PORT/TOKEN``, as the only line on stdout (logs go to stderr) and
serves until SIGTERM or SIGINT, when it closes Chromium and exits. Put the endpoints in
``asyncweb.env.remote_endpoints``; the pool's browsers then ``connect`` instead of launching (Playwright's own
browser-server protocol, the one ``BrowserType.connect`` speaks).

Hardened, unlike ``playwright run-server`` (which launches whatever executable and flags a client asks for):

- the launch options are fixed here: the pool's :data:`DEFAULT_CHROMIUM_ARGS` (plus
  :data:`DETERMINISTIC_CHROMIUM_ARGS` with ``--deterministic-clock``, :data:`LOOPBACK_ONLY_ARGS` with
  ``--loopback-only``), the Chromium binary, headless. Clients only connect; the ``x-playwright-launch-options``
  header is ignored (Playwright's ``launchServer`` mode serves its one pre-launched browser);
- the websocket path is a random capability token (``secrets.token_urlsafe(24)``; set
  ``ASYNCWEB_BROWSER_SERVER_TOKEN`` to keep one across restarts, so a pool's retry of a lost endpoint finds it
  again). It travels in the child's environment, never on a command line ``ps`` shows;
- Chromium's death ends the server (exit 1), so a pool sees a lost endpoint rather than a server without browser;
  a server whose parent dies stops too (its stdin closes).

Anyone holding the endpoint controls the browser, and the pool's origin allowlist is enforced by the pool (its
``context.route``), not here: bind to a private interface, and put a TLS proxy in front for ``wss://``.

The server is Playwright's ``chromium.launchServer`` run by the Node.js driver bundled with the Python package (the
driver's ``package`` folder is playwright-core), so client and server versions always match. This module does not
import verl (nor torch): a CPU host starts it in well under a second, plus Chromium's launch.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from verl_asyncweb.env.chromium import (
    DEFAULT_CHROMIUM_ARGS,
    DETERMINISTIC_CHROMIUM_ARGS,
    LOOPBACK_ONLY_ARGS,
    find_chromium,
)
from verl_asyncweb.env.remote import redacted

logger = logging.getLogger(__name__)
TOKEN_ENV = "ASYNCWEB_BROWSER_SERVER_TOKEN"
_OPTIONS_ENV = "ASYNCWEB_BROWSER_SERVER_OPTIONS"

# Reports {"endpoint", "chromium_pid"} (or {"error"}) as one JSON line on stdout; stops on SIGTERM, SIGINT or a
# closed stdin; exits when Chromium does.
_SERVER_JS = r"""
const options = JSON.parse(process.env.ASYNCWEB_BROWSER_SERVER_OPTIONS);
delete process.env.ASYNCWEB_BROWSER_SERVER_OPTIONS;  // Chromium inherits the environment
const report = (message) => process.stdout.write(JSON.stringify(message) + "\n");
(async () => {
  const server = await require(options.package).chromium.launchServer(options.launch);
  let stopping = false;
  server.on("close", (code, signal) => {
    if (!stopping) console.error(`browser server: Chromium exited (code ${code}, signal ${signal}); stopping`);
    process.exit(stopping ? 0 : 1);
  });
  const stop = () => {
    if (stopping) return;
    stopping = true;
    server.close().catch(() => server.kill());
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  process.stdin.on("end", stop);
  process.stdin.resume();
  report({ endpoint: server.wsEndpoint(), chromium_pid: server.process().pid });
})().catch((error) => {
  report({ error: String((error && error.message) || error).split("\n")[0] });
  process.exit(1);
});
"""


def launch_options(
    executable_path: str, host: str, port: int, token: str, deterministic_clock: bool, loopback_only: bool
) -> dict:
    """The fixed ``launchServer`` options: every browser of this server runs with exactly these."""
    args = list(DEFAULT_CHROMIUM_ARGS)
    if deterministic_clock:
        args += DETERMINISTIC_CHROMIUM_ARGS
    if loopback_only:
        args += LOOPBACK_ONLY_ARGS
    return {
        "executablePath": executable_path,
        "args": args,
        "headless": True,
        "host": host,
        "port": port,
        "wsPath": "/" + token,
        # Signals are the server script's to handle: it closes Chromium, then exits.
        "handleSIGINT": False,
        "handleSIGTERM": False,
        "handleSIGHUP": False,
    }


def _driver() -> tuple[str, str]:
    """``(node binary, playwright-core package folder)`` of the driver bundled with the Playwright package."""
    from playwright._impl._driver import compute_driver_executable

    node, cli_js = compute_driver_executable()
    return str(node), str(Path(cli_js).parent)


class BrowserServer:
    """One Playwright browser server (a Node.js process and its Chromium), started and stopped from Python.

    Usage::

        with BrowserServer(port=0) as server:
            endpoint = server.endpoint      # ws://127.0.0.1:PORT/TOKEN
            ...

    The server runs in its own process group (``pid`` is its leader), so ``os.killpg(server.pid, SIGKILL)`` kills
    it; Chromium then exits too (its pipe to the server closes).

    Args:
        host: Interface to listen on.
        port: TCP port; 0 lets the OS choose.
        executable_path: Chromium binary; ``None`` looks up ``chromium`` on ``PATH``.
        deterministic_clock: Add :data:`DETERMINISTIC_CHROMIUM_ARGS` (pools with ``deterministic_clock`` on).
        loopback_only: Add :data:`LOOPBACK_ONLY_ARGS` (only loopback host names resolve).
        token: Websocket path (capability token); ``None`` draws a random one.
        start_timeout_s: Bound of launching Chromium and reporting the endpoint.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        executable_path: str | None = None,
        deterministic_clock: bool = False,
        loopback_only: bool = False,
        token: str | None = None,
        start_timeout_s: float = 60.0,
    ) -> None:
        if not 0 <= port <= 65535:
            raise ValueError(f"port (--port) must be in [0, 65535], got {port!r}")
        token = token or secrets.token_urlsafe(24)
        if not token.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"{TOKEN_ENV} must be letters, digits, '-' and '_' only")
        executable = find_chromium(executable_path, key="--executable")
        if shutil.which(executable) is None:
            raise ValueError(f"--executable must name an executable file, got {executable!r}")
        self.options = launch_options(executable, host, port, token, deterministic_clock, loopback_only)
        self.start_timeout_s = start_timeout_s
        self.endpoint = ""
        self.chromium_pid: int | None = None
        self._process: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        """Process id of the server (leader of its process group), ``None`` before :meth:`start`."""
        return self._process.pid if self._process else None

    def start(self) -> str:
        """Launch Chromium and listen; returns the websocket endpoint.

        Raises:
            RuntimeError: If the server did not report its endpoint within ``start_timeout_s``.
        """
        node, package = _driver()
        env = {**os.environ, _OPTIONS_ENV: json.dumps({"package": package, "launch": self.options})}
        self._process = subprocess.Popen(
            [node, "-e", _SERVER_JS],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,  # its own process group: killable as one, untouched by the terminal's Ctrl-C
        )
        try:
            report = json.loads(self._read_report())
            if "error" in report:
                raise RuntimeError(f"browser server did not start: {report['error']}")
        except BaseException:
            self.stop()
            raise
        self.endpoint, self.chromium_pid = report["endpoint"], report["chromium_pid"]
        logger.info(
            "browser server %d listening on %s (Chromium pid %d)", self.pid, redacted(self.endpoint), self.chromium_pid
        )
        return self.endpoint

    def _read_report(self) -> str:
        """The server's first stdout line, within ``start_timeout_s``."""
        assert self._process is not None and self._process.stdout is not None
        deadline, data = time.monotonic() + self.start_timeout_s, b""
        with selectors.DefaultSelector() as selector:
            selector.register(self._process.stdout, selectors.EVENT_READ)
            while b"\n" not in data:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    raise RuntimeError(f"browser server did not report its endpoint within {self.start_timeout_s:g}s")
                chunk = os.read(self._process.stdout.fileno(), 4096)
                if not chunk:
                    raise RuntimeError(f"browser server exited before listening (code {self._process.wait()})")
                data += chunk
        return data.split(b"\n", 1)[0].decode()

    def wait(self) -> int:
        """Block until the server exits; returns its exit code."""
        assert self._process is not None, "BrowserServer.start() must be called before wait()"
        return self._process.wait()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Close Chromium and stop the server (SIGTERM; after ``timeout_s``, SIGKILL). Idempotent."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                logger.warning("browser server %d did not stop within %gs; killing it", process.pid, timeout_s)
                for kill in (lambda: os.killpg(process.pid, signal.SIGKILL), self._kill_chromium):
                    try:
                        kill()
                    except ProcessLookupError:
                        pass
                process.wait(timeout_s)
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()

    def _kill_chromium(self) -> None:
        if self.chromium_pid is not None:
            os.killpg(self.chromium_pid, signal.SIGKILL)  # Playwright starts Chromium as a process group leader

    def __enter__(self) -> BrowserServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Stop(Exception):
    """Raised by the SIGTERM/SIGINT handler of :func:`main`."""


def _raise_stop(signum: int, frame: object) -> None:
    raise _Stop(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    """Command line: start a server, print its endpoint, serve until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m verl_asyncweb.browser_server", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="TCP port; 0 lets the OS choose (default: 0)")
    parser.add_argument("--executable", default=None, help="Chromium binary (default: chromium on PATH)")
    parser.add_argument("--deterministic-clock", action="store_true", help="for pools with deterministic_clock")
    parser.add_argument("--loopback-only", action="store_true", help="only loopback host names resolve")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s", force=True
    )
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGINT, _raise_stop)
    server = BrowserServer(
        host=args.host,
        port=args.port,
        executable_path=args.executable,
        deterministic_clock=args.deterministic_clock,
        loopback_only=args.loopback_only,
        token=os.environ.get(TOKEN_ENV) or None,
    )
    try:
        print(server.start(), flush=True)  # the one line on stdout: what pools connect to
        code = server.wait()
        logger.error("browser server exited on its own (code %d)", code)
        return 1
    except _Stop as stop:
        logger.info("%s: stopping the browser server", stop)
        return 0
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second signal must not interrupt the cleanup
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
