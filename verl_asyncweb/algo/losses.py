"""Policy loss ``decoupled_ppo`` (AReaL's decoupled PPO, DESIGN.md section 5); importing registers it.

Per token, with u = pi_theta/pi_prox and w = pi_prox/pi_behave::

    loss_t = w_t * max(-A_t * u_t, -A_t * clip(u_t, 1 - clip_ratio_low, 1 + clip_ratio_high))
             (and for A_t < 0 at most -A_t * clip_ratio_c: dual clip)

then verl's ``agg_loss`` (token-mean over the global mini-batch). Tokens with w > ``behav_cap`` contribute
nothing (``drop``; they still count in the token-mean denominator, as in AReaL) or use w = cap (``clip``).
With every w <= cap this is exactly verl's ``vanilla`` loss given the same ``rollout_is_weights``; with w = 1
it is plain PPO.

How the inputs arrive (verl 0.9.1, ``verl.workers.utils.losses.ppo_loss``): ``old_log_prob`` is the
``old_log_probs`` field, ``rollout_is_weights`` the per-token weights the trainer computed in
``_compute_advantage`` as ``exp(old_log_probs - rollout_log_probs)``; ``rollout_log_probs`` themselves are
not passed to a policy loss, so pi_behave is recovered as ``old_log_prob - log(w)`` (the naive ratio is
pi_theta/pi_behave = u * w). That is only right when w is untruncated, hence the recipe keys below.

Recipe keys a verl 0.9.1 job needs for ``decoupled_ppo`` (``required_verl_overrides()`` in
:mod:`verl_asyncweb.algo.verl_keys` returns them and ``check_verl_config()`` verifies a composed config)::

    actor_rollout_ref.actor.policy_loss.loss_mode: decoupled_ppo
    actor_rollout_ref.actor.policy_loss._target_: verl_asyncweb.algo.config.DecoupledPolicyLossConfig
    actor_rollout_ref.actor.policy_loss.behav_cap: ${asyncweb.algo.behav_cap}          # default 5.0
    actor_rollout_ref.actor.policy_loss.behav_cap_mode: ${asyncweb.algo.behav_cap_mode}  # drop | clip
    actor_rollout_ref.actor.loss_agg_mode: token-mean
    actor_rollout_ref.rollout.calculate_log_probs: true   # servers return pi_behave -> rollout_log_probs
    algorithm.rollout_correction.bypass_mode: false       # trainer recomputes old_log_probs = pi_prox
    algorithm.rollout_correction.rollout_is: token        # per-token w, not the sequence product
    algorithm.rollout_correction.rollout_is_threshold: 1.0e9   # > exp(20), verl's log-ratio clamp: no TIS truncation
    algorithm.rollout_correction.rollout_is_batch_normalize: false
    algorithm.rollout_correction.rollout_rs: null         # no rejection sampling; the cap is applied here

In ``separate_async`` mode verl recomputes pi_prox with the weights of the start of the current
``parameter_sync_step`` cycle (``trainer_separate_async._compute_old_log_prob``).
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from verl.trainer.ppo.core_algos import agg_loss, register_policy_loss

from verl_asyncweb.algo.config import check_behav_cap
from verl_asyncweb.compare import metric_names as names

logger = logging.getLogger(__name__)

DEFAULT_BEHAV_CAP = 5.0
DEFAULT_BEHAV_CAP_MODE = "drop"
_warned: set[str] = set()


def _warn_once(key: str, msg: str, *args: Any) -> None:
    if key not in _warned:
        _warned.add(key)
        logger.warning(msg, *args)


def behav_cap_settings(config: Any) -> tuple[float | None, str]:
    """Read ``(behav_cap, behav_cap_mode)`` from an actor config's ``policy_loss`` section.

    A plain verl ``PolicyLossConfig`` (the recipe did not set ``policy_loss._target_``) has neither key; the
    defaults (5.0, ``drop``) are used and a warning is logged once.
    """
    policy_loss = config.get("policy_loss", None)
    if policy_loss is None or policy_loss.get("behav_cap_mode", None) is None:
        _warn_once(
            "cap",
            "decoupled_ppo: actor policy_loss has no behav_cap/behav_cap_mode (set policy_loss._target_ to "
            "verl_asyncweb.algo.config.DecoupledPolicyLossConfig); using cap %s, mode %s",
            DEFAULT_BEHAV_CAP,
            DEFAULT_BEHAV_CAP_MODE,
        )
        return DEFAULT_BEHAV_CAP, DEFAULT_BEHAV_CAP_MODE
    cap, mode = policy_loss.get("behav_cap"), policy_loss.get("behav_cap_mode")
    check_behav_cap("actor_rollout_ref.actor.policy_loss", cap, mode)
    return (None if cap is None else float(cap)), mode


def apply_behav_cap(weights: torch.Tensor, cap: float | None, mode: str) -> torch.Tensor:
    """Behaviour weights after the cap: zero above it (``drop``) or clipped to it (``clip``); same shape."""
    if cap is None:
        return weights
    if mode == "drop":
        return weights.masked_fill(weights > cap, 0.0)
    return weights.clamp(max=cap)


def _clip_ranges(config: Any) -> tuple[float, float, float]:
    clip_ratio = config.clip_ratio
    low = config.clip_ratio_low if config.clip_ratio_low is not None else clip_ratio
    high = config.clip_ratio_high if config.clip_ratio_high is not None else clip_ratio
    clip_c = config.get("clip_ratio_c", 3.0)
    if not clip_c > 1.0:
        raise ValueError(f"actor_rollout_ref.actor.clip_ratio_c must be > 1.0 for dual-clip PPO, got {clip_c!r}")
    return low, high, clip_c


@torch.no_grad()
def _metrics(tensors: dict[str, torch.Tensor], mask: torch.Tensor, low: float, high: float, cap: float | None):
    """Loss diagnostics over the valid tokens, reduced with one host sync."""
    adv, ratio, weights = tensors["adv"], tensors["ratio"], tensors["w"]
    naive_ratio = ratio * weights  # pi_theta / pi_behave
    naive_clipped = (-adv * naive_ratio.clamp(1 - low, 1 + high)) > (-adv * naive_ratio)
    sums = [
        (tensors["neg_kl"] * mask).sum().neg(),
        (tensors["clipped"] & mask).sum(),
        (tensors["clipped_lower"] & mask).sum(),
        (naive_clipped & mask).sum(),
        ((weights > cap) & mask).sum() if cap is not None else torch.zeros((), device=mask.device),
        (weights * mask).sum(),
        weights.masked_fill(~mask, float("-inf")).max() if mask.any() else torch.zeros((), device=mask.device),
    ]
    values = torch.stack([s.to(torch.float64) for s in sums]).tolist()
    n = max(float(mask.sum()), 1.0)
    clip_rate = values[1] / n
    return {
        names.VERL_PG_CLIPFRAC: clip_rate,
        names.VERL_PPO_KL: values[0] / n,
        names.VERL_PG_CLIPFRAC_LOWER: values[2] / n,
        names.DECOUPLED_CLIP_FRAC: clip_rate,
        names.DECOUPLED_NAIVE_CLIP_FRAC: values[3] / n,
        names.DECOUPLED_DROPPED_FRAC: values[4] / n,
        names.BEHAV_W_MEAN: values[5] / n,
        names.BEHAV_W_MAX: values[6] if mask.any() else 0.0,
    }


@register_policy_loss("decoupled_ppo")  # type: ignore[arg-type]
def compute_policy_loss_decoupled_ppo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """Decoupled PPO loss with verl's policy-loss signature.

    Args:
        old_log_prob: log pi_prox, recomputed by the trainer before the update, shape (batch, response_len).
        log_prob: log pi_theta of the model being trained, shape (batch, response_len).
        advantages: Per-token advantages, shape (batch, response_len).
        response_mask: Trained tokens, shape (batch, response_len).
        loss_agg_mode: verl's aggregation mode (``token-mean`` for this project).
        config: verl ``ActorConfig`` (clip ratios, ``clip_ratio_c``, ``global_batch_info`` and
            ``policy_loss.behav_cap``/``behav_cap_mode``).
        rollout_is_weights: Untruncated behaviour weights w = pi_prox/pi_behave, zero on padding,
            shape (batch, response_len). ``None`` means w = 1 (plain PPO; a warning is logged once).

    Returns:
        ``(loss, metrics)``: the scalar loss and floats ``actor/pg_clipfrac`` (= ``actor/decoupled_clip_rate``,
        the share of valid tokens where the PPO clip on u took effect), ``actor/pg_clipfrac_lower``,
        ``actor/ppo_kl``, ``actor/naive_clip_rate`` (the share where PPO on pi_theta/pi_behave would have
        clipped), ``actor/behav_over_cap_frac`` (share with w > cap: dropped, or clipped in ``clip`` mode),
        ``actor/behav_w_mean`` and ``actor/behav_w_max`` (raw w over valid tokens).
    """
    if config is None:
        raise ValueError("decoupled_ppo needs the actor config (clip ratios, behav_cap); got config=None")
    low, high, clip_c = _clip_ranges(config)
    cap, mode = behav_cap_settings(config)

    neg_kl = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)  # same stability clamp as verl's vanilla
    ratio = torch.exp(neg_kl)
    pg_losses1 = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1 - low, 1 + high)
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_losses3 = -advantages * clip_c
    pg_losses = torch.where(advantages < 0, torch.minimum(pg_losses3, clip_pg_losses1), clip_pg_losses1)

    if rollout_is_weights is None:
        _warn_once("w", "decoupled_ppo: no rollout_is_weights from the trainer; using w = 1 (plain PPO)")
        weights = torch.ones_like(old_log_prob)
    else:
        weights = rollout_is_weights.detach()
        pg_losses = pg_losses * apply_behav_cap(weights, cap, mode)

    global_batch_info = getattr(config, "global_batch_info", None) or {}
    loss = agg_loss(loss_mat=pg_losses, loss_mask=response_mask, loss_agg_mode=loss_agg_mode, **global_batch_info)

    tensors = {
        "adv": advantages.detach(),
        "ratio": ratio.detach(),
        "w": weights,
        "neg_kl": neg_kl.detach(),
        "clipped": pg_losses2.detach() > pg_losses1.detach(),
        "clipped_lower": (clip_pg_losses1.detach() > pg_losses3.detach()) & (advantages < 0),
    }
    return loss, _metrics(tensors, response_mask.bool(), low, high, cap)
