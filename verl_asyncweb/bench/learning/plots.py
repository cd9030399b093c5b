"""The experiment's plots: held-out and training success against RL wall time, and held-out success against the
environment steps played."""

from __future__ import annotations

from pathlib import Path


def _held_out_curve(result: dict, before: float) -> list[tuple[float, int, float]]:
    """(wall s, step, held-out success) from the warm start on; an arm reported before checkpoints were evaluated
    has its last one only."""
    if "held_out_curve" in result:
        return result["held_out_curve"]
    return [(0.0, 0, before), (result["rl_wall_s"], result["steps"], result["held_out_after"])]


def _arm_lines(results: list[dict], drawn=lambda result: True):
    """The ``drawn`` runs, each with its arm's colour (by the arm's place among all ``results``, so that every plot
    colours an arm alike) and legend label: the seeds of an arm share one entry (Matplotlib leaves labels that start
    with "_" out of the legend)."""
    colors = {arm: f"C{i % 10}" for i, arm in enumerate(dict.fromkeys(result["arm"] for result in results))}
    labelled = set()
    for result in filter(drawn, results):
        arm = result["arm"]
        prefix = arm if arm not in labelled else f"_{result.get('run', arm)}"
        labelled.add(arm)
        yield result, colors[arm], prefix


def _save(figure, axes, before: float, path: Path, xlabel: str, ylabel: str):
    """The warm start's point, axes labels and the legend beside the axes; the figure saved to ``path``."""
    axes.scatter([0], [before], color="black", marker="*", s=120, zorder=3)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_ylim(0, 1)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    return figure


def _axes():
    """A figure and its axes, drawn off screen."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(9, 4))


def plot(results: list[dict], before: float, path: Path):
    """Training success rate vs wall time per run, with the held-out success of the warm start and of each
    evaluated checkpoint; the seeds of an arm share its colour and one legend entry. Returns the saved figure."""
    figure, axes = _axes()
    for result, color, prefix in _arm_lines(results):
        points = [(t / 60, s) for t, s in result["curve"] if s is not None]
        axes.plot(*zip(*points, strict=True), color=color, alpha=0.3, label=f"{prefix}: training episodes")
        held_out = [(t / 60, s) for t, _, s in _held_out_curve(result, before)]
        axes.plot(
            *zip(*held_out, strict=True),
            color=color,
            marker="*",
            markersize=10,
            label=f"{prefix}: held-out, warm start and checkpoints",
        )
    return _save(figure, axes, before, path, "RL wall time (min)", "success rate")


def plot_env_steps(results: list[dict], before: float, path: Path):
    """Held-out success of the warm start and each evaluated checkpoint against the policy steps a run had played
    by then (runs recorded without per-step environment steps are left out); the seeds of an arm share its colour
    and one legend entry. Returns the saved figure."""
    figure, axes = _axes()
    for result, color, prefix in _arm_lines(results, lambda result: bool(result.get("env_steps_by_step"))):
        env_steps = {step: total for step, total in result["env_steps_by_step"]}
        held_out = [(step, s) for _, step, s in _held_out_curve(result, before) if step == 0 or step in env_steps]
        points = [(env_steps.get(step, 0), s) for step, s in held_out]
        axes.plot(*zip(*points, strict=True), color=color, marker="*", markersize=10, label=f"{prefix}: held-out")
    return _save(figure, axes, before, path, "environment (policy) steps played in training", "held-out success rate")
