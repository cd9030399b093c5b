"""The ``decoupled_ppo`` policy loss: hand-computed values, equality with verl's vanilla loss, cap and metrics."""

import math
import os
import subprocess
import sys

import pytest
import torch
from algo_helpers import make_actor_config
from torch.testing import assert_close
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla
from verl.workers.config import FSDPActorConfig, PolicyLossConfig

from verl_asyncweb.algo.losses import compute_policy_loss_decoupled_ppo

TOL = dict(rtol=1e-5, atol=1e-6)


def _hand_case():
    """Four tokens (clip 0.2, dual clip 3, cap 5) with u, A, w chosen so every branch is taken once."""
    old = torch.tensor([[-1.0, -2.0, -0.5, -1.5]])
    u = torch.tensor([[1.5, 0.5, 5.0, 1.0]])
    adv = torch.tensor([[1.0, -1.0, -1.0, 2.0]])
    w = torch.tensor([[1.0, 2.0, 1.0, 6.0]])
    log_prob = (old + u.log()).requires_grad_()
    return old, log_prob, adv, w, torch.ones(1, 4, dtype=torch.bool)


def test_hand_computed_loss_drop_mode():
    # token 1: max(-1.5, -1.2) = -1.2 (upper clip); token 2: max(0.5, 0.8) * w 2 = 1.6;
    # token 3: max(5, 1.2) = 5, dual clip min(5, 3) = 3; token 4: w 6 > cap 5, dropped -> 0.
    loss, _ = compute_policy_loss_decoupled_ppo(
        *_hand_case()[:3], _hand_case()[4], "token-mean", make_actor_config(), _hand_case()[3]
    )
    assert_close(loss, torch.tensor((-1.2 + 1.6 + 3.0 + 0.0) / 4), **TOL)


def test_hand_computed_loss_clip_mode_uses_the_cap_as_weight():
    old, log_prob, adv, w, mask = _hand_case()
    loss, _ = compute_policy_loss_decoupled_ppo(
        old, log_prob, adv, mask, "token-mean", make_actor_config(5.0, "clip"), w
    )
    assert_close(loss, torch.tensor((-1.2 + 1.6 + 3.0 - 2.0 * 1.0 * 5.0) / 4), **TOL)


def test_hand_computed_metrics():
    old, log_prob, adv, w, mask = _hand_case()
    _, m = compute_policy_loss_decoupled_ppo(old, log_prob, adv, mask, "token-mean", make_actor_config(), w)
    assert m["actor/decoupled_clip_rate"] == pytest.approx(2 / 4)  # tokens 1 and 2
    assert m["actor/pg_clipfrac"] == pytest.approx(2 / 4)
    assert m["actor/pg_clipfrac_lower"] == pytest.approx(1 / 4)  # token 3
    assert m["actor/naive_clip_rate"] == pytest.approx(2 / 4)  # u*w = 1.5, 1.0, 5.0, 6.0: tokens 1 and 4
    assert m["actor/behav_over_cap_frac"] == pytest.approx(1 / 4)
    assert m["actor/behav_w_mean"] == pytest.approx(10 / 4)
    assert m["actor/behav_w_max"] == pytest.approx(6.0)
    assert m["actor/ppo_kl"] == pytest.approx(-sum(math.log(x) for x in (1.5, 0.5, 5.0, 1.0)) / 4, rel=1e-5)


def _random_case(seed=0, batch=6, length=9, w_scale=0.4):
    gen = torch.Generator().manual_seed(seed)
    old = -torch.rand(batch, length, generator=gen) * 3
    log_prob = old + 0.4 * torch.randn(batch, length, generator=gen)
    adv = torch.randn(batch, length, generator=gen)
    w = torch.exp(w_scale * torch.randn(batch, length, generator=gen))
    mask = torch.rand(batch, length, generator=gen) > 0.2
    return old, log_prob, adv, w, mask


