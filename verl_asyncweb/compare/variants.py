"""Runs of one variant: runs whose configs differ only in seeds and in their own folder's paths.

``compare`` pools the runs of a variant (several seeds of one setup) into a mean with a 95% confidence interval
per metric (:mod:`verl_asyncweb.compare.confidence`) and marks which pairwise differences between variants the
intervals resolve. Held-out success pools the evaluated episodes of each seed when the evaluation recorded them;
where every run of two variants recorded its instances, the difference is also paired by instance
(:mod:`verl_asyncweb.compare.paired`: the i-th run of one variant, in the order of their names, against the i-th
of the other), Holm-corrected apart.
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass

from verl_asyncweb.compare.confidence import Interval, Samples, difference_interval, holm, mean_interval
from verl_asyncweb.compare.paired import matched_differences, paired_difference
from verl_asyncweb.compare.runs import Run
from verl_asyncweb.compare.table import MISSING, TableRow, cell_value


@dataclass(frozen=True)
class Variant:
    """Runs of one setup.

    Attributes:
        name: Label: the runs' common name (``rl`` for ``rl``, ``rl_seed1``, ...), else the first run's.
        runs: Its runs, in the order given.
    """

    name: str
    runs: tuple[Run, ...]


def _common_name(names: list[str]) -> str:
    if len(names) == 1:
        return names[0]
    prefix = os.path.commonprefix(names).rstrip("_-/")
    prefix = re.sub(r"[_-]?seed$", "", prefix)
    return prefix or f"{names[0]} (+{len(names) - 1})"


def group_variants(runs: list[Run]) -> list[Variant]:
    """Runs grouped by :attr:`Run.setup`, in order of first appearance; a run without a readable config is a
    variant of its own."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.setup if run.setup is not None else f"run:{run.path}", []).append(run)
    variants = [Variant(_common_name([run.name for run in members]), tuple(members)) for members in groups.values()]
    names = [variant.name for variant in variants]
    return [
        variant if names.count(variant.name) == 1 else Variant(f"{variant.name} #{index}", variant.runs)
        for index, variant in enumerate(variants, 1)
    ]


def step_samples(run: Run, metric: str, step: int, value: float) -> list[float]:
    """What a run contributes at ``step``: the evaluated episodes for held-out success (when recorded), else the
    logged ``value``."""
    return run.held_out_episodes.get(metric, {}).get(step) or [value]


def run_samples(run: Run, row: TableRow) -> list[float] | None:
    """What a run contributes to a row: :func:`step_samples` at its last step for a final value, the row's one value
    for a best one; ``None`` when the run never logged the metric."""
    value = cell_value(run, row)
    if value is None:
        return None
    if row.aggregate == "final":
        return step_samples(run, row.metric, run.series(row.metric)[-1][0], value)
    return [value]


def variant_samples(variant: Variant, row: TableRow) -> Samples:
    """One sample per run (seed) of the variant that logged the row's metric."""
    return [samples for run in variant.runs if (samples := run_samples(run, row)) is not None]


def variant_interval(variant: Variant, row: TableRow) -> Interval | None:
    samples = variant_samples(variant, row)
    return mean_interval(samples) if samples else None


def is_success_row(row: TableRow) -> bool:
    """Rows whose pairwise differences are reported: held-out success and training success, final values."""
    return row.aggregate == "final" and row.metric.endswith("success_rate")


@dataclass(frozen=True)
class Difference:
    """The difference of two variants' means in one row, and paired by instance where both recorded instances."""

    row: TableRow
    first: str
    second: str
    interval: Interval
    paired: Interval | None = None


def variant_instances(variant: Variant, row: TableRow) -> list[dict] | None:
    """Per run, in the order of their names, (task, page seed) -> success at the run's last step of the row's
    metric; None unless every run recorded its instances there."""
    found = []
    for run in sorted(variant.runs, key=lambda run: run.name):
        series = run.series(row.metric) if row.aggregate == "final" else []
        instances = run.held_out_instances.get(row.metric, {}).get(series[-1][0]) if series else None
        if not instances:
            return None
        found.append(instances)
    return found


def pairwise_differences(variants: list[Variant], rows: list[TableRow]) -> list[Difference]:
    """Every pair of variants on every success row both logged, Holm-corrected across all of them (the table's
    comparisons); the paired differences are a family of their own."""
    found, comparisons, paired = [], [], []
    for row in filter(is_success_row, rows):
        for first, second in itertools.combinations(variants, 2):
            a, b = variant_samples(first, row), variant_samples(second, row)
            if a and b:
                found.append((row, first.name, second.name))
                comparisons.append(lambda level, a=a, b=b: difference_interval(a, b, level))
                x, y = variant_instances(first, row), variant_instances(second, row)
                if x and y and matched_differences(x, y):  # what paired_difference needs to give one
                    paired.append((len(found) - 1, lambda level, x=x, y=y: paired_difference(x, y, level, (0, 1))))
    corrected = dict(zip([i for i, _ in paired], holm([compute for _, compute in paired]), strict=True))
    return [
        Difference(*names, interval, corrected.get(i))
        for i, (names, interval) in enumerate(zip(found, holm(comparisons), strict=True))
    ]


def render_variants(variants: list[Variant], rows: list[TableRow]) -> list[str]:
    """The variants' table (mean [95% CI] (seeds) per row) and the pairwise differences, as Markdown lines."""
    lines = [
        "| metric | " + " | ".join(f"{v.name} ({len(v.runs)} runs)" for v in variants) + " |",
        "|" + "|".join([" --- "] * (len(variants) + 1)) + "|",
    ]
    for row in rows:
        cells = [variant_interval(variant, row) for variant in variants]
        if any(cell is not None for cell in cells):
            lines.append(f"| {row.label} | " + " | ".join(MISSING if c is None else c.format() for c in cells) + " |")
    differences = pairwise_differences(variants, rows)
    if differences:
        lines += [
            "",
            "| difference | metric | mean [95% CI] | over seeds (Welch) | resolved "
            "| paired by instance (Holm) | resolved |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for d in differences:
            paired = f"{MISSING} | {MISSING}" if d.paired is None else d.paired.format_paired()
            lines.append(f"| {d.first} − {d.second} | {d.row.label} | {d.interval.format_difference()} | {paired} |")
    return lines
