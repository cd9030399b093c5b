"""The paper's mechanism, stated with autograd: 1/|tau| shrinks every token of long (failed) trajectories.

One group: a success of 5 steps, a failure of 12 steps, one step-sample per step. Advantages go through the
batch helper, the loss through verl's registry, gradients through autograd. At u = w = 1 no clip is active,
so the gradient on a token is -A_i / N and its norm is proportional to |A_i| = |R_i - mean|/std * c_i.
"""

import pytest
import torch
from algo_helpers import make_actor_config
from torch.testing import assert_close
from verl.trainer.ppo.core_algos import get_policy_loss_fn

from verl_asyncweb.algo.trajectories import compute_multistep_advantages_for_batch

TOKENS_PER_STEP = 3


def _per_token_grad_norms(step_norm: str) -> tuple[torch.Tensor, torch.Tensor]:
    steps = {"success": 5, "failure": 12}
    rows = [("success", 1.0)] * steps["success"] + [("failure", 0.0)] * steps["failure"]
    mask = torch.ones(len(rows), TOKENS_PER_STEP)
    rewards = torch.zeros(len(rows), TOKENS_PER_STEP)
    rewards[:, -1] = torch.tensor([r for _, r in rows])
    traj_id = [t for t, _ in rows]
    adv = compute_multistep_advantages_for_batch(
        rewards, mask, ["task"] * len(rows), traj_id, [steps[t] for t in traj_id], {"step_norm": step_norm, "k": 10}
    ).advantages

    log_prob = torch.full((len(rows), TOKENS_PER_STEP), -1.3, requires_grad=True)
    loss, _ = get_policy_loss_fn("decoupled_ppo")(
        log_prob.detach(), log_prob, adv, mask.bool(), "token-mean", make_actor_config(), torch.ones_like(mask)
    )
    loss.backward()
    per_token = log_prob.grad.abs()
    return per_token[: steps["success"]].flatten(), per_token[steps["success"] :].flatten()


def test_traj_norm_gives_each_failed_token_5_12_of_the_gradient_of_a_successful_token():
    success, failure = _per_token_grad_norms("traj")
    assert torch.all(success > 0)
    assert_close(failure / success.mean(), torch.full_like(failure, 5 / 12), rtol=1e-6, atol=0)
    assert_close(success, torch.full_like(success, success[0].item()), rtol=1e-6, atol=0)


def test_const_norm_gives_failed_and_successful_tokens_equal_gradient():
    success, failure = _per_token_grad_norms("const")
    assert torch.all(success > 0)
    assert_close(failure / success.mean(), torch.ones_like(failure), rtol=1e-6, atol=0)


@pytest.mark.parametrize("step_norm", ["traj", "const"])
def test_gradient_per_token_is_advantage_over_token_count(step_norm):
    success, _ = _per_token_grad_norms(step_norm)
    c = 1 / 5 if step_norm == "traj" else 1 / 10
    n_tokens = (5 + 12) * TOKENS_PER_STEP
    # group of two with rewards 1, 0: (1 - 0.5) / (0.5 + 1e-6) * c
    assert_close(success, torch.full_like(success, 0.5 / (0.5 + 1e-6) * c / n_tokens), rtol=1e-5, atol=0)
