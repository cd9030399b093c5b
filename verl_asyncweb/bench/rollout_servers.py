"""``python -m verl_asyncweb.bench rollout_servers``: the ``hf`` server against verl's vLLM replica on CPU.

Both arms are ``cpu_vllm`` runs in the vLLM environment (the same interpreter, model, tasks, seeds and steps; sync
rollout, so each step's generation is timed on its own), one after the other in one invocation: ``vllm`` as the
recipe is, ``hf`` with ``actor_rollout_ref.rollout.name=hf``. Reported per arm: trajectories finished per hour over
the steps after the first, generated tokens per second of a server call (each agent step's response tokens over its
call's wall time, queueing behind the other requests in flight included: the episodes' ``generate_s``), the median
call's time, the time to the first step, and the rollout's agreement with the trainer (largest
|log pi_prox - log pi_rollout| over every token of every step).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path

from verl_asyncweb.gpu_check import largest_log_ratio
from verl_asyncweb.run_folder import RunFolder

ARMS = {"vllm": [], "hf": ["actor_rollout_ref.rollout.name=hf"]}
STEPS = 6


def run_arm(python: Path, name: str, out_dir: Path, steps: int) -> dict:
    run_dir = out_dir / name
    command = [
        str(python),
        "-m",
        "verl_asyncweb.main",
        "recipe=cpu_vllm",
        f"trainer.default_local_dir={run_dir}",
        f"trainer.total_training_steps={steps}",
        "trainer.resume_mode=disable",
        *ARMS[name],
    ]
    started = time.time()
    with (out_dir / f"{name}.log").open("w") as log:
        returncode = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT).returncode
    if returncode != 0:
        raise RuntimeError(f"arm {name} failed with {returncode}; see {out_dir / f'{name}.log'}")
    wall_s = time.time() - started
    folder = RunFolder(run_dir)
    metrics = folder.read_metrics()
    later = [metrics[step] for step in sorted(metrics) if step > 1]
    window_s = metrics[max(metrics)]["asyncweb/wall_s"] - metrics[1]["asyncweb/wall_s"]
    calls = [step for episode in folder.read_episodes() for step in episode["steps"] if "generate_s" in step]
    diffs = [diff for diff in map(largest_log_ratio, metrics.values()) if diff is not None]
    return {
        "arm": name,
        "trajs_per_hour": sum(step.get("asyncweb/trajectories", 0) for step in later) / max(window_s, 1e-6) * 3600,
        "tokens_per_s": sum(c["response_tokens"] for c in calls) / max(sum(c["generate_s"] for c in calls), 1e-6),
        "generate_s_median": statistics.median(call["generate_s"] for call in calls),
        "first_step_s": metrics[1]["asyncweb/wall_s"],
        "wall_s": wall_s,
        "log_prob_diff_max": max(diffs) if len(diffs) == len(metrics) else None,
    }


def table(results: list[dict]) -> str:
    lines = [
        "| arm | traj/h | generated tokens/s per call | server call s (median) | first step s | wall s "
        "| max abs log-prob diff |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines.extend(
        f"| {r['arm']} | {r['trajs_per_hour']:.0f} | {r['tokens_per_s']:.0f} | {r['generate_s_median']:.2f} "
        f"| {r['first_step_s']:.0f} | {r['wall_s']:.0f} | {_diff(r['log_prob_diff_max'])} |"
        for r in results
    )
    by_arm = {r["arm"]: r for r in results}
    if {"vllm", "hf"} <= set(by_arm) and by_arm["hf"]["trajs_per_hour"] > 0 and by_arm["hf"]["tokens_per_s"] > 0:
        vllm, hf = by_arm["vllm"], by_arm["hf"]
        lines.append(
            f"\nvllm / hf: traj/h {vllm['trajs_per_hour'] / hf['trajs_per_hour']:.2f}x, generated tokens/s "
            f"{vllm['tokens_per_s'] / hf['tokens_per_s']:.2f}x"
        )
    return "\n".join(lines)


def _diff(value: float | None) -> str:
    return "not logged every step" if value is None else f"{value:.2g}"


def main(argv: list[str] | None = None) -> int:
    from verl_asyncweb.backends.vllm_cpu import VLLM_PYTHON

    parser = argparse.ArgumentParser(prog="python -m verl_asyncweb.bench rollout_servers", description=__doc__)
    parser.add_argument("--out", type=Path, required=True, help="folder for the arms' run folders and logs")
    parser.add_argument("--steps", type=int, default=STEPS, help=f"training steps per arm (default {STEPS})")
    parser.add_argument("--python", type=Path, default=VLLM_PYTHON, help="the vLLM environment's interpreter")
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error(f"--steps must be >= 2 (throughput is measured after the first step), got {args.steps}")
    if not args.python.exists():
        parser.error(
            f"--python {args.python} does not exist: install the vLLM environment (scripts/install_vllm_cpu.py)"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    results = [run_arm(args.python, name, args.out, args.steps) for name in ARMS]
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(table(results))
    return 0
