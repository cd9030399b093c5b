"""One simulated rollout server: a queue in front of up to ``max_concurrency`` requests sharing the device.

While m requests run, each progresses at rate 1 / (1 + slowdown (m - 1)) seconds of its solo work per second
(see :class:`verl_asyncweb.plan.profile.RolloutCost`). Tracked in virtual time: V advances at that rate, a request
admitted at V0 with solo work w finishes when V reaches V0 + w, so every change costs O(log m).
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Any

from verl_asyncweb.plan.profile import RolloutCost


class Replica:
    """A rollout server's queue and running requests; the simulation asks it when the next one finishes."""

    def __init__(self, cost: RolloutCost) -> None:
        self.cost = cost
        self._running: list[tuple[float, int, Any]] = []  # (finish virtual time, arrival order, request)
        self._waiting: deque[tuple[float, Any]] = deque()  # (solo work seconds, request)
        self._arrivals = 0
        self._virtual = 0.0
        self._updated_at = 0.0
        self._paused = False
        self.busy_s = 0.0
        """Seconds with at least one request generating (not paused), up to the last update."""
        self.epoch = 0
        """Bumped on every change; a completion event scheduled under an older epoch is stale."""

    def _rate(self) -> float:
        if self._paused or not self._running:
            return 0.0
        return 1.0 / (1.0 + self.cost.concurrency_slowdown * (len(self._running) - 1))

    def advance(self, now: float) -> None:
        """Bring virtual time and busy seconds up to ``now``."""
        elapsed = now - self._updated_at
        if elapsed > 0:
            rate = self._rate()
            self._virtual += rate * elapsed
            if rate > 0:
                self.busy_s += elapsed
        self._updated_at = now

    def _start_waiting(self) -> None:
        while self._waiting and len(self._running) < self.cost.max_concurrency:
            work_s, request = self._waiting.popleft()
            self._arrivals += 1
            heapq.heappush(self._running, (self._virtual + work_s, self._arrivals, request))

    def submit(self, now: float, work_s: float, request: Any) -> None:
        """Queue a request of ``work_s`` solo seconds."""
        self.advance(now)
        self._waiting.append((work_s, request))
        self._start_waiting()
        self.epoch += 1

    def pop_finished(self, now: float) -> list[Any]:
        """Requests done by ``now`` (in finishing order); waiting ones take their places."""
        self.advance(now)
        done = []
        while self._running and self._running[0][0] <= self._virtual + 1e-9:
            done.append(heapq.heappop(self._running)[2])
        self._start_waiting()
        self.epoch += 1
        return done

    def set_paused(self, now: float, paused: bool) -> None:
        """Stop (weight sync) or resume generation."""
        self.advance(now)
        self._paused = paused
        self.epoch += 1

    def next_finish_s(self, now: float) -> float | None:
        """When the first running request finishes if nothing changes; ``None`` while paused or empty."""
        rate = self._rate()
        if rate == 0.0:
            return None
        return now + max(self._running[0][0] - self._virtual, 0.0) / rate
