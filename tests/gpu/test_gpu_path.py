"""The GPU path on a machine that has it: ``scripts/gpu_check.sh`` must pass (never runs in CI here: no GPU)."""

import importlib.util
import subprocess
from pathlib import Path

import pytest
import torch

from verl_asyncweb.gpu_check import NEEDED_GPUS, TIMEOUT_S

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        torch.cuda.device_count() < NEEDED_GPUS, reason=f"needs {NEEDED_GPUS} CUDA devices (trainer + vLLM rollout)"
    ),
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vLLM (pip install verl_asyncweb[gpu])"),
]


def test_gpu_check_passes(tmp_path):
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu_check.sh"), "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S + 120,
    )
    assert result.returncode == 0, result.stdout[-6000:]
    assert "verdict: PASSED" in result.stdout
