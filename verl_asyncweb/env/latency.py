"""Seeded heavy-tailed web latency for benchmarks (``asyncweb.env.latency``)."""

from __future__ import annotations

import random

from verl_asyncweb.env.config import LatencyConfig


class LatencyModel:
    """Draws per-step delays ``min(LogNormal(ln median, sigma), max_delay_s)`` from a seeded generator."""

    def __init__(self, config: LatencyConfig) -> None:
        self.config = config
        self._rng = random.Random(config.seed)

    def sample_s(self) -> float:
        """One delay in seconds (0 when disabled)."""
        if not self.config.enable:
            return 0.0
        return min(self._rng.lognormvariate(self.config.mu, self.config.sigma), self.config.max_delay_s)
