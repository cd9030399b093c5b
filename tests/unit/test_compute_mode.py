"""``doctor`` and ``gpu_check`` read the GPUs' compute mode from ``nvidia-smi``: a GPU in exclusive-process mode holds
one CUDA context, and a rollout GPU needs several. A script on ``PATH`` stands in for ``nvidia-smi``."""

import os
import stat

import pytest

from verl_asyncweb.doctor import compute_mode_checks


def _nvidia_smi(tmp_path, monkeypatch, output: str, code: int = 0) -> None:
    script = tmp_path / "nvidia-smi"
    script.write_text(f"#!/bin/sh\nprintf '{output}'\nexit {code}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.parametrize(
    ("output", "ok", "detail"),
    [
        ("0, Default\\n1, Default\\n", True, "2 GPU(s), none exclusive"),
        ("0, Exclusive_Process\\n1, Default\\n", False, "GPU 0 in exclusive-process mode"),
    ],
)
def test_the_compute_mode_of_every_gpu_is_read_and_exclusive_ones_are_named(tmp_path, monkeypatch, output, ok, detail):
    _nvidia_smi(tmp_path, monkeypatch, output)
    (check,) = compute_mode_checks()
    assert check.ok is ok and check.detail.startswith(detail)
    if not ok:
        assert "nvidia-smi -i INDEX -c DEFAULT" in check.fix


def test_a_failing_nvidia_smi_is_a_failed_check_and_none_is_no_check(tmp_path, monkeypatch):
    _nvidia_smi(tmp_path, monkeypatch, "NVIDIA-SMI has failed", code=9)
    (check,) = compute_mode_checks()
    assert not check.ok and check.detail.startswith("nvidia-smi failed")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert compute_mode_checks() == []
