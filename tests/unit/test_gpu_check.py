"""``python -m verl_asyncweb.gpu_check`` on a machine without the GPUs it needs: a clear verdict, nothing started."""

import json
import os
import subprocess
import sys

import pytest


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


def test_the_vllm_cpu_check_needs_the_vllm_environment_and_no_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("ASYNCWEB_VLLM_VENV", str(tmp_path / "no-venv"))
    out = _gpu_check_without_cuda(tmp_path, "--vllm-cpu").stdout
    assert f"[FAIL] vllm (rollout server (vLLM's CPU build)): not installed (no interpreter at {tmp_path}" in out
    assert "CUDA device" not in out and "cupy" not in out


def test_episodes_of_a_killed_run_are_read_up_to_the_cut_line(tmp_path):
    from verl_asyncweb.run_folder import RunFolder

    episodes = tmp_path / "episodes"
    episodes.mkdir()
    (episodes / "episodes.jsonl").write_text('{"traj_id": "a", "steps": [{"policy_version": 1}]}\n{"traj_id": "b", "st')
    assert [record["traj_id"] for record in RunFolder(tmp_path).read_episodes()] == ["a"]
    assert RunFolder(tmp_path / "never_ran").read_episodes() == []


def test_the_check_recipes_compute_in_true_fp32_in_every_process():
    # Their 1e-3 agreement assumes fp32 on both sides; cuDNN would run the vision convolutions in TF32.
    from verl_asyncweb.gpu_check import ONE_GPU_LAYOUT, VLLM_LAYOUT, VLLM_ONE_GPU_LAYOUT
    from verl_asyncweb.main import load_config

    for layout in (VLLM_LAYOUT, ONE_GPU_LAYOUT, VLLM_ONE_GPU_LAYOUT):
        cfg, _ = load_config([f"recipe={layout.recipe}"])
        assert cfg.ray_kwargs.ray_init.runtime_env.env_vars.NVIDIA_TF32_OVERRIDE == "0"
        assert cfg.actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype == "fp32"
        assert cfg.actor_rollout_ref.rollout.dtype == "float32"


def test_the_vllm_one_gpu_check_needs_a_gpu_and_vllm_but_not_cupy(tmp_path):
    out = _gpu_check_without_cuda(tmp_path, "--vllm-one-gpu").stdout
    assert "[FAIL] at least 1 CUDA device: 0 visible" in out
    assert "[FAIL] vllm (rollout server): not installed" in out
    assert "cupy" not in out
    assert "fit on the GPU" not in out  # no device to size the split for