def _loss_and_grad(fn, old, log_prob, adv, mask, config, w):
    lp = log_prob.clone().requires_grad_()
    loss, metrics = fn(old, lp, adv, mask, "token-mean", config, w)
    loss.backward()
    return loss.detach(), lp.grad, metrics


@pytest.mark.parametrize("loss_agg_mode", ["token-mean", "seq-mean-token-mean"])
def test_equals_verl_vanilla_when_every_weight_is_below_the_cap(loss_agg_mode):
    old, log_prob, adv, w, mask = _random_case()
    w = w.clamp(max=4.9)
    cfg = make_actor_config()
    ours = compute_policy_loss_decoupled_ppo(old, log_prob, adv, mask, loss_agg_mode, cfg, w)
    theirs = compute_policy_loss_vanilla(old, log_prob, adv, mask, loss_agg_mode, cfg, w)
    assert_close(ours[0], theirs[0], rtol=1e-6, atol=1e-7)
    ours = _loss_and_grad(compute_policy_loss_decoupled_ppo, old, log_prob, adv, mask, cfg, w)
    theirs = _loss_and_grad(compute_policy_loss_vanilla, old, log_prob, adv, mask, cfg, w)
    assert_close(ours[1], theirs[1], rtol=1e-6, atol=1e-8)
    assert ours[2]["actor/pg_clipfrac"] == pytest.approx(theirs[2]["actor/pg_clipfrac"], rel=1e-5)


