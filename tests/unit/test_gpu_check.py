"""``python -m verl_asyncweb.gpu_check`` on a machine without the GPUs it needs: a clear verdict, nothing started."""

import os
import subprocess
import sys


def _gpu_check_without_cuda(tmp_path, *args: str) -> subprocess.CompletedProcess:
    # No CUDA device even on a GPU machine: the verdict must be NOT RUN, and no run started.
    env = {**{key: value for key, value in os.environ.items() if key != "VERL_PLATFORM"}, "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run(
        [sys.executable, "-m", "verl_asyncweb.gpu_check", *args, "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout.rstrip().endswith("verdict: NOT RUN (this machine lacks what is marked FAIL above)")
    assert not (tmp_path / "run").exists()
    return result


def test_without_gpus_nothing_runs_and_the_missing_pieces_are_named(tmp_path):
    out = _gpu_check_without_cuda(tmp_path).stdout
    assert "[FAIL] at least 2 CUDA devices: 0 visible" in out
    assert "[FAIL] vllm (rollout server): not installed" in out
    assert "[ok  ] chromium browser" in out


def test_the_one_gpu_check_needs_a_gpu_but_not_vllm(tmp_path):
    out = _gpu_check_without_cuda(tmp_path, "--one-gpu").stdout
    assert "[FAIL] at least 1 CUDA device: 0 visible" in out
    assert "vllm" not in out and "cupy" not in out


def test_episodes_of_a_killed_run_are_read_up_to_the_cut_line(tmp_path):
    from verl_asyncweb.gpu_check import read_episodes

    episodes = tmp_path / "episodes"
    episodes.mkdir()
    (episodes / "episodes.jsonl").write_text('{"traj_id": "a", "steps": [{"policy_version": 1}]}\n{"traj_id": "b", "st')
    assert [record["traj_id"] for record in read_episodes(tmp_path)] == ["a"]
    assert read_episodes(tmp_path / "never_ran") == []


def test_the_check_recipes_compute_in_true_fp32_in_every_process():
    # Their 1e-3 agreement assumes fp32 on both sides; cuDNN would run the vision convolutions in TF32.
    from verl_asyncweb.gpu_check import ONE_GPU_LAYOUT, VLLM_LAYOUT
    from verl_asyncweb.main import load_config

    for layout in (VLLM_LAYOUT, ONE_GPU_LAYOUT):
        cfg, _ = load_config([f"recipe={layout.recipe}"])
        assert cfg.ray_kwargs.ray_init.runtime_env.env_vars.NVIDIA_TF32_OVERRIDE == "0"
        assert cfg.actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype == "fp32"
