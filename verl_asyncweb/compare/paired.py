"""Differences of two variants paired by held-out instance.

Variants evaluated on the same held-out instances (task, page seed) and trained with the same seeds compare seed
by seed and instance by instance: seed ``s`` of one variant against seed ``s`` of the other (the same data order
and sampling seed), each on the instances both evaluated. An instance's difficulty then cancels in its difference,
which the unpaired interval counts as noise. The interval is Student's t over the matched seeds' mean differences,
its variance floored, as the unpaired one's (:mod:`verl_asyncweb.compare.confidence`), at the sampling variance of
one seed's mean difference over its instances; with one matched seed, the interval over that seed's instances
(evaluation noise only: no seed-to-seed spread, so it resolves nothing).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np
from scipy import stats

from verl_asyncweb.compare.confidence import LEVEL, Interval

Scores = Sequence[Mapping[Hashable, float]]
"""Per seed, in seed order: instance -> score."""


def matched_differences(first: Scores, second: Scores) -> list[np.ndarray]:
    """Per matched seed (by position), the instance-by-instance differences on the instances both evaluated, in a
    stable order; seeds with fewer than two shared instances are left out."""
    matched = []
    for a, b in zip(first, second, strict=False):
        shared = sorted(set(a) & set(b), key=repr)
        if len(shared) >= 2:
            matched.append(np.array([a[key] - b[key] for key in shared], dtype=float))
    return matched


def paired_difference(
    first: Scores, second: Scores, level: float = LEVEL, bounds: tuple[float, float] | None = None
) -> Interval | None:
    """``first - second`` paired by seed and instance (see the module docstring); None when no seed is matched on
    two instances. ``bounds``: the values a score can take; the interval is cut to the differences they allow."""
    seeds = matched_differences(first, second)
    if not seeds:
        return None
    means = np.array([d.mean() for d in seeds])
    within = float(np.mean([d.var(ddof=1) / d.size for d in seeds]))
    if len(seeds) >= 2:
        variance, freedom = max(float(means.var(ddof=1)), within) / len(seeds), len(seeds) - 1
    else:
        variance, freedom = within, seeds[0].size - 1
    difference = float(means.mean())
    scale = float(np.sqrt(variance))
    half = float(stats.t.ppf(1 - (1 - level) / 2, freedom) * scale)
    low, high = difference - half, difference + half
    if bounds is not None:
        low, high = max(low, bounds[0] - bounds[1]), min(high, bounds[1] - bounds[0])
    found = Interval(difference, float(low), float(high), len(seeds), sum(d.size for d in seeds))
    if len(seeds) < 2:
        return found
    p_value = float(2 * stats.t.sf(abs(difference) / scale, freedom)) if scale > 0 else float(difference == 0)
    return Interval(found.mean, found.low, found.high, found.seeds, found.values, found.low, found.high, p_value)
