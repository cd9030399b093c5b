"""Shared profiles of the planner tests; every simulation here is pure Python and well under a second."""

import functools
import json
from pathlib import Path

import pytest
import yaml

from verl_asyncweb.plan.overrides import apply_overrides
from verl_asyncweb.plan.profile import Profile
from verl_asyncweb.plan.profile_file import load_profile
from verl_asyncweb.plan.simulate import simulate

predict = functools.cache(simulate)
"""``simulate`` memoised per profile (profiles are frozen): tests that look at the same run share it."""


def override(profile: Profile, **dotted: object) -> Profile:
    """``profile`` with fields set by dotted name: ``override(p, **{"pipeline.mode": "sync"})``."""
    return apply_overrides(profile, [(key, str(value)) for key, value in dotted.items()])


@pytest.fixture(scope="session")
def gpu_paper() -> Profile:
    return load_profile("gpu_paper")


@pytest.fixture(scope="session")
def gpu_short(gpu_paper) -> Profile:
    """The paper profile over fewer steps, for tests of the mechanics rather than of its figures."""
    return override(gpu_paper, **{"sim.train_steps": 14, "sim.warmup_steps": 3})


@pytest.fixture(scope="session")
def cpu_laptop() -> Profile:
    return load_profile("cpu_laptop_learning")


def write_run(
    run_dir: Path, mode: str = "async", trained: int = 4, trainer_idle: float = 0.5, compute_scale: float = 1.0
) -> None:
    """A run folder as ``verl_asyncweb.main`` writes it: ``config.yaml`` and three steps of ``metrics.jsonl``
    (``compute_scale`` multiplies the pi_prox and update times)."""
    config = {
        "actor_rollout_ref": {
            "rollout": {
                "n": 2,
                "nnodes": 1,
                "n_gpus_per_node": 1,
                "tensor_model_parallel_size": 1,
                "name": "hf",
                "agent": {"num_workers": 1},
            }
        },
        "data": {"train_batch_size": 2},
        "trainer": {"nnodes": 1, "n_gpus_per_node": 2, "device": "cpu"},
        "asyncweb": {
            "recipe": "unit",
            "rollout_mode": mode,
            "staleness": 1,
            "algo": {"dynamic_sampling": False},
            "agent": {"max_steps": 3},
            "env": {
                "num_browsers": 1,
                "pages_per_browser": 4,
                "latency": {"enable": False, "median_s": 1.5, "sigma": 1.15, "max_delay_s": 60.0},
            },
        },
    }
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))

    def row(step, wall, idle, gen, pi_prox, update, tokens, prompt):
        pi_prox, update = pi_prox * compute_scale, update * compute_scale
        data = {
            "asyncweb/wall_s": wall,
            "asyncweb/rollout_idle_frac": idle,
            "asyncweb/trainer_idle_frac": trainer_idle,
            "asyncweb/trajectories": 10,
            "asyncweb/trained_trajectories": trained,
            "asyncweb/success_rate": 0.2,
            "asyncweb/steps_per_traj/success": 1,
            "asyncweb/steps_per_traj/failure": 3,
            "asyncweb/response_tokens_per_step/success": 10,
            "asyncweb/response_tokens_per_step/failure": 20,
            "prompt_length/mean": prompt,
            "perf/total_num_tokens": tokens,
            "timing_s/step": gen + pi_prox + update + 0.5 + 2.0,
            "timing_s/gen": gen,
            "timing_s/old_log_prob": pi_prox,
            "timing_s/update_actor": update,
            "timing_s/update_weights": 0.5,
        }
        return json.dumps({"step": step, "data": data})

    rows = [
        row(1, 100.0, 0.9, 50, 9, 9, 1000, 999),  # start-up, left out
        row(2, 160.0, 0.5, 10, 1, 5, 1000, 100),
        row(3, 200.0, 0.25, 15, 4, 10, 2000, 200),
    ]
    (run_dir / "metrics.jsonl").write_text("\n".join(rows) + "\n")
