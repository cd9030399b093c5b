"""An arm's RL run: its ``verl_asyncweb.main`` command, running or continuing it, and the figures read from its
run folder (wall time, throughput, environment steps, branch members, peak memory)."""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig

from verl_asyncweb.bench.e2e import run_sampled
from verl_asyncweb.compare.metric_names import BRANCH_MEMBERS, ENV_STEPS, WALL_S
from verl_asyncweb.compare.runs import metrics_files, read_metrics
from verl_asyncweb.run_folder import RunFolder


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
