"""From step-samples to trajectories and back: the batch layout of the web agent loop.

The web agent loop emits ONE training sample per step. Every step-sample of trajectory i carries the task's
group id ``uid``, a ``traj_id`` unique to the trajectory, its ``step_index``, ``traj_num_steps`` and the
trajectory reward (verl copies the final reward to every output of a ``list[AgentLoopOutput]``; it sits at
the last response token of ``token_level_rewards``). Group statistics are taken over trajectories, never over
step-samples (a 12-step failure must count once, not 12 times), and the trajectory's advantage is then
written on every token of every one of its step-samples.

Rows whose ``response_mask`` is all zero are verl's synthetic padding rows
(``verl.trainer.ppo.padding_utils.upsample_batch_to_divisible_size``). They copy the non-tensor fields of a
real sample, ``traj_id`` included, so they are left out of every statistic and get advantage 0.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from verl_asyncweb.algo.advantages import (
    constant_group_mask,
    multistep_grpo_advantages,
    multistep_reinforce_advantages,
    raftpp_advantages,
    shared_state_advantages,
    step_scale,
)
from verl_asyncweb.algo.config import AsyncWebAlgoConfig

logger = logging.getLogger(__name__)


@dataclass
class TrajectoryTable:
    """Trajectories found in a batch of step-samples.

    Attributes:
        row_to_traj: Trajectory index of each row, -1 for padding rows, shape (batch,).
        traj_ids: Trajectory ids, length num_trajectories.
        groups: Group id (``uid``) of each trajectory, length num_trajectories.
        rewards: Reward of each trajectory, shape (num_trajectories,).
        num_steps: Steps of each trajectory, shape (num_trajectories,).
    """

    row_to_traj: torch.Tensor
    traj_ids: list[Hashable]
    groups: list[Hashable]
    rewards: torch.Tensor
    num_steps: torch.Tensor


@dataclass
class BatchAdvantages:
    """Advantages of a batch of step-samples.

    Attributes:
        advantages: Per-token advantages, zero outside the response mask, shape (batch, response_len).
        returns: Same as ``advantages`` (outcome estimators have no value target), shape (batch, response_len).
        filtered_rows: Rows whose group was filtered by dynamic sampling (their advantage is 0; a trainer may
            drop them before the update), shape (batch,).
        metrics: Scalars for verl's tracking, prefixed ``asyncweb/adv/``.
    """

    advantages: torch.Tensor
    returns: torch.Tensor
    filtered_rows: torch.Tensor
    metrics: dict[str, float] = field(default_factory=dict)


def traj_ids_from_batch_keys(keys: Sequence[str]) -> tuple[list[str], list[str], list[int]]:
    """Split verl V1 TransferQueue keys ``{uid}_{session_id}_{index}`` into (uid, traj_id, step_index).

    verl's ``AgentLoopWorkerTQ`` stores output ``index`` of the agent loop run ``session_id`` of prompt ``uid``
    under that key, so ``{uid}_{session_id}`` identifies a trajectory even without a ``traj_id`` field.

    Args:
        keys: ``KVBatchMeta.keys`` of a training batch.

    Returns:
        Three lists of length ``len(keys)``.
    """
    uids, traj_ids, steps = [], [], []
    for key in keys:
        parts = key.rsplit("_", 2)
        if len(parts) != 3 or not parts[2].isdigit():
            raise ValueError(f"batch key must look like '{{uid}}_{{session_id}}_{{index}}', got {key!r}")
        uids.append(parts[0])
        traj_ids.append(f"{parts[0]}_{parts[1]}")
        steps.append(int(parts[2]))
    return uids, traj_ids, steps


def count_real_trajectories(keys: Sequence[str], tags: Sequence[dict]) -> int:
    """Distinct trajectories among a batch's rows, leaving out the padding rows verl adds (``is_padding`` tag)."""
    real = [key for key, tag in zip(keys, tags, strict=True) if not tag.get("is_padding", False)]
    return len(set(traj_ids_from_batch_keys(real)[1]))


def _spread(values: torch.Tensor, ids: torch.Tensor, size: int) -> torch.Tensor:
    """Per-trajectory max - min of ``values`` (float64), shape (size,)."""
    empty = torch.zeros(size, dtype=torch.float64)
    high = empty.scatter_reduce(0, ids, values, "amax", include_self=False)
    low = empty.scatter_reduce(0, ids, values, "amin", include_self=False)
    return high - low


