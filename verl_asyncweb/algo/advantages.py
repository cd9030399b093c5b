"""Trajectory-level advantages of the multi-step estimators, as plain tensor functions (DESIGN.md section 5).

Each function takes one value per *trajectory* and returns one advantage per trajectory; broadcasting it to
every token of every step-sample is :mod:`verl_asyncweb.algo.trajectories`' job. The step normalizer c_i is
shared by all estimators:

* ``traj``: c_i = 1/|tau_i| (the common default; down-weights every token of long, usually failed,
  trajectories: AsyncWebRL measures 12.5 failed vs 5.1 successful steps on average);
* ``const``: c_i = 1/k (AsyncWebRL, k = 10);
* ``none``: c_i = 1.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch

from verl_asyncweb.algo.config import STEP_NORMS


def _check_traj_inputs(traj_rewards: torch.Tensor, num_steps: torch.Tensor) -> None:
    if traj_rewards.dim() != 1:
        raise ValueError(
            f"traj_rewards must be a 1-D tensor (num_trajectories,), got shape {tuple(traj_rewards.shape)}"
        )
    if num_steps.shape != traj_rewards.shape:
        raise ValueError(
            f"num_steps must have the shape of traj_rewards {tuple(traj_rewards.shape)}, got {tuple(num_steps.shape)}"
        )
    if num_steps.numel() and int(num_steps.min()) < 1:
        raise ValueError(f"num_steps must be >= 1 for every trajectory, got min {int(num_steps.min())}")


def _out_dtype(traj_rewards: torch.Tensor) -> torch.dtype:
    return traj_rewards.dtype if traj_rewards.is_floating_point() else torch.float32


def step_scale(num_steps: torch.Tensor, step_norm: str, k: int = 10) -> torch.Tensor:
    """The per-trajectory step normalizer c_i.

    Args:
        num_steps: Steps per trajectory |tau_i|, shape (num_trajectories,).
        step_norm: ``traj`` (1/|tau_i|), ``const`` (1/k) or ``none`` (1).
        k: Constant of ``const``.

    Returns:
        float64 tensor of shape (num_trajectories,).
    """
    if step_norm not in STEP_NORMS:
        raise ValueError(f"step_norm must be one of {list(STEP_NORMS)}, got {step_norm!r}")
    if step_norm == "traj":
        return 1.0 / num_steps.to(torch.float64)
    if step_norm == "const":
        if not k > 0:
            raise ValueError(f"k must be > 0 for step_norm='const', got {k!r}")
        return torch.full(num_steps.shape, 1.0 / k, dtype=torch.float64, device=num_steps.device)
    return torch.ones(num_steps.shape, dtype=torch.float64, device=num_steps.device)


def group_ids(group_index: Sequence[Hashable], device: torch.device | None = None) -> tuple[torch.Tensor, int]:
    """Map group labels (task uids: strings, ints, or a tensor of ids) to dense ids ``0..G-1``.

    Returns:
        ``(ids, G)`` with ``ids`` a long tensor of shape (num_trajectories,).
    """
    if isinstance(group_index, torch.Tensor):  # 0-d tensors hash by identity: group by value instead
        uniques, inverse = torch.unique(group_index, return_inverse=True)
        return inverse.to(device=device, dtype=torch.long), uniques.numel()
    mapping: dict[Hashable, int] = {}
    ids = [mapping.setdefault(g, len(mapping)) for g in group_index]
    return torch.tensor(ids, dtype=torch.long, device=device), len(mapping)


def _group_stats(rewards: torch.Tensor, ids: torch.Tensor, num_groups: int):
    """Group size, mean and population std of float64 ``rewards``, gathered back per trajectory."""
    zeros = torch.zeros(num_groups, dtype=rewards.dtype, device=rewards.device)
    counts = zeros.index_add(0, ids, torch.ones_like(rewards))
    mean = zeros.index_add(0, ids, rewards) / counts
    centered = rewards - mean[ids]
    std = (zeros.index_add(0, ids, centered * centered) / counts).sqrt()
    return counts[ids], centered, std[ids]


def multistep_grpo_advantages(
    traj_rewards: torch.Tensor,
    group_index: Sequence[Hashable],
    num_steps: torch.Tensor,
    step_norm: str,
    k: int = 10,
    norm_by_std: bool = True,
    eps: float = 1e-6,
) -> torch.Tensor:
    """Multi-step GRPO: group-normalised trajectory reward times the step normalizer.

    A_i = (R_i - mean_g R) / (std_g R + eps) * c_i, with the population (``unbiased=False``) std of the
    trajectory's group g; without the std division when ``norm_by_std`` is False. A group of one
    trajectory gets 0.

    Args:
        traj_rewards: One reward per trajectory, shape (num_trajectories,).
        group_index: Group label per trajectory (same task = same group), length num_trajectories.
        num_steps: Steps per trajectory, int tensor of shape (num_trajectories,).
        step_norm: ``traj``, ``const`` or ``none`` (see module docstring).
        k: Constant of ``const``.
        norm_by_std: Divide by the group std.
        eps: Added to the std.

    Returns:
        Advantages, shape (num_trajectories,), dtype of ``traj_rewards`` (float32 if it is not floating).
    """
    num_steps = torch.as_tensor(num_steps, device=traj_rewards.device)
    _check_traj_inputs(traj_rewards, num_steps)
    if len(group_index) != traj_rewards.numel():
        raise ValueError(f"group_index must have {traj_rewards.numel()} entries, got {len(group_index)}")
    rewards = traj_rewards.to(torch.float64)
    ids, num_groups = group_ids(group_index, device=rewards.device)
    counts, centered, std = _group_stats(rewards, ids, num_groups)
    adv = centered / (std + eps) if norm_by_std else centered
    adv = torch.where(counts > 1, adv, torch.zeros_like(adv))
    return (adv * step_scale(num_steps, step_norm, k)).to(_out_dtype(traj_rewards))


def multistep_reinforce_advantages(
    traj_rewards: torch.Tensor, num_steps: torch.Tensor, step_norm: str, k: int = 10
) -> torch.Tensor:
    """WebGym's synchronous REINFORCE baseline on the step layout: A_i = R_i * c_i (no group baseline).

    Args:
        traj_rewards: One reward per trajectory, shape (num_trajectories,).
        num_steps: Steps per trajectory, shape (num_trajectories,).
        step_norm: ``traj``, ``const`` or ``none``.
        k: Constant of ``const``.

    Returns:
        Advantages, shape (num_trajectories,).
    """
    num_steps = torch.as_tensor(num_steps, device=traj_rewards.device)
    _check_traj_inputs(traj_rewards, num_steps)
    adv = traj_rewards.to(torch.float64) * step_scale(num_steps, step_norm, k)
    return adv.to(_out_dtype(traj_rewards))


def raftpp_advantages(
    traj_rewards: torch.Tensor,
    num_steps: torch.Tensor,
    step_norm: str,
    k: int = 10,
    success_threshold: float = 0.0,
) -> torch.Tensor:
    """RAFT++: behaviour cloning on successful trajectories only, A_i = 1[R_i > threshold] * c_i.

    Used with the (decoupled) PPO loss this is RAFT with importance weighting and clipping; failed
    trajectories get 0 and so contribute no gradient.

    Args:
        traj_rewards: One reward per trajectory, shape (num_trajectories,).
        num_steps: Steps per trajectory, shape (num_trajectories,).
        step_norm: ``traj``, ``const`` or ``none``.
        k: Constant of ``const``.
        success_threshold: A trajectory is successful when its reward is strictly above this.

    Returns:
        Advantages, shape (num_trajectories,).
    """
    num_steps = torch.as_tensor(num_steps, device=traj_rewards.device)
    _check_traj_inputs(traj_rewards, num_steps)
    success = (traj_rewards > success_threshold).to(torch.float64)
    return (success * step_scale(num_steps, step_norm, k)).to(_out_dtype(traj_rewards))


def constant_group_mask(traj_rewards: torch.Tensor, group_index: Sequence[Hashable]) -> torch.Tensor:
    """True for trajectories whose group carries no signal: one trajectory, or all rewards equal.

    Args:
        traj_rewards: One reward per trajectory, shape (num_trajectories,).
        group_index: Group label per trajectory.

    Returns:
        Bool tensor of shape (num_trajectories,).
    """
    ids, num_groups = group_ids(group_index, device=traj_rewards.device)
    empty = torch.zeros(num_groups, dtype=traj_rewards.dtype, device=traj_rewards.device)
    high = empty.scatter_reduce(0, ids, traj_rewards, "amax", include_self=False)
    low = empty.scatter_reduce(0, ids, traj_rewards, "amin", include_self=False)
    counts = torch.bincount(ids, minlength=num_groups)
    return ((counts <= 1) | (high == low))[ids]


def shared_state_advantages(
    traj_rewards: torch.Tensor, state_index: Sequence[Hashable], norm_by_std: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """Step-level advantages of actions taken from one exact state: A^S_i = (R_i - mean_P R) / (std_P R + eps) over
    the trajectories P that took a step from the same branch point (their returns from there are their terminal
    rewards). A state only one trajectory left from gets 0.

    Args:
        traj_rewards: Reward of each trajectory that left a shared state, shape (num,).
        state_index: The branch point each of them left, length num.
        norm_by_std: Divide by the population std of P.
        eps: Added to the std.

    Returns:
        float64 tensor of shape (num,).
    """
    ones = torch.ones_like(traj_rewards, dtype=torch.long)
    return multistep_grpo_advantages(
        traj_rewards.to(torch.float64), state_index, ones, "none", norm_by_std=norm_by_std, eps=eps
    )
