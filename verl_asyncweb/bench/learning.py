"""``python -m verl_asyncweb.bench learning``: does RL improve the agent on this machine, and is it the RL signal?

The whole experiment in one invocation, every stage in its own folder under ``--out`` (a stage whose output
exists is reused, so an interrupted experiment continues):

1. demonstrations of the oracles on the recipe's training instances (:mod:`verl_asyncweb.learning.demos`) of the
   tasks named by ``--demo-tasks`` (by default three of the six, :data:`DEMO_TASKS`; ``all`` for every one);
2. a deliberately partial supervised warm start of the offline ``small`` model on them;
3. held-out evaluation of the warm start (:mod:`verl_asyncweb.learning.evaluate`);
4. one RL run per arm and seed through ``verl_asyncweb.main`` (``--recipe``, ``laptop_learning`` by default,
   from the warm start), each evaluated on the same held-out instances: ``rl`` (the recipe), ``control`` (the
   same run with the advantage sign flipped, ``asyncweb.algo.negate_advantage=true``) and the loss variants of
   :data:`ARMS`. ``--seeds N`` runs every arm with N sampling/data seeds (:func:`seed_overrides`), all from the
   one warm start; the table then gives each arm's mean held-out success with a 95% confidence interval
   (bootstrap over held-out episodes and seeds) and which differences between arms exclude zero.

Reported: demonstration count and recording time, warm-start time, environment (policy) steps and RL wall
time, held-out success before and after (overall and per task; ``--eval-checkpoints`` also at every saved
checkpoint), trajectories per hour, peak memory, and for branch rollouts the episodes played on from a restored
branch point per step; with seeds, each arm's mean of its per-run figures with a 95% interval over its seeds
(:func:`arm_figure_rows`); ``success_vs_wall.png`` plots each arm's training success rate against wall time with the
held-out points, ``success_vs_env_steps.png`` the held-out points against the policy steps played by then.
An interrupted arm, or a larger ``--rl-steps`` than an arm's finished run, continues from its latest checkpoint
(:func:`arm_command`).

``results.json`` carries the experiment to another machine: copied into a fresh ``--out``, only the runs it does
not hold are run there (:func:`earlier_record`), from weights checked to be the same (:func:`weights_digest`);
other weights are refused. Its ``warm_start`` folder copied beside it is used as it is; without it the warm start
is made again and kept only if it comes out as the same weights (it does when the demonstrations are recorded again
identically: score panel hidden, deterministic page clock). A recorded run is run again only when its folder is
there, or after its entry is removed from ``results.json``. Records, demonstrations and warm starts that do not say
whether MiniWoB++'s score panel was shown were made with it shown (``--set asyncweb.env.miniwob_score_panel=true``
continues them; :func:`evaluation_settings`, :func:`check_score_panel`).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import logging
import math
import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import yaml
from omegaconf import DictConfig, OmegaConf

from verl_asyncweb.bench.e2e import run_sampled
from verl_asyncweb.compare.confidence import Interval
from verl_asyncweb.compare.metric_names import (
    BRANCH_MEMBERS,
    ENV_STEPS,
    INVALID_ACTION_RATE,
    STEPS_PER_TRAJ_SUCCESS,
    WALL_S,
)
from verl_asyncweb.compare.runs import metrics_files, read_metrics
from verl_asyncweb.learning.evaluate import SCORE_PANEL_UNRECORDED, checkpoint_steps, output_file, recorded_score_panel
from verl_asyncweb.learning.outcomes import by_instance, outcomes_to_json, read_outcomes
from verl_asyncweb.recipes_registry import compose_recipe
from verl_asyncweb.run_folder import RunFolder

SYNC_REINFORCE = [
    "asyncweb.rollout_mode=sync",
    "asyncweb.algo.estimator=multistep_reinforce",
    "algorithm.adv_estimator=multistep_reinforce",
    "asyncweb.algo.step_norm=traj",
]
"""Sync rollout, REINFORCE on the raw trajectory reward with 1/|tau|: the overrides both REINFORCE arms share."""

BRANCH = ["asyncweb.agent.branch_step=1", "asyncweb.agent.branch_members=2"]
"""Branch rollouts from step 1 with two members a group (of ``rollout.n`` = 4): the branch arms' rollouts."""

