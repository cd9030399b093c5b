"""PNG curves: one figure per metric, one line per run, against training step and against wall time.

Uses matplotlib's object API on the Agg canvas (no pyplot, no global figure state, no display needed).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from verl_asyncweb.compare import metric_names as M
from verl_asyncweb.compare.runs import Run, Series
from verl_asyncweb.compare.table import TABLE_ROWS

logger = logging.getLogger(__name__)

PLOT_METRICS: tuple[str, ...] = tuple(
    dict.fromkeys(
        [row.metric for row in TABLE_ROWS]
        + [M.MEMORY_KEYSET_KEPT_FRAC, M.STUCK_RATE, M.POLICY_LAG_MEAN, M.TRAINER_IDLE_FRAC, M.ROLLOUT_IDLE_FRAC]
    )
)
"""Metrics that get a figure, in order."""

X_AXES = ("step", "wall")


@dataclass
class PlotResult:
    """What :func:`write_plots` produced.

    Attributes:
        files: Written PNGs.
        notes: Why some figures or lines are absent.
    """

    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def plot_filename(metric: str) -> str:
    """File-safe name, e.g. ``asyncweb/success_rate/easy`` -> ``asyncweb__success_rate__easy.png``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", metric.replace("/", "__")) + ".png"


def wall_series(run: Run, metric: str) -> Series:
    """The metric against hours since start, using ``asyncweb/wall_s`` logged at the same step; step 0 (the
    start, e.g. a held-out evaluation of the starting model) is at 0 h.

    Returns:
        ``(hours, value)`` pairs (hours as float), only for steps that logged both.
    """
    wall = {0: 0.0, **dict(run.series(M.WALL_S))}
    return [(wall[step] / 3600.0, value) for step, value in run.series(metric) if step in wall]


def _draw(path: Path, metric: str, lines: list[tuple[str, list[tuple[float, float]]]], xlabel: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.2), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for name, points in lines:
        xs, ys = zip(*points, strict=True)
        ax.plot(xs, ys, marker="o" if len(points) < 30 else None, markersize=3, label=name)
    ax.set_title(metric)
    ax.set_xlabel(xlabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.subplots_adjust(left=0.12, right=0.97, top=0.91, bottom=0.13)
    fig.savefig(path)


def write_plots(runs: list[Run], out_dir: Path, metrics: tuple[str, ...] = PLOT_METRICS) -> PlotResult:
    """Write ``out_dir/step/<metric>.png`` and ``out_dir/wall/<metric>.png``.

    A metric no run logged gets no figure; a run without ``asyncweb/wall_s`` is left out of the wall-time
    figures. Both are recorded in the notes.

    Args:
        runs: Runs to draw, one line each.
        out_dir: Folder for the PNGs (created).
        metrics: Metric names to draw.

    Returns:
        The written files and the notes.
    """
    result = PlotResult()
    for run in runs:
        if not run.series(M.WALL_S):
            result.notes.append(f"{run.name}: no {M.WALL_S} logged, left out of the wall-time plots")
    for axis in X_AXES:
        (out_dir / axis).mkdir(parents=True, exist_ok=True)
    for metric in metrics:
        by_step = [(run.name, [(float(s), v) for s, v in run.series(metric)]) for run in runs]
        by_step = [(name, pts) for name, pts in by_step if pts]
        if not by_step:
            result.notes.append(f"{metric}: logged by no run, no plot")
            continue
        path = out_dir / "step" / plot_filename(metric)
        _draw(path, metric, by_step, "training step")
        result.files.append(path)
        by_wall = [(run.name, wall_series(run, metric)) for run in runs]
        by_wall = [(name, pts) for name, pts in by_wall if pts]
        if by_wall:
            path = out_dir / "wall" / plot_filename(metric)
            _draw(path, metric, by_wall, "wall time (hours)")
            result.files.append(path)
    logger.info("wrote %d plots under %s", len(result.files), out_dir)
    return result


def _variant_points(variant, metric: str) -> list[tuple[float, float, float, float]]:
    """(step, mean, low, high) at every step some run of the variant logged ``metric``."""
    from verl_asyncweb.compare.confidence import mean_interval
    from verl_asyncweb.compare.variants import step_samples

    by_run = [(run, dict(run.series(metric))) for run in variant.runs]
    points = []
    for step in sorted({step for _, values in by_run for step in values}):
        samples = [step_samples(run, metric, step, values[step]) for run, values in by_run if step in values]
        interval = mean_interval(samples)
        points.append((float(step), interval.mean, interval.low, interval.high))
    return points


def write_variant_plots(variants: list, out_dir: Path, metrics: tuple[str, ...]) -> PlotResult:
    """``out_dir/<metric>.png``: per variant (:mod:`verl_asyncweb.compare.variants`), the mean over its runs
    against training step with the 95% interval shaded."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    result = PlotResult()
    out_dir.mkdir(parents=True, exist_ok=True)
    for metric in metrics:
        lines = [(variant, _variant_points(variant, metric)) for variant in variants]
        lines = [(variant, points) for variant, points in lines if points]
        if not lines:
            continue
        fig = Figure(figsize=(7, 4.2), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        for variant, points in lines:
            steps, means, lows, highs = zip(*points, strict=True)
            drawn = ax.plot(steps, means, marker="o", markersize=3, label=f"{variant.name} ({len(variant.runs)} runs)")
            ax.fill_between(steps, lows, highs, color=drawn[0].get_color(), alpha=0.2)
        ax.set_title(f"{metric}: mean and 95% CI over runs")
        ax.set_xlabel("training step")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
        fig.subplots_adjust(left=0.12, right=0.97, top=0.91, bottom=0.13)
        path = out_dir / plot_filename(metric)
        fig.savefig(path)
        result.files.append(path)
    return result
