"""One simulated rollout server: a queue in front of up to ``max_concurrency`` requests sharing the device.

A request holds one of the replica's places from admission to its last token. Its prefill is compute-bound and
takes the device: admitted prefills run one at a time in arrival order, and decoding stalls while one runs (a
server that chunks prefills into decode batches spends the same compute). Decoding is memory-bound and batches:
while m requests decode, each progresses at rate 1 / (1 + slowdown (m - 1)) seconds of its solo decode work per
second (see :class:`verl_asyncweb.plan.profile.RolloutCost`). Decoding is tracked in virtual time: V advances at
that rate, a request that starts decoding at V0 with solo work w finishes when V reaches V0 + w, so every change
costs O(log m). A replica that shares its compute with the trainer runs at ``share`` (< 1) of that speed while
the trainer computes (:meth:`set_share`).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from typing import Any

from verl_asyncweb.plan.profile import RolloutCost


class Replica:
    """A rollout server's queue and running requests; the simulation asks it when the next one finishes."""

    def __init__(self, cost: RolloutCost) -> None:
        self.cost = cost
        self._waiting: deque[tuple[float, float, Any]] = deque()  # (prefill s, solo decode s, request)
        self._prefilling: deque[list] = deque()  # [prefill s left, solo decode s, request]; the head runs
        self._decoding: list[tuple[float, int, Any]] = []  # (finish virtual time, arrival order, request)
        self._arrivals = 0
        self._virtual = 0.0
        self._updated_at = 0.0
        self._paused = False
        self._share = 1.0
        self.busy_s = 0.0
        """Seconds with a request prefilling or decoding (not paused), up to the last update."""
        self.epoch = 0
        """Bumped on every change; a completion event scheduled under an older epoch is stale."""

    @property
    def _admitted(self) -> int:
        return len(self._prefilling) + len(self._decoding)

    @property
    def active(self) -> bool:
        """A request is prefilling or decoding (not paused)."""
        return not self._paused and self._admitted > 0

    def _decode_rate(self) -> float:
        if self._paused or not self._decoding:
            return 0.0
        return self._share / (1.0 + self.cost.concurrency_slowdown * (len(self._decoding) - 1))

    def _start_decoding(self, decode_s: float, request: Any) -> None:
        self._arrivals += 1
        heapq.heappush(self._decoding, (self._virtual + decode_s, self._arrivals, request))

    def _admit_waiting(self) -> None:
        while self._waiting and self._admitted < self.cost.max_concurrency:
            prefill_s, decode_s, request = self._waiting.popleft()
            if prefill_s > 0:
                self._prefilling.append([prefill_s, decode_s, request])
            else:
                self._start_decoding(decode_s, request)

    def advance(self, now: float) -> None:
        """Bring prefills, virtual time and busy seconds up to ``now``."""
        elapsed = now - self._updated_at
        self._updated_at = now
        while elapsed > 0 and not self._paused and self._prefilling:
            head = self._prefilling[0]
            spent = min(elapsed, head[0] / self._share)
            head[0] -= spent * self._share
            elapsed -= spent
            self.busy_s += spent
            if head[0] <= 1e-12:
                self._prefilling.popleft()
                self._start_decoding(head[1], head[2])
        rate = self._decode_rate()  # decoding gets only the time no prefill took (none while one waits)
        if elapsed > 0 and rate > 0:
            self._virtual += rate * elapsed
            self.busy_s += elapsed

    def submit(self, now: float, prefill_s: float, decode_s: float, request: Any) -> None:
        """Queue a request of ``prefill_s`` exclusive seconds, then ``decode_s`` solo seconds of decoding."""
        self.advance(now)
        self._waiting.append((prefill_s, decode_s, request))
        self._admit_waiting()
        self.epoch += 1

    def pop_finished(self, now: float) -> list[Any]:
        """Requests done by ``now`` (in finishing order); waiting ones take their places."""
        self.advance(now)
        done = []
        while self._decoding and self._decoding[0][0] <= self._virtual + 1e-9:
            done.append(heapq.heappop(self._decoding)[2])
        self._admit_waiting()
        self.epoch += 1
        return done

    def set_paused(self, now: float, paused: bool) -> None:
        """Stop (weight sync) or resume generation."""
        self.advance(now)
        self._paused = paused
        self.epoch += 1

    def set_share(self, now: float, share: float) -> None:
        """Run at ``share`` of full speed from ``now`` (the trainer computes on the same device, or stopped)."""
        self.advance(now)
        self._share = share
        self.epoch += 1

    def next_finish_s(self, now: float) -> float | None:
        """When the next prefill or decode finishes if nothing changes; ``None`` while paused or empty."""
        if self._paused:
            return None
        if self._prefilling:
            finish_s = now + self._prefilling[0][0] / self._share
        else:
            rate = self._decode_rate()
            if rate == 0.0:
                return None
            finish_s = now + max(self._decoding[0][0] - self._virtual, 0.0) / rate
        # Work left below the clock's resolution at ``now`` would schedule the event at ``now`` for ever.
        return max(finish_s, math.nextafter(now, math.inf))
