"""Chromium processes of this test process: which they are, and killing one pool's browser under it."""

import asyncio
import os
import signal

import psutil


def our_chromium_pids() -> set[int]:
    """Chromium processes descended from this test process (never anyone else's)."""
    return {p.pid for p in psutil.Process().children(recursive=True) if "chrom" in p.name().lower()}


async def kill_browser(pids: set[int], sessions) -> None:
    """SIGKILL ``pids`` (every process of one pool's browser) and wait until the sessions' pages notice."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # exited with its browser
    for _ in range(100):  # Playwright notices the closed pipe within milliseconds
        if not any(s.slot.alive for s in sessions):
            return
        await asyncio.sleep(0.05)
