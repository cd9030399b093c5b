"""Chromium processes of this test process: which they are, and killing one pool's browser under it."""

import asyncio
import os
import signal

import psutil


def descendants(pid: int | None, matches) -> set[int]:
    """Processes descended from ``pid`` (this process when ``None``) for which ``matches(process)`` holds; one
    that exits while they are read (a renderer closing with its page) is left out instead of raising."""
    found = set()
    for process in psutil.Process(pid).children(recursive=True):
        try:
            if matches(process):
                found.add(process.pid)
        except psutil.Error:
            pass
    return found


def is_chromium(process: psutil.Process) -> bool:
    """Whether ``process`` is one of Chromium's (browser, renderer, zygote, GPU or utility process)."""
    return "chrom" in process.name().lower()


def gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie awaiting its parent counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def chromium_under(pid: int | None = None) -> set[int]:
    """Chromium processes descended from process ``pid`` (this test process when ``None``)."""
    return descendants(pid, is_chromium)


def browser_processes(pids: set[int]) -> set[int]:
    """Those of ``pids`` that are a browser's main process, i.e. a launch: a renderer's, zygote's or GPU process's
    parent is a Chromium process, a browser's is Playwright's driver. One that exited meanwhile is left out."""
    found = set()
    for pid in pids:
        try:
            parent = psutil.Process(pid).parent()
            if parent is None or not is_chromium(parent):
                found.add(pid)
        except psutil.Error:
            pass
    return found


def our_chromium_pids() -> set[int]:
    """Chromium processes descended from this test process (never anyone else's)."""
    return chromium_under()


def _browser_of(process: psutil.Process) -> int:
    """The browser main process ``process`` belongs to: its topmost ancestor that is still Chromium."""
    while (parent := process.parent()) is not None and is_chromium(parent):
        process = parent
    return process.pid


def chromium_since(before: set[int]) -> set[int]:
    """Chromium processes of this test process that are not in ``before`` and not of a browser in ``before``.

    Pools that outlive a test (session fixtures) keep starting renderers at any time; counting every new
    Chromium process would blame those on the test's own pool (CI saw it twice). One whose ancestry cannot be read
    (a parent exiting meanwhile) is kept unless it has exited itself: a leak check must not lose it.
    """
    old_browsers = browser_processes(before)
    found = set()
    for pid in our_chromium_pids() - before:
        try:
            if _browser_of(psutil.Process(pid)) not in old_browsers:
                found.add(pid)
        except psutil.Error:
            if not gone(pid):
                found.add(pid)
    return found


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
