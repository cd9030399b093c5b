"""Chromium flags and binary lookup, shared by the pool and the browser server (which must not import verl)."""

from __future__ import annotations

import shutil

# Flags from DESIGN.md section 4: headless Debian Chromium without sandbox, GPU, QUIC or phoning home.
DEFAULT_CHROMIUM_ARGS: tuple[str, ...] = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--dns-prefetch-disable",
)

# Added with ``deterministic_clock``: partial raster re-rasterises only damaged areas, which leaves +-1 differences
# in anti-aliased edges depending on the page's repaint history (measured: identical MiniWoB++ resets gave two
# screenshot hashes); smooth scrolling animates on the wall clock.
DETERMINISTIC_CHROMIUM_ARGS: tuple[str, ...] = ("--disable-partial-raster", "--disable-smooth-scrolling")

# Extra flag for tests and offline runs: every host name except loopback fails to resolve, so nothing
# outside this machine can be reached even by a request that slipped past ``context.route``.
LOOPBACK_ONLY_ARGS: tuple[str, ...] = ("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",)


def find_chromium(executable_path: str | None, key: str = "asyncweb.env.executable_path") -> str:
    """The Chromium binary: ``executable_path`` if set, else ``chromium`` (or ``chromium-browser``) on ``PATH``.

    Args:
        executable_path: Explicit binary, or ``None``.
        key: How the caller's setting is named in the error message.

    Raises:
        ValueError: If ``executable_path`` is unset and no Chromium is on ``PATH``.
    """
    if executable_path:
        return executable_path
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        raise ValueError(
            f"{key} is unset and no 'chromium' binary is on PATH; install Debian's chromium package or set {key}"
        )
    return found
