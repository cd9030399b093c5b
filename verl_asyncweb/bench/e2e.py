"""``python -m verl_asyncweb.bench e2e``: async vs sync on the same recipe, with and without web latency.

Each arm is a real run of ``verl_asyncweb.main`` (verl's trainer, the hf server, Chromium) in its own run folder;
the arms run one after another in one invocation so that their figures are comparable. Reported per arm, over the
training steps after the first: trajectories trained on per hour (the useful throughput) and trajectories finished
per hour (async finishes some that the staleness bound then drops), trainer-idle (median and mean over steps) and
rollout-idle fractions, the step time split (sample wait, pi_prox recompute, update, weight sync), wall time and
peak memory (the machine's used memory above its level before the arm, and the RSS sum over the process tree as
an upper bound), the time from launch to the first finished step and the CPU seconds the job's processes used
before it (divided by the machine's cores: the earliest that first step could end with this work).
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
from verl_asyncweb.run_folder import RunFolder

ARMS = {
    "async": ["asyncweb.rollout_mode=async"],
    "sync": ["asyncweb.rollout_mode=sync"],
}
LATENCY = ["asyncweb.env.latency.enable=true"]
# Both modes get the same pool. Async keeps the recipe's eta batches in flight ahead of the trainer (its
# num_warmup_batches) unless --prefetch says otherwise; sync submits one batch per step.
TIMINGS = ("timing_s/gen", "timing_s/old_log_prob", "timing_s/update_actor", "timing_s/update_weights")


class _JobSampler(threading.Thread):
    """Peak memory (MiB) of a job, sampled every ``interval_s``, which processes hold it, and their CPU time.

    ``peak_used_mib`` is the machine's used memory (total minus available) above what it was when sampling
    started: the job's footprint, shared pages counted once, on a machine without other big jobs.
    ``peak_rss_mib`` sums RSS over the process tree, counting every shared page once per process that maps it
    (an upper bound, far above the machine's memory for the dozens of processes of a job that import torch).
    Every ``breakdown_every`` samples the process tree's PSS (shared pages split among the processes that map
    them; slower to read) is taken per process; ``processes_at_peak`` is the breakdown with the largest sum.
    Every sample also reads each process's CPU time (user + system): :meth:`cpu_until` gives it per process as
    of a moment (a process that lived less than ``interval_s`` may be missed).
    """

    def __init__(self, pid: int, interval_s: float = 1.0, breakdown_every: int = 10) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval_s, self.breakdown_every = pid, interval_s, breakdown_every
        self.peak_used_mib = self.peak_rss_mib = 0.0
        self.processes_at_peak: list[dict] = []
        self._peak_pss_mib = 0.0
        self._baseline = self._used()
        self._cpu_samples: list[tuple[float, dict[tuple[int, float], tuple[str, float]]]] = []
        self._done = threading.Event()

    @staticmethod
    def _used() -> int:
        memory = psutil.virtual_memory()
        return memory.total - memory.available

    def _tree(self) -> list[psutil.Process]:
        try:
            root = psutil.Process(self.pid)
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return []

    def run(self) -> None:
        samples = 0
        while not self._done.is_set():
            tree = self._tree()
            rss = 0
            cpu: dict[tuple[int, float], tuple[str, float]] = {}
            for process in tree:
                try:
                    with process.oneshot():
                        rss += process.memory_info().rss
                        times = process.cpu_times()
                        cpu[(process.pid, process.create_time())] = (_name(process), times.user + times.system)
                except psutil.Error:
                    pass  # exited between listing and reading
            self._cpu_samples.append((time.time(), cpu))
            self.peak_rss_mib = max(self.peak_rss_mib, rss / 2**20)
            self.peak_used_mib = max(self.peak_used_mib, (self._used() - self._baseline) / 2**20)
            if samples % self.breakdown_every == 0:
                self._take_breakdown(tree)
            samples += 1
            self._done.wait(self.interval_s)

    def _take_breakdown(self, tree: list[psutil.Process]) -> None:
        processes = [entry for entry in map(process_memory, tree) if entry is not None]
        total = sum(entry["pss_mib"] for entry in processes)
        if total > self._peak_pss_mib:
            self._peak_pss_mib = total
            self.processes_at_peak = sorted(processes, key=lambda entry: -entry["pss_mib"])

    def cpu_until(self, moment: float) -> list[dict]:
        """CPU seconds each process of the job had used by ``moment`` (``time.time()``), largest first: its last
        reading at or before then, for every process seen by then (one that exited keeps its last reading)."""
        latest: dict[tuple[int, float], tuple[str, float]] = {}
        for taken_at, cpu in self._cpu_samples:
            if taken_at > moment:
                break
            latest.update(cpu)
        entries = [{"name": name, "cpu_s": round(seconds, 2)} for name, seconds in latest.values()]
        return sorted(entries, key=lambda entry: -entry["cpu_s"])

    def stop(self) -> None:
        self._done.set()


def _name(process: psutil.Process) -> str:
    """A Ray worker's actor class (``ray::Name``), else the executable's file name."""
    name = " ".join(process.cmdline()[:1]) or process.name()
    return name.split()[0].split(".")[0] if name.startswith("ray::") else Path(name).name


def process_memory(process: psutil.Process) -> dict | None:
    """One process's PSS (MiB), its name (a Ray worker's is its actor class) and whether it loaded torch; ``None``
    for a process that exited while it was read."""
    try:
        with process.oneshot():
            name = _name(process)
            pss = process.memory_full_info().pss
        maps = Path(f"/proc/{process.pid}/maps").read_text()
    except (psutil.Error, OSError):
        return None
    return {"name": name, "pss_mib": round(pss / 2**20, 1), "torch": "libtorch_cpu" in maps}


def run_sampled(command: list[str], log_path: Path, what: str) -> _JobSampler:
    """Run ``command`` (output to ``log_path``) while sampling its memory and CPU time; raises if it fails."""
    with log_path.open("w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        sampler = _JobSampler(process.pid)
        sampler.start()
        returncode = process.wait()
        sampler.stop()
    if returncode != 0:
        raise RuntimeError(f"{what} failed with {returncode}; see {log_path}")
    return sampler


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
    with StepReporter(run_dir / "metrics.jsonl", total_steps=steps, label=name) as reporter:
        sampler = run_sampled(command, out_dir / f"{run_dir.name}.log", f"arm {name}")
    cpu_before_first_step = sampler.cpu_until(reporter.first_step_at) if reporter.first_step_at else []
    data = RunFolder(run_dir).read_metrics()
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
        "first_step_s": reporter.first_step_at - started if reporter.first_step_at else None,
        "peak_used_mib": sampler.peak_used_mib,
        "peak_rss_mib": sampler.peak_rss_mib,
        "processes_at_peak": sampler.processes_at_peak,
        "cpu_s_before_first_step": round(sum(entry["cpu_s"] for entry in cpu_before_first_step), 1),
        "cpu_before_first_step": cpu_before_first_step,
        "cores": psutil.cpu_count(),
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
    lines.append(
        "| arm | wall time s | first step s | CPU s before it | its floor on these cores s "
        "| peak memory used by the job MiB | peak RSS sum MiB |"
    )
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    lines.extend(
        f"| {r['arm']} | {r['wall_s']:.0f} | {_seconds(r['first_step_s'])} | {r['cpu_s_before_first_step']:.0f} "
        f"| {r['cpu_s_before_first_step'] / r['cores']:.0f} | {r['peak_used_mib']:.0f} | {r['peak_rss_mib']:.0f} |"
        for r in results
    )
    for r in results:
        lines.append(f"\n{r['arm']}: processes at the largest PSS sum\n")
        lines.append(_process_table(r["processes_at_peak"]))
        lines.append(f"\n{r['arm']}: CPU time of the job's processes before the first step ended\n")
        lines.append(_cpu_table(r["cpu_before_first_step"]))
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


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _process_table(processes: list[dict]) -> str:
    """PSS per kind of process (a Ray worker's actor class, else the executable), largest first."""
    kinds: dict[str, list[dict]] = {}
    for entry in processes:
        kinds.setdefault(entry["name"], []).append(entry)
    rows = sorted(kinds.items(), key=lambda item: -sum(e["pss_mib"] for e in item[1]))
    lines = ["| process | count | PSS MiB | with torch |", "| --- | ---: | ---: | ---: |"]
    lines.extend(
        f"| {name} | {len(group)} | {sum(e['pss_mib'] for e in group):.0f} | {sum(e['torch'] for e in group)} |"
        for name, group in rows
    )
    lines.append(
        f"| total | {len(processes)} | {sum(e['pss_mib'] for e in processes):.0f} | "
        f"{sum(e['torch'] for e in processes)} |"
    )
    return "\n".join(lines)


def _cpu_table(processes: list[dict]) -> str:
    """CPU seconds per kind of process, largest first."""
    kinds: dict[str, list[float]] = {}
    for entry in processes:
        kinds.setdefault(entry["name"], []).append(entry["cpu_s"])
    rows = sorted(kinds.items(), key=lambda item: -sum(item[1]))
    lines = ["| process | count | CPU s |", "| --- | ---: | ---: |"]
    lines.extend(f"| {name} | {len(seconds)} | {sum(seconds):.1f} |" for name, seconds in rows)
    lines.append(f"| total | {len(processes)} | {sum(entry['cpu_s'] for entry in processes):.1f} |")
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
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override of the recipe for every arm (repeatable)",
    )
    parser.add_argument("--out", type=Path, default=Path("runs/bench_e2e"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    common = [
        f"asyncweb.env.pages_per_browser={args.pages}",
        f"data.train_batch_size={args.groups}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={args.groups}",
        *args.set,
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
