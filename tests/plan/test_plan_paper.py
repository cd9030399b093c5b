"""The GPU paper profile against AsyncWebRL's published figures and recorded experience.

The profile takes the pipeline's shape from REFERENCE.md and a-priori component costs (see its ``sources:``); the
paper's throughput is never an input. The band is loose on purpose: the point is that the prediction is computed
from documented inputs and lands in the right range, and the test states the error.
"""

from conftest import override, predict

PAPER_SYNC_TRAJS_PER_HOUR = 1300  # REFERENCE.md "Throughput": WebGym sync, Qwen3-VL-8B-Instruct
PAPER_ASYNC_TRAJS_PER_HOUR = 3100  # REFERENCE.md "Throughput": AsyncWebRL
BAND = (0.5, 2.0)
"""Accepted prediction / paper ratio: within a factor of two."""


def _paper_sync(gpu_paper):
    """WebGym's sync baseline: REINFORCE, no dynamic sampling (REFERENCE.md)."""
    return override(gpu_paper, **{"pipeline.mode": "sync", "pipeline.dynamic_sampling": False})


def test_gpu_paper_prediction_lands_within_a_factor_of_two_of_the_paper(gpu_paper):
    sync, async_ = predict(_paper_sync(gpu_paper)), predict(gpu_paper)
    errors = {
        "sync": sync.trained_trajs_per_hour / PAPER_SYNC_TRAJS_PER_HOUR,
        "async trained": async_.trained_trajs_per_hour / PAPER_ASYNC_TRAJS_PER_HOUR,
        "async finished": async_.finished_trajs_per_hour / PAPER_ASYNC_TRAJS_PER_HOUR,
    }
    report = ", ".join(f"{name} {ratio - 1:+.0%}" for name, ratio in errors.items())
    print(
        f"gpu_paper vs paper: sync {sync.trained_trajs_per_hour:.0f}/h vs {PAPER_SYNC_TRAJS_PER_HOUR}, async "
        f"trained {async_.trained_trajs_per_hour:.0f}/h, finished {async_.finished_trajs_per_hour:.0f}/h vs "
        f"{PAPER_ASYNC_TRAJS_PER_HOUR}; errors: {report}"
    )
    for name, ratio in errors.items():
        assert BAND[0] <= ratio <= BAND[1], f"{name}: prediction / paper = {ratio:.2f} ({report})"
    speedup = async_.trained_trajs_per_hour / sync.trained_trajs_per_hour
    assert 1.5 <= speedup <= 4.0, f"async / sync = {speedup:.2f}, paper ~2.4 (2.4-2.9x end to end)"


def _split(gpu_paper, rollout_gpus: int, trainer_gpus: int):
    return predict(override(gpu_paper, gpu_split=f"{rollout_gpus}:{trainer_gpus}"))


def test_moving_gpus_from_rollout_to_trainer_makes_rollout_the_bottleneck(gpu_paper):
    # The mechanism behind the recorded experience: with fewer rollout GPUs the trainer waits for data.
    paper, middle, few = _split(gpu_paper, 48, 16), _split(gpu_paper, 32, 32), _split(gpu_paper, 24, 40)
    assert paper.trainer_idle_frac < 0.05
    assert paper.trainer_idle_frac < middle.trainer_idle_frac < few.trainer_idle_frac
    assert few.trainer_idle_frac > 0.3
    assert paper.rollout_idle_frac > middle.rollout_idle_frac > few.rollout_idle_frac


def test_with_a_priori_costs_rollout_is_over_provisioned_and_24_40_is_faster_than_48_16(gpu_paper):
    # gpu_paper's bandwidth-based generation cost is 21x below what AsyncWebRL's recorded run implies
    # (gpu_recorded): with it, rollout idles half the time at 48/16 and the staleness admission, not the rollout
    # GPUs, caps throughput, so GPUs moved to the trainer help. tests/plan/test_plan_recorded.py shows the recorded
    # direction (fewer rollout GPUs, slower) once the generation cost is fitted to the recorded step times.
    paper, few = _split(gpu_paper, 48, 16), _split(gpu_paper, 24, 40)
    assert paper.rollout_idle_frac > 0.4
    assert few.step_s < paper.step_s