def collect_trajectories(
    row_rewards: torch.Tensor,
    row_valid: torch.Tensor,
    uid: Sequence[Hashable],
    traj_id: Sequence[Hashable],
    traj_num_steps: Sequence[int] | torch.Tensor | None = None,
    atol: float = 1e-5,
) -> TrajectoryTable:
    """Deduplicate step-samples into trajectories and check that their fields agree.

    Args:
        row_rewards: Reward of each row (sum of its token-level rewards), shape (batch,).
        row_valid: False for padding rows, shape (batch,).
        uid: Group id of each row.
        traj_id: Trajectory id of each row.
        traj_num_steps: Steps of each row's trajectory; ``None`` counts the trajectory's rows in the batch.
        atol: Tolerance when checking that all steps of a trajectory carry the same reward.

    Returns:
        The trajectory table.
    """
    batch = row_rewards.shape[0]
    if len(uid) != batch or len(traj_id) != batch:
        raise ValueError(f"uid and traj_id must have one entry per row ({batch}), got {len(uid)} and {len(traj_id)}")
    if traj_num_steps is not None and len(traj_num_steps) != batch:
        raise ValueError(f"traj_num_steps must have one entry per row ({batch}), got {len(traj_num_steps)}")
    valid_rows = row_valid.detach().cpu().nonzero().flatten()
    rows = valid_rows.tolist()
    index: dict[Hashable, int] = {}
    ids = torch.tensor([index.setdefault(traj_id[r], len(index)) for r in rows], dtype=torch.long)
    size = len(index)
    first = torch.full((size,), batch, dtype=torch.long).scatter_reduce(0, ids, valid_rows, "amin")
    first_rows = first.tolist()
    row_to_traj = torch.full((batch,), -1, dtype=torch.long)
    row_to_traj[valid_rows] = ids

    rewards = row_rewards.detach().cpu().to(torch.float64)
    traj_rewards = rewards[first]
    bad = _spread(rewards[valid_rows], ids, size) > atol * (1.0 + traj_rewards.abs())
    if bool(bad.any()):
        t = int(bad.nonzero()[0])
        raise ValueError(
            f"trajectory {traj_id[first_rows[t]]!r} has different rewards on its step-samples; "
            "the trajectory reward must be copied to every step"
        )
    group_of_row = {}
    row_groups = torch.tensor([group_of_row.setdefault(uid[r], len(group_of_row)) for r in rows], dtype=torch.float64)
    bad = _spread(row_groups, ids, size) != 0
    if bool(bad.any()):
        t = int(bad.nonzero()[0])
        raise ValueError(f"trajectory {traj_id[first_rows[t]]!r} has step-samples in more than one uid group")
    if traj_num_steps is None:
        num_steps = torch.bincount(ids, minlength=size)
    else:
        steps = torch.as_tensor(traj_num_steps).detach().cpu().to(torch.long)[valid_rows]
        bad = _spread(steps.to(torch.float64), ids, size) != 0
        if bool(bad.any()):
            t = int(bad.nonzero()[0])
            raise ValueError(f"trajectory {traj_id[first_rows[t]]!r} has different traj_num_steps on its step-samples")
        num_steps = steps.new_zeros(size).scatter_(0, ids, steps)
    return TrajectoryTable(
        row_to_traj=row_to_traj,
        traj_ids=list(index),
        groups=[uid[r] for r in first_rows],
        rewards=traj_rewards,
        num_steps=num_steps,
    )


def trajectory_advantages(table: TrajectoryTable, config: AsyncWebAlgoConfig) -> torch.Tensor:
    """Run the configured estimator on the trajectory table; returns float64 of shape (num_trajectories,)."""
    if config.estimator == "multistep_grpo":
        return multistep_grpo_advantages(
            table.rewards, table.groups, table.num_steps, config.step_norm, config.k, config.norm_by_std, config.eps
        )
    if config.estimator == "multistep_reinforce":
        return multistep_reinforce_advantages(table.rewards, table.num_steps, config.step_norm, config.k)
    return raftpp_advantages(table.rewards, table.num_steps, config.step_norm, config.k, config.success_threshold)


def branch_step_credit(
    table: TrajectoryTable, shared_state: Sequence[str | None], row_valid: torch.Tensor, config: AsyncWebAlgoConfig
) -> tuple[torch.Tensor, dict[str, float]]:
    """The step-level term of ``step_credit=branch``: omega * c_i * A^S_i on the row of each trajectory's step taken
    from a branch point (:func:`~verl_asyncweb.algo.advantages.shared_state_advantages` over the trajectories that
    left that point), 0 on every other row. Returns the per-row term (float64, shape (batch,)) and its metrics.

    Args:
        table: The batch's trajectories.
        shared_state: Per row, the branch point its step was taken from (``None``/``""`` for an unshared state).
        row_valid: False for padding rows.
        config: ``step_credit_weight``, ``step_norm``, ``k``, ``norm_by_std``, ``eps``.

    Raises:
        ValueError: If one trajectory has two rows with a branch point (the term would land on whichever comes
            first, and verl reorders batches).
    """
    term = torch.zeros(len(shared_state), dtype=torch.float64)
    leaving: dict[int, tuple[int, str]] = {}  # trajectory -> (its row, the point it left)
    for row, point in enumerate(shared_state):
        if point and bool(row_valid[row]):
            traj = int(table.row_to_traj[row])
            if traj in leaving:
                raise ValueError(
                    f"trajectory {table.traj_ids[traj]!r} has two step-samples taken from branch points "
                    f"({leaving[traj][1]!r}, {point!r}): only the step taken from the shared state carries it"
                )
            leaving[traj] = (row, point)
    if not leaving:
        return term, {}
    trajs = list(leaving)
    points = [point for _, point in leaving.values()]
    index = torch.tensor(trajs, dtype=torch.long)
    step_adv = shared_state_advantages(table.rewards[index], points, config.norm_by_std, config.eps)
    scaled = config.step_credit_weight * step_scale(table.num_steps[index], config.step_norm, config.k) * step_adv
    term[torch.tensor([row for row, _ in leaving.values()])] = scaled
    shared = [points.count(point) > 1 for point in points]
    compared = step_adv[torch.tensor(shared)]
    return term, {
        "asyncweb/step_credit/points": float(len({p for p, s in zip(points, shared, strict=True) if s})),
        "asyncweb/step_credit/samples": float(sum(shared)),
        "asyncweb/step_credit/abs_mean": compared.abs().mean().item() if len(compared) else 0.0,
    }


