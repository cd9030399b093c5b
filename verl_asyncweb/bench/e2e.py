"""``python -m verl_asyncweb.bench e2e``: async vs sync on the same recipe, with and without web latency.

Each arm is a real run of ``verl_asyncweb.main`` (verl's trainer, the hf server, Chromium) in its own run folder;
the arms run one after another in one invocation so that their figures are comparable. Reported per arm, over the
training steps after the first: trajectories trained on per hour (the useful throughput) and trajectories finished
per hour (async finishes some that the staleness bound then drops), trainer-idle (median and mean over steps) and
rollout-idle fractions, the step time split (sample wait, pi_prox recompute, update, weight sync), wall time and
peak memory (the machine's used memory above its level before the arm, and the RSS sum over the process tree as
an upper bound).
Web latency (arm suffix ``+latency``) is the environment's lognormal model: median 1.5 s per step, ~5% of steps
10 s or more, as on live websites.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from verl_asyncweb.console import StepReporter

ARMS = {
    "async": ["asyncweb.rollout_mode=async"],
    "sync": ["asyncweb.rollout_mode=sync"],
}
LATENCY = ["asyncweb.env.latency.enable=true"]
# Both modes get the same pool. Async keeps the recipe's eta batches in flight ahead of the trainer (its
# num_warmup_batches) unless --prefetch says otherwise; sync submits one batch per step.
TIMINGS = ("timing_s/gen", "timing_s/old_log_prob", "timing_s/update_actor", "timing_s/update_weights")


class _MemorySampler(threading.Thread):
    """Peak memory (MiB) of a job, sampled every ``interval_s``; both figures are cheap to read.

    ``peak_used_mib`` is the machine's used memory (total minus available) above what it was when sampling
    started: the job's footprint, shared pages counted once, on a machine without other big jobs.
    ``peak_rss_mib`` sums RSS over the process tree, counting every shared page once per process that maps it
    (an upper bound, far above the machine's memory for the dozens of processes of a job that import torch).
    """

    def __init__(self, pid: int, interval_s: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval_s = pid, interval_s
        self.peak_used_mib = self.peak_rss_mib = 0.0
        self._baseline = self._used()
        self._stop = threading.Event()

    @staticmethod
    def _used() -> int:
        memory = psutil.virtual_memory()
        return memory.total - memory.available

    def run(self) -> None:
        while not self._stop.is_set():
            rss = 0
            try:
                root = psutil.Process(self.pid)
                for process in [root, *root.children(recursive=True)]:
                    try:
                        rss += process.memory_info().rss
                    except psutil.Error:
                        pass  # exited between listing and reading
            except psutil.Error:
                pass
            self.peak_rss_mib = max(self.peak_rss_mib, rss / 2**20)
            self.peak_used_mib = max(self.peak_used_mib, (self._used() - self._baseline) / 2**20)
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        self._stop.set()


def run_sampled(command: list[str], log_path: Path, what: str) -> _MemorySampler:
    """Run ``command`` (output to ``log_path``) while sampling its memory; raises if it fails."""
    with log_path.open("w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        sampler = _MemorySampler(process.pid)
        sampler.start()
        returncode = process.wait()
        sampler.stop()
    if returncode != 0:
        raise RuntimeError(f"{what} failed with {returncode}; see {log_path}")
    return sampler


def read_steps(run_dir: Path) -> dict[int, dict]:
    steps: dict[int, dict] = {}
    for path in sorted(run_dir.glob("metrics*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            steps[record["step"]] = record["data"]
    return steps


def arm_run_dir(out_dir: Path, arm: str) -> Path:
    """The run folder of ``arm`` (``async+latency`` -> ``OUT/async_latency``)."""
    return out_dir / arm.replace("+", "_")


def run_arm(name: str, overrides: list[str], out_dir: Path, recipe: str, steps: int) -> dict:
    run_dir = arm_run_dir(out_dir, name)
    command = [
        sys.executable,
        "-m",
        "verl_asyncweb.main",
        f"recipe={recipe}",
        f"trainer.default_local_dir={run_dir}",
        f"trainer.total_training_steps={steps}",
        "trainer.resume_mode=disable",
        *overrides,
    ]
    started = time.time()
    with StepReporter(run_dir / "metrics.jsonl", total_steps=steps, label=name):
        sampler = run_sampled(command, out_dir / f"{run_dir.name}.log", f"arm {name}")
    data = read_steps(run_dir)
    later = [data[s] for s in sorted(data) if s > 1]
    window_s = data[max(data)]["asyncweb/wall_s"] - data[1]["asyncweb/wall_s"]
    finished = sum(d.get("asyncweb/trajectories", 0) for d in later)
    trained = sum(d.get("asyncweb/trained_trajectories", 0) for d in later)
    trainer_idle = [d.get("asyncweb/trainer_idle_frac", 0.0) for d in later]
    return {
        "arm": name,
        "trained_trajs_per_hour": trained / max(window_s, 1e-6) * 3600,
        "trajs_per_hour": finished / max(window_s, 1e-6) * 3600,
        "trainer_idle_frac": statistics.median(trainer_idle),
        "trainer_idle_frac_mean": statistics.fmean(trainer_idle),
        "rollout_idle_frac": statistics.median(d.get("asyncweb/rollout_idle_frac", 0.0) for d in later),
        **{key: statistics.median(d.get(key, 0.0) for d in later) for key in TIMINGS},
        "wall_s": time.time() - started,
        "peak_used_mib": sampler.peak_used_mib,
        "peak_rss_mib": sampler.peak_rss_mib,
    }


def _table(results: list[dict]) -> str:
    header = (
        "| arm | trained traj/h | finished traj/h | trainer idle (mean) | rollout idle | sample wait s | pi_prox s "
        "| update s | sync s |"
    )
    lines = [header, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        lines.append(
            f"| {r['arm']} | {r['trained_trajs_per_hour']:.0f} | {r['trajs_per_hour']:.0f} "
            f"| {r['trainer_idle_frac']:.2f} ({r['trainer_idle_frac_mean']:.2f}) | {r['rollout_idle_frac']:.2f} "
            f"| {r['timing_s/gen']:.1f} | {r['timing_s/old_log_prob']:.1f} | {r['timing_s/update_actor']:.1f} "
            f"| {r['timing_s/update_weights']:.2f} |"
        )
    lines.append("")
    lines.append("| arm | wall time s | peak memory used by the job MiB | peak RSS sum MiB |")
    lines.append("| --- | ---: | ---: | ---: |")
    lines.extend(
        f"| {r['arm']} | {r['wall_s']:.0f} | {r['peak_used_mib']:.0f} | {r['peak_rss_mib']:.0f} |" for r in results
    )
    by_name = {r["arm"]: r for r in results}
    for suffix in ("", "+latency"):
        a, s = by_name.get(f"async{suffix}"), by_name.get(f"sync{suffix}")
        if a and s and s["trained_trajs_per_hour"] > 0 and s["trajs_per_hour"] > 0:
            trained = a["trained_trajs_per_hour"] / s["trained_trajs_per_hour"]
            finished = a["trajs_per_hour"] / s["trajs_per_hour"]
            lines.append(
                f"\nasync / sync{suffix or ' (no latency)'}: trained trajectories per hour {trained:.2f}x, "
                f"finished trajectories per hour {finished:.2f}x"
            )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_asyncweb.bench e2e", description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="cpu_smoke")
    parser.add_argument("--steps", type=int, default=6, help="training steps per arm (the first is warm-up)")
    parser.add_argument("--pages", type=int, default=24, help="browser pages (concurrent episodes) of every arm")
    parser.add_argument(
        "--groups",
        type=int,
        default=3,
        help="prompt groups (tasks) per training step, both arms (train_batch_size = ppo_mini_batch_size: the "
        "recipe must update once per step, parameter_sync_step 1)",
    )
    parser.add_argument(
        "--prefetch",
        type=int,
        default=None,
        help="batches async rolls out ahead of the trainer (num_warmup_batches; default: the recipe's, eta)",
    )
    parser.add_argument("--arms", default="async,sync,async+latency,sync+latency")
    parser.add_argument("--out", type=Path, default=Path("runs/bench_e2e"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    common = [
        f"asyncweb.env.pages_per_browser={args.pages}",
        f"data.train_batch_size={args.groups}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={args.groups}",
    ]
    if args.prefetch is not None:
        common.append(f"trainer.v1.separate_async.num_warmup_batches={args.prefetch}")
    results = []
    for arm in args.arms.split(","):
        mode, _, latency = arm.partition("+")
        overrides = common + ARMS[mode] + (LATENCY if latency else [])
        results.append(run_arm(arm, overrides, args.out, args.recipe, args.steps))
        (args.out / "results.json").write_text(json.dumps(results, indent=2))
    print(_table(results))
    print(f"\nthe capacity planner against these arms: python -m verl_asyncweb.bench plan_check --e2e-dir {args.out}")
    return 0