ARMS = {
    "rl": [],
    "control": ["asyncweb.algo.negate_advantage=true"],
    "traj": ["asyncweb.algo.step_norm=traj"],
    "const": ["asyncweb.algo.step_norm=const"],
    "vanilla": ["asyncweb.algo.loss_mode=vanilla", "algorithm.rollout_correction.bypass_mode=true"],
    # WebGym's synchronous baseline, as recipe demo_sync_reinforce: sync rollout, REINFORCE on the raw reward, every
    # group trained (no dynamic sampling: a group whose members all succeeded carries signal without a baseline).
    "sync_reinforce": [*SYNC_REINFORCE, "asyncweb.algo.dynamic_sampling=false"],
    # The same with the recipe's dynamic sampling (mixed groups only): on binary rewards RAFT++'s update, in sync.
    "sync_reinforce_filtered": [*SYNC_REINFORCE],
    "sync_grpo": ["asyncweb.rollout_mode=sync"],
    "raftpp": ["asyncweb.algo.estimator=raftpp", "algorithm.adv_estimator=raftpp"],
    # Branch rollouts: two of each group's other members play on from the state its first member reached after one
    # action and the last plays a whole episode, with episode-level credit (branch) or with the actions taken from
    # that shared state also compared among the three that left it (branch_credit). With every member restoring the
    # point (branch_members 0) the two levels coincide and step credit only reweighs that step (algorithms.md).
    "branch": BRANCH,
    "branch_credit": [*BRANCH, "asyncweb.algo.step_credit=branch"],
}
"""RL arms: ``verl_asyncweb.main`` overrides on top of the recipe and the warm start."""

REDEFINED_ARMS = {"sync_reinforce": "2026-12-06", "branch": "2026-12-06", "branch_credit": "2026-12-06"}
"""Arms whose overrides changed, and when: a ``results.json`` entry of theirs that does not record its overrides
(written before entries did) and has no run folder to read them from is refused, not reported as the new arm."""


def seed_overrides(seed: int) -> list[str]:
    """Overrides of seed ``seed`` of an arm: the rollout's sampling seed, the dataloader's order and the training
    instances' base seed (seed 0 is the recipe's own)."""
    if seed == 0:
        return []
    return [f"actor_rollout_ref.rollout.seed={42 + seed}", f"data.seed={seed}", f"asyncweb.tasks.seed={seed}"]


def arm_run_name(arm: str, seed: int) -> str:
    """Run folder of an arm's seed under ``--out``: the arm's name for seed 0, ``ARM_seedN`` for the others."""
    return arm if seed == 0 else f"{arm}_seed{seed}"


DEMO_TASKS = {
    "laptop_learning": "miniwob:click-button,click-link,click-tab",
    "laptop_multistep": "miniwob:enter-text,login-user,click-checkboxes",
}
"""Demonstrated by default, per recipe: three of its tasks. RL learned laptop_learning's click-test and focus-text
from the reward alone (docs/history-2026-12.md, bl13); a warm start shown every task left RL less to add.
laptop_multistep's demonstrations teach the multi-step layout (fill one or two fields, or tick boxes, then submit);
of its RL tasks only click-checkboxes is demonstrated, and the typing tasks it cannot learn (docs/learning.md) are
demonstrated but not trained on."""


WARM_STEPS = {"laptop_learning": 200, "laptop_multistep": 1000}
"""Warm-start steps by default, per recipe (batch 4). laptop_multistep's 200-step warm start wrote an executable
action in 3 of 100 multi-step decisions, too rarely for RL to find mixed groups; 1000 steps wrote one in ~70
(docs/learning.md)."""

HELD_OUT_BEFORE = (
    "held_out_before",
    "held_out_before_by_task",
    "held_out_before_steps_by_task",
    "held_out_before_outcomes",
)
"""The warm start's held-out figures in ``results.json``: success rate, per task, steps to success per task, and
per instance (:mod:`verl_asyncweb.learning.outcomes`; 0/1 per episode in records written before)."""


EVALUATION_DEFAULTS = {
    "recipe": "laptop_learning",
    "recipe_overrides": [],
    "miniwob_score_panel": SCORE_PANEL_UNRECORDED,
}
"""Evaluation settings of a ``results.json`` written before it recorded them."""

