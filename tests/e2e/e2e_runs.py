"""The shape every end-to-end run shares: a ``verl_asyncweb.main`` subprocess on a recipe, its run folder, and
readers of its metrics (verl's FileLogger lines ``{"step", "data"}``)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from verl_asyncweb.compare.metric_names import promised_every_step

RUN_TIMEOUT_S = 900


def main_command(run_dir: Path, *overrides: str, recipe: str = "cpu_smoke") -> list[str]:
    """``python -m verl_asyncweb.main recipe=RECIPE`` writing into ``run_dir``."""
    return [
        sys.executable,
        "-m",
        "verl_asyncweb.main",
        f"recipe={recipe}",
        f"trainer.default_local_dir={run_dir}",
        *overrides,
    ]


def read_steps(path: Path) -> dict[int, dict]:
    """Metrics of each step in one metrics file (a later line of the same step wins)."""
    steps = {}
    if path.exists():
        for line in path.read_text().splitlines():
            record = json.loads(line)
            steps[record["step"]] = record["data"]
    return steps


def wait_for(predicate, process: subprocess.Popen, timeout_s: float, what: str) -> None:
    """Poll ``predicate`` every second; fail if the run exits or ``timeout_s`` passes first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        if process.poll() is not None:
            pytest.fail(f"run exited with {process.returncode} while waiting for {what}")
        time.sleep(1.0)
    pytest.fail(f"timed out after {timeout_s} s waiting for {what}")


def stop_if_running(process: subprocess.Popen) -> None:
    """SIGKILL the run's whole process group (it was started with ``start_new_session``) unless it has exited."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)


def run_to_completion(command: list[str], log: Path) -> None:
    """Run ``command`` with its output in ``log``; fail with the log's tail on a non-zero exit."""
    with log.open("w") as out:
        result = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 0, log.read_text()[-4000:]


def assert_every_step_metrics(steps: dict[int, dict], loss_mode: str = "decoupled_ppo") -> None:
    """Each logged step has every metric docs/metrics.md promises for every step (of a run with this policy loss), and
    the rollout agrees with the trainer's recompute (verl's actor forward): probabilities within 1e-3 on every
    step, and, on a step whose samples all come from the weights the trainer holds (policy lag 0), log-probs
    within 1e-3 on every token (gpu_check's bound: a stale weight sync breaks it, a probability bound of a
    near-uniform tiny model need not notice)."""
    from verl_asyncweb.gpu_check import LOG_PROB_DIFF_MAX, largest_log_ratio

    promised = promised_every_step(loss_mode)
    assert steps, "no step logged"
    for step, data in steps.items():
        missing = [name for name in promised if name not in data]
        assert not missing, f"step {step} lacks the documented metrics {missing}"
        assert data["training/rollout_probs_diff_max"] < 1e-3, (step, data["training/rollout_probs_diff_max"])
        if data["asyncweb/policy_lag/max"] == 0:
            log_ratio = largest_log_ratio(data)
            assert log_ratio is not None and log_ratio < LOG_PROB_DIFF_MAX, (step, log_ratio)
