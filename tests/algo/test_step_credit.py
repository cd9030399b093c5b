"""Step-level credit from branch points (``asyncweb.algo.step_credit=branch``) against a batch computed by hand."""

import math

import pytest
import torch

from verl_asyncweb.algo.config import AsyncWebAlgoConfig
from verl_asyncweb.algo.trajectories import compute_multistep_advantages_for_batch

# (uid, traj_id, step_index, reward, branch point the step was taken from)
ROWS = [
    ("g", "t0", 0, 1.0, ""),  # t0: anchor of g, publishes t0@1 before its step 1
    ("g", "t0", 1, 1.0, "t0@1"),
    ("g", "t0", 2, 1.0, ""),
    ("g", "t1", 1, 0.0, "t0@1"),  # t1, t2: members of g, played from t0@1
    ("g", "t1", 2, 0.0, ""),
    ("g", "t2", 1, 1.0, "t0@1"),
    ("g", "t3", 0, 0.0, ""),  # t3: a fallback of g (its anchor's point came too late): a whole episode
    ("g", "t3", 1, 0.0, ""),
    ("h", "u0", 0, 0.0, ""),  # u0: anchor of h, publishes u0@1
    ("h", "u0", 1, 0.0, "u0@1"),
    ("h", "u1", 1, 1.0, "u0@1"),  # u1: member of h
    ("h", "u1", 2, 1.0, ""),
]
WEIGHT = 0.5


def _advantages(step_credit: str, shared: list[str] | None, rows=ROWS, **config) -> torch.Tensor:
    rewards = torch.zeros(len(rows), 2)
    rewards[:, -1] = torch.tensor([row[3] for row in rows])
    result = compute_multistep_advantages_for_batch(
        token_level_rewards=rewards,
        response_mask=torch.ones(len(rows), 2),
        uid=[row[0] for row in rows],
        traj_id=[row[1] for row in rows],
        config=AsyncWebAlgoConfig(
            step_norm="traj", dynamic_sampling=False, step_credit=step_credit, step_credit_weight=WEIGHT, **config
        ),
        shared_state=shared,
    )
    assert torch.equal(result.advantages[:, 0], result.advantages[:, 1]), "one advantage per step-sample"
    return result.advantages[:, 0].double(), result.metrics


def test_two_branch_points_with_mixed_outcomes_against_the_hand_computation():
    advantages, metrics = _advantages("branch", [row[4] for row in ROWS])
    # Episode level, 1/|tau|: g's rewards 1, 0, 1, 0 give +-1; h's 0, 1 give -+1 (eps aside).
    # Step level at t0@1 over t0, t1, t2 (rewards 1, 0, 1): mean 2/3, std sqrt(2)/3: +1/sqrt2, -sqrt2, +1/sqrt2;
    # at u0@1 over u0, u1: -1, +1. Only the step taken from the point gets the step term, times c_i.
    s = 1 / math.sqrt(2)
    expected = [
        1 / 3,
        (1 + WEIGHT * s) / 3,
        1 / 3,
        (-1 - WEIGHT * math.sqrt(2)) / 2,
        -1 / 2,
        1 + WEIGHT * s,
        -1 / 2,
        -1 / 2,
        -1 / 2,
        (-1 - WEIGHT) / 2,
        (1 + WEIGHT) / 2,
        1 / 2,
    ]
    torch.testing.assert_close(advantages, torch.tensor(expected, dtype=torch.float64), atol=1e-5, rtol=0)
    assert metrics["asyncweb/step_credit/points"] == 2 and metrics["asyncweb/step_credit/samples"] == 5
    assert metrics["asyncweb/step_credit/abs_mean"] == pytest.approx((2 * s + math.sqrt(2) + 2) / 5, abs=1e-5)


def test_the_step_term_follows_its_row_in_any_batch_order_and_two_marked_steps_are_refused():
    """verl reorders a batch (length balancing) before the advantages: the term stays on the step taken from the
    point. A trajectory with two steps marked (once, every step from K on was) is a contract break, not a guess."""
    in_order, _ = _advantages("branch", [row[4] for row in ROWS])
    order = torch.randperm(len(ROWS), generator=torch.Generator().manual_seed(0)).tolist()
    shuffled_rows = [ROWS[i] for i in order]
    shuffled, _ = _advantages("branch", [row[4] for row in shuffled_rows], rows=shuffled_rows)
    torch.testing.assert_close(shuffled, in_order[order], atol=1e-6, rtol=0)
    from_k_on = [point or ("t0@1" if trajectory == "t1" else "") for _, trajectory, _, _, point in ROWS]
    with pytest.raises(ValueError, match="'t1' has two step-samples taken from branch points"):
        _advantages("branch", from_k_on)


def test_a_point_every_member_of_its_group_left_weighs_its_step_by_one_plus_the_weight():
    """With the whole group leaving one point (no fallback), A^S is A^E: the step term only reweighs that step."""
    rows = [row for row in ROWS if row[0] == "h"]
    episode_level, _ = _advantages("none", None, rows=rows)
    advantages, metrics = _advantages("branch", [row[4] for row in rows], rows=rows)
    from_point = torch.tensor([bool(row[4]) for row in rows])
    torch.testing.assert_close(advantages[from_point], (1 + WEIGHT) * episode_level[from_point])
    torch.testing.assert_close(advantages[~from_point], episode_level[~from_point])
    assert metrics["asyncweb/step_credit/abs_mean"] == pytest.approx(1.0, abs=1e-5)


def test_without_branch_points_the_advantages_are_exactly_the_episode_level_ones():
    today, _ = _advantages("none", None)
    for shared in (None, [""] * len(ROWS)):
        unshared, metrics = _advantages("branch", shared)
        assert torch.equal(unshared, today)
        assert not any(name.startswith("asyncweb/step_credit/") for name in metrics)


def test_the_sign_flip_control_flips_the_step_term_too():
    credited, _ = _advantages("branch", [row[4] for row in ROWS])
    flipped, _ = _advantages("branch", [row[4] for row in ROWS], negate_advantage=True)
    assert torch.equal(flipped, -credited)


def test_branch_credit_needs_grpo_and_branch_rollouts():
    with pytest.raises(ValueError, match="step_credit=branch needs estimator multistep_grpo"):
        AsyncWebAlgoConfig(estimator="raftpp", step_credit="branch")
    from verl_asyncweb.main import SetupError, load_config

    with pytest.raises(SetupError, match="set asyncweb.agent.branch_step"):
        load_config(["asyncweb.algo.step_credit=branch"])
    load_config(["asyncweb.algo.step_credit=branch", "asyncweb.agent.branch_step=1"])
