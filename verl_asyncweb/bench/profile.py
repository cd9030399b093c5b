"""``python -m verl_asyncweb.bench profile --run-dir RUN_DIR [--out FILE]``: a capacity-planner profile of a run.

Reads only ``RUN_DIR/config.yaml`` and ``RUN_DIR/metrics*.jsonl`` and writes a profile for
``python -m verl_asyncweb.plan`` with a ``# sources:`` comment on every value; starts nothing. The first
``--skip-steps`` steps (start-up) are left out. What the metrics cannot tell is said in the comments:

- rollout: each replica is modelled as an effective serial server whose per-request time is its measured busy
  time (``1 - asyncweb/rollout_idle_frac`` of each step's wall time, times the replicas) per generation request, all
  of it put on the response tokens (the metrics do not separate prefill from decode). The ``hf`` server generates
  one request at a time, so for CPU runs this is what it does.
- environment: the metrics hold no browser time; ``--env-step-s`` and ``--episode-end-s`` supply it.
- success spread: when dynamic sampling discarded more groups than p^n + (1-p)^n (tasks differ in difficulty),
  ``workload.success_concentration`` is fitted so that the model discards the measured fraction.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from verl_asyncweb.plan.profile import (
    EnvCost,
    LatencySpec,
    PipelineShape,
    Profile,
    RolloutCost,
    SimSettings,
    TrainerCost,
    Workload,
)
from verl_asyncweb.plan.profile_file import dump_profile
from verl_asyncweb.plan.workload import expected_discard_prob
from verl_asyncweb.run_folder import RunFolder

logger = logging.getLogger(__name__)

DEFAULT_ENV_STEP_S = 0.15
ENV_STEP_SOURCE = "docs/benchmarks.md 'Browser pool': our pool, 4 pages, 27.1 steps/s (0.15 s per step per page)"
SUCCESS_RATE = "asyncweb/success_rate"

Sources = dict[str, str]


def config_value(config: dict, dotted: str) -> Any:
    """``config[a][b]...`` for ``"a.b..."``; raises naming the key when it is missing."""
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ValueError(f"config.yaml has no {dotted}; is this a verl_asyncweb run folder?")
        node = node[part]
    return node


def _metric(data: dict, key: str, step: int) -> float:
    if key not in data:
        raise ValueError(f"metrics of step {step} have no {key}; the planner profile needs it")
    return float(data[key])


def _weighted_mean(pairs: list[tuple[float, float]]) -> float | None:
    total = sum(weight for _, weight in pairs)
    return sum(value * weight for value, weight in pairs) / total if total > 0 else None


def _independent_discard(success_prob: float, group_size: int, kappa: float | None = None) -> float:
    workload = Workload(
        success_prob=success_prob,
        success_concentration=kappa,
        steps_success=1,
        steps_failure=1,
        max_steps=1,
        prompt_tokens_per_step=0,
        response_tokens_success=1,
        response_tokens_failure=1,
    )
    return expected_discard_prob(workload, group_size)


def fit_success_concentration(success_prob: float, group_size: int, discard_frac: float) -> float | None:
    """Beta concentration kappa whose expected discard fraction is ``discard_frac``; ``None`` when independent
    episodes already discard that much (kappa -> infinity)."""
    if not 0.0 < success_prob < 1.0 or discard_frac <= _independent_discard(success_prob, group_size):
        return None
    low, high = -3.0, 6.0  # log10 kappa; the discard fraction falls as kappa grows
    if _independent_discard(success_prob, group_size, 10**low) <= discard_frac:
        return 10**low
    for _ in range(80):
        mid = (low + high) / 2
        if _independent_discard(success_prob, group_size, 10**mid) > discard_frac:
            low = mid
        else:
            high = mid
    return 10 ** ((low + high) / 2)


@dataclass(frozen=True)
class MeasuredFigures:
    """What the run measured over the used steps, to set the planner's prediction against."""

    trained_trajs_per_hour: float
    finished_trajs_per_hour: float
    trainer_idle_frac_mean: float
    rollout_idle_frac_median: float
    group_discard_frac: float
    policy_lag_mean: float

    def header_lines(self) -> list[str]:
        return [
            f"  trained trajectories/h {self.trained_trajs_per_hour:.0f}, finished {self.finished_trajs_per_hour:.0f}",
            f"  trainer idle fraction (mean over steps) {self.trainer_idle_frac_mean:.3f}, rollout idle fraction "
            f"(median) {self.rollout_idle_frac_median:.3f}",
            f"  groups discarded by dynamic sampling {self.group_discard_frac:.3f}, policy lag mean "
            f"{self.policy_lag_mean:.2f}",
        ]


