"""What GPU users run, run on CPU: ``main recipe=cpu_vllm`` with verl's own vLLM replica and server (vLLM's CPU
build) serving the web_agent loop on Chromium, weights synced into vLLM after every cycle.

The recipe as it is (sync rollout, ``parameter_sync_step`` 2) is judged by ``gpu_check --vllm-cpu`` from the main
environment (tests/e2e/test_gpu_check_vllm_cpu.py), vLLM's log-probs against the trainer's recompute included.
Here: one step of it with the trainer's sampler mask off, where that agreement must fail; and an async run of the
offline Qwen3-VL (verl aborts and resumes the vLLM servers' requests at every sync) that is SIGKILLed after a
checkpoint and resumed from the run folder.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from verl_asyncweb.compare.metric_names import ENV_FAILURES_TOTAL, POLICY_LAG_MAX, SCREENSHOTS_IMAGES_PER_STEP
from verl_asyncweb.gpu_check import LOG_PROB_DIFF_MAX, largest_log_ratio
from verl_asyncweb.run_folder import RunFolder

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from e2e_runs import RUN_TIMEOUT_S, main_command, read_steps, run_to_completion, wait_for  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.ray, pytest.mark.browser]

RECIPE = "cpu_vllm"
MASK_OFF = "ray_kwargs.ray_init.runtime_env.env_vars.VERL_ASYNCWEB_SAMPLER_MASK=0"
# Qwen3-VL, the GPU recipes' family (the verdict run is the recipe's Qwen2.5-VL): both offline models built for
# vLLM's CPU attention are served.
ASYNC = ("asyncweb.rollout_mode=async", "trainer.save_freq=1", "asyncweb.tiny_model_size=qwen3-tiny-vllm")
KILLED_AFTER_STEP = 2
RESUMED_TO_STEP = 4


def _finished(run_dir: Path, *overrides: str) -> Path:
    run_to_completion(main_command(run_dir, *overrides, recipe=RECIPE), run_dir.parent / f"{run_dir.name}.log")
    return run_dir


def _policy_versions(run_dir: Path) -> list[list[int]]:
    """Each episode's per-step policy versions."""
    episodes = RunFolder(run_dir).read_episodes()
    return [[step.get("policy_version") or 0 for step in episode.get("steps", [])] for episode in episodes]


def test_the_agreement_fails_with_the_trainers_sampler_mask_off(tmp_path):
    # vLLM bans the vision placeholders and the ids past the tokenizer when it samples; a trainer over the whole
    # vocabulary differs by log(kept mass) on every token.
    run_dir = _finished(tmp_path / "mask_off", MASK_OFF, "trainer.total_training_steps=1")
    diff = largest_log_ratio(RunFolder(run_dir).read_metrics()[1])
    assert diff is not None and diff > LOG_PROB_DIFF_MAX, diff
    print(f"with the trainer's mask off: largest |log pi_prox - log pi_vllm| {diff:.2g}")


@pytest.fixture(scope="module")
def killed_and_resumed(tmp_path_factory) -> Path:
    """An async run SIGKILLed (its whole process group: Ray, vLLM's engine, Chromium) right after the checkpoint
    of step ``KILLED_AFTER_STEP``, then resumed from the run folder to ``RESUMED_TO_STEP``."""
    run_dir = tmp_path_factory.mktemp("vllm") / "async"
    metrics = run_dir / "metrics.jsonl"
    command = main_command(run_dir, *ASYNC, "trainer.total_training_steps=100", recipe=RECIPE)
    with (run_dir.parent / "attempt0.log").open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        tracker = run_dir / "latest_checkpointed_iteration.txt"
        # verl saves a step's checkpoint (its tracker file last) before it logs the step: wait for both.
        wait_for(lambda: KILLED_AFTER_STEP in read_steps(metrics), process, RUN_TIMEOUT_S, f"step {KILLED_AFTER_STEP}")
        wait_for(
            lambda: tracker.exists() and int(tracker.read_text()) >= KILLED_AFTER_STEP,
            process,
            RUN_TIMEOUT_S,
            f"the checkpoint of step {KILLED_AFTER_STEP}",
        )
        os.killpg(process.pid, signal.SIGKILL)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
    saved = int(tracker.read_text())
    assert saved < RESUMED_TO_STEP, f"the first attempt saved step {saved} before the SIGKILL"
    _finished(run_dir, *ASYNC, f"trainer.total_training_steps={RESUMED_TO_STEP}")
    return run_dir


def test_an_async_run_killed_and_resumed_trains_on_with_vllm(killed_and_resumed):
    steps = RunFolder(killed_and_resumed).read_metrics()
    assert sorted(steps) == list(range(1, RESUMED_TO_STEP + 1))
    for step, data in steps.items():
        assert data[SCREENSHOTS_IMAGES_PER_STEP] > 0, step
        assert data[ENV_FAILURES_TOTAL] == 0, step
        # Within the staleness bound (asyncweb.staleness 2): verl's sampler drops older groups.
        assert data[POLICY_LAG_MAX] <= 2, step
    versions = _policy_versions(killed_and_resumed)
    # The resumed attempt's vLLM server got the checkpoint's weights and every later sync.
    assert max(max(v) for v in versions if v) >= RESUMED_TO_STEP - 1, sorted({x for v in versions for x in v})
