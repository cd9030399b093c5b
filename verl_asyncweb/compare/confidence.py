"""Means with 95% confidence intervals over seeds and held-out episodes, and which differences they resolve.

A variant run with several seeds gives one sample per seed: the seed's held-out episode outcomes (0/1), or one
number (a training metric's final value). The point estimate weighs every seed equally (the mean of the seeds'
means); the interval is a two-level percentile bootstrap: seeds are resampled with replacement, then each drawn
seed's episodes, so that both the seed-to-seed spread and the finite held-out set widen it.

A difference between two variants is *resolved* when two intervals exclude zero: the bootstrap interval of the
difference, and Welch's t interval of the difference of the seeds' means, Holm-corrected across the experiment's
comparisons (:func:`holm`). Each side's seed-level variance is floored at the sampling variance of one seed's mean
(``p(1-p)/n`` for a success rate), so seeds that tie (two seeds at exactly 8/80) still carry their episodes' noise;
a warm start (one model, counted as a variant without seed spread) carries its evaluation's binomial variance.
With two or three seeds a side the bootstrap alone is too narrow when seeds differ (it excluded zero in 36%, 13% and
11% of simulated pairs with no true difference at one, two and three seeds, seed-to-seed spread 8 points around
17.5%, 80 episodes a seed); both together in 0%, 1% and 2% (``python -m verl_asyncweb.bench intervals``). Welch's t
needs two seeds of each variant, so one seed resolves nothing. :mod:`verl_asyncweb.compare.paired` pairs two
variants by seed and held-out instance where the evaluations record instances.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
            with seed spread has one seed); after :func:`holm`, at its Holm-adjusted level.
        seed_high: Its upper bound.
        p_value: Welch's two-sided p-value of the difference (None without Welch's interval).
        adjusted_p: Its Holm-adjusted p-value across the experiment's comparisons (:func:`holm`; until then, the
            p-value of a single comparison).
        comparisons: How many comparisons the correction spans (1: none).
    """

    mean: float
    low: float
    high: float
    seeds: int
    values: int
    seed_low: float | None = None
    seed_high: float | None = None
    p_value: float | None = None
    adjusted_p: float | None = None
    comparisons: int = 1

    @property
    def resolved(self) -> bool:
        """Whether a difference is resolved: Welch's test over the seeds' means rejects zero after the Holm
        correction (adjusted p below ``1 - LEVEL``, so its adjusted interval excludes zero; None with one seed of
        a variant) and the bootstrap interval excludes zero on the same side."""
        p_value = self.p_value if self.adjusted_p is None else self.adjusted_p
        if p_value is None or self.seed_low is None or self.seed_high is None or p_value >= 1 - LEVEL:
            return False
        return (self.low > 0 and self.seed_low > 0) or (self.high < 0 and self.seed_high < 0)

    def format_difference(self) -> str:
        """``+0.500 [+0.400, +0.600] | [+0.300, +0.700] (Holm, 3) | yes``: a difference, its bootstrap interval, its
        Welch interval over seeds (Holm-adjusted across that many comparisons) and whether it is resolved (Markdown
        cells; ``one seed`` where Welch's has none)."""
        seeds = "one seed" if self.seed_low is None else f"[{self.seed_low:+.3f}, {self.seed_high:+.3f}]"
        if self.seed_low is not None and self.comparisons > 1:
            seeds += f" (Holm, {self.comparisons})"
        return f"{self.mean:+.3f} [{self.low:+.3f}, {self.high:+.3f}] | {seeds} | {'yes' if self.resolved else 'no'}"

    def format_paired(self) -> str:
        """``+0.100 [+0.040, +0.160] | yes``: a paired difference, its interval and whether it is resolved (two
        Markdown cells)."""
        return f"{self.mean:+.3f} [{self.low:+.3f}, {self.high:+.3f}] | {'yes' if self.resolved else 'no'}"

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


def _side_variance(seeds: list[np.ndarray], fixed: bool) -> tuple[float, float]:
    """Variance of one side's mean of seed means and its degrees of freedom.

    A side with seed spread: the seeds' sample variance, floored at the mean sampling variance of one seed's mean
    (``p(1-p)/n`` for a success rate; zero for one value a seed), over the seed count, with ``seeds - 1`` degrees.
    Seeds that tie have no spread to estimate, yet each seed's rate is itself drawn from ``n`` episodes. A fixed
    reference (one evaluation, no seed spread): its evaluation's sampling variance, ``n - 1`` degrees.
    """
    if fixed:
        values = np.concatenate(seeds)
        return float(values.var() / values.size), float(max(values.size - 1, 1))
    means = np.array([values.mean() for values in seeds])
    floor = float(np.mean([values.var() / values.size for values in seeds]))
    return max(float(means.var(ddof=1)), floor) / len(seeds), float(len(seeds) - 1)


