"""``python -m verl_asyncweb.bench plan_check --e2e-dir DIR``: the capacity planner against ``bench e2e``'s arms.

Records a planner profile from the arms of one ``bench e2e`` invocation as ``bench profile`` does: component costs
from ``--profile-arm`` (default ``sync``, where rollout and trainer never run at once) and, on a machine where they
share compute, ``trainer.rollout_contention`` from ``--contended-arm`` (default ``async``). Then it predicts every
arm from that profile with the arm's own shape (its ``config.yaml``: mode, staleness, batch, pages, web latency)
in steady state, and sets each prediction beside what the arm measured over its steps after start-up: trained
trajectories/h (within ``TRAJS_PER_HOUR_TOLERANCE``) and trainer idle (mean over steps, within
``TRAINER_IDLE_TOLERANCE``). Writes ``DIR/plan_check.json`` and ``DIR/plan_profile.yaml``; starts nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from verl_asyncweb.bench.e2e import arm_run_dir
from verl_asyncweb.bench.profile import (
    DEFAULT_ENV_STEP_S,
    ENV_STEP_SOURCE,
    MeasuredFigures,
    env_cost,
    measured_figures,
    pipeline_shape,
    profile_from_run,
    used_steps,
)
from verl_asyncweb.plan.prediction import Prediction
from verl_asyncweb.plan.profile import Profile
from verl_asyncweb.plan.profile_file import dump_profile
from verl_asyncweb.plan.simulate import simulate

logger = logging.getLogger(__name__)

TRAJS_PER_HOUR_TOLERANCE = 0.15
"""Accepted |predicted / measured - 1| of trained trajectories per hour."""
TRAINER_IDLE_TOLERANCE = 0.1
"""Accepted |predicted - measured| trainer-idle fraction."""
PREDICTED_STEPS = 300
"""Simulated training steps after start-up: the model's expectation. A bench arm's few steps are one sample of a
heavy-tailed process (a sync step waits for the slowest of its episodes); simulating only those steps would give
a second, independent sample (seeded), not the prediction."""


@dataclass(frozen=True)
class ArmCheck:
    """One arm: what it measured and what the planner predicts for it."""

    arm: str
    measured: MeasuredFigures
    predicted: Prediction

    @property
    def trajs_error(self) -> float:
        return self.predicted.trained_trajs_per_hour / self.measured.trained_trajs_per_hour - 1

    @property
    def idle_error(self) -> float:
        return self.predicted.trainer_idle_frac - self.measured.trainer_idle_frac_mean

    @property
    def within(self) -> bool:
        return abs(self.trajs_error) <= TRAJS_PER_HOUR_TOLERANCE and abs(self.idle_error) <= TRAINER_IDLE_TOLERANCE

    def as_dict(self) -> dict:
        return {
            "arm": self.arm,
            "measured": dataclasses.asdict(self.measured),
            "predicted": {
                "trained_trajs_per_hour": self.predicted.trained_trajs_per_hour,
                "finished_trajs_per_hour": self.predicted.finished_trajs_per_hour,
                "trainer_idle_frac": self.predicted.trainer_idle_frac,
                "rollout_idle_frac": self.predicted.rollout_idle_frac,
                "policy_lag_mean": self.predicted.policy_lag_mean,
                "step_s": self.predicted.step_s,
            },
            "trained_trajs_per_hour_error": self.trajs_error,
            "trainer_idle_error": self.idle_error,
            "within_tolerance": self.within,
        }


def arm_dirs(e2e_dir: Path) -> dict[str, Path]:
    """The arms of a ``bench e2e`` folder in their run order (``results.json``), by arm name."""
    results_path = e2e_dir / "results.json"
    if not results_path.is_file():
        raise ValueError(f"{e2e_dir} has no results.json; is it a `python -m verl_asyncweb.bench e2e --out` folder?")
    arms = [result["arm"] for result in json.loads(results_path.read_text())]
    return {arm: arm_run_dir(e2e_dir, arm) for arm in arms}


def profile_for_arm(costs: Profile, run_dir: Path, skip_steps: int) -> Profile:
    """``costs`` with the pipeline shape and web latency of the run in ``run_dir``, simulated in steady state."""
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    pipeline, _ = pipeline_shape(config)
    env, _ = env_cost(config, costs.env.step_s, "", costs.env.episode_end_s)
    sim = dataclasses.replace(costs.sim, train_steps=skip_steps + PREDICTED_STEPS, warmup_steps=skip_steps)
    return dataclasses.replace(costs, pipeline=pipeline, env=env, sim=sim)


def check_arms(
    e2e_dir: Path,
    profile_arm: str,
    contended_arm: str | None,
    skip_steps: int,
    env_step_s: float,
    env_step_source: str,
) -> tuple[Profile, dict[str, str], list[ArmCheck]]:
    """The profile recorded from ``profile_arm`` and ``contended_arm`` (with its sources) and every arm's check."""
    arms = arm_dirs(e2e_dir)
    for flag, arm in (("--profile-arm", profile_arm), ("--contended-arm", contended_arm)):
        if arm is not None and arm not in arms:
            raise ValueError(f"{flag} {arm!r} is not an arm of {e2e_dir}; its arms: {', '.join(arms)}")
    contended_dir = arms[contended_arm] if contended_arm else None
    costs, sources, _ = profile_from_run(
        arms[profile_arm], skip_steps, env_step_s, env_step_source, 0.0, contended_run_dir=contended_dir
    )
    checks = []
    for arm, run_dir in arms.items():
        run = used_steps(run_dir, skip_steps)
        measured = measured_figures(run, costs.pipeline.group_size)
        checks.append(ArmCheck(arm, measured, simulate(profile_for_arm(costs, run_dir, skip_steps))))
    return costs, sources, checks