SCORE_PANEL_KEY = "asyncweb.env.miniwob_score_panel"

logger = logging.getLogger(__name__)


def _python(*args: str, log: Path) -> None:
    """Run ``python -m ARGS`` with its output in ``log``; raises if it fails."""
    with log.open("w") as out:
        returncode = subprocess.run([sys.executable, "-m", *args], stdout=out, stderr=subprocess.STDOUT).returncode
    if returncode != 0:
        raise RuntimeError(f"python -m {' '.join(args)} failed with {returncode}; see {log}")


def demos_args(
    instances: int, out: Path, tasks: str | None, overrides: list[str], recipe: str = "laptop_learning"
) -> list[str]:
    """Arguments of ``verl_asyncweb.learning.demos`` for the bench's demonstrations."""
    return [
        f"--recipe={recipe}",
        f"--instances={instances}",
        f"--out={out}",
        *([f"--tasks={tasks}"] if tasks else []),
        *overrides,
    ]


def evaluation_settings(
    config: DictConfig, recipe: str, overrides: Sequence[str], eval_instances: int, temperature: float
) -> dict:
    """What held-out figures depend on besides the weights, as ``results.json`` records them: recipe, overrides,
    instances, temperature, and whether observations showed MiniWoB++'s score panel (as ``config``, the recipe
    composed with the overrides, has it; recorded on its own, so that a record from before the key existed is
    continued by setting it)."""
    return {
        "recipe": recipe,
        "recipe_overrides": [o for o in overrides if o.split("=", 1)[0].lstrip("+~") != SCORE_PANEL_KEY],
        "eval_instances": eval_instances,
        "temperature": temperature,
        "miniwob_score_panel": bool(config.asyncweb.env.miniwob_score_panel),
    }


def check_score_panel(manifest: dict, evaluation: dict, where: Path) -> None:
    """Refuse demonstrations (and so the warm start trained on them) whose observations showed MiniWoB++'s score
    panel otherwise than the evaluations and runs would (a manifest that does not say was recorded with it shown)."""
    recorded = recorded_score_panel(manifest)
    if recorded != evaluation["miniwob_score_panel"]:
        shown = "shown" if recorded else "hidden"
        raise SystemExit(
            f"{where}: the demonstrations were recorded with MiniWoB++'s score panel {shown}: run with --set "
            f"{SCORE_PANEL_KEY}={str(recorded).lower()}, or give another --out"
        )


def checked_trainer(config: DictConfig, recipe: str, overrides: Sequence[str] = ()) -> DictConfig:
    """The ``trainer`` settings of ``config`` (``recipe`` composed with the ``--set`` overrides; an arm's RL steps
    when ``--rl-steps`` is not given: ``total_training_steps``); refused, before anything runs, when they save no
    checkpoint (an arm is evaluated at its saved checkpoint, and an interrupted one goes on from its latest)."""
    trainer = config.trainer
    if trainer.save_freq <= 0:
        raise SystemExit(
            f"trainer.save_freq is {trainer.save_freq} in {recipe} with {list(overrides)}: bench learning needs "
            "saved checkpoints (set it > 0, e.g. --set trainer.save_freq=10)"
        )
    return trainer


def warm_start_args(demos: Path, model: Path, size: str, steps: int | None, recipe: str) -> list[str]:
    """Arguments of ``verl_asyncweb.learning.warm_start``: ``steps``, or the recipe's :data:`WARM_STEPS` (200 for
    a recipe without one)."""
    steps = steps or WARM_STEPS.get(recipe, 200)
    return [f"--demos={demos}", f"--out={model}", f"--size={size}", f"--steps={steps}"]


def _evaluate(
    path: Path,
    instances: int,
    temperature: float,
    log: Path,
    step: int | None = None,
    overrides: Sequence[str] = (),
    recipe: str = "laptop_learning",
) -> dict:
    """Held-out evaluation of a model folder (with the recipe ``overrides``), or of checkpoint ``step`` of a run
    folder; a result already written (next to that checkpoint) with the same overrides is reused."""
    folder = path / f"global_step_{step}" if step is not None else path
    out = output_file(folder, "held-out", temperature)
    if not out.exists() or json.loads(out.read_text()).get("overrides", []) != list(overrides):
        _python(
            "verl_asyncweb.evaluate",
            str(path),
            f"--recipe={recipe}",
            *([f"--step={step}"] if step is not None else []),
            f"--instances={instances}",
            f"--temperature={temperature}",
            *(f"--set={override}" for override in overrides),
            f"--out={out}",
            log=log,
        )
    return json.loads(out.read_text())


