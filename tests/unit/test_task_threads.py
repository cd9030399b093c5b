"""Task threads: a call that never got a thread because every one is held by a hanging call says so."""

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from verl_asyncweb.env import task_threads


async def test_a_call_queued_behind_hanging_ones_is_logged_when_given_up(monkeypatch, caplog):
    executor, release = ThreadPoolExecutor(max_workers=1), threading.Event()
    monkeypatch.setattr(task_threads, "_executor", lambda: executor)
    monkeypatch.setattr(task_threads, "MAX_TASK_THREADS", 1)
    hanging = asyncio.create_task(task_threads.run_task_code(release.wait, 30))
    try:
        for _ in range(1000):  # until the hanging call holds the one thread
            if task_threads.busy_task_threads() == 1:
                break
            await asyncio.sleep(0.01)
        with caplog.at_level(logging.WARNING, logger="verl_asyncweb"), pytest.raises(TimeoutError):
            await asyncio.wait_for(task_threads.run_task_code(len, "never runs"), 0.2)
        assert [r.getMessage() for r in caplog.records] == ["len waited for a task thread in vain: all 1 are busy"]
    finally:
        release.set()
        assert await hanging is True
        executor.shutdown()
