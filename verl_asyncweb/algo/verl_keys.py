"""The verl 0.9.1 config keys our loss and estimators depend on, as data a recipe test or the trainer can check.

:func:`required_verl_overrides` lists them for one ``asyncweb.algo`` config; :func:`check_verl_config` verifies
a composed trainer config and names every key that is wrong, so a recipe cannot silently train with truncated
behaviour weights or with verl's own advantage estimator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

from verl_asyncweb.algo.config import AsyncWebAlgoConfig

POLICY_LOSS_TARGET = "verl_asyncweb.algo.config.DecoupledPolicyLossConfig"
# verl clamps log(w) to +-20 before exponentiating (rollout_corr_helper.SAFETY_BOUND), so any TIS threshold
# above exp(20) ~ 4.9e8 never truncates w.
UNTRUNCATED_IS_THRESHOLD = 1.0e9


def required_verl_overrides(algo: AsyncWebAlgoConfig | Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Dotted verl keys and the values a recipe must set for the loss (``decoupled_ppo`` or the ``vanilla``
    baseline) and our estimators.

    Args:
        algo: The ``asyncweb.algo`` config; ``None`` uses its defaults.

    Returns:
        ``{dotted_key: value}``; the cap keys hold the values of ``algo`` (recipes interpolate them from
        ``asyncweb.algo`` instead of repeating them).
    """
    algo = AsyncWebAlgoConfig.from_dict(algo)
    keys: dict[str, Any] = {
        "trainer.use_v1": True,
        "actor_rollout_ref.actor.policy_loss.loss_mode": algo.loss_mode,
        "actor_rollout_ref.actor.policy_loss._target_": POLICY_LOSS_TARGET,
        "actor_rollout_ref.actor.policy_loss.behav_cap": algo.behav_cap,
        "actor_rollout_ref.actor.policy_loss.behav_cap_mode": algo.behav_cap_mode,
        "actor_rollout_ref.actor.loss_agg_mode": "token-mean",
        "actor_rollout_ref.rollout.calculate_log_probs": True,
        # vanilla: the old log-probs are the rollout's (the ratio is against pi_behave, no pi_prox pass).
        "algorithm.rollout_correction.bypass_mode": algo.loss_mode == "vanilla",
        "algorithm.rollout_correction.rollout_is": "token",
        "algorithm.rollout_correction.rollout_is_threshold": UNTRUNCATED_IS_THRESHOLD,
        "algorithm.rollout_correction.rollout_is_batch_normalize": False,
        "algorithm.rollout_correction.rollout_rs": None,
        "algorithm.adv_estimator": algo.estimator,
    }
    if algo.dynamic_sampling:
        # verl's replay buffer evicts uid groups whose rm_scores are all equal and refills them; with the reward
        # copied to every step-sample this is exactly "all trajectory rewards equal".
        keys["algorithm.filter_groups.enable"] = True
        keys["algorithm.filter_groups.metric"] = "reward"
    else:
        # Without dynamic sampling every group trains (REINFORCE's all-success groups carry signal): verl's filter
        # would drop the groups the estimator was told to keep.
        keys["algorithm.filter_groups.enable"] = False
    return keys


def _matches(key: str, want: Any, got: Any) -> bool:
    if key.endswith("rollout_is_threshold"):
        try:
            return float(got) >= want
        except (TypeError, ValueError):
            return False  # a "lower_upper" IcePop string truncates
    return got == want


def check_verl_config(cfg: DictConfig | Mapping[str, Any], algo: AsyncWebAlgoConfig | None = None) -> None:
    """Raise ``ValueError`` naming every key of :func:`required_verl_overrides` that ``cfg`` sets otherwise.

    Args:
        cfg: The composed trainer config (verl's keys plus ``asyncweb``).
        algo: The ``asyncweb.algo`` config; read from ``cfg.asyncweb.algo`` when ``None``.
    """
    cfg = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(dict(cfg))
    if algo is None:
        algo = AsyncWebAlgoConfig.from_dict(OmegaConf.select(cfg, "asyncweb.algo", default=None))
    wrong = []
    for key, want in required_verl_overrides(algo).items():
        got = OmegaConf.select(cfg, key, default="<missing>")
        if not _matches(key, want, got):
            wrong.append(f"{key} must be {want!r}, got {got!r}")
    if wrong:
        raise ValueError("verl config does not match asyncweb.algo: " + "; ".join(wrong))