def wall_by_step(run_dir: Path) -> dict[int, float]:
    """Training wall time (s) at each logged step, continuous over resumed attempts (see
    :func:`verl_asyncweb.compare.runs.read_metrics`)."""
    return dict(read_metrics(metrics_files(run_dir))[0].get(WALL_S, []))


def arm_command(
    run_dir: Path, model: Path, steps: int, overrides: Sequence[str], recipe: str, every_checkpoint: bool
) -> list[str]:
    """The ``verl_asyncweb.main`` command of an arm: the recipe from the warm start for ``steps`` steps, saving at
    the recipe's ``trainer.save_freq`` and the last step, so that an interrupted arm goes on from its latest
    checkpoint; all are kept when ``every_checkpoint`` (each is evaluated), else only the latest. ``overrides``
    (the user's ``--set``, then the arm's) come last and win."""
    keep = [] if every_checkpoint else ["trainer.max_actor_ckpt_to_keep=1"]
    return [
        sys.executable,
        "-m",
        "verl_asyncweb.main",
        f"recipe={recipe}",
        f"actor_rollout_ref.model.path={model}",
        f"trainer.default_local_dir={run_dir}",
        f"trainer.total_training_steps={steps}",
        *keep,
        *overrides,
    ]


def run_arm(
    name: str,
    overrides: list[str],
    model: Path,
    out: Path,
    steps: int,
    recipe_overrides: list[str],
    recipe: str = "laptop_learning",
    every_checkpoint: bool = False,
) -> dict:
    """One RL run (folder ``out/name``) from the warm start, or the rest of it up to ``steps`` when a shorter one
    exists (verl resumes from its latest checkpoint); returns its wall time, throughput and peak memory."""
    run_dir = out / name
    summary = run_dir / "summary.json"
    if not summary.exists() or json.loads(summary.read_text())["last_step"] < steps:
        command = arm_command(run_dir, model, steps, [*recipe_overrides, *overrides], recipe, every_checkpoint)
        memory = run_dir / "bench_memory.json"
        earlier = json.loads(memory.read_text())["peak_used_mib"] if memory.exists() else 0
        sampler = run_sampled(command, out / f"{name}.log", f"arm {name}")
        memory.write_text(json.dumps({"peak_used_mib": max(earlier, sampler.peak_used_mib)}))
    data = RunFolder(run_dir).read_metrics()
    walls = wall_by_step(run_dir)
    wall = walls[max(data)]
    trajectories = sum(d.get("asyncweb/trained_trajectories", 0) for d in data.values())
    members = [d[BRANCH_MEMBERS] for d in data.values() if BRANCH_MEMBERS in d]
    counted = all(ENV_STEPS in d for d in data.values())
    cumulative = list(itertools.accumulate(data[step][ENV_STEPS] for step in sorted(data))) if counted else []
    return {
        "arm": name,
        "steps": max(data),
        "rl_wall_s": round(wall, 1),
        "trained_trajs_per_hour": round(trajectories / max(wall, 1e-6) * 3600, 1),
        "train_success_first": data[min(data)].get("asyncweb/success_rate"),
        "train_success_last": data[max(data)].get("asyncweb/success_rate"),
        "curve": [(walls[step], d.get("asyncweb/success_rate")) for step, d in sorted(data.items()) if step in walls],
        # Policy steps (a run from before the metric existed has none): equal-environment-step reads.
        "env_steps": cumulative[-1] if counted else None,
        # [step, policy steps played up to it]: held-out checkpoints read at equal environment steps.
        "env_steps_by_step": [[step, total] for step, total in zip(sorted(data), cumulative, strict=True)]
        if counted
        else None,
        # Branch rollouts: episodes that played on from their group's restored branch point, per training step.
        "branch_members_per_step": sum(members) / len(members) if members else None,
        **json.loads((run_dir / "bench_memory.json").read_text()),
    }


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


