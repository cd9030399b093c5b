"""A small named Ray actor where agent-loop workers report finished episodes and the trainer drains them.

Env-failed episodes never reach the training batch (verl drops their group), so their counts, and the
behaviour metrics of every episode, travel here instead. Reports are small dicts (no images).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any

import ray

from verl_asyncweb.agent.named_actor import named_actor

logger = logging.getLogger(__name__)

STATS_ACTOR_NAME = "asyncweb_rollout_stats"
POOL_STATS_FIELD = "pool_stats"
"""Episode-report field with the reporting worker's browser-pool counters (``{"pool": key, "counters": {...}}``)."""
_MAX_PENDING = 100_000
_REASON_CHARS = 200


@ray.remote(num_cpus=0)
class RolloutStats:
    """Collects episode summaries and generation intervals until the trainer drains them."""

    def __init__(self) -> None:
        self._episodes: list[dict[str, Any]] = []
        self._intervals: list[tuple[float, float]] = []
        self._totals = {"episodes": 0, "env_failures": 0, "episode_errors": 0}
        self._pools: dict[str, dict[str, int]] = {}  # latest counters of each worker's browser pool
        self.started_at = time.time()
        self._since_drain = _Window(self.started_at)

    def report_episode(self, summary: dict[str, Any]) -> None:
        pool = summary.pop(POOL_STATS_FIELD, None)
        if pool is not None:
            self._pools[pool["pool"]] = pool["counters"]
        self._totals["episodes"] += 1
        self._totals["env_failures"] += int(bool(summary.get("env_failed")))
        self._totals["episode_errors"] += int("error" in summary)
        if len(self._episodes) < _MAX_PENDING:
            self._episodes.append(summary)
        if summary.get("split") != "val":
            self._since_drain.add(summary)

    def report_generation(self, start: float, end: float) -> None:
        if len(self._intervals) < _MAX_PENDING:
            self._intervals.append((start, end))

    def drain(self) -> dict[str, Any]:
        episodes, intervals = self._episodes, self._intervals
        self._episodes, self._intervals = [], []
        self._since_drain = _Window(time.time())
        return {"episodes": episodes, "intervals": intervals, "totals": dict(self._totals), "pools": self.pool_totals()}

    def pool_totals(self) -> dict[str, int]:
        """Every browser pool's counters summed (a restarted worker's old pool keeps its counts)."""
        totals: dict[str, int] = {}
        for counters in self._pools.values():
            for name, value in counters.items():
                totals[name] = totals.get(name, 0) + int(value)
        return totals

    def totals(self) -> dict[str, int]:
        return dict(self._totals)

    def since_drain(self) -> dict[str, Any]:
        """The training episodes reported since the last drain (the last training step): when it was, how many
        finished and failed by the environment, how many groups had an episode finish with none failed, and the
        most common failure reasons."""
        return self._since_drain.report()


class _Window:
    """Counts of the training episodes reported since ``started_at``."""

    def __init__(self, started_at: float) -> None:
        self.started_at = started_at
        self.episodes = 0
        self.failed_groups: set[str] = set()
        self.finished_groups: set[str] = set()
        self.reasons: Counter[str] = Counter()

    def add(self, summary: dict[str, Any]) -> None:
        self.episodes += 1
        group = str(summary.get("group"))
        if summary.get("env_failed"):
            self.failed_groups.add(group)
            reasons = summary.get("evaluator_reasons") or [summary.get("error") or "no reason given"]
            self.reasons[str(reasons[0])[:_REASON_CHARS]] += 1
        else:
            self.finished_groups.add(group)

    def report(self) -> dict[str, Any]:
        return {
            "since": self.started_at,
            "episodes": self.episodes,
            "env_failures": self.reasons.total(),  # one reason counted per failed episode
            "clean_groups": len(self.finished_groups - self.failed_groups),
            "reasons": self.reasons.most_common(3),
        }


def stats_actor():
    """Get or create the job's stats actor; the handle is cached per process."""
    return named_actor(RolloutStats, STATS_ACTOR_NAME)