@dataclass(frozen=True)
class RunSteps:
    """The used steps of a run; ``start_s`` is the wall time at which the first of them began."""

    rows: list[tuple[int, dict]]
    start_s: float

    @property
    def span(self) -> str:
        return f"steps {self.rows[0][0]}-{self.rows[-1][0]}"

    @property
    def window_s(self) -> float:
        return self.values("asyncweb/wall_s")[-1] - self.start_s

    def values(self, key: str) -> list[float]:
        return [_metric(data, key, step) for step, data in self.rows]

    def durations_s(self) -> list[float]:
        """Wall time of each used step."""
        walls = [self.start_s, *self.values("asyncweb/wall_s")]
        return [end - start for start, end in zip(walls[:-1], walls[1:], strict=True)]


def used_steps(run_dir: Path, skip_steps: int) -> RunSteps:
    steps = RunFolder(run_dir).read_metrics()
    ordered = sorted(steps)
    if len(ordered) <= skip_steps:
        raise ValueError(f"{run_dir} has {len(ordered)} logged steps; --skip-steps {skip_steps} leaves none")
    start_s = _metric(steps[ordered[skip_steps - 1]], "asyncweb/wall_s", ordered[skip_steps - 1]) if skip_steps else 0
    return RunSteps(rows=[(s, steps[s]) for s in ordered[skip_steps:]], start_s=start_s)


def measured_figures(run: RunSteps, group_size: int) -> MeasuredFigures:
    finished = sum(run.values("asyncweb/trajectories"))
    trained = sum(run.values("asyncweb/trained_trajectories"))
    # verl's filter_groups/evicted_samples counts prompt groups (on runs/bl4/rl, trajectories = n x (evicted +
    # trained groups) up to those in flight).
    discarded_groups = sum(data.get("training/filter_groups/evicted_samples", 0.0) for _, data in run.rows)
    return MeasuredFigures(
        trained_trajs_per_hour=trained / run.window_s * 3600,
        finished_trajs_per_hour=finished / run.window_s * 3600,
        trainer_idle_frac_mean=statistics.fmean(run.values("asyncweb/trainer_idle_frac")),
        rollout_idle_frac_median=statistics.median(run.values("asyncweb/rollout_idle_frac")),
        group_discard_frac=discarded_groups / max(discarded_groups + trained / group_size, 1e-9),
        policy_lag_mean=statistics.fmean(data.get("asyncweb/policy_lag/mean", 0.0) for _, data in run.rows),
    )


def pipeline_shape(config: dict) -> tuple[PipelineShape, Sources]:
    keys = {
        "mode": "asyncweb.rollout_mode",
        "staleness": "asyncweb.staleness",
        "groups_per_batch": "data.train_batch_size",
        "group_size": "actor_rollout_ref.rollout.n",
        "dynamic_sampling": "asyncweb.algo.dynamic_sampling",
    }
    values = {name: config_value(config, key) for name, key in keys.items()}
    pages = config_value(config, "asyncweb.env.num_browsers") * config_value(config, "asyncweb.env.pages_per_browser")
    workers = config_value(config, "actor_rollout_ref.rollout.agent.num_workers")
    sources = {f"pipeline.{name}": f"config.yaml {key}" for name, key in keys.items()}
    sources["pipeline.max_concurrent_episodes"] = (
        "config.yaml asyncweb.env.num_browsers x asyncweb.env.pages_per_browser per agent-loop worker x "
        "actor_rollout_ref.rollout.agent.num_workers"
    )
    return PipelineShape(**values, max_concurrent_episodes=pages * workers), sources


def _by_outcome(run: RunSteps, metric: str) -> tuple[dict[str, float], Sources]:
    """Trajectory-weighted means of ``asyncweb/{metric}/{success,failure}``; a missing outcome takes the other's."""
    means, sources = {}, {}
    for outcome in ("success", "failure"):
        key = f"asyncweb/{metric}/{outcome}"
        pairs = [
            (data[key], data["asyncweb/trajectories"] * (rate if outcome == "success" else 1 - rate))
            for _, data in run.rows
            if key in data and (rate := data.get(SUCCESS_RATE)) is not None
        ]
        means[outcome] = _weighted_mean(pairs)
        sources[outcome] = f"metrics.jsonl {key}, {run.span}, weighted by trajectories of that outcome"
    for outcome, other in (("success", "failure"), ("failure", "success")):
        if means[outcome] is None:
            if means[other] is None:
                raise ValueError(f"metrics over {run.span} have no asyncweb/{metric}/* with {SUCCESS_RATE}")
            means[outcome] = means[other]
            adjective = {"success": "successful", "failure": "failed"}[outcome]
            sources[outcome] = f"no {adjective} trajectory over {run.span}: the {other} figure"
    return means, sources


