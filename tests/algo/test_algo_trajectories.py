"""Step-sample batches: trajectory deduplication, broadcasting, padding rows and the registered estimators."""

import numpy as np
import pytest
import torch
from torch.testing import assert_close
from verl.trainer.ppo import core_algos

from verl_asyncweb.algo import estimators
from verl_asyncweb.algo.trajectories import (
    compute_multistep_advantages_for_batch,
    count_real_trajectories,
    traj_ids_from_batch_keys,
)

RESP_LEN = 4


def _step_batch(trajs):
    """Rows for ``trajs = [(uid, traj_id, reward, steps), ...]``: one row per step, reward at the last token.

    Response lengths vary (2..4 tokens) so that the broadcast must respect the mask.
    """
    uid, traj_id, num_steps, rewards, lengths = [], [], [], [], []
    for g, t, r, steps in trajs:
        for s in range(steps):
            uid.append(g)
            traj_id.append(t)
            num_steps.append(steps)
            rewards.append(r)
            lengths.append(2 + (s % 3))
    lengths = torch.tensor(lengths)
    mask = (torch.arange(RESP_LEN).unsqueeze(0) < lengths.unsqueeze(1)).float()
    token_rewards = torch.zeros(len(uid), RESP_LEN)
    token_rewards[torch.arange(len(uid)), lengths - 1] = torch.tensor(rewards)
    return token_rewards, mask, uid, traj_id, num_steps


def test_group_stats_count_trajectories_not_step_samples():
    # One success of 2 steps, one failure of 6 steps. Over trajectories: mean 0.5, std 0.5 -> +-1.
    # (Over step-samples the mean would be 0.25 and every advantage different.)
    rewards, mask, uid, traj, steps = _step_batch([("g", "s", 1.0, 2), ("g", "f", 0.0, 6)])
    out = compute_multistep_advantages_for_batch(
        rewards, mask, uid, traj, steps, {"step_norm": "none", "eps": 0.0, "dynamic_sampling": False}
    )
    per_row = torch.tensor([1.0] * 2 + [-1.0] * 6)
    assert_close(out.advantages, per_row.unsqueeze(-1) * mask, rtol=1e-6, atol=1e-7)
    assert_close(out.returns, out.advantages, rtol=0, atol=0)


def test_traj_norm_broadcasts_one_value_to_every_token_of_every_step():
    rewards, mask, uid, traj, steps = _step_batch([("g", "s", 1.0, 5), ("g", "f", 0.0, 12)])
    out = compute_multistep_advantages_for_batch(rewards, mask, uid, traj, steps, {"step_norm": "traj", "eps": 0.0})
    per_row = torch.tensor([1 / 5] * 5 + [-1 / 12] * 12)
    assert_close(out.advantages, per_row.unsqueeze(-1) * mask, rtol=1e-6, atol=1e-7)
    assert (out.advantages[mask == 0] == 0).all()


def test_num_steps_default_to_the_rows_of_each_trajectory():
    rewards, mask, uid, traj, steps = _step_batch([("g", "s", 1.0, 3), ("g", "f", 0.0, 4)])
    given = compute_multistep_advantages_for_batch(rewards, mask, uid, traj, steps, {"step_norm": "traj"})
    counted = compute_multistep_advantages_for_batch(rewards, mask, uid, traj, None, {"step_norm": "traj"})
    assert_close(counted.advantages, given.advantages, rtol=0, atol=0)


def test_padding_rows_copying_a_real_traj_id_get_zero_and_change_nothing():
    rewards, mask, uid, traj, steps = _step_batch([("g", "s", 1.0, 2), ("g", "f", 0.0, 3), ("h", "x", 1.0, 1)])
    cfg = {"step_norm": "traj", "dynamic_sampling": False}
    base = compute_multistep_advantages_for_batch(rewards, mask, uid, traj, steps, cfg)
    # verl's upsample_batch_to_divisible_size copies the first sample's fields, zeroes the mask and rm_scores
    # and gives the row a fresh uid.
    pad_rewards = torch.cat([rewards, torch.zeros(2, RESP_LEN)])
    pad_mask = torch.cat([mask, torch.zeros(2, RESP_LEN)])
    padded = compute_multistep_advantages_for_batch(
        pad_rewards, pad_mask, uid + ["pad0", "pad0"], traj + ["s", "s"], steps + [2, 2], cfg
    )
    assert_close(padded.advantages[:-2], base.advantages, rtol=0, atol=0)
    assert (padded.advantages[-2:] == 0).all()
    assert padded.metrics["asyncweb/adv/num_trajectories"] == 3.0


def test_dynamic_sampling_zeroes_and_flags_constant_groups():
    rewards, mask, uid, traj, steps = _step_batch(
        [("a", "a1", 1.0, 2), ("a", "a2", 1.0, 3), ("b", "b1", 1.0, 2), ("b", "b2", 0.0, 2)]
    )
    cfg = {"estimator": "multistep_reinforce", "step_norm": "none"}
    on = compute_multistep_advantages_for_batch(rewards, mask, uid, traj, steps, {**cfg, "dynamic_sampling": True})
    off = compute_multistep_advantages_for_batch(rewards, mask, uid, traj, steps, {**cfg, "dynamic_sampling": False})
    assert on.filtered_rows.tolist() == [True] * 5 + [False] * 4
    assert (on.advantages[:5] == 0).all() and (off.advantages[:5] == mask[:5]).all()
    assert_close(on.advantages[5:], off.advantages[5:], rtol=0, atol=0)


