"""Counters of a pool, exported by :meth:`BrowserPool.stats`."""

from __future__ import annotations

from collections import Counter

COUNTERS = (
    "episodes",
    "steps",
    "invalid_actions",
    "timeouts",
    "recoveries_context",
    "contexts_renewed",
    "recoveries_relaunch",
    "relaunches",
    "env_failures",
    "blocked_requests",
    "blocked_navigations",
    "blocked_popups",
    "blocked_downloads",
    "evaluations",
    "snapshots",
    "snapshots_restored",
    "snapshots_replayed",
    "snapshots_diverged",
    "remote_connect_failures",
    "remote_endpoints_lost",
    "remote_endpoints_restored",
)


class PoolStats:
    """Monotonic counters; ``snapshot()`` returns a plain dict (every counter present, zeros included)."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter({name: 0 for name in COUNTERS})

    def add(self, name: str, amount: int = 1) -> None:
        """Increase counter ``name`` by ``amount``."""
        assert name in COUNTERS, name
        self._counts[name] += amount

    def snapshot(self) -> dict[str, int]:
        """Current counters as a dict."""
        return dict(self._counts)
