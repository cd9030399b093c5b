"""Means with 95% confidence intervals over seeds and held-out episodes, and which differences they resolve.

A variant run with several seeds gives one sample per seed: the seed's held-out episode outcomes (0/1), or one
number (a training metric's final value). The point estimate weighs every seed equally (the mean of the seeds'
means); the interval is a two-level percentile bootstrap: seeds are resampled with replacement, then each drawn
seed's episodes, so that both the seed-to-seed spread and the finite held-out set widen it. A difference between
two variants is *resolved* when the bootstrap interval of the difference of their means excludes zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

LEVEL = 0.95
RESAMPLES = 4000

Samples = Sequence[Sequence[float]]
"""One sequence of values per seed (a single value for a per-run metric)."""


@dataclass(frozen=True)
class Interval:
    """A mean and its confidence interval.

    Attributes:
        mean: Mean of the seeds' means.
        low: Lower bound of the interval.
        high: Upper bound of the interval.
        seeds: Seeds it pools.
        values: Values (episodes, or one per seed) it pools.
    """

    mean: float
    low: float
    high: float
    seeds: int
    values: int

    @property
    def resolved(self) -> bool:
        """Whether the interval excludes zero (read on a difference)."""
        return self.low > 0 or self.high < 0

    def format_difference(self) -> str:
        """``+0.500 [+0.400, +0.600] | yes``: a difference, its interval and whether it is resolved (a Markdown
        cell pair)."""
        return f"{self.mean:+.3f} [{self.low:+.3f}, {self.high:+.3f}] | {'yes' if self.resolved else 'no'}"

    def format(self, digits: int = 3) -> str:
        """``0.412 [0.350, 0.476] (3 seeds)``; a single value has no interval."""
        if self.seeds == 1 and self.values == 1:
            return f"{self.mean:.{digits}f} (1 value)"
        seeds = f"{self.seeds} seed{'s' if self.seeds != 1 else ''}"
        return f"{self.mean:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}] ({seeds})"


def _clean(samples: Samples) -> list[np.ndarray]:
    seeds = [np.asarray(values, dtype=float) for values in samples if len(values)]
    if not seeds:
        raise ValueError("a confidence interval needs at least one value, got none")
    return seeds


def _resampled_means(seeds: list[np.ndarray], rng: np.random.Generator, resamples: int) -> np.ndarray:
    """``resamples`` bootstrap replicates of the mean of the seeds' means."""
    drawn = rng.integers(0, len(seeds), size=(resamples, len(seeds)))
    means = np.empty((resamples, len(seeds)))
    for column in range(len(seeds)):
        for index, values in enumerate(seeds):
            rows = np.flatnonzero(drawn[:, column] == index)
            if rows.size:
                picks = rng.integers(0, values.size, size=(rows.size, values.size))
                means[rows, column] = values[picks].mean(axis=1)
    return means.mean(axis=1)


def _interval(point: float, replicates: np.ndarray, seeds: int, values: int, level: float) -> Interval:
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(replicates, [tail, 100 - tail])
    return Interval(float(point), float(low), float(high), seeds, values)


def mean_interval(samples: Samples, level: float = LEVEL, resamples: int = RESAMPLES, seed: int = 0) -> Interval:
    """Mean of the seeds' means and its bootstrap interval (see the module docstring)."""
    seeds = _clean(samples)
    point = float(np.mean([values.mean() for values in seeds]))
    replicates = _resampled_means(seeds, np.random.default_rng(seed), resamples)
    return _interval(point, replicates, len(seeds), sum(values.size for values in seeds), level)


def difference_interval(
    first: Samples, second: Samples, level: float = LEVEL, resamples: int = RESAMPLES, seed: int = 0
) -> Interval:
    """``mean(first) - mean(second)`` and its interval, the two variants resampled independently."""
    a, b = _clean(first), _clean(second)
    rng = np.random.default_rng(seed)
    replicates = _resampled_means(a, rng, resamples) - _resampled_means(b, rng, resamples)
    point = float(np.mean([v.mean() for v in a]) - np.mean([v.mean() for v in b]))
    return _interval(point, replicates, len(a) + len(b), sum(v.size for v in a) + sum(v.size for v in b), level)
