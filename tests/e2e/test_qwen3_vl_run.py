"""The GPU recipes' model family through verl's engine on CPU: a tiny Qwen3-VL trained by ``verl_asyncweb.main``.

Qwen3-VL differs from the Qwen2.5-VL smoke model everywhere images meet tokens: its processor (16-pixel patches,
its own video processor), verl's Qwen3-VL rope index (interleaved mrope) and deepstack visual features in the
trainer's forward, and the pixel rebuild from screenshot keys. A synchronous run (policy lag 0) must train and
recompute the rollout server's log-probs on the same weights: pi_prox equals pi_behave within 1e-3 on every step.
"""

from pathlib import Path

import pytest
from e2e_runs import main_command, read_steps, run_to_completion
from omegaconf import OmegaConf

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.browser]

STEPS = 2


def test_qwen3_vl_run_trains_with_rollout_and_trainer_agreeing(tmp_path: Path):
    run_dir = tmp_path / "run"
    command = main_command(
        run_dir,
        "asyncweb.tiny_model_size=qwen3-tiny",
        "asyncweb.rollout_mode=sync",
        f"trainer.total_training_steps={STEPS}",
    )
    run_to_completion(command, tmp_path / "run.log")

    config = OmegaConf.load(run_dir / "config.yaml")
    assert OmegaConf.load(Path(config.actor_rollout_ref.model.path) / "config.json").model_type == "qwen3_vl"
    steps = read_steps(run_dir / "metrics.jsonl")
    assert sorted(steps) == list(range(1, STEPS + 1))
    for step, metrics in steps.items():
        assert metrics["asyncweb/screenshots/images_per_step"] > 0, step
        assert metrics["asyncweb/screenshots/dropped_samples"] == 0, step
        assert metrics["training/rollout_probs_diff_max"] < 1e-3, (step, metrics["training/rollout_probs_diff_max"])
