"""Loopback stand-ins of a BrowserGym benchmark's servers, and the fresh-process probes that run against them
(tests/env/test_browsergym_webarena.py, _visualwebarena.py and _workarena.py).

A stand-in answers every GET with a page (blank unless the test gives it one, a tiny PNG for a ``.png`` path), after
a delay if the test gives one, and every POST with a 404 page, and logs each path on the server. A probe is a test
file run as a script in a fresh process: benchmark packages read their environment variables at their first
import, and the isolated folders (scripts/install_browsergym.py) go on ``PYTHONPATH`` there, never into the test
process.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("install_browsergym", REPO / "scripts" / "install_browsergym.py")
INSTALLER = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(INSTALLER)


def _png() -> bytes:
    from PIL import Image

    with io.BytesIO() as out:
        Image.new("RGB", (2, 2), (200, 30, 30)).save(out, format="PNG")
        return out.getvalue()


class StandIn(BaseHTTPRequestHandler):
    """A server's stand-in: ``server.body`` in a page for every GET (a PNG for ``.png``) after ``server.delay_s``,
    404 for every POST; the paths asked for are logged in ``server.paths`` (GET) and ``server.posts`` (POST)."""

    def _send(self, code: int, content_type: str, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(ConnectionError):  # Chromium may drop a favicon request it no longer needs
            self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.server.paths.append(self.path)
        time.sleep(self.server.delay_s)
        if self.path.endswith(".png"):
            self._send(200, "image/png", _png())
            return
        page = f"<html><head><title>stand-in {self.server.site}</title></head><body>{self.server.body}</body></html>"
        self._send(200, "text/html", page.encode())

    def do_POST(self) -> None:  # noqa: N802
        self.server.posts.append(self.path)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send(404, "text/html", f"<html><body>stand-in {self.server.site}: no API</body></html>".encode())

    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def stand_ins(
    variables: Iterable[str], bodies: dict[str, str] | None = None, delays_s: dict[str, float] | None = None
) -> Iterator[dict]:
    """One loopback server per variable: ``{"WA_MAP": server, ...}``; ``bodies`` and ``delays_s`` give some of them a
    page body and a delay before each GET's answer."""
    servers = {}
    try:
        for variable in variables:
            server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
            server.site, server.paths, server.posts = variable, [], []
            server.body, server.delay_s = (bodies or {}).get(variable, ""), (delays_s or {}).get(variable, 0.0)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            servers[variable] = server
        yield servers
    finally:
        for server in servers.values():
            server.shutdown()
            server.server_close()


def origin(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def run_probe(
    script: str,
    name: str,
    tmp_path: Path,
    variables: dict[str, str],
    folder: Path | None = None,
    timeout_s: float = 150,
) -> dict:
    """Probe ``name`` of ``script`` in a fresh process: the benchmark's ``variables`` set (others of their prefixes
    unset), ``folder`` on ``PYTHONPATH``, ``NLTK_DATA`` on an empty ``punkt_tab`` (BrowserGym's WebArena-family
    imports download it otherwise) and the Hugging Face hub offline. Returns the JSON of its last stdout line."""
    (tmp_path / "nltk" / "tokenizers" / "punkt_tab").mkdir(parents=True, exist_ok=True)
    prefixes = tuple({variable.split("_", 1)[0] + "_" for variable in variables})
    env = {key: value for key, value in os.environ.items() if not key.startswith(prefixes)}
    env.update(variables)
    if folder is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    env.update({"NLTK_DATA": str(tmp_path / "nltk"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    env["TMPDIR"] = str(tmp_path)  # BrowserGym writes each set-up task's config there
    done = subprocess.run(
        [sys.executable, script, name], capture_output=True, text=True, timeout=timeout_s, env=env, cwd=REPO
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])