def _outcomes(evaluation: dict) -> list:
    """The held-out outcomes to record: per instance (:mod:`verl_asyncweb.learning.outcomes`) as the evaluation
    wrote them; one number, the rate, for an evaluation written without them."""
    if "outcomes" in evaluation:
        return outcomes_to_json(read_outcomes(evaluation["outcomes"]))
    return [float(evaluation["success"])]


def _successes(recorded: list) -> list[float]:
    """The successes (0/1) of recorded outcomes: per-instance records, or successes as older records hold them."""
    return [float(o["success"]) if isinstance(o, dict) else float(o) for o in recorded]


def _instances(recorded: list) -> dict:
    """Instance -> success of recorded per-instance outcomes (empty for older records: nothing to pair)."""
    return by_instance(read_outcomes([o for o in recorded if isinstance(o, dict)]))


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


_NO_PAIRS = Interval(math.nan, math.nan, math.nan, 0, 0)
"""A pair of arms without instances to pair (records written before per-instance outcomes)."""


def _seed(run: dict) -> int:
    return int(run.get("seed", 0))


def _format_paired(interval: Interval) -> str:
    if interval.seeds == 0:
        return "n/a | n/a"
    return f"{interval.mean:+.3f} [{interval.low:+.3f}, {interval.high:+.3f}] | {'yes' if interval.resolved else 'no'}"


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


def _table(record: dict) -> str:
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


def weights_digest(model: Path) -> str:
    """SHA-256 over a model folder's ``*.safetensors`` files (name, size, bytes): which warm start the arms
    trained from."""
    files = sorted(model.glob("*.safetensors"))
    if not files:
        raise SystemExit(f"{model} holds no *.safetensors weights")
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.name}\0{path.stat().st_size}\0".encode())
        with path.open("rb") as weights:
            while chunk := weights.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()


def runs_by_arm(runs: Iterable[dict]) -> dict[str, list[dict]]:
    """``runs`` grouped by arm, in the order the arms first appear."""
    by_arm: dict[str, list[dict]] = {}
    for run in runs:
        by_arm.setdefault(run["arm"], []).append(run)
    return by_arm


def by_arm_and_seed(runs: Iterable[dict]) -> list[dict]:
    """``runs`` grouped by arm (in the order the arms first appear), each arm's by seed."""
    return [run for group in runs_by_arm(runs).values() for run in sorted(group, key=lambda r: r.get("seed", 0))]


def _same_value(got, text: str) -> bool:
    """Whether a resolved config value is what the override ``key=text`` sets."""
    want = yaml.safe_load(text)
    if isinstance(got, int | float) and not isinstance(got, bool):
        try:
            return float(got) == float(want)
        except (TypeError, ValueError):
            return False
    return got == want


def check_arm_settings(arm: str, run_name: str, overrides: Sequence[str], recorded: dict | None, run_dir: Path) -> None:
    """Refuse to report a recorded run or continue a run folder under an arm whose overrides it was not trained
    with (an arm's definition changed since, e.g. ``sync_reinforce`` trains every group since 2026-12-06): the
    ``results.json`` entry's ``arm_overrides`` must set what ``overrides`` set (in any order), and the run folder's
    resolved ``config.yaml`` must hold each of them. An entry recorded before ``arm_overrides`` existed, without its
    folder, is refused for an arm of :data:`REDEFINED_ARMS` and not checked otherwise."""
    config_path = RunFolder(run_dir).config_path
    if recorded is not None and "arm_overrides" in recorded:
        if _as_settings(recorded["arm_overrides"]) != _as_settings(overrides):
            raise SystemExit(
                f"{run_name} is recorded with the overrides {recorded['arm_overrides']}, but its arm now sets "
                f"{list(overrides)}: rename its folder and results.json entry, or use another --out"
            )
    elif recorded is not None and arm in REDEFINED_ARMS and not config_path.exists():
        raise SystemExit(
            f"{run_name} is recorded without the overrides it was trained with and its folder is not in "
            f"{run_dir.parent}; arm {arm} changed on {REDEFINED_ARMS[arm]}: rename its results.json entry (a "
            f"sync_reinforce run from before is sync_reinforce_filtered's), or use another --out"
        )
    if not config_path.exists():
        return
    config = OmegaConf.load(config_path)
    for override in overrides:
        key, _, text = override.partition("=")
        got = OmegaConf.select(config, key, default="<unset>")
        if not _same_value(got, text):
            raise SystemExit(
                f"{run_dir} was trained with {key}={got}, but its arm now sets {override}: rename the folder and "
                "its results.json entry, or use another --out"
            )


