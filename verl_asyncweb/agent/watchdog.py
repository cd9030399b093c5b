"""Detect restarted agent-loop workers and fail the prompt groups that died with them.

verl's V1 agent-loop worker runs each prompt group as a background task and records its status in TransferQueue
(``pending`` -> ``running`` -> ``finished``/``failure``); the replay buffer evicts ``failure`` groups, counts
them and refills the batch with fresh prompts. A worker process that dies (OOM killer, SIGKILL, a crashed
extension) takes its running groups with it: their status would stay ``running`` forever and a synchronous step
waiting for them would never end. Workers are restartable Ray actors that report a random incarnation id; this
watchdog polls it from the manager's process, and when a worker comes back with a new incarnation, every group
that was dispatched to the old one and is not terminal is marked ``failure`` -- dropped, counted and replaced.
Samples already written by finished groups are untouched.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict

logger = logging.getLogger(__name__)

TERMINAL_STATUSES = frozenset({"finished", "failure"})
DEAD = "<dead>"
"""Incarnation of a worker that Ray will not restart: everything it held is failed; dispatching to it raises."""


class WorkerWatchdog:
    """Tracks which prompt groups each worker incarnation holds; fails the groups of dead incarnations.

    Args:
        workers: The agent-loop worker actor handles (each has ``get_incarnation``).
        interval_s: Seconds between polls of the background thread.
        timeout_s: Timeout of one poll of one worker (a restarting worker is simply polled again later).
    """

    def __init__(self, workers: list, interval_s: float = 5.0, timeout_s: float = 30.0) -> None:
        self.workers = workers
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.restarts = 0
        self.lost_groups = 0
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._current: dict[int, str] = {}
        # (worker index, incarnation, partition) -> prompt uids dispatched there and not yet seen terminal
        self._assigned: dict[tuple[int, str, str], set[str]] = defaultdict(set)

    def start(self) -> None:
        """Poll in a daemon thread until :meth:`stop` or Ray's shutdown (the manager lives as long as the run)."""
        self.thread = threading.Thread(target=self._run, name="asyncweb-worker-watchdog", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """End the polling thread after its current poll."""
        self._stopped.set()

    def assign(self, index: int, incarnation: str, partition_id: str, uids: list[str]) -> None:
        """Record that worker ``index`` (as ``incarnation``) accepted ``uids`` of ``partition_id``."""
        with self._lock:
            self._current.setdefault(index, incarnation)
            self._assigned[(index, incarnation, partition_id)].update(uids)

    def stats(self) -> dict[str, float]:
        with self._lock:
            return {
                "asyncweb/rollout/worker_restarts": float(self.restarts),
                "asyncweb/rollout/lost_groups": float(self.lost_groups),
            }

    def _run(self) -> None:
        import ray

        while not self._stopped.wait(self.interval_s):
            if not ray.is_initialized():
                return  # the driver shut Ray down: a poll now would auto-connect a new driver to the cluster
            try:
                self.check_once()
            except Exception:  # the watchdog must outlive any single bad poll
                if self._stopped.is_set():
                    return  # the run ended during the poll: verl closes TransferQueue right after training
                logger.exception("agent-loop worker watchdog poll failed")

    def check_once(self) -> None:
        """Poll every worker once and fail the groups of incarnations that are gone."""
        import ray
        from ray.exceptions import ActorDiedError, GetTimeoutError, RayActorError

        for index, worker in enumerate(self.workers):
            try:
                incarnation = ray.get(worker.get_incarnation.remote(), timeout=self.timeout_s)
            except ActorDiedError as exc:
                logger.error("agent-loop worker %d is dead and will not restart: %s", index, exc)
                incarnation = DEAD
            except (GetTimeoutError, RayActorError) as exc:
                logger.warning("agent-loop worker %d did not answer (%s); will poll again", index, type(exc).__name__)
                continue
            self.observe(index, incarnation)

    def observe(self, index: int, incarnation: str) -> None:
        """Worker ``index`` now runs as ``incarnation``: settle what the previous incarnations held."""
        import transfer_queue as tq

        with self._lock:
            previous = self._current.get(index)
            self._current[index] = incarnation
            if previous is not None and previous != incarnation and incarnation != DEAD:
                self.restarts += 1
                logger.warning("agent-loop worker %d restarted (%s -> %s)", index, previous, incarnation)
            mine = [key for key in self._assigned if key[0] == index]
        if not mine:
            return
        listing = tq.kv_list() or {}
        lost = 0
        for key in mine:
            _, owner, partition_id = key
            tags = listing.get(partition_id, {})
            with self._lock:
                uids = self._assigned.pop(key, set())
            alive = set()
            for uid in uids:
                status = (tags.get(uid) or {}).get("status")
                if status is None or status in TERMINAL_STATUSES:
                    continue  # consumed and cleared, or settled by the worker
                if owner == incarnation:
                    alive.add(uid)
                else:
                    tq.kv_put(key=uid, partition_id=partition_id, tag={"status": "failure"})
                    lost += 1
            if alive:
                with self._lock:
                    self._assigned[key].update(alive)
        if lost:
            logger.warning("agent-loop worker %d lost %d prompt groups with its old process: failed", index, lost)
            with self._lock:
                self.lost_groups += lost
