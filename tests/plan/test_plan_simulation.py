"""The pipeline simulation: determinism, sync vs async, the staleness bound, dynamic sampling, the replica model."""

import math
import random
from collections import deque

import pytest
from conftest import override, predict

from verl_asyncweb.plan.profile import RolloutCost
from verl_asyncweb.plan.replica import Replica
from verl_asyncweb.plan.simulate import simulate
from verl_asyncweb.plan.workload import WorkloadSampler, expected_discard_prob, geometric_stop_prob, latency_s


def test_simulate_same_profile_and_seed_gives_identical_prediction(gpu_short):
    # simulate itself, not the memoised predict: two independent runs
    short = override(gpu_short, **{"sim.train_steps": 8})
    assert simulate(short) == simulate(short)
    assert simulate(override(short, **{"sim.seed": 1})) != simulate(short)


def test_sync_mode_has_zero_policy_lag_and_no_rollout_during_update(gpu_short, cpu_laptop):
    for profile in (gpu_short, cpu_laptop):
        sync = predict(override(profile, **{"pipeline.mode": "sync"}))
        assert sync.policy_lag_hist == {0: 1.0}
        assert sync.rollout_busy_during_update_frac == 0.0
        assert sync.stale_drop_frac == 0.0


def test_async_trains_at_least_as_many_trajectories_per_hour_as_sync(gpu_short, cpu_laptop):
    for profile in (gpu_short, cpu_laptop):
        async_ = predict(override(profile, **{"pipeline.mode": "async"}))
        sync = predict(override(profile, **{"pipeline.mode": "sync"}))
        assert async_.trained_trajs_per_hour >= sync.trained_trajs_per_hour, profile.name
        assert async_.rollout_busy_during_update_frac > 0.0, "async must overlap rollout with the update"
        assert async_.trainer_idle_frac < sync.trainer_idle_frac


def test_async_staleness_zero_admits_nothing_ahead_and_equals_sync(gpu_short):
    eta0 = predict(override(gpu_short, **{"pipeline.staleness": 0}))
    sync = predict(override(gpu_short, **{"pipeline.mode": "sync"}))
    assert eta0.policy_lag_hist == {0: 1.0}
    assert eta0.stale_drop_frac == 0.0
    assert eta0.rollout_busy_during_update_frac == 0.0
    assert eta0.trained_trajs_per_hour == pytest.approx(sync.trained_trajs_per_hour, rel=1e-9)


@pytest.mark.parametrize("staleness", [1, 2, 3])
def test_async_policy_lag_never_exceeds_staleness_and_tail_latency_causes_drops(gpu_short, staleness):
    prediction = predict(override(gpu_short, **{"pipeline.staleness": staleness}))
    assert prediction.policy_lag_max == staleness
    assert sum(prediction.policy_lag_hist.values()) == pytest.approx(1.0)
    # Heavy-tailed web latency keeps some groups running past eta versions: they are dropped, not trained.
    assert prediction.stale_drop_frac > 0.0
    assert prediction.finished_trajs_per_hour > prediction.trained_trajs_per_hour


def test_dynamic_sampling_discards_p_to_the_n_plus_one_minus_p_to_the_n_of_groups(cpu_laptop):
    profile = override(
        cpu_laptop,
        **{"workload.success_prob": 0.3, "workload.success_concentration": None, "sim.train_steps": 1500},
    )
    prediction = predict(profile)
    expected = 0.3**4 + 0.7**4
    groups = prediction.measured_steps * 2 / (1 - expected)  # ~4,000: standard error ~0.007
    assert expected_discard_prob(profile.workload, 4) == pytest.approx(expected)
    assert prediction.group_discard_frac == pytest.approx(
        expected, abs=4 * math.sqrt(expected * (1 - expected) / groups)
    )


def test_dynamic_sampling_with_task_spread_discards_the_beta_expectation(cpu_laptop):
    prediction = predict(override(cpu_laptop, **{"sim.train_steps": 400}))
    expected = expected_discard_prob(cpu_laptop.workload, cpu_laptop.pipeline.group_size)
    assert expected > 0.3**4 + 0.7**4
    assert prediction.group_discard_frac == pytest.approx(expected, abs=0.03)


def test_dynamic_sampling_off_discards_nothing(gpu_short):
    prediction = predict(override(gpu_short, **{"pipeline.dynamic_sampling": False}))
    assert prediction.group_discard_frac == 0.0


def test_dynamic_sampling_that_discards_every_group_is_refused(gpu_paper):
    with pytest.raises(ValueError, match="pipeline.dynamic_sampling discards"):
        predict(override(gpu_paper, **{"workload.success_prob": 0.0}))


@pytest.mark.parametrize(("mean", "limit"), [(5.1, 30), (12.5, 30), (1.0, 1), (3.0, 3), (1.5, 10)])
def test_episode_steps_have_the_profile_mean_under_the_limit(gpu_paper, mean, limit):
    stop = geometric_stop_prob(mean, limit)
    exact_mean = (1 - (1 - stop) ** limit) / stop if stop > 0 else limit
    assert exact_mean == pytest.approx(mean, rel=1e-9)
    workload = override(
        gpu_paper,
        **{"workload.max_steps": limit, "workload.steps_success": 1, "workload.steps_failure": mean},
        **{"workload.success_prob": 0.0},
    ).workload
    sampler = WorkloadSampler(workload, gpu_paper.env, seed=3)
    draws = [episode.num_steps for _ in range(3000) for episode in sampler.group(1)]
    assert max(draws) <= limit
    assert sum(draws) / len(draws) == pytest.approx(mean, rel=0.05)