def _workload(
    config: dict, run: RunSteps, pipeline: PipelineShape, measured: MeasuredFigures
) -> tuple[Workload, Sources]:
    rated = [(data[SUCCESS_RATE], data["asyncweb/trajectories"]) for _, data in run.rows if SUCCESS_RATE in data]
    success_prob = _weighted_mean(rated)
    if success_prob is None:
        raise ValueError(f"metrics over {run.span} have no {SUCCESS_RATE}")
    steps, steps_sources = _by_outcome(run, "steps_per_traj")
    tokens, tokens_sources = _by_outcome(run, "response_tokens_per_step")
    kappa = None
    if pipeline.dynamic_sampling:
        kappa = fit_success_concentration(success_prob, pipeline.group_size, measured.group_discard_frac)
    independent = _independent_discard(success_prob, pipeline.group_size)
    workload = Workload(
        success_prob=success_prob,
        success_concentration=kappa,
        steps_success=steps["success"],
        steps_failure=steps["failure"],
        max_steps=config_value(config, "asyncweb.agent.max_steps"),
        prompt_tokens_per_step=statistics.fmean(run.values("prompt_length/mean")),
        response_tokens_success=tokens["success"],
        response_tokens_failure=tokens["failure"],
    )
    sources = {
        "workload.success_prob": f"metrics.jsonl {SUCCESS_RATE}, {run.span}, weighted by finished trajectories",
        "workload.success_concentration": (
            f"fitted so that the model discards the measured {measured.group_discard_frac:.3f} of groups "
            f"(training/filter_groups/evicted_samples; independent episodes would discard {independent:.3f})"
            if kappa is not None
            else "episodes independent (no dynamic sampling, or it discarded no more than p^n + (1-p)^n)"
        ),
        "workload.steps_success": steps_sources["success"],
        "workload.steps_failure": steps_sources["failure"],
        "workload.max_steps": "config.yaml asyncweb.agent.max_steps",
        "workload.prompt_tokens_per_step": f"metrics.jsonl prompt_length/mean, mean over {run.span}",
        "workload.response_tokens_success": tokens_sources["success"],
        "workload.response_tokens_failure": tokens_sources["failure"],
    }
    return workload, sources


def env_cost(config: dict, env_step_s: float, env_step_source: str, episode_end_s: float) -> tuple[EnvCost, Sources]:
    latency_keys = ("enable", "median_s", "sigma", "max_delay_s")
    latency = LatencySpec(**{key: config_value(config, f"asyncweb.env.latency.{key}") for key in latency_keys})
    sources = {f"env.latency.{key}": f"config.yaml asyncweb.env.latency.{key}" for key in latency_keys}
    sources["env.step_s"] = env_step_source
    sources["env.episode_end_s"] = "--episode-end-s (the metrics hold no reward time)"
    return EnvCost(step_s=env_step_s, episode_end_s=episode_end_s, latency=latency), sources


def _rollout(config: dict, run: RunSteps, workload: Workload) -> tuple[RolloutCost, Sources]:
    gpus = config_value(config, "actor_rollout_ref.rollout.nnodes") * config_value(
        config, "actor_rollout_ref.rollout.n_gpus_per_node"
    )
    per_replica = config_value(config, "actor_rollout_ref.rollout.tensor_model_parallel_size")
    replicas = gpus // per_replica
    idle = run.values("asyncweb/rollout_idle_frac")
    busy_s = sum((1 - frac) * duration_s * replicas for frac, duration_s in zip(idle, run.durations_s(), strict=True))
    p = workload.success_prob
    steps_per_traj = p * workload.steps_success + (1 - p) * workload.steps_failure
    tokens_per_step = p * workload.response_tokens_success + (1 - p) * workload.response_tokens_failure
    requests = sum(run.values("asyncweb/trajectories")) * steps_per_traj
    request_s = busy_s / requests
    rollout = RolloutCost(
        gpus=gpus,
        gpus_per_replica=per_replica,
        max_concurrency=1,
        prefill_s=0.0,
        decode_s_per_token=request_s / tokens_per_step,
        concurrency_slowdown=0.0,
    )
    name = config_value(config, "actor_rollout_ref.rollout.name")
    serial = "the hf server generates one request at a time" if name == "hf" else f"effective serial {name} server"
    sources = {
        "rollout.gpus": "config.yaml actor_rollout_ref.rollout.nnodes x n_gpus_per_node",
        "rollout.gpus_per_replica": "config.yaml actor_rollout_ref.rollout.tensor_model_parallel_size",
        "rollout.max_concurrency": serial,
        "rollout.prefill_s": "not separable from decode in the metrics: all time is put on the response tokens",
        "rollout.decode_s_per_token": (
            f"busy replica-seconds (1 - asyncweb/rollout_idle_frac) x step wall time, {run.span}: {busy_s:.0f} s, "
            f"per request ({requests:.0f} = finished trajectories x mean steps) = {request_s:.3f} s, "
            f"per response token ({tokens_per_step:.1f})"
        ),
        "rollout.concurrency_slowdown": "irrelevant at max_concurrency 1",
    }
    return rollout, sources