def _metrics(table: TrajectoryTable, adv: torch.Tensor, filtered: torch.Tensor, config) -> dict[str, float]:
    success = table.rewards > config.success_threshold
    steps = table.num_steps.to(torch.float64)
    metrics = {
        "asyncweb/adv/num_trajectories": float(len(table.traj_ids)),
        "asyncweb/adv/num_groups": float(len(set(table.groups))),
        "asyncweb/adv/filtered_traj_frac": filtered.to(torch.float64).mean().item() if len(adv) else 0.0,
        "asyncweb/adv/abs_mean": adv.abs().mean().item() if len(adv) else 0.0,
    }
    if bool(success.any()):
        metrics["asyncweb/adv/steps_success_mean"] = steps[success].mean().item()
    if bool((~success).any()):
        metrics["asyncweb/adv/steps_failure_mean"] = steps[~success].mean().item()
    return metrics


def compute_multistep_advantages_for_batch(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    uid: Sequence[Hashable],
    traj_id: Sequence[Hashable],
    traj_num_steps: Sequence[int] | torch.Tensor | None = None,
    config: AsyncWebAlgoConfig | Mapping[str, Any] | None = None,
    shared_state: Sequence[str | None] | None = None,
) -> BatchAdvantages:
    """Advantages of a batch of step-samples: dedupe into trajectories, estimate, broadcast to tokens.

    Args:
        token_level_rewards: Rewards with the trajectory reward on each row, shape (batch, response_len).
        response_mask: 1 on response tokens that are trained, shape (batch, response_len).
        uid: Group (task) id of each row.
        traj_id: Trajectory id of each row (for verl V1 batches: :func:`traj_ids_from_batch_keys`).
        traj_num_steps: Steps of each row's trajectory; ``None`` counts the trajectory's rows in the batch.
        config: The ``asyncweb.algo`` config (estimator, step_norm, k, ...); ``None`` uses the defaults.
        shared_state: Per row, the branch point its step was taken from (``step_credit=branch``; the agent loop's
            ``branch_point`` field), ``None`` or ``""`` elsewhere.

    Returns:
        Per-token advantages and returns of shape (batch, response_len), the rows filtered by dynamic
        sampling and metrics.
    """
    config = AsyncWebAlgoConfig.from_dict(config)
    if token_level_rewards.shape != response_mask.shape:
        raise ValueError(
            f"token_level_rewards {tuple(token_level_rewards.shape)} and response_mask "
            f"{tuple(response_mask.shape)} must have the same shape"
        )
    row_valid = response_mask.sum(dim=-1) > 0
    table = collect_trajectories(token_level_rewards.sum(dim=-1), row_valid, uid, traj_id, traj_num_steps)
    adv = trajectory_advantages(table, config).to(torch.float64)
    filtered = torch.zeros(len(table.traj_ids), dtype=torch.bool)
    if config.dynamic_sampling and len(table.traj_ids):
        filtered = constant_group_mask(table.rewards, table.groups)
        adv = torch.where(filtered, torch.zeros_like(adv), adv)
    row_to_traj = table.row_to_traj.to(token_level_rewards.device)
    padded_adv = torch.cat([adv, adv.new_zeros(1)]).to(token_level_rewards.device)
    row_adv = padded_adv[row_to_traj]  # index -1 (padding row) reads the appended 0
    metrics = _metrics(table, adv, filtered, config)
    if config.step_credit == "branch" and shared_state is not None:
        term, credit_metrics = branch_step_credit(table, shared_state, row_valid.cpu(), config)
        kept = ~torch.cat([filtered, filtered.new_zeros(1)])[table.row_to_traj]
        row_adv = row_adv + (term * kept).to(row_adv.device)
        metrics.update(credit_metrics)
    if config.negate_advantage:
        row_adv = -row_adv
    dtype = token_level_rewards.dtype if token_level_rewards.is_floating_point() else torch.float32
    advantages = row_adv.to(dtype).unsqueeze(-1) * response_mask.to(dtype)
    filtered_rows = torch.cat([filtered, filtered.new_zeros(1)]).to(row_to_traj.device)[row_to_traj]
    return BatchAdvantages(
        advantages=advantages,
        returns=advantages.clone(),
        filtered_rows=filtered_rows,
        metrics=metrics,
    )