@dataclass(frozen=True)
class WelchTest:
    """Welch's t interval of a difference of means over seeds, cut to the values a sample can take, and its
    two-sided p-value (uncut)."""

    low: float
    high: float
    p_value: float


def welch_test(
    first: list[np.ndarray],
    second: list[np.ndarray],
    level: float = LEVEL,
    fixed_second: bool = False,
    bounds: tuple[float, float] | None = None,
) -> WelchTest | None:
    """Welch's t test of the difference of the two variants' seed means (variances by :func:`_side_variance`;
    ``fixed_second``: ``second`` is one fixed reference, a warm start evaluated once); None when a variant that has
    seed spread has one seed. ``bounds``: the values a sample can take (a success rate's 0 and 1); the interval is
    then cut to the differences they allow (with two seeds its t of 12.7 reaches far past them), which keeps its
    coverage and whether it excludes zero."""
    if len(first) < 2 or (len(second) < 2 and not fixed_second):
        return None
    parts, degrees = zip(_side_variance(first, False), _side_variance(second, fixed_second), strict=True)
    variance = sum(parts)
    difference = float(np.mean([v.mean() for v in first]) - np.mean([v.mean() for v in second]))
    if variance == 0:  # every value alike on both sides: nothing to widen it
        return WelchTest(difference, difference, float(difference == 0))
    freedom = variance**2 / sum(part**2 / dof for part, dof in zip(parts, degrees, strict=True) if part > 0)
    scale = float(np.sqrt(variance))
    half = float(stats.t.ppf(1 - (1 - level) / 2, freedom) * scale)
    p_value = float(2 * stats.t.sf(abs(difference) / scale, freedom))
    low, high = difference - half, difference + half
    if bounds is not None:
        smallest, largest = bounds
        low, high = max(low, smallest - largest), min(high, largest - smallest)
        if fixed_second and parts[1] == 0:  # an exact reference: only the first variant's mean can move
            reference = float(np.concatenate(second).mean())
            low, high = max(low, smallest - reference), min(high, largest - reference)
    return WelchTest(float(low), float(high), p_value)


def welch_interval(
    first: list[np.ndarray],
    second: list[np.ndarray],
    level: float = LEVEL,
    fixed_second: bool = False,
    bounds: tuple[float, float] | None = None,
) -> tuple[float, float] | None:
    """The interval of :func:`welch_test`."""
    test = welch_test(first, second, level, fixed_second, bounds)
    return None if test is None else (test.low, test.high)


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
    welch = welch_test(a, b, level, fixed_second, bounds)
    if welch is None:
        return bootstrap
    return replace(bootstrap, seed_low=welch.low, seed_high=welch.high, p_value=welch.p_value)


def holm(comparisons: Sequence[Callable[[float], Interval]], level: float = LEVEL) -> list[Interval]:
    """Holm's step-down correction across one experiment's comparisons, each a function of the confidence level.

    Ranked by p-value, smallest first (rank ``r`` from 0), the comparison at rank ``r`` is computed again at level
    ``1 - (1 - level) / (m - r)`` and gets the adjusted p-value ``max over ranks <= r of min(1, (m - r) * p)``;
    ``m`` counts the comparisons that have a p-value (one seed of a variant gives none: it resolves nothing and is
    returned as it is). A comparison is resolved when its adjusted p-value is below ``1 - level``.
    """
    nominal = [compute(level) for compute in comparisons]
    tested = sorted(
        (i for i, found in enumerate(nominal) if found.p_value is not None), key=lambda i: nominal[i].p_value
    )
    corrected, adjusted = list(nominal), 0.0
    for rank, index in enumerate(tested):
        factor = len(tested) - rank
        adjusted = max(adjusted, min(1.0, factor * nominal[index].p_value))
        again = comparisons[index](1 - (1 - level) / factor)
        corrected[index] = replace(again, adjusted_p=adjusted, comparisons=len(tested))
    return corrected
