"""The profile fitted to AsyncWebRL's recorded run (``gpu_recorded``) against the timings it records.

``gpu_recorded.yaml`` takes two costs from two recorded timings (the fits are checked here, so the file and the model
cannot drift apart unnoticed) and leaves two more as checks: the steady-state step time of the final 48/16 split, and
the first step's rollout with 24 rollout GPUs, the experience that made AsyncWebRL settle on 48/16.
"""

import pytest
from conftest import override, predict

from verl_asyncweb.plan.profile_file import load_profile

FIRST_ROLLOUT_40_ROLLOUT_GPUS_S = 17 * 60
FIRST_ROLLOUT_24_ROLLOUT_GPUS_S = 29 * 60
TRAIN_40_TRAINER_GPUS_S = 1.6 * 60
STEADY_STEP_48_16_S = 11 * 60
EARLY_GROUPS_PER_STEP = 15
"""The recorded split experiment ran at 120 trajectories per step (15 groups); 128 came with the 48/16 split."""


@pytest.fixture(scope="module")
def recorded():
    return load_profile("gpu_recorded")


def _early(recorded, split: str):
    """The split experiment's shape, over three simulated steps (enough for the first step's figures)."""
    return predict(
        override(
            recorded,
            gpu_split=split,
            **{"pipeline.groups_per_batch": EARLY_GROUPS_PER_STEP, "sim.train_steps": 3, "sim.warmup_steps": 1},
        )
    )


def test_the_fitted_costs_reproduce_the_timings_they_were_fitted_to(recorded):
    # rollout.decode_s_per_token was fitted to the first step's rollout at 40 rollout GPUs, the trainer's per-token
    # costs to 1.6 min of training per step (steady state) on 40 trainer GPUs.
    assert _early(recorded, "40:24").first_batch_s == pytest.approx(FIRST_ROLLOUT_40_ROLLOUT_GPUS_S, rel=0.03)
    steady = override(recorded, gpu_split="24:40", **{"pipeline.groups_per_batch": EARLY_GROUPS_PER_STEP})
    assert predict(steady).train_s == pytest.approx(TRAIN_40_TRAINER_GPUS_S, rel=0.03)


def test_steady_state_step_of_the_final_split_is_close_to_the_recorded_eleven_minutes(recorded):
    # Not an input: the fits above come from the earlier splits' first step and training time.
    step_s = predict(recorded).step_s
    print(f"gpu_recorded 48/16: {step_s / 60:.1f} min per step predicted, ~11 recorded")
    assert step_s == pytest.approx(STEADY_STEP_48_16_S, rel=0.25)


def test_fewer_rollout_gpus_make_the_first_step_rollout_slower_as_recorded(recorded):
    # The recorded experience: 17 -> 29 min (x1.71) going from 40 to 24 rollout GPUs. The model reproduces the
    # direction but not the size: it admits (eta + 1) x 15 groups = 360 trajectories at the first step (15 per
    # server), where the recorded servers ran ~45 concurrent requests each, so its servers never queue.
    forty, twenty_four = _early(recorded, "40:24").first_batch_s, _early(recorded, "24:40").first_batch_s
    recorded_change = FIRST_ROLLOUT_24_ROLLOUT_GPUS_S / FIRST_ROLLOUT_40_ROLLOUT_GPUS_S - 1
    print(
        f"gpu_recorded first step's rollout: 40 rollout GPUs {forty / 60:.1f} min, 24: {twenty_four / 60:.1f} min "
        f"({twenty_four / forty - 1:+.1%}; recorded {recorded_change:+.0%})"
    )
    assert twenty_four > forty * 1.03