def test_negate_advantage_control_flips_every_advantage_and_keeps_the_filter():
    rewards, mask, uid, traj, steps = _step_batch(
        [("a", "a1", 1.0, 2), ("a", "a2", 1.0, 3), ("b", "b1", 1.0, 2), ("b", "b2", 0.0, 3)]
    )
    cfg = {"step_norm": "traj", "dynamic_sampling": True}
    plain = compute_multistep_advantages_for_batch(rewards, mask, uid, traj, steps, cfg)
    flipped = compute_multistep_advantages_for_batch(rewards, mask, uid, traj, steps, {**cfg, "negate_advantage": True})
    assert bool((plain.advantages[5:7][mask[5:7] > 0] > 0).all()), "the success of the mixed group is pushed up"
    assert_close(flipped.advantages, -plain.advantages, rtol=0, atol=0)
    assert flipped.filtered_rows.tolist() == plain.filtered_rows.tolist()
    assert flipped.metrics["asyncweb/adv/abs_mean"] == plain.metrics["asyncweb/adv/abs_mean"] > 0


def test_raftpp_config_trains_successful_trajectories_only():
    rewards, mask, uid, traj, steps = _step_batch([("g", "s", 1.0, 2), ("g", "f", 0.0, 4)])
    out = compute_multistep_advantages_for_batch(
        rewards, mask, uid, traj, steps, {"estimator": "raftpp", "step_norm": "const", "k": 4}
    )
    per_row = torch.tensor([0.25] * 2 + [0.0] * 4)
    assert_close(out.advantages, per_row.unsqueeze(-1) * mask, rtol=1e-6, atol=1e-7)


def test_inconsistent_step_samples_raise():
    rewards, mask, uid, traj, steps = _step_batch([("g", "s", 1.0, 2), ("g", "f", 0.0, 2)])
    bad_rewards = rewards.clone()
    bad_rewards[1] = bad_rewards[1] * 0.5
    with pytest.raises(ValueError, match="trajectory 's' has different rewards"):
        compute_multistep_advantages_for_batch(bad_rewards, mask, uid, traj, steps)
    with pytest.raises(ValueError, match="trajectory 's' has step-samples in more than one uid group"):
        compute_multistep_advantages_for_batch(rewards, mask, ["g", "h", "g", "g"], traj, steps)
    with pytest.raises(ValueError, match="trajectory 'f' has different traj_num_steps"):
        compute_multistep_advantages_for_batch(rewards, mask, uid, traj, [2, 2, 2, 3])


def test_batch_keys_split_into_uid_trajectory_and_step():
    uids, trajs, steps = traj_ids_from_batch_keys(["u1_0_0", "u1_0_1", "u1_1_0", "pad9_3_0"])
    assert uids == ["u1", "u1", "u1", "pad9"]
    assert trajs == ["u1_0", "u1_0", "u1_1", "pad9_3"]
    assert steps == [0, 1, 0, 0]
    with pytest.raises(ValueError, match="batch key must look like"):
        traj_ids_from_batch_keys(["nounderscore"])


def test_real_trajectories_are_counted_once_and_padding_rows_not_at_all():
    keys = ["u1_0_0", "u1_0_1", "u1_1_0", "u2_0_0", "u1_1_0"]
    tags = [{}, {}, {}, {"is_padding": True}, {"is_padding": True}]
    assert count_real_trajectories(keys, tags) == 2
    assert count_real_trajectories(keys, [{}] * 5) == 3


@pytest.mark.parametrize(
    ("name", "fn"),
    [
        ("multistep_grpo", estimators.compute_multistep_grpo_advantage),
        ("multistep_reinforce", estimators.compute_multistep_reinforce_advantage),
        ("raftpp", estimators.compute_raftpp_advantage),
    ],
)
def test_estimators_are_registered_in_verl_under_their_names(name, fn):
    assert core_algos.get_adv_estimator_fn(name) is fn


def test_registered_estimator_with_traj_ids_matches_the_batch_helper():
    rewards, mask, uid, traj, steps = _step_batch([("g", "s", 1.0, 5), ("g", "f", 0.0, 12)])
    fn = core_algos.get_adv_estimator_fn("multistep_grpo")
    adv, ret = fn(
        token_level_rewards=rewards,
        response_mask=mask,
        index=np.array(uid, dtype=object),
        config=None,
        traj_id=traj,
        traj_num_steps=steps,
        algo_config={"step_norm": "traj"},
    )
    want = compute_multistep_advantages_for_batch(rewards, mask, uid, traj, steps, {"step_norm": "traj"})
    assert_close(adv, want.advantages, rtol=0, atol=0)
    assert_close(ret, want.returns, rtol=0, atol=0)


def test_verl_compute_advantage_cannot_pass_traj_ids_and_gets_a_clear_error():
    # Documents the verl 0.9.1 limitation the asyncweb trainer works around: compute_advantage passes only
    # token_level_rewards, response_mask, config and index to a registered estimator.
    from verl import DataProto
    from verl.trainer.ppo.ray_trainer import compute_advantage

    rewards, mask, uid, traj, _ = _step_batch([("g", "s", 1.0, 2), ("g", "f", 0.0, 2)])
    data = DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask},
        non_tensors={"uid": np.array(uid, dtype=object), "traj_id": np.array(traj, dtype=object)},
    )
    with pytest.raises(ValueError, match="needs per-row 'index' \\(uid\\) and 'traj_id'"):
        compute_advantage(data, adv_estimator="multistep_grpo")
