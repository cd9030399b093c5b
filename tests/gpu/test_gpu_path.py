"""The GPU path on a machine that has it: ``scripts/gpu_check.sh`` must pass (never runs in CI here: no GPU)."""

import importlib.util
import subprocess
from pathlib import Path

import pytest
import torch

from verl_asyncweb.gpu_check import ONE_GPU_LAYOUT, TIMEOUT_S, VLLM_LAYOUT, VLLM_ONE_GPU_LAYOUT

REPO = Path(__file__).resolve().parents[2]
DEVICES = torch.cuda.device_count() if torch.cuda.is_available() else 0

pytestmark = pytest.mark.gpu


def _gpu_check(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu_check.sh"), "--out", str(tmp_path / "run"), *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S + 120,
    )


@pytest.mark.skipif(DEVICES < VLLM_LAYOUT.gpus, reason=f"needs {VLLM_LAYOUT.gpus} CUDA devices (trainer + vLLM)")
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vLLM (pip install verl_asyncweb[gpu])")
def test_gpu_check_passes(tmp_path):
    result = _gpu_check(tmp_path)
    assert result.returncode == 0, result.stdout[-6000:]
    assert "verdict: PASSED" in result.stdout


@pytest.mark.skipif(DEVICES < ONE_GPU_LAYOUT.gpus, reason="needs a CUDA device (the FSDP2 trainer)")
def test_one_gpu_check_passes(tmp_path):
    result = _gpu_check(tmp_path, "--one-gpu")
    assert result.returncode == 0, result.stdout[-6000:]
    assert "verdict: PASSED" in result.stdout


@pytest.mark.skipif(DEVICES < VLLM_ONE_GPU_LAYOUT.gpus, reason="needs a CUDA device (the trainer and vLLM share it)")
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vLLM (pip install verl_asyncweb[gpu])")
def test_vllm_one_gpu_check_passes(tmp_path):
    result = _gpu_check(tmp_path, "--vllm-one-gpu")
    assert result.returncode == 0, result.stdout[-6000:]
    assert "verdict: PASSED" in result.stdout