def format_checks(checks: list[ArmCheck], costs: Profile, profile_arm: str, contended_arm: str | None) -> str:
    contention = f", rollout contention {costs.trainer.rollout_contention:.2f} from the {contended_arm} arm"
    lines = [
        f"planner (costs recorded from the {profile_arm} arm{contention if contended_arm else ''}) vs each arm's "
        f"measurement (steps after start-up; the prediction: {PREDICTED_STEPS} simulated steps)",
        "",
        "| arm | trained traj/h measured | predicted | error | trainer idle measured (mean) | predicted | error "
        "| within ±15% and ±0.1 |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for check in checks:
        lines.append(
            f"| {check.arm} | {check.measured.trained_trajs_per_hour:.0f} | "
            f"{check.predicted.trained_trajs_per_hour:.0f} | {check.trajs_error:+.1%} | "
            f"{check.measured.trainer_idle_frac_mean:.2f} | {check.predicted.trainer_idle_frac:.2f} | "
            f"{check.idle_error:+.2f} | {'yes' if check.within else 'no'} |"
        )
    return "\n".join(lines)


def run_check(
    e2e_dir: Path,
    profile_arm: str = "sync",
    contended_arm: str | None = "async",
    skip_steps: int = 1,
    env_step_s: float | None = None,
) -> str:
    """Check every arm of ``e2e_dir``, write ``plan_check.json`` and ``plan_profile.yaml`` there; returns the table."""
    source = ENV_STEP_SOURCE if env_step_s is None else "--env-step-s"
    costs, sources, checks = check_arms(
        e2e_dir,
        profile_arm,
        contended_arm,
        skip_steps,
        DEFAULT_ENV_STEP_S if env_step_s is None else env_step_s,
        source,
    )
    header = [
        f"{costs.name}: planner profile recorded from the arms of {e2e_dir} by",
        f"`python -m verl_asyncweb.bench plan_check --e2e-dir {e2e_dir}`: component costs from the {profile_arm} arm"
        + (f", trainer.rollout_contention from the {contended_arm} arm" if contended_arm else ""),
        *(
            f"  {check.arm}: measured trained trajectories/h {check.measured.trained_trajs_per_hour:.0f}, trainer idle "
            f"(mean) {check.measured.trainer_idle_frac_mean:.3f}"
            for check in checks
        ),
        "",
    ]
    (e2e_dir / "plan_profile.yaml").write_text(dump_profile(costs, sources, header))
    report = {
        "profile_arm": profile_arm,
        "contended_arm": contended_arm,
        "skip_steps": skip_steps,
        "arms": [check.as_dict() for check in checks],
    }
    (e2e_dir / "plan_check.json").write_text(json.dumps(report, indent=2))
    return format_checks(checks, costs, profile_arm, contended_arm)


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(
        prog="python -m verl_asyncweb.bench plan_check", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--e2e-dir", type=Path, required=True, help="a `bench e2e --out` folder")
    parser.add_argument(
        "--profile-arm", default="sync", help="the arm whose component costs the planner uses (default sync)"
    )
    parser.add_argument(
        "--contended-arm",
        default="async",
        help="the arm whose trainer shared compute with rollout, to fit trainer.rollout_contention (default "
        "async; 'none': separate devices)",
    )
    parser.add_argument("--skip-steps", type=int, default=1, help="start-up steps left out (default 1, as bench e2e)")
    parser.add_argument(
        "--env-step-s", type=float, help=f"browser seconds per step (default {DEFAULT_ENV_STEP_S}: {ENV_STEP_SOURCE})"
    )
    args = parser.parse_args(argv)
    try:
        contended_arm = None if args.contended_arm == "none" else args.contended_arm
        print(run_check(args.e2e_dir, args.profile_arm, contended_arm, args.skip_steps, args.env_step_s))
    except (OSError, ValueError, KeyError) as exc:
        sys.stderr.write(f"python -m verl_asyncweb.bench plan_check: error: {exc}\n")
        return 2
    logger.info("wrote %s and %s", args.e2e_dir / "plan_check.json", args.e2e_dir / "plan_profile.yaml")
    return 0
