"""verl advantage estimators ``multistep_grpo``, ``multistep_reinforce`` and ``raftpp`` (importing registers them).

verl's ``compute_advantage`` (``verl/trainer/ppo/ray_trainer.py``, also used by the V1 trainer for every
estimator other than ``grpo``) calls a registered estimator with exactly ``token_level_rewards``,
``response_mask``, ``config`` (the ``algorithm`` node) and ``index`` (``uid``). It cannot pass ``traj_id`` or
``traj_num_steps``, and the V1 trainer's ``_compute_advantage`` fetches only
``uid, response_mask, rm_scores, rollout_log_probs, old_log_probs, ref_log_prob, values`` from the
TransferQueue. Without the trajectory ids a batch of step-samples cannot be deduplicated, so these estimators
refuse to run on that call and say so; the ``asyncweb`` trainer overrides ``_compute_advantage`` and calls
them (or :func:`verl_asyncweb.algo.trajectories.compute_multistep_advantages_for_batch`) with the extra
keyword arguments ``traj_id``, ``traj_num_steps`` and ``algo_config``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import torch
from verl.trainer.ppo.core_algos import register_adv_est

from verl_asyncweb.algo.config import AsyncWebAlgoConfig
from verl_asyncweb.algo.trajectories import compute_multistep_advantages_for_batch


def _estimate(
    name: str,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Sequence[Hashable] | None,
    traj_id: Sequence[Hashable] | None,
    traj_num_steps: Sequence[int] | torch.Tensor | None,
    algo_config: AsyncWebAlgoConfig | Mapping[str, Any] | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    if index is None or traj_id is None:
        raise ValueError(
            f"advantage estimator {name!r} needs per-row 'index' (uid) and 'traj_id' (got index="
            f"{'set' if index is not None else None}, traj_id={'set' if traj_id is not None else None}); verl's "
            "compute_advantage does not pass trajectory ids, so run it through the asyncweb trainer "
            "(trainer.v1 trainer name 'asyncweb'), whose _compute_advantage passes traj_id and traj_num_steps"
        )
    cfg = AsyncWebAlgoConfig.from_dict(algo_config)
    if cfg.estimator != name:
        cfg = dataclasses.replace(cfg, estimator=name)
    out = compute_multistep_advantages_for_batch(
        token_level_rewards, response_mask, list(index), list(traj_id), traj_num_steps, cfg
    )
    return out.advantages, out.returns


@register_adv_est("multistep_grpo")
def compute_multistep_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Sequence[Hashable] | None = None,
    config: Any = None,
    traj_id: Sequence[Hashable] | None = None,
    traj_num_steps: Sequence[int] | torch.Tensor | None = None,
    algo_config: AsyncWebAlgoConfig | Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-step GRPO on step-samples (see :func:`verl_asyncweb.algo.advantages.multistep_grpo_advantages`).

    Args:
        token_level_rewards: Trajectory reward on every step-sample, shape (batch, response_len).
        response_mask: Trained response tokens, shape (batch, response_len).
        index: Group id (``uid``) of each row.
        config: verl's ``algorithm`` node; unused (the options live in ``asyncweb.algo``).
        traj_id: Trajectory id of each row.
        traj_num_steps: Steps of each row's trajectory; ``None`` counts rows per trajectory.
        algo_config: The ``asyncweb.algo`` config; ``None`` uses its defaults.
        **kwargs: Other keywords verl passes (e.g. ``reward_baselines``); ignored.

    Returns:
        ``(advantages, returns)``, both of shape (batch, response_len).
    """
    return _estimate("multistep_grpo", token_level_rewards, response_mask, index, traj_id, traj_num_steps, algo_config)


@register_adv_est("multistep_reinforce")
def compute_multistep_reinforce_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Sequence[Hashable] | None = None,
    config: Any = None,
    traj_id: Sequence[Hashable] | None = None,
    traj_num_steps: Sequence[int] | torch.Tensor | None = None,
    algo_config: AsyncWebAlgoConfig | Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """WebGym's REINFORCE baseline on step-samples: A = R_i * c_i.

    Arguments and returns as :func:`compute_multistep_grpo_advantage`.
    """
    return _estimate(
        "multistep_reinforce", token_level_rewards, response_mask, index, traj_id, traj_num_steps, algo_config
    )


@register_adv_est("raftpp")
def compute_raftpp_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Sequence[Hashable] | None = None,
    config: Any = None,
    traj_id: Sequence[Hashable] | None = None,
    traj_num_steps: Sequence[int] | torch.Tensor | None = None,
    algo_config: AsyncWebAlgoConfig | Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """RAFT++ on step-samples: A = 1[R_i > threshold] * c_i (``asyncweb.algo.success_threshold``).

    Arguments and returns as :func:`compute_multistep_grpo_advantage`.
    """
    return _estimate("raftpp", token_level_rewards, response_mask, index, traj_id, traj_num_steps, algo_config)
