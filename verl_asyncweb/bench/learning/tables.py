"""The tables the experiment prints from its ``results.json`` record: one row per run, held-out success per
task, each arm's gain and the differences between arms with their intervals, and per-run figures pooled per
arm."""

from __future__ import annotations

import itertools
import math

from verl_asyncweb.bench.learning.record import runs_by_arm
from verl_asyncweb.compare.confidence import Interval
from verl_asyncweb.learning.evaluate import recorded_score_panel
from verl_asyncweb.learning.outcomes import by_instance, read_outcomes


def results_table(record: dict) -> str:
    """What the experiment prints of ``record``: its stages, one row per run, then the per-task, per-arm and
    per-checkpoint figures."""
    lines = [
        f"demonstrations: {record['demo_episodes']} episodes ({record['demo_steps']} steps) in {record['demo_s']} s",
        f"warm start: {record['warm_start_steps']} steps in {record['warm_start_s']} s "
        f"(loss {record['warm_start_loss_first']} -> {record['warm_start_loss_last']})",
        f"held-out success of the warm start: {record['held_out_before']:.3f} ({record['eval_instances']} instances"
        f" per task, T={record['temperature']:g})",
        f"{record.get('recipe', 'laptop_learning')} overrides: "
        f"{' '.join(record.get('recipe_overrides') or []) or 'none'}; MiniWoB++ score panel "
        f"{'shown' if recorded_score_panel(record) else 'hidden'}",
        "",
        "| arm | seed | steps | env steps | RL wall min | held-out after | gain | steps to success | invalid actions "
        "| trained traj/h | members/step | peak memory GiB |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]

    def figure(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}"

    def count(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.0f}"

    for r in record["arms"]:
        lines.append(
            f"| {r['arm']} | {r.get('seed', 0)} | {r['steps']} | {count(r.get('env_steps'))} "
            f"| {r['rl_wall_s'] / 60:.1f} | {r['held_out_after']:.3f} "
            f"| {r['held_out_after'] - record['held_out_before']:+.3f} "
            f"| {figure(r.get('held_out_steps_to_success'))} | {figure(r.get('held_out_invalid_action_rate'))} "
            f"| {r['trained_trajs_per_hour']:.0f} | {figure(r.get('branch_members_per_step'))} "
            f"| {r['peak_used_mib'] / 1024:.1f} |"
        )
    lines += task_rows(record)
    lines += arm_summaries(record)
    lines += arm_figure_rows(record)
    for r in record["arms"]:
        if len(r.get("held_out_curve", [])) > 2:
            env_steps = {step: total for step, total in r.get("env_steps_by_step") or []}
            points = ", ".join(
                f"step {step} ({wall / 60:.1f} min{f', {env_steps[step]:.0f} env steps' if step in env_steps else ''})"
                f" {success:.3f}"
                for wall, step, success in r["held_out_curve"]
            )
            lines.append(f"{r.get('run', r['arm'])}, held-out by checkpoint: {points}")
    return "\n".join(lines)


def task_rows(record: dict) -> list[str]:
    """Held-out success per task, steps to success in brackets: the warm start's, then each arm's mean over its
    seeds (steps: over the seeds with a success on the task)."""

    def cell(rates: list[float | None], steps: list[float | None]) -> str:
        rates, steps = [r for r in rates if r is not None], [s for s in steps if s is not None]
        if not rates:
            return "n/a"
        return f"{sum(rates) / len(rates):.2f}" + (f" ({sum(steps) / len(steps):.1f} steps)" if steps else "")

    by_arm = runs_by_arm(run for run in record["arms"] if run.get("held_out_after_by_task"))
    tasks = sorted(record.get("held_out_before_by_task") or {})
    if not tasks or not by_arm:
        return []
    columns = [f"{arm} ({len(runs)} seed{'s' if len(runs) > 1 else ''})" for arm, runs in by_arm.items()]
    lines = ["", f"| task | warm start | {' | '.join(columns)} |", "| --- |" + " ---: |" * (len(by_arm) + 1)]
    for task in tasks:
        before_steps = (record.get("held_out_before_steps_by_task") or {}).get(task)
        cells = [cell([record["held_out_before_by_task"][task]], [before_steps])]
        for runs in by_arm.values():
            cells.append(
                cell(
                    [run["held_out_after_by_task"].get(task) for run in runs],
                    [(run.get("held_out_after_steps_by_task") or {}).get(task) for run in runs],
                )
            )
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    return lines


def arm_summaries(record: dict) -> list[str]:
    """Per arm: mean held-out success over its seeds with a 95% interval, and its gain over the warm start (one
    model; its evaluation's episodes its noise); then each pair of arms' difference, and paired by seed and
    held-out instance where both record instances (:mod:`verl_asyncweb.compare.paired`). Each family (gains,
    differences, paired differences) is Holm-corrected across its comparisons; a comparison is resolved when its
    bootstrap interval and Welch's over the seeds (floored at each seed's binomial spread, Holm-adjusted) both
    exclude zero (:mod:`verl_asyncweb.compare.confidence`; Welch's cut to what a success rate allows)."""
    from verl_asyncweb.compare.confidence import difference_interval, holm, mean_interval
    from verl_asyncweb.compare.paired import paired_difference

    runs = runs_by_arm(record["arms"])
    by_arm = {
        arm: [_successes(run.get("held_out_after_outcomes") or [run["held_out_after"]]) for run in arm_runs]
        for arm, arm_runs in runs.items()
    }
    instances = {
        arm: [_instances(run.get("held_out_after_outcomes") or []) for run in sorted(arm_runs, key=_seed)]
        for arm, arm_runs in runs.items()
    }
    before = [_successes(record.get("held_out_before_outcomes") or [record["held_out_before"]])]
    lines = [
        "",
        "| arm | held-out after, mean [95% CI] | gain over the warm start [95% CI] | gain over seeds (Welch) "
        "| resolved |",
        "| --- | --- | --- | --- | --- |",
    ]
    gains = holm(
        [
            lambda level, s=samples: difference_interval(s, before, level, fixed_second=True, bounds=(0, 1))
            for samples in by_arm.values()
        ]
    )
    for (arm, samples), gain in zip(by_arm.items(), gains, strict=True):
        lines.append(f"| {arm} | {mean_interval(samples).format()} | {gain.format_difference()} |")
    pairs = list(itertools.combinations(by_arm, 2))
    if pairs:
        differences = holm(
            [lambda level, a=a, b=b: difference_interval(by_arm[a], by_arm[b], level, bounds=(0, 1)) for a, b in pairs]
        )
        paired = holm(
            [
                lambda level, a=a, b=b: paired_difference(instances[a], instances[b], level, (0, 1)) or _NO_PAIRS
                for a, b in pairs
            ]
        )
        lines += [
            "",
            "| difference | held-out success [95% CI] | over seeds (Welch) | resolved | paired by instance "
            "(Holm) | resolved |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for (a, b), difference, by_instance_pair in zip(pairs, differences, paired, strict=True):
            lines.append(f"| {a} − {b} | {difference.format_difference()} | {_format_paired(by_instance_pair)} |")
    return lines


def _successes(recorded: list) -> list[float]:
    """The successes (0/1) of recorded outcomes: per-instance records, or successes as older records hold them."""
    return [float(o["success"]) if isinstance(o, dict) else float(o) for o in recorded]


def _instances(recorded: list) -> dict:
    """Instance -> success of recorded per-instance outcomes (empty for older records: nothing to pair)."""
    return by_instance(read_outcomes([o for o in recorded if isinstance(o, dict)]))


_NO_PAIRS = Interval(math.nan, math.nan, math.nan, 0, 0)
"""A pair of arms without instances to pair (records written before per-instance outcomes)."""


def _seed(run: dict) -> int:
    return int(run.get("seed", 0))


def _format_paired(interval: Interval) -> str:
    return "n/a | n/a" if interval.seeds == 0 else interval.format_paired()


ARM_FIGURES = {
    "steps to success": ("held_out_steps_to_success", 1, "{:.2f}", (0, math.inf)),
    "invalid-action rate": ("held_out_invalid_action_rate", 1, "{:.2f}", (0, 1)),
    "env steps": ("env_steps", 1, "{:.0f}", (0, math.inf)),
    "trained traj/h": ("trained_trajs_per_hour", 1, "{:.0f}", (0, math.inf)),
    "RL wall min": ("rl_wall_s", 1 / 60, "{:.1f}", (0, math.inf)),
}
"""Per-run figures that :func:`arm_figure_rows` pools per arm: results.json key, scale, format, the values the
figure can take."""


def arm_figure_rows(record: dict) -> list[str]:
    """Per arm, the mean over its seeds of each per-run figure of :data:`ARM_FIGURES` with its 95% Student t
    interval (one value a seed: a bootstrap over two or three would be no wider than their range), cut to the values
    the figure can take (which keeps its coverage); ``n/a`` where no seed recorded it, no interval with one seed, and
    ``(of N)`` where only N of the arm's seeds recorded it."""
    from verl_asyncweb.compare.confidence import seed_interval

    def cell(runs: list[dict], key: str, scale: float, fmt: str, bounds: tuple[float, float]) -> str:
        values = [run[key] * scale for run in runs if run.get(key) is not None]
        if not values:
            return "n/a"
        mean = sum(values) / len(values)
        fewer = f" (of {len(values)})" if len(values) < len(runs) else ""
        if len(values) == 1:
            return fmt.format(mean) + fewer
        low, high = seed_interval(values, bounds=bounds)
        return f"{fmt.format(mean)} [{fmt.format(low)}, {fmt.format(high)}]{fewer}"

    lines = [
        "",
        f"| arm | seeds | {' | '.join(ARM_FIGURES)} |",
        "| --- | ---: |" + " --- |" * len(ARM_FIGURES),
    ]
    for arm, runs in runs_by_arm(record["arms"]).items():
        cells = [cell(runs, *figure) for figure in ARM_FIGURES.values()]
        lines.append(f"| {arm} | {len(runs)} | {' | '.join(cells)} |")
    return lines