def _trainer(config: dict, run: RunSteps) -> tuple[TrainerCost, Sources]:
    gpus = config_value(config, "trainer.nnodes") * config_value(config, "trainer.n_gpus_per_node")
    tokens = run.values("perf/total_num_tokens")

    def per_token(key: str) -> float:
        return statistics.median(t / n for t, n in zip(run.values(key), tokens, strict=True)) * gpus

    residual = [
        step - gen - pi_prox - update - sync
        for step, gen, pi_prox, update, sync in zip(
            *(run.values(f"timing_s/{k}") for k in ("step", "gen", "old_log_prob", "update_actor", "update_weights")),
            strict=True,
        )
    ]
    trainer = TrainerCost(
        gpus=gpus,
        recompute_gpu_s_per_token=per_token("timing_s/old_log_prob"),
        update_gpu_s_per_token=per_token("timing_s/update_actor"),
        overhead_s=max(statistics.median(residual), 0.0),
        weight_sync_s=statistics.median(run.values("timing_s/update_weights")),
        rollout_contention=0.0,
    )
    per_gpu = f"/ perf/total_num_tokens x trainer.gpus, median over {run.span}"
    sources = {
        "trainer.gpus": "config.yaml trainer.nnodes x trainer.n_gpus_per_node",
        "trainer.recompute_gpu_s_per_token": f"metrics.jsonl timing_s/old_log_prob {per_gpu}",
        "trainer.update_gpu_s_per_token": f"metrics.jsonl timing_s/update_actor {per_gpu}",
        "trainer.overhead_s": (
            f"metrics.jsonl timing_s/step minus gen, old_log_prob, update_actor and update_weights; median over "
            f"{run.span}"
        ),
        "trainer.weight_sync_s": f"metrics.jsonl timing_s/update_weights, median over {run.span}",
        "trainer.rollout_contention": (
            "0: the costs above are as this run measured them (with whatever sharing of compute it had); "
            "--contended-run-dir fits it"
        ),
    }
    return trainer, sources


def _compute_s_per_token(run: RunSteps) -> float:
    """Median over steps of the trainer's pi_prox + update seconds per token."""
    keys = ("timing_s/old_log_prob", "timing_s/update_actor", "perf/total_num_tokens")
    return statistics.median((a + b) / n for a, b, n in zip(*(run.values(key) for key in keys), strict=True))


def fit_rollout_contention(uncontended: RunSteps, contended: RunSteps) -> tuple[float, str]:
    """``trainer.rollout_contention`` c from two runs of one recipe on one machine, and its source line.

    ``uncontended``: rollout never generates while the trainer computes (a sync run). ``contended``: it does (an
    async run). A token costs t (1 + c f) in the contended run, f being the fraction of its trainer compute during
    which rollout generated: per step, rollout's busy seconds minus those in which the trainer waited for samples,
    over the compute seconds.
    """
    ratio = _compute_s_per_token(contended) / _compute_s_per_token(uncontended)
    overlaps = []
    for (_, data), duration_s in zip(contended.rows, contended.durations_s(), strict=True):
        compute_s = data["timing_s/old_log_prob"] + data["timing_s/update_actor"]
        busy_s = (1 - data["asyncweb/rollout_idle_frac"]) * duration_s
        waited_s = data["asyncweb/trainer_idle_frac"] * duration_s
        overlaps.append(min(max((busy_s - waited_s) / compute_s, 0.0), 1.0))
    overlap = statistics.fmean(overlaps)
    if overlap < 0.05:
        raise ValueError(
            f"rollout generated during {overlap:.0%} of the contended run's trainer compute: no contention to fit"
        )
    contention = max((ratio - 1) / overlap, 0.0)
    source = (
        f"pi_prox + update seconds per token {ratio:.3f}x those of the uncontended run ({uncontended.span}) with "
        f"rollout generating during {overlap:.2f} of the trainer's compute ({contended.span}): (ratio - 1) / overlap"
    )
    return contention, source