def test_one_check_at_a_time():
    result = subprocess.run(
        [sys.executable, "-m", "verl_asyncweb.gpu_check", "--one-gpu", "--vllm-one-gpu"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "not allowed with argument" in result.stderr


def test_the_shared_device_run_lists_the_first_visible_gpu_for_the_node_and_every_worker(monkeypatch):
    from verl_asyncweb.gpu_check import SHARED_DEVICES_KEY, VLLM_ONE_GPU_LAYOUT, shared_device_setup
    from verl_asyncweb.main import load_config

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    overrides, env = shared_device_setup(["trainer.total_training_steps=2"])
    assert env == {"CUDA_VISIBLE_DEVICES": "3,3"}  # the Ray node main starts
    assert overrides == ["trainer.total_training_steps=2", f'{SHARED_DEVICES_KEY}="3,3"']
    cfg, _ = load_config([f"recipe={VLLM_ONE_GPU_LAYOUT.recipe}", *overrides])
    workers = cfg.ray_kwargs.ray_init.runtime_env.env_vars  # every Ray worker
    assert (workers.CUDA_VISIBLE_DEVICES, workers.NVIDIA_TF32_OVERRIDE) == ("3,3", "0")
    assert cfg.ray_kwargs.ray_init.num_gpus == 2
    assert (cfg.actor_rollout_ref.rollout.name, cfg.actor_rollout_ref.rollout.checkpoint_engine.backend) == (
        "vllm",
        "ray_object_store",
    )


def test_the_memory_check_passes_the_recipe_and_refuses_a_greedy_vllm_or_a_bad_override():
    from verl_asyncweb.gpu_check import VLLM_ONE_GPU_LAYOUT, memory_check

    gib = 2**30
    ok = memory_check(VLLM_ONE_GPU_LAYOUT.recipe, [], 80 * gib)
    assert ok.ok and ok.detail.startswith("80.0 GiB: vLLM 0.3 x total = 24.0 GiB")
    greedy = memory_check(
        VLLM_ONE_GPU_LAYOUT.recipe, ["actor_rollout_ref.rollout.gpu_memory_utilization=0.99"], 80 * gib
    )
    assert not greedy.ok and "gpu_memory_utilization between 0.013 and 0.928" in greedy.detail
    bad = memory_check(VLLM_ONE_GPU_LAYOUT.recipe, ["actor_rollout_ref.rollout.no_such_key=1"], 80 * gib)
    assert not bad.ok and "no_such_key is not a key of recipe 'gpu_check_vllm_1gpu'" in bad.detail


def _passing_vllm_one_gpu_run(run_dir):
    """The folder a passing run of the recipe leaves: its resolved config, 3 steps with the figures of the H200 run
    of ``--one-gpu`` (gradient norms, lr 1e-3, |log-ratio| 9.5e-7, 2 optimizer steps), 4 episodes per step, each
    played by the weights synced after the previous step."""
    from verl_asyncweb.compare.metric_names import (
        ENV_FAILURES_TOTAL,
        EPISODE_ERRORS_TOTAL,
        OPTIMIZER_STEPS,
        POLICY_LAG_MAX,
        SCREENSHOTS_IMAGES_PER_STEP,
    )
    from verl_asyncweb.gpu_check import GRAD_NORM_KEY, LR_KEY, RATIO_MAX_KEY, RATIO_MIN_KEY, VLLM_ONE_GPU_LAYOUT
    from verl_asyncweb.main import load_config
    from verl_asyncweb.run_folder import RunFolder

    folder = RunFolder(run_dir).prepare()
    folder.write_config(load_config([f"recipe={VLLM_ONE_GPU_LAYOUT.recipe}"])[0])
    metrics = {
        step: {
            SCREENSHOTS_IMAGES_PER_STEP: 12.0,
            GRAD_NORM_KEY: grad_norm,
            LR_KEY: 1e-3,
            POLICY_LAG_MAX: 0.0,
            RATIO_MAX_KEY: 1 + 9.5e-7,
            RATIO_MIN_KEY: 1 - 9.5e-7,
            OPTIMIZER_STEPS: 2.0,
            ENV_FAILURES_TOTAL: 0.0,
            EPISODE_ERRORS_TOTAL: 0.0,
        }
        for step, grad_norm in ((1, 2.2e-4), (2, 1.1e-4), (3, 7.7e-5))
    }
    episodes = [
        {"traj_id": f"{step}-{i}", "steps": [{"policy_version": step - 1}] * 3} for step in metrics for i in range(4)
    ]
    return metrics, episodes


def _write_run(run_dir, metrics, episodes) -> None:
    (run_dir / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": step, "data": data}) + "\n" for step, data in metrics.items())
    )
    (run_dir / "episodes" / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in episodes))


def _no_sync_reached_vllm(metrics, episodes):
    # The trainer moved, vLLM kept the checkpoint's weights: |log-ratio| ~0.1 from step 2 on, every episode v0.
    for step in (2, 3):
        metrics[step].update({"rollout_corr/rollout_is_max": 1.1, "rollout_corr/rollout_is_min": 0.9})
    for episode in episodes:
        episode["steps"] = [{"policy_version": 0}] * 3


def _cut_by_the_timeout_after_step_1(metrics, episodes):
    del metrics[2], metrics[3]
    episodes[:] = [e for e in episodes if e["traj_id"].startswith("1-")]


def _bf16_logits_on_one_side(metrics, episodes):
    metrics[2]["rollout_corr/rollout_is_min"] = 0.9989  # |log| 1.1e-3


def _a_page_failed(metrics, episodes):
    metrics[3]["asyncweb/env_failures_total"] = 1.0


def _a_batch_without_screenshots(metrics, episodes):
    metrics[2]["asyncweb/screenshots/images_per_step"] = 0.0


def _within_the_bound(metrics, episodes):
    metrics[2]["rollout_corr/rollout_is_min"] = 0.99905  # |log| 9.5e-4


@pytest.mark.parametrize(
    ("doctor", "failed"),
    [
        (_within_the_bound, []),
        (
            _no_sync_reached_vllm,
            [
                "rollout and trainer log-probs agree (every token within 0.001)",
                "weights synced to the rollout server once per cycle",
            ],
        ),
        (_cut_by_the_timeout_after_step_1, ["steps finished", "weights synced to the rollout server once per cycle"]),
        (_bf16_logits_on_one_side, ["rollout and trainer log-probs agree (every token within 0.001)"]),
        (_a_page_failed, ["no failed or raising episodes"]),
        (_a_batch_without_screenshots, ["screenshots in every trainer batch"]),
    ],
)
def test_the_verdict_reads_a_vllm_one_gpu_run_folder(tmp_path, doctor, failed):
    from verl_asyncweb.gpu_check import judge_run

    metrics, episodes = _passing_vllm_one_gpu_run(tmp_path)
    _write_run(tmp_path, metrics, episodes)
    assert [check.name for check in judge_run(tmp_path) if not check.ok] == []
    doctor(metrics, episodes)
    _write_run(tmp_path, metrics, episodes)
    assert [check.name for check in judge_run(tmp_path) if not check.ok] == failed
