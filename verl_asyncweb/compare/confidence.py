"""Means with 95% confidence intervals over seeds and held-out episodes, and which differences they resolve.

A variant run with several seeds gives one sample per seed: the seed's held-out episode outcomes (0/1), or one
number (a training metric's final value). The point estimate weighs every seed equally (the mean of the seeds'
means); the interval is a two-level percentile bootstrap: seeds are resampled with replacement, then each drawn
seed's episodes, so that both the seed-to-seed spread and the finite held-out set widen it.

A difference between two variants is *resolved* when two intervals exclude zero: the bootstrap interval of the
difference, and Welch's t interval of the difference of the seeds' means. With two or three seeds a side the
bootstrap alone is too narrow when seeds differ (resampling three seeds draws their spread smaller than it is, and
its percentiles ignore how little three seeds tell): with a seed-to-seed spread of 8 points around 17.5%, 80
episodes a seed and no true difference, it excluded zero in 35% of simulated pairs at one seed a side, 15% at two
and 10% at three; both together in 0%, 1% and 3% (``python -m verl_asyncweb.bench intervals``, figures in
docs/learning.md). Welch's t needs two seeds of each variant, so one seed resolves nothing; a fixed reference (a
warm start: one model, its evaluation's episodes its only noise) counts as a variant without seed spread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

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
        seed_low: Of a difference, the lower bound of Welch's t interval over the seeds' means (None: a variant
            with seed spread has one seed).
        seed_high: Its upper bound.
    """

    mean: float
    low: float
    high: float
    seeds: int
    values: int
    seed_low: float | None = None
    seed_high: float | None = None

    @property
    def resolved(self) -> bool:
        """Whether a difference is resolved: its bootstrap interval and its Welch interval over the seeds' means
        (``seed_low``/``seed_high``; None with one seed of a variant) both exclude zero."""
        if self.seed_low is None or self.seed_high is None:
            return False
        return (self.low > 0 and self.seed_low > 0) or (self.high < 0 and self.seed_high < 0)

    def format_difference(self) -> str:
        """``+0.500 [+0.400, +0.600] | [+0.300, +0.700] | yes``: a difference, its bootstrap interval, its Welch
        interval over seeds and whether it is resolved (Markdown cells; ``one seed`` where Welch's has none)."""
        seeds = "one seed" if self.seed_low is None else f"[{self.seed_low:+.3f}, {self.seed_high:+.3f}]"
        return f"{self.mean:+.3f} [{self.low:+.3f}, {self.high:+.3f}] | {seeds} | {'yes' if self.resolved else 'no'}"

    def format(self, digits: int = 3) -> str:
        """``0.412 [0.350, 0.476] (3 seeds)``; a single value has no interval."""
        if self.seeds == 1 and self.values == 1:
            return f"{self.mean:.{digits}f} (1 value)"
        seeds = f"{self.seeds} seed{'s' if self.seeds != 1 else ''}"
        return f"{self.mean:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}] ({seeds})"


def _clean(samples: Samples) -> list[np.ndarray]:
    """The seeds' finite values (a missing or NaN value, e.g. a rate with no episode, is left out), seeds with none
    dropped."""
    arrays = (np.asarray([np.nan if v is None else v for v in values], dtype=float) for values in samples)
    seeds = [values[np.isfinite(values)] for values in arrays]
    seeds = [values for values in seeds if values.size]
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


def welch_interval(
    first: list[np.ndarray],
    second: list[np.ndarray],
    level: float = LEVEL,
    fixed_second: bool = False,
    bounds: tuple[float, float] | None = None,
) -> tuple[float, float] | None:
    """Welch's t interval of the difference of the two variants' seed means (``fixed_second``: ``second`` is one
    fixed reference, no seed spread); None when a variant that has seed spread has one seed. ``bounds``: the values
    a sample can take (a success rate's 0 and 1); the interval is then cut to the differences they allow (with two
    seeds its t of 12.7 reaches far past them), which keeps its coverage and whether it excludes zero."""
    a = np.array([values.mean() for values in first])
    b = np.array([values.mean() for values in second])
    if len(a) < 2 or (len(b) < 2 and not fixed_second):
        return None
    parts = [a.var(ddof=1) / len(a)] + ([] if fixed_second else [b.var(ddof=1) / len(b)])
    degrees = [len(a) - 1] + ([] if fixed_second else [len(b) - 1])
    variance = sum(parts)
    difference = float(a.mean() - b.mean())
    if variance == 0:  # every seed alike: no spread to widen it (the bootstrap carries the episodes' noise)
        return difference, difference
    freedom = variance**2 / sum(part**2 / dof for part, dof in zip(parts, degrees, strict=True) if part > 0)
    half = float(stats.t.ppf(1 - (1 - level) / 2, freedom) * np.sqrt(variance))
    low, high = difference - half, difference + half
    if bounds is not None:
        smallest, largest = bounds
        if fixed_second:  # one fixed reference: only the first variant's mean can move
            low, high = max(low, smallest - b.mean()), min(high, largest - b.mean())
        else:
            low, high = max(low, smallest - largest), min(high, largest - smallest)
    return float(low), float(high)


def seed_interval(
    values: Sequence[float], level: float = LEVEL, bounds: tuple[float, float] | None = None
) -> tuple[float, float]:
    """Student's t interval of the mean of one value per seed (two or more): Welch's against a fixed 0, cut to
    ``bounds``."""
    return welch_interval([np.array([value]) for value in values], [np.zeros(1)], level, True, bounds)


def difference_interval(
    first: Samples,
    second: Samples,
    level: float = LEVEL,
    resamples: int = RESAMPLES,
    seed: int = 0,
    fixed_second: bool = False,
    bounds: tuple[float, float] | None = None,
) -> Interval:
    """``mean(first) - mean(second)``, its bootstrap interval (the two variants resampled independently) and its
    Welch interval over the seeds' means (:func:`welch_interval`, cut to ``bounds``; the bootstrap's stays inside
    them by construction)."""
    a, b = _clean(first), _clean(second)
    rng = np.random.default_rng(seed)
    replicates = _resampled_means(a, rng, resamples) - _resampled_means(b, rng, resamples)
    point = float(np.mean([v.mean() for v in a]) - np.mean([v.mean() for v in b]))
    bootstrap = _interval(point, replicates, len(a) + len(b), sum(v.size for v in a) + sum(v.size for v in b), level)
    welch = welch_interval(a, b, level, fixed_second, bounds)
    if welch is None:
        return bootstrap
    return replace(bootstrap, seed_low=welch[0], seed_high=welch[1])