def _as_settings(overrides: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` overrides as the settings they make (the last of a key wins, as on the command line)."""
    return dict(override.partition("=")[::2] for override in overrides)


def recorded_runs(record: dict) -> dict[str, dict]:
    """Run folder name -> the run's figures in a ``results.json`` record (a run reported before seeds existed is
    named after its arm)."""
    return {run.get("run", run["arm"]): run for run in record.get("arms", [])}


def earlier_record(results: Path, evaluation: dict) -> dict:
    """What an earlier invocation into the same ``--out`` (or on another machine) wrote ({} if nothing): its runs
    are kept and only runs it lacks are run. Refused, before any stage runs, when it was evaluated otherwise
    (``evaluation``: :func:`evaluation_settings`; their arms would not compare)."""
    if not results.exists():
        return {}
    try:
        record = json.loads(results.read_text())
    except json.JSONDecodeError as error:
        raise SystemExit(
            f"{results} is not JSON ({error}): a copy cut short? Copy it again, or give another --out"
        ) from None
    differing = [
        f"{key}: {record.get(key, EVALUATION_DEFAULTS.get(key))!r} there, {value!r} here"
        for key, value in evaluation.items()
        if record.get(key, EVALUATION_DEFAULTS.get(key)) != value
    ]
    if differing:
        panel = recorded_score_panel(record)
        only_the_panel = len(differing) == 1 and panel != evaluation["miniwob_score_panel"]
        hint = f"run with --set {SCORE_PANEL_KEY}={str(panel).lower()}, or " if only_the_panel else ""
        raise SystemExit(f"{results} was evaluated otherwise ({'; '.join(differing)}): {hint}give another --out")
    if "warm_start_digest" not in record and record.get("arms"):
        logger.warning("%s records no warm-start digest (written before it did): its runs are kept unchecked", results)
    return record


def write_record(results: Path, record: dict) -> None:
    """Write ``results.json`` whole or not at all (the runs it records took hours): into a partial file first,
    which then replaces it."""
    partial = results.with_suffix(".partial")
    with partial.open("w") as out:
        json.dump(record, out, indent=1)
        out.flush()
        os.fsync(out.fileno())
    partial.replace(results)


def check_weights(record: dict, digest: str, results: Path, made_here: bool = False) -> None:
    """Refuse a ``results.json`` record whose runs trained from other warm-start weights than ``digest`` (those of
    a warm start ``made_here`` by this invocation, or of one found in ``--out``)."""
    earlier = record.get("warm_start_digest")
    if earlier is None or earlier == digest:
        return
    weights = f"sha256 {earlier[:12]}, these {digest[:12]}"
    if made_here:
        raise SystemExit(
            f"the warm start made again here is other weights than the one {results} holds runs of ({weights}); "
            "demonstrations recorded again come out the same only with MiniWoB++'s score panel hidden and a "
            "deterministic page clock: copy that warm_start folder here in place of this one, give another --out, "
            "or move results.json away to start over"
        )
    raise SystemExit(
        f"{results} holds runs trained from other warm-start weights ({weights}): copy its warm_start folder here, "
        "give another --out, or move results.json away to start over"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_asyncweb.bench learning", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/bench_learning"))
    parser.add_argument("--size", default="small", help="offline model size of the warm start")
    parser.add_argument("--instances", type=int, default=100, help="demonstrated instances per task")
    parser.add_argument(
        "--demo-tasks",
        default=None,
        help="task sources to demonstrate, or 'all' (the recipe's training tasks); RL always trains on the recipe's, "
        f"so tasks left out here are learned from the reward alone (default, per recipe: {DEMO_TASKS})",
    )
    parser.add_argument(
        "--warm-steps",
        type=int,
        default=None,
        help=f"supervised warm-start steps (default, per recipe: {WARM_STEPS}; a partial warm start for one-action "
        "episodes, five passes over the demonstrations for multi-step ones)",
    )
    parser.add_argument(
        "--rl-steps",
        type=int,
        default=None,
        help="RL steps per arm (default: the recipe's trainer.total_training_steps)",
    )
    parser.add_argument("--eval-instances", type=int, default=10, help="held-out instances per task")
    parser.add_argument("--temperature", type=float, default=0.7, help="evaluation temperature (the rollout's)")
    parser.add_argument("--arms", default="rl,control", help=f"comma-separated, from {list(ARMS)}")
    parser.add_argument(
        "--seeds", type=int, default=1, help="sampling/data seeds per arm, all from the one warm start (default: 1)"
    )
    parser.add_argument(
        "--recipe",
        default="laptop_learning",
        help="the RL recipe (its tasks and agent settings are demonstrated and evaluated): laptop_learning "
        "(one action per episode) or laptop_multistep (default: %(default)s)",
    )
    parser.add_argument(
        "--eval-checkpoints",
        action="store_true",
        help="keep and evaluate every saved checkpoint of each arm (trainer.save_freq), not only the last",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override of the recipe for the demonstrations, evaluations and every arm (repeatable), e.g. "
        "asyncweb.agent.click_target=coordinate",
    )
    args = parser.parse_args(argv)
    unknown = [arm for arm in args.arms.split(",") if arm not in ARMS]
    if unknown:
        parser.error(f"unknown arms {unknown}; valid arms are {list(ARMS)}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args.out.mkdir(parents=True, exist_ok=True)
    demos, model = args.out / "demos", args.out / "warm_start"
    config = compose_recipe(args.recipe, args.set)
    evaluation = evaluation_settings(config, args.recipe, args.set, args.eval_instances, args.temperature)
    trainer = checked_trainer(config, args.recipe, args.set)
    earlier = earlier_record(args.out / "results.json", evaluation)

    from verl_asyncweb.learning.warm_start import DEMOS_MANIFEST_FILE, WARM_START_FILE

    made_here = not (model / WARM_START_FILE).exists()
    if made_here:
        if "warm_start_digest" in earlier:
            logger.info(
                "%s holds runs of the warm start sha256 %s, which %s does not hold: making it again (kept only if it "
                "comes out as the same weights)",
                args.out / "results.json",
                earlier["warm_start_digest"][:12],
                model,
            )
        if not (demos / "manifest.json").exists():
            demo_tasks = args.demo_tasks or DEMO_TASKS.get(args.recipe, "all")
            demo_tasks = None if demo_tasks == "all" else demo_tasks
            logger.info("demonstrations -> %s (log: %s)", demos, args.out / "demos.log")
            _python(
                "verl_asyncweb.learning.demos",
                *demos_args(args.instances, demos, demo_tasks, args.set, args.recipe),
                log=args.out / "demos.log",
            )
        # Refused before training a warm start on them.
        check_score_panel(json.loads((demos / "manifest.json").read_text()), evaluation, demos)
        logger.info("warm start -> %s (log: %s)", model, args.out / "warm_start.log")
        _python(
            "verl_asyncweb.learning.warm_start",
            *warm_start_args(demos, model, args.size, args.warm_steps, args.recipe),
            log=args.out / "warm_start.log",
        )
    # The warm start keeps a copy of its demonstrations' manifest: a carried one comes without the demonstrations.
    manifest_path = model / DEMOS_MANIFEST_FILE if (model / DEMOS_MANIFEST_FILE).exists() else demos / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    check_score_panel(manifest, evaluation, model)
    warm = json.loads((model / WARM_START_FILE).read_text())
    digest = weights_digest(model)
    check_weights(earlier, digest, args.out / "results.json", made_here)
    same_weights = earlier.get("warm_start_digest") == digest
    if same_weights and all(key in earlier for key in HELD_OUT_BEFORE):
        # The same weights, evaluated when the kept runs were: their gains are read against that draw.
        held_out_before = {key: earlier[key] for key in HELD_OUT_BEFORE}
    else:
        logger.info("held-out evaluation of the warm start (log: %s)", args.out / "eval_warm_start.log")
        before = _evaluate(
            model,
            args.eval_instances,
            args.temperature,
            args.out / "eval_warm_start.log",
            overrides=args.set,
            recipe=args.recipe,
        )
        figures = (before["success"], before["success_by_task"], before.get("steps_to_success_by_task"))
        held_out_before = dict(zip(HELD_OUT_BEFORE, (*figures, _outcomes(before)), strict=True))
    stage_times = {"demo_s": manifest["record_s"], "warm_start_s": warm["train_s"]}
    if made_here and same_weights:
        # Made again the same: the record keeps the times of the stages its runs came from.
        logger.info("made again here in %.0f s (demonstrations) and %.0f s (warm start)", *stage_times.values())
        stage_times = {key: earlier.get(key, value) for key, value in stage_times.items()}
    runs = [(name, seed) for name in args.arms.split(",") for seed in range(args.seeds)]
    rl_steps = args.rl_steps or trainer.total_training_steps
    record = {
        "demo_episodes": manifest["episodes"],
        "demo_steps": manifest["steps"],
        "demo_s": stage_times["demo_s"],
        "demo_tasks": sorted({name for name, _ in manifest["instances"]}),
        "warm_start_steps": warm["steps"],
        "warm_start_s": stage_times["warm_start_s"],
        "warm_start_loss_first": warm["loss_first"],
        "warm_start_loss_last": warm["loss_last"],
        "warm_start_digest": digest,
        **evaluation,
        **held_out_before,
    }
    arms = recorded_runs(earlier)
    for run_name, entry in arms.items():  # every recorded run is reported, not only those of --arms
        arm, seed = entry.get("arm", run_name), int(entry.get("seed", 0))
        if arm in ARMS:
            overrides = [*ARMS[arm], *seed_overrides(seed)]
            check_arm_settings(arm, run_name, overrides, entry, args.out / run_name)
    for name, seed in runs:
        run_name = arm_run_name(name, seed)
        overrides = [*ARMS[name], *seed_overrides(seed)]
        if run_name not in arms:  # a folder this command continues (recorded runs were checked above)
            check_arm_settings(name, run_name, overrides, None, args.out / run_name)
        if run_name in arms and not (args.out / run_name).exists():
            if arms[run_name]["steps"] != rl_steps:
                raise SystemExit(
                    f"{run_name} is recorded at {arms[run_name]['steps']} steps, not {rl_steps}, and its folder is "
                    f"not in {args.out} to continue it: give --rl-steps {arms[run_name]['steps']} or another --out"
                )
            logger.info("%s: kept as results.json records it (no run folder here)", run_name)
            continue
        logger.info("%s: to %d RL steps (log: %s)", run_name, rl_steps, args.out / f"{run_name}.log")
        result = run_arm(
            run_name,
            overrides,
            model,
            args.out,
            rl_steps,
            args.set,
            args.recipe,
            every_checkpoint=args.eval_checkpoints,
        )
        run_dir, walls = args.out / run_name, wall_by_step(args.out / run_name)
        saved = checkpoint_steps(run_dir)
        if not saved:
            raise RuntimeError(f"{run_dir} saved no checkpoint to evaluate (trainer.save_freq must be > 0)")
        curve = [(0.0, 0, record["held_out_before"])]
        for step in saved if args.eval_checkpoints else saved[-1:]:
            logger.info("%s: held-out evaluation of step %d", run_name, step)
            after = _evaluate(run_dir, args.eval_instances, args.temperature, args.out / f"eval_{run_name}.log", step)
            curve.append((walls[step], step, after["success"]))
        result.update(
            arm=name,
            seed=seed,
            run=run_name,
            arm_overrides=overrides,
            held_out_step=saved[-1],
            held_out_after=after["success"],
            held_out_after_by_task=after["success_by_task"],
            held_out_after_steps_by_task=after.get("steps_to_success_by_task"),
            held_out_after_outcomes=_outcomes(after),
            held_out_steps_to_success=after["metrics"].get(STEPS_PER_TRAJ_SUCCESS),
            held_out_invalid_action_rate=after["metrics"].get(INVALID_ACTION_RATE),
            held_out_curve=curve,
        )
        arms[run_name] = result
        record["arms"] = by_arm_and_seed(arms.values())
        write_record(args.out / "results.json", record)
    record["arms"] = by_arm_and_seed(arms.values())
    plot(record["arms"], record["held_out_before"], args.out / "success_vs_wall.png")
    plot_env_steps(record["arms"], record["held_out_before"], args.out / "success_vs_env_steps.png")
    print(_table(record))
    return 0
