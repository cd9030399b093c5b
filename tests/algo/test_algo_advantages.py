"""Trajectory-level advantage formulas against hand-computed values and a plain-loop reference."""

import math
import random
import statistics

import pytest
import torch
from torch.testing import assert_close

from verl_asyncweb.algo.advantages import (
    constant_group_mask,
    multistep_grpo_advantages,
    multistep_reinforce_advantages,
    raftpp_advantages,
    step_scale,
)

TOL = dict(rtol=1e-5, atol=1e-6)


def test_grpo_one_group_traj_norm_divides_by_each_trajectory_length():
    # rewards 1,0,0,1: mean 0.5, population std 0.5 -> normalised +-1 (up to eps); then 1/|tau|.
    adv = multistep_grpo_advantages(
        torch.tensor([1.0, 0.0, 0.0, 1.0]), ["g"] * 4, torch.tensor([2, 4, 5, 10]), "traj", eps=0.0
    )
    assert_close(adv, torch.tensor([1 / 2, -1 / 4, -1 / 5, 1 / 10]), **TOL)


def test_grpo_three_trajectories_uses_population_std():
    # mean 1/3, population std sqrt(2/9): (2/3)/sqrt(2/9) = sqrt(2), (-1/3)/sqrt(2/9) = -1/sqrt(2).
    adv = multistep_grpo_advantages(torch.tensor([1.0, 0.0, 0.0]), ["g"] * 3, torch.tensor([1, 1, 1]), "none", eps=0.0)
    assert_close(adv, torch.tensor([math.sqrt(2), -1 / math.sqrt(2), -1 / math.sqrt(2)]), **TOL)


def test_grpo_const_norm_divides_by_k_regardless_of_length():
    adv = multistep_grpo_advantages(torch.tensor([1.0, 0.0]), ["g", "g"], torch.tensor([5, 12]), "const", k=10, eps=0.0)
    assert_close(adv, torch.tensor([0.1, -0.1]), **TOL)


def test_grpo_without_std_only_centres_rewards():
    adv = multistep_grpo_advantages(
        torch.tensor([3.0, 1.0, 2.0]), ["g"] * 3, torch.tensor([1, 2, 4]), "traj", norm_by_std=False
    )
    assert_close(adv, torch.tensor([1.0, -1.0 / 2, 0.0]), **TOL)


def test_grpo_eps_is_added_to_the_std():
    adv = multistep_grpo_advantages(torch.tensor([1.0, 0.0]), ["g", "g"], torch.tensor([1, 1]), "none", eps=0.5)
    assert_close(adv, torch.tensor([0.5, -0.5]), **TOL)  # 0.5 / (0.5 + 0.5)


def test_grpo_group_of_one_and_constant_group_get_zero():
    adv = multistep_grpo_advantages(
        torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0]), ["solo", "a", "a", "b", "b"], torch.tensor([3, 2, 2, 4, 4]), "none"
    )
    assert_close(adv, torch.zeros(5), **TOL)


def test_grpo_groups_are_independent_and_labels_may_be_a_tensor():
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.5, 1.5])
    by_str = multistep_grpo_advantages(rewards, ["a", "a", "b", "b", "b"], torch.tensor([1, 1, 2, 2, 2]), "traj")
    by_tensor = multistep_grpo_advantages(rewards, torch.tensor([7, 7, 3, 3, 3]), torch.tensor([1, 1, 2, 2, 2]), "traj")
    # group b: mean 5/6, population std sqrt(2/9) = 0.4714; (0.5 - 5/6)/0.4714 = -0.70711, (1.5 - 5/6)/0.4714 = 1.41421
    expected = torch.tensor([1.0, -1.0, -0.70711 / 2, -0.70711 / 2, 1.41421 / 2])
    assert_close(by_str, expected, rtol=1e-4, atol=1e-5)
    assert_close(by_tensor, by_str, **TOL)


def _reference_grpo(rewards, groups, steps, step_norm, k, norm_by_std, eps):
    """Plain-loop reference written from the issue's formula with the statistics module."""
    out = []
    for i, r in enumerate(rewards):
        members = [rewards[j] for j in range(len(rewards)) if groups[j] == groups[i]]
        if len(members) == 1:
            out.append(0.0)
            continue
        a = r - statistics.fmean(members)
        if norm_by_std:
            a /= statistics.pstdev(members) + eps
        c = {"traj": 1.0 / steps[i], "const": 1.0 / k, "none": 1.0}[step_norm]
        out.append(a * c)
    return out


@pytest.mark.parametrize("step_norm", ["traj", "const", "none"])
@pytest.mark.parametrize("norm_by_std", [True, False])
def test_grpo_matches_plain_loop_reference_on_random_groups(step_norm, norm_by_std):
    rng = random.Random(3)
    groups = [rng.choice("abcde") for _ in range(40)]
    rewards = [rng.choice([0.0, 1.0, 0.3]) for _ in range(40)]
    steps = [rng.randint(1, 30) for _ in range(40)]
    got = multistep_grpo_advantages(torch.tensor(rewards), groups, torch.tensor(steps), step_norm, 7, norm_by_std)
    want = _reference_grpo(rewards, groups, steps, step_norm, 7, norm_by_std, 1e-6)
    assert_close(got, torch.tensor(want, dtype=torch.float32), rtol=1e-5, atol=1e-6)


def test_reinforce_is_reward_times_step_norm_without_baseline():
    adv = multistep_reinforce_advantages(torch.tensor([1.0, 0.0, -0.5]), torch.tensor([4, 10, 2]), "traj")
    assert_close(adv, torch.tensor([0.25, 0.0, -0.25]), **TOL)
    adv = multistep_reinforce_advantages(torch.tensor([1.0, 1.0]), torch.tensor([4, 10]), "const", k=10)
    assert_close(adv, torch.tensor([0.1, 0.1]), **TOL)


def test_raftpp_gives_step_norm_to_successes_and_zero_to_failures():
    rewards = torch.tensor([1.0, 0.0, 0.7, -1.0])
    adv = raftpp_advantages(rewards, torch.tensor([5, 12, 4, 3]), "traj")
    assert_close(adv, torch.tensor([1 / 5, 0.0, 1 / 4, 0.0]), **TOL)
    adv = raftpp_advantages(rewards, torch.tensor([5, 12, 4, 3]), "none", success_threshold=0.8)
    assert_close(adv, torch.tensor([1.0, 0.0, 0.0, 0.0]), **TOL)


def test_step_scale_values_and_rejects_unknown_norm():
    assert_close(step_scale(torch.tensor([2, 8]), "traj"), torch.tensor([0.5, 0.125], dtype=torch.float64))
    assert_close(step_scale(torch.tensor([2, 8]), "const", k=4), torch.tensor([0.25, 0.25], dtype=torch.float64))
    with pytest.raises(ValueError, match=r"step_norm must be one of \['traj', 'const', 'none'\], got 'steps'"):
        step_scale(torch.tensor([1]), "steps")


def test_constant_group_mask_flags_singletons_and_all_equal_groups():
    mask = constant_group_mask(torch.tensor([1.0, 1.0, 0.0, 1.0, 0.3]), ["a", "a", "b", "b", "c"])
    assert mask.tolist() == [True, True, False, False, True]


def test_invalid_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="num_steps must be >= 1"):
        multistep_grpo_advantages(torch.tensor([1.0, 0.0]), ["g", "g"], torch.tensor([0, 3]), "traj")
    with pytest.raises(ValueError, match="group_index must have 2 entries, got 1"):
        multistep_grpo_advantages(torch.tensor([1.0, 0.0]), ["g"], torch.tensor([1, 3]), "traj")
