"""Predictions over a grid of one or two knobs (``--sweep key=v1,v2,...``), as a table and a plot."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from verl_asyncweb.plan.overrides import apply_overrides, parse_assignment
from verl_asyncweb.plan.prediction import Prediction
from verl_asyncweb.plan.profile import Profile
from verl_asyncweb.plan.simulate import simulate

MAX_AXES = 2


@dataclass(frozen=True)
class SweepAxis:
    """One knob and the values it takes (text, as on the command line)."""

    key: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class SweepPoint:
    """One grid point: a value per axis and the prediction there."""

    values: tuple[str, ...]
    prediction: Prediction


def parse_sweep(text: str) -> SweepAxis:
    """``"key=v1,v2,..."`` -> :class:`SweepAxis`."""
    key, raw_values = parse_assignment(text)
    values = tuple(v.strip() for v in raw_values.split(",") if v.strip())
    if not values:
        raise ValueError(f"--sweep {key} needs at least one value: --sweep {key}=V1,V2,..., got {text!r}")
    return SweepAxis(key=key, values=values)


def run_sweep(profile: Profile, axes: list[SweepAxis]) -> list[SweepPoint]:
    """Simulate every combination of the axes' values on top of ``profile`` (first axis outermost).

    Every grid point is checked before any is simulated, so a bad value fails at once.
    """
    if not 1 <= len(axes) <= MAX_AXES:
        raise ValueError(f"--sweep may be given 1 to {MAX_AXES} times, got {len(axes)}")
    combos = list(itertools.product(*(axis.values for axis in axes)))
    profiles = [apply_overrides(profile, [(a.key, v) for a, v in zip(axes, combo, strict=True)]) for combo in combos]
    return [SweepPoint(values=combo, prediction=simulate(p)) for combo, p in zip(combos, profiles, strict=True)]


COLUMNS = (
    ("trained traj/h", lambda p: f"{p.trained_trajs_per_hour:,.0f}"),
    ("finished traj/h", lambda p: f"{p.finished_trajs_per_hour:,.0f}"),
    ("step s", lambda p: f"{p.step_s:.1f}"),
    ("first step's rollout s", lambda p: f"{p.first_batch_s:.0f}"),
    ("trainer idle", lambda p: f"{p.trainer_idle_frac:.2f}"),
    ("rollout idle", lambda p: f"{p.rollout_idle_frac:.2f}"),
    ("lag mean", lambda p: f"{p.policy_lag_mean:.2f}"),
    ("stale dropped", lambda p: f"{p.stale_drop_frac:.3f}"),
    ("discarded groups", lambda p: f"{p.group_discard_frac:.3f}"),
)


def format_sweep_table(axes: list[SweepAxis], points: list[SweepPoint]) -> str:
    """A markdown table: one row per grid point."""
    header = [axis.key for axis in axes] + [name for name, _ in COLUMNS]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(axes) + " ---: |" * len(COLUMNS)]
    for point in points:
        cells = [*point.values, *(fmt(point.prediction) for _, fmt in COLUMNS)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def best_point(points: list[SweepPoint]) -> SweepPoint:
    """The grid point with the most trained trajectories per hour (the first of equals)."""
    return max(points, key=lambda point: point.prediction.trained_trajs_per_hour)


def format_recommendation(axes: list[SweepAxis], points: list[SweepPoint]) -> str:
    """One line naming the grid point with the highest trained throughput."""
    best = best_point(points)
    where = " ".join(f"{axis.key}={value}" for axis, value in zip(axes, best.values, strict=True))
    figures = best.prediction
    return (
        f"highest trained throughput: {where} ({figures.trained_trajs_per_hour:,.0f} trajectories/h, "
        f"{figures.step_s:.0f} s per step, policy lag mean {figures.policy_lag_mean:.2f})"
    )


def plot_sweep(axes: list[SweepAxis], points: list[SweepPoint], path: Path, title: str) -> None:
    """Trained trajectories/hour and trainer idle fraction against the first knob, one line per second-knob value."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    first = axes[0]
    positions = range(len(first.values))
    series = axes[1].values if len(axes) == 2 else ("",)
    figure, (throughput, idle) = plt.subplots(1, 2, figsize=(11, 4))
    for label in series:
        chosen = [p.prediction for p in points if len(axes) == 1 or p.values[1] == label]
        name = f"{axes[1].key}={label}" if len(axes) == 2 else None
        throughput.plot(positions, [p.trained_trajs_per_hour for p in chosen], marker="o", label=name)
        idle.plot(positions, [p.trainer_idle_frac for p in chosen], marker="o", label=name)
    for axis, ylabel in ((throughput, "trained trajectories / hour"), (idle, "trainer idle fraction")):
        axis.set_xticks(list(positions), first.values)
        axis.set_xlabel(first.key)
        axis.set_ylabel(ylabel)
        axis.grid(alpha=0.3)
        if len(axes) == 2:
            axis.legend()
    figure.suptitle(title, fontsize=9, wrap=True)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