def profile_from_run(
    run_dir: Path,
    skip_steps: int,
    env_step_s: float,
    env_step_source: str,
    episode_end_s: float,
    contended_run_dir: Path | None = None,
) -> tuple[Profile, Sources, MeasuredFigures]:
    """The profile of ``run_dir``, the source of each of its values, and the run's own figures.

    With ``contended_run_dir`` (an async run of the same recipe on the same machine; ``run_dir`` then a sync one),
    ``trainer.rollout_contention`` is fitted from the two (:func:`fit_rollout_contention`).
    """
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    run = used_steps(run_dir, skip_steps)
    pipeline, sources = pipeline_shape(config)
    measured = measured_figures(run, pipeline.group_size)
    workload, workload_sources = _workload(config, run, pipeline, measured)
    env, env_sources = env_cost(config, env_step_s, env_step_source, episode_end_s)
    rollout, rollout_sources = _rollout(config, run, workload)
    trainer, trainer_sources = _trainer(config, run)
    if contended_run_dir is not None:
        contention, source = fit_rollout_contention(run, used_steps(contended_run_dir, skip_steps))
        trainer = dataclasses.replace(trainer, rollout_contention=contention)
        trainer_sources["trainer.rollout_contention"] = f"{contended_run_dir}: {source}"
    last_step = run.rows[-1][0]
    sim = SimSettings(seed=0, train_steps=last_step, warmup_steps=skip_steps)
    sources.update(workload_sources | env_sources | rollout_sources | trainer_sources)
    sources["sim.seed"] = "planner setting"
    sources["sim.train_steps"] = "the run's logged steps"
    sources["sim.warmup_steps"] = "--skip-steps, as left out of the measurement"
    platform = config_value(config, "trainer.device")
    name = f"{platform}_{config_value(config, 'asyncweb.recipe')}"
    profile = Profile(
        name=name, pipeline=pipeline, workload=workload, env=env, rollout=rollout, trainer=trainer, sim=sim
    )
    return profile, sources, measured


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(prog="python -m verl_asyncweb.bench profile", description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, required=True, help="a run folder (config.yaml, metrics.jsonl)")
    parser.add_argument("--out", type=Path, help="profile file to write (default RUN_DIR/plan_profile.yaml)")
    parser.add_argument("--skip-steps", type=int, default=1, help="start-up steps left out (default 1)")
    parser.add_argument(
        "--env-step-s", type=float, help=f"browser seconds per step (default {DEFAULT_ENV_STEP_S}: {ENV_STEP_SOURCE})"
    )
    parser.add_argument("--episode-end-s", type=float, default=0.0, help="reward seconds per episode (a judge call)")
    parser.add_argument(
        "--contended-run-dir",
        type=Path,
        help="an async run of the same recipe on the same machine (--run-dir then a sync one): fits "
        "trainer.rollout_contention, how much rollout and trainer slow each other on shared compute",
    )
    args = parser.parse_args(argv)
    env_step_source = ENV_STEP_SOURCE if args.env_step_s is None else "--env-step-s"
    env_step_s = DEFAULT_ENV_STEP_S if args.env_step_s is None else args.env_step_s
    try:
        profile, sources, measured = profile_from_run(
            args.run_dir, args.skip_steps, env_step_s, env_step_source, args.episode_end_s, args.contended_run_dir
        )
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"python -m verl_asyncweb.bench profile: error: {exc}\n")
        return 2
    header = [
        f"{profile.name}: planner profile recorded from the run folder {args.run_dir}",
        f"by `python -m verl_asyncweb.bench profile --run-dir {args.run_dir}` (config.yaml and metrics.jsonl only).",
        f"What the run itself measured over {args.skip_steps + 1}..{profile.sim.train_steps} (compare the planner):",
        *measured.header_lines(),
        "",
    ]
    out = args.out or args.run_dir / "plan_profile.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dump_profile(profile, sources, header))
    logger.info("wrote %s", out)
    return 0
