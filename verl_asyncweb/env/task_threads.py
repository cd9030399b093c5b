"""Worker threads for task code the pool does not own (BrowserGym's task classes), apart from the event loop's.

A task class's ``setup``, ``validate`` and ``teardown`` are sync and may block on the task's server: WorkArena's
constructor checks its instance with a 30000 s timeout. The pool gives up on such a call at its reset or step
timeout, but the thread goes on until the call returns. In the loop's default executor (``asyncio.to_thread``;
``min(32, cores + 4)`` threads) a few of those would stall everything else that uses it, such as the name
lookups (``getaddrinfo``) of the rollout's HTTP calls. Here they occupy threads of their own, and each one left
running is logged with the count of busy threads.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

MAX_TASK_THREADS = 64
"""Threads for task code per process: a pool's sessions use at most one each at a time; the rest is room for calls
that hang on their server after their episode gave up on them."""

T = TypeVar("T")
logger = logging.getLogger(__name__)

_busy = 0
_busy_lock = threading.Lock()


@functools.cache
def _executor() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=MAX_TASK_THREADS, thread_name_prefix="task-code")


def busy_task_threads() -> int:
    """Task threads running a call now (including calls whose caller gave up on them)."""
    return _busy


def _counted(call: Callable[[], T]) -> T:
    global _busy
    with _busy_lock:
        _busy += 1
    try:
        return call()
    finally:
        with _busy_lock:
            _busy -= 1


async def run_task_code(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``function(*args, **kwargs)`` in a task thread, with the caller's context variables (as ``to_thread``)."""
    call = functools.partial(contextvars.copy_context().run, function, *args, **kwargs)
    running = _executor().submit(_counted, call)
    try:
        return await asyncio.wrap_future(running)
    except asyncio.CancelledError:
        name = getattr(function, "__qualname__", repr(function))
        if not running.done():  # the caller timed out: the thread runs on until ``function`` returns
            logger.warning(
                "%s goes on in its thread after its caller gave up (%d of %d task threads busy)",
                name,
                _busy,
                MAX_TASK_THREADS,
            )
        elif _busy >= MAX_TASK_THREADS:  # never started: every thread is held by a call that hangs
            logger.warning("%s waited for a task thread in vain: all %d are busy", name, MAX_TASK_THREADS)
        raise
