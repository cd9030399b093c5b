"""Screenshots leave the store as soon as their prompt group leaves TransferQueue.

A group's screenshots are needed while its prompt or any of its rows is in TransferQueue: in flight, finished and
waiting to be sampled, or sampled and being trained on (verl clears the rows after the step). Every other way out
is a release: trained, filtered by dynamic sampling, evicted as stale, failed, surplus. The sweep reads which groups
TransferQueue still lists and releases the store's other owners, so no path has to be hooked one by one.

Order matters: the store's owners are listed *before* TransferQueue. verl registers a group's prompt before it
dispatches it (``_submit_batch_to_rollout``), so every owner listed first has its group listed next unless the group
is gone; an episode that starts between the two reads is not in the owner list and is left alone.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

import ray
import transfer_queue as tq

from verl_asyncweb.agent.fields import group_of

logger = logging.getLogger(__name__)

SWEEP_INTERVAL_S = 2.0
"""Seconds between sweeps; a full store waits at most about this long for what it can release."""


def live_groups(listing: Mapping[str, Mapping[str, object]] | None) -> set[str]:
    """Prompt groups of a ``tq.kv_list()`` answer: prompt keys are the ``uid``, rows ``{uid}_{session}_{index}``."""
    return {key.split("_")[0] for keys in (listing or {}).values() for key in keys}


def sweep(screenshots) -> int:
    """Release the screenshots of every trajectory whose group TransferQueue no longer lists; returns how many."""
    owners = screenshots.owners()
    if not owners:
        return 0
    live = live_groups(tq.kv_list())
    gone = [owner for owner in owners if group_of(owner) not in live]
    if gone:
        screenshots.release_owners(gone)
    return len(gone)


class ScreenshotSweeper:
    """Runs :func:`sweep` every ``interval_s`` in a thread of the trainer process; counts what it released."""

    def __init__(self, screenshots, interval_s: float = SWEEP_INTERVAL_S):
        self.screenshots = screenshots
        self.interval_s = interval_s
        self._released = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="screenshot-sweep", daemon=True)

    def start(self) -> ScreenshotSweeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval_s + 60)

    def take_released(self) -> int:
        """Trajectories released since the previous call."""
        with self._lock:
            released, self._released = self._released, 0
        return released

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                released = sweep(self.screenshots)
            except (ray.exceptions.RayError, TimeoutError, RuntimeError) as exc:
                logger.warning("screenshot sweep failed (retried in %.0f s): %s", self.interval_s, exc)
                continue
            with self._lock:
                self._released += released