def test_unit_weights_give_plain_ppo():
    old, log_prob, adv, _, mask = _random_case(1)
    cfg = make_actor_config()
    ours = _loss_and_grad(compute_policy_loss_decoupled_ppo, old, log_prob, adv, mask, cfg, torch.ones_like(old))
    plain = _loss_and_grad(compute_policy_loss_vanilla, old, log_prob, adv, mask, cfg, None)
    assert_close(ours[0], plain[0], rtol=1e-6, atol=1e-7)
    assert_close(ours[1], plain[1], rtol=1e-6, atol=1e-8)
    no_weights = _loss_and_grad(compute_policy_loss_decoupled_ppo, old, log_prob, adv, mask, cfg, None)
    assert_close(no_weights[0], plain[0], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("mode", ["drop", "clip"])
def test_over_cap_weights_match_vanilla_with_dropped_or_clipped_weights(mode):
    old, log_prob, adv, w, mask = _random_case(2, w_scale=1.5)
    assert (w[mask] > 5.0).any()
    cfg = make_actor_config(5.0, mode)
    capped = w.masked_fill(w > 5.0, 0.0) if mode == "drop" else w.clamp(max=5.0)
    ours = _loss_and_grad(compute_policy_loss_decoupled_ppo, old, log_prob, adv, mask, cfg, w)
    theirs = _loss_and_grad(compute_policy_loss_vanilla, old, log_prob, adv, mask, cfg, capped)
    assert_close(ours[0], theirs[0], rtol=1e-6, atol=1e-7)
    assert_close(ours[1], theirs[1], rtol=1e-6, atol=1e-8)
    assert ours[2]["actor/behav_over_cap_frac"] == pytest.approx((w[mask] > 5.0).float().mean().item(), rel=1e-6)


def test_token_above_cap_has_zero_gradient_in_drop_mode():
    old, log_prob, adv, w, mask = _random_case(3)
    w[2, 3], mask[2, 3], adv[2, 3] = 7.5, True, 1.0
    _, grad, _ = _loss_and_grad(compute_policy_loss_decoupled_ppo, old, log_prob, adv, mask, make_actor_config(), w)
    assert grad[2, 3] == 0.0
    assert (grad[mask & (w <= 5.0) & (adv != 0)] != 0).any()


def test_stale_behaviour_decoupled_clips_fewer_tokens_than_naive_ppo():
    # pi_prox is close to pi_theta (one update away); pi_behave is several versions stale.
    gen = torch.Generator().manual_seed(4)
    prox = -torch.rand(16, 32, generator=gen) * 3
    theta = prox + 0.05 * torch.randn(16, 32, generator=gen)
    behave = prox + 0.6 * torch.randn(16, 32, generator=gen)
    adv = torch.randn(16, 32, generator=gen)
    mask = torch.ones(16, 32, dtype=torch.bool)
    w = torch.exp(prox - behave)
    cfg = make_actor_config(behav_cap=None)
    _, metrics = compute_policy_loss_decoupled_ppo(prox, theta, adv, mask, "token-mean", cfg, w)
    # Independent reference for the naive rate: verl's own PPO with pi_behave as the old policy.
    _, naive = compute_policy_loss_vanilla(behave, theta, adv, mask, "token-mean", make_actor_config(), None)
    assert metrics["actor/naive_clip_rate"] == pytest.approx(naive["actor/pg_clipfrac"], abs=1e-6)
    assert metrics["actor/decoupled_clip_rate"] < 0.5 * metrics["actor/naive_clip_rate"]


def test_masked_padding_tokens_change_neither_loss_nor_gradient_even_with_garbage():
    old, log_prob, adv, w, mask = _random_case(5)
    cfg = make_actor_config()
    base = _loss_and_grad(compute_policy_loss_decoupled_ppo, old, log_prob, adv, mask, cfg, w * mask)
    pad = ~mask
    g_old, g_lp, g_adv = old.masked_fill(pad, -50.0), log_prob.masked_fill(pad, 0.0), adv.masked_fill(pad, 1e6)
    got = _loss_and_grad(compute_policy_loss_decoupled_ppo, g_old, g_lp, g_adv, mask, cfg, w * mask)
    assert_close(got[0], base[0], rtol=0, atol=0)
    assert_close(got[1][mask], base[1][mask], rtol=0, atol=0)
    assert (got[1][pad] == 0).all() and torch.isfinite(got[1]).all()
    assert all(math.isfinite(v) for v in got[2].values())


def test_plain_policy_loss_section_falls_back_to_cap_5_drop():
    old, log_prob, adv, w, mask = _hand_case()
    plain = FSDPActorConfig(
        strategy="fsdp",
        ppo_mini_batch_size=4,
        ppo_micro_batch_size_per_gpu=2,
        rollout_n=1,
        policy_loss=PolicyLossConfig(loss_mode="decoupled_ppo"),
    )
    got, _ = compute_policy_loss_decoupled_ppo(old, log_prob, adv, mask, "token-mean", plain, w)
    want, _ = compute_policy_loss_decoupled_ppo(old, log_prob, adv, mask, "token-mean", make_actor_config(), w)
    assert_close(got, want, rtol=0, atol=0)


def test_decoupled_ppo_is_our_function_in_verls_registry():
    import verl  # noqa: F401  (verl's import loads every verl.plugins entry point, which may register names)

    import verl_asyncweb.algo.losses as losses

    assert core_algos.get_policy_loss_fn("decoupled_ppo") is losses.compute_policy_loss_decoupled_ppo


def test_registering_modules_load_inside_verl_import_and_keep_their_names():
    # verl imports plugins from inside its own __init__; VERL_USE_EXTERNAL_MODULES takes the same route, so a
    # circular import or a failing top-level import of ours would show here (verl would hide it at debug level).
    code = (
        "import verl\n"
        "from verl.trainer.ppo import core_algos as c\n"
        "import verl_asyncweb.algo.losses as l, verl_asyncweb.algo.estimators as e\n"
        "assert c.get_policy_loss_fn('decoupled_ppo') is l.compute_policy_loss_decoupled_ppo\n"
        "assert c.get_adv_estimator_fn('multistep_grpo') is e.compute_multistep_grpo_advantage\n"
        "assert c.get_adv_estimator_fn('multistep_reinforce') is e.compute_multistep_reinforce_advantage\n"
        "assert c.get_adv_estimator_fn('raftpp') is e.compute_raftpp_advantage\n"
    )
    env = dict(os.environ, VERL_USE_EXTERNAL_MODULES="verl_asyncweb.algo.losses,verl_asyncweb.algo.estimators")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