def test_latency_draw_is_the_env_latency_model_formula(gpu_paper):
    spec = gpu_paper.env.latency
    ours, reference = random.Random(7), random.Random(7)
    for _ in range(200):
        expected = min(reference.lognormvariate(math.log(spec.median_s), spec.sigma), spec.max_delay_s)
        assert latency_s(spec, ours) == expected


def _cost(slowdown: float, concurrency: int, prefill_s: float = 0.0) -> RolloutCost:
    return RolloutCost(
        gpus=1,
        gpus_per_replica=1,
        max_concurrency=concurrency,
        prefill_s=prefill_s,
        decode_s_per_token=1.0,
        concurrency_slowdown=slowdown,
    )


def test_replica_shares_its_rate_between_concurrent_requests():
    # Two requests of 2 s and 4 s solo work, slowdown 0.5: each runs at 1/1.5 while both run.
    replica = Replica(_cost(0.5, concurrency=8))
    replica.submit(0.0, 0.0, 2.0, "short")
    replica.submit(0.0, 0.0, 4.0, "long")
    assert replica.next_finish_s(0.0) == pytest.approx(3.0)
    assert replica.pop_finished(3.0) == ["short"]
    assert replica.next_finish_s(3.0) == pytest.approx(5.0)  # 2 s of solo work left, alone: rate 1
    assert replica.pop_finished(5.0) == ["long"]
    assert replica.busy_s == pytest.approx(5.0)


def test_replica_queues_beyond_its_concurrency_and_pauses_for_weight_sync():
    replica = Replica(_cost(0.0, concurrency=1))
    replica.submit(0.0, 0.0, 1.0, "first")
    replica.submit(0.0, 0.0, 1.0, "second")
    replica.set_paused(0.5, True)
    assert replica.next_finish_s(0.5) is None
    replica.set_paused(2.5, False)
    assert replica.next_finish_s(2.5) == pytest.approx(3.0)
    assert replica.pop_finished(3.0) == ["first"]
    assert replica.pop_finished(4.0) == ["second"]
    assert replica.busy_s == pytest.approx(2.0)


def test_prefills_take_the_replica_one_at_a_time_and_stall_decoding():
    # Prefill 1 s each, perfect decode batching: "a" prefills 0-1 s and decodes; "b" arrives at 1.5 s and its
    # prefill takes the replica at once, so a's decoding stalls until 2.5 s.
    replica = Replica(_cost(0.0, concurrency=8, prefill_s=1.0))
    replica.submit(0.0, 1.0, 2.0, "a")
    assert replica.next_finish_s(0.0) == pytest.approx(1.0)  # the end of a's prefill
    assert replica.pop_finished(1.0) == []
    replica.submit(1.5, 1.0, 2.0, "b")  # a has decoded 0.5 s of its 2
    assert replica.next_finish_s(1.5) == pytest.approx(2.5)  # b's prefill; a waits
    assert replica.pop_finished(2.5) == []
    assert replica.next_finish_s(2.5) == pytest.approx(4.0)  # both decode; a has 1.5 s left
    assert replica.pop_finished(4.0) == ["a"]
    assert replica.pop_finished(4.5) == ["b"]
    assert replica.busy_s == pytest.approx(4.5)


def test_work_left_below_the_clock_resolution_still_finishes():
    # gpu_recorded at gpu_split=24:40 once hung here: 1.5e-12 s of prefill left at t = 17,872 s is below the
    # resolution of the clock (3.6e-12 s), so the next event was scheduled at "now" for ever.
    now = 17872.258582924587
    replica = Replica(_cost(0.0, concurrency=8, prefill_s=1.0))
    replica.submit(now, 1.0, 2.0, "r")
    replica._prefilling[0][0] = 1.5e-12  # what a prefill's remainder came to after floating-point advances
    finish_s = replica.next_finish_s(now)
    assert finish_s > now
    assert replica.pop_finished(finish_s) == []  # the prefill is done, decoding starts
    assert replica._prefilling == deque() and replica.next_finish_s(finish_s) == pytest.approx(now + 2.0)


def test_a_replica_sharing_compute_with_the_trainer_slows_while_it_computes():
    replica = Replica(_cost(0.0, concurrency=1, prefill_s=1.0))
    replica.set_share(0.0, 0.5)
    replica.submit(0.0, 1.0, 2.0, "r")
    assert replica.next_finish_s(0.0) == pytest.approx(2.0)  # 1 s of prefill at half speed
    replica.set_share(1.0, 1.0)  # the trainer stopped half-way through the prefill
    assert replica.next_finish_s(1.0) == pytest.approx(1.5)
    assert replica.pop_finished(1.5) == []
    assert replica.next_finish_s(1.5) == pytest.approx(3.5)
    assert replica.pop_finished(3.5) == ["r"] and replica.busy_s == pytest.approx(3.5)


def test_rollout_contention_slows_only_what_overlaps(cpu_laptop):
    # Sync never overlaps rollout and training: contention changes nothing. Async overlaps them: its trainer
    # compute and steps get longer, by less than the factor 2 of computing with rollout all the time.
    sync = override(cpu_laptop, **{"pipeline.mode": "sync"})
    assert predict(override(sync, **{"trainer.rollout_contention": 1.0})) == predict(sync)
    alone, shared = predict(cpu_laptop), predict(override(cpu_laptop, **{"trainer.rollout_contention": 1.0}))
    assert alone.train_s < shared.train_s < 2 * alone.train_s
    assert shared.step_s > alone.step_s
