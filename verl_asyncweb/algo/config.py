"""Typed configs of the algorithm layer: ``asyncweb.algo`` and the decoupled-PPO ``policy_loss`` section.

Two configs, because they are read in two places:

* :class:`AsyncWebAlgoConfig` (``asyncweb.algo``) is read on the driver, where advantages are computed.
* :class:`DecoupledPolicyLossConfig` replaces verl's ``actor_rollout_ref.actor.policy_loss`` node (via its
  ``_target_``) so that the behaviour-weight cap reaches the loss function inside the training workers, which
  only ever see the actor's config. Recipes set its ``behav_cap``/``behav_cap_mode`` by interpolation from
  ``asyncweb.algo`` so that the two cannot disagree (see :func:`verl_asyncweb.algo.verl_keys.required_verl_overrides`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig
from verl.base_config import BaseConfig
from verl.workers.config import PolicyLossConfig

STEP_NORMS: tuple[str, ...] = ("traj", "const", "none")
CAP_MODES: tuple[str, ...] = ("drop", "clip")
ESTIMATORS: tuple[str, ...] = ("multistep_grpo", "multistep_reinforce", "raftpp")
STEP_CREDITS: tuple[str, ...] = ("none", "branch")
LOSS_MODES: tuple[str, ...] = ("decoupled_ppo", "vanilla")


def _one_of(key: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{key} must be one of {list(allowed)}, got {value!r}")


def check_behav_cap(prefix: str, cap: float | None, mode: str) -> None:
    """Raise ``ValueError`` unless ``cap`` is None or a number >= 1 and ``mode`` is ``drop`` or ``clip``."""
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int | float) or not cap >= 1.0):
        raise ValueError(f"{prefix}.behav_cap must be a number >= 1.0 or null (no cap), got {cap!r}")
    _one_of(f"{prefix}.behav_cap_mode", mode, CAP_MODES)


@dataclass
class AsyncWebAlgoConfig(BaseConfig):
    """The ``asyncweb.algo`` node: advantage estimator, step normalizer and behaviour-weight cap.

    Args:
        estimator: ``multistep_grpo`` (group-normalised reward, docs/algorithms.md), ``multistep_reinforce``
            (WebGym sync baseline: raw reward, no group baseline) or ``raftpp`` (RAFT++: advantage 1 on
            successful trajectories, 0 otherwise). Recipes also set ``algorithm.adv_estimator`` to this name.
        step_norm: Per-trajectory scale c_i of the advantage: ``traj`` = 1/|tau_i|, ``const`` = 1/k,
            ``none`` = 1. AsyncWebRL uses ``const`` with k = 10.
        k: Constant of ``step_norm=const``.
        norm_by_std: Divide the group-centred reward by the group's population std (+ eps); GRPO only.
        eps: Added to the std before dividing.
        behav_cap: Tokens whose behaviour weight w = pi_prox/pi_behave exceeds this are dropped (or clipped);
            ``None`` disables the cap. AsyncWebRL: 5.
        behav_cap_mode: ``drop`` (the token contributes nothing) or ``clip`` (w is clipped to the cap).
        dynamic_sampling: Groups whose trajectory rewards are all equal carry no signal; give them zero
            advantage and mark their rows for removal (DAPO-style). verl's replay buffer can do the removal
            before training: ``algorithm.filter_groups.enable=true``, ``algorithm.filter_groups.metric=reward``;
            with this off, its filter must be off too.
        success_threshold: RAFT++ counts a trajectory as successful when its reward is strictly above this.
        negate_advantage: A control, never a training setting: every advantage's sign is flipped, so updates
            push away from rewarded behaviour. A run with it must not improve; if it does, the gain did not
            come from the RL signal.
        loss_mode: ``decoupled_ppo`` (the PPO ratio against pi_prox, recomputed by the trainer, times the behaviour
            weight pi_prox/pi_behave) or ``vanilla``, the baseline without decoupling: verl's ``vanilla`` PPO loss
            with the ratio taken against pi_behave itself (verl's ``rollout_correction.bypass_mode``: the old
            log-probs are the rollout's, no pi_prox pass, no behaviour weights). Recipes interpolate
            ``policy_loss.loss_mode`` from it; ``vanilla`` also needs ``bypass_mode: true``.
        step_credit: ``none`` or ``branch`` (``multistep_grpo`` with branch rollouts only): the actions taken from a
            branch point, an exact page state that a group's anchor and members all start a step from, are
            compared among those trajectories (their rewards normalised over them), and that step-level
            advantage, times ``step_credit_weight``, is added to the episode-level one on the step taken from the
            point (docs/algorithms.md).
        step_credit_weight: Weight of the step-level advantage (GiGPO's omega).
    """

    estimator: str = "multistep_grpo"
    step_norm: str = "const"
    k: int = 10
    norm_by_std: bool = True
    eps: float = 1e-6
    behav_cap: float | None = 5.0
    behav_cap_mode: str = "drop"
    dynamic_sampling: bool = True
    success_threshold: float = 0.0
    negate_advantage: bool = False
    loss_mode: str = "decoupled_ppo"
    step_credit: str = "none"
    step_credit_weight: float = 1.0

    def __post_init__(self):
        _one_of("asyncweb.algo.estimator", self.estimator, ESTIMATORS)
        _one_of("asyncweb.algo.loss_mode", self.loss_mode, LOSS_MODES)
        _one_of("asyncweb.algo.step_norm", self.step_norm, STEP_NORMS)
        _one_of("asyncweb.algo.step_credit", self.step_credit, STEP_CREDITS)
        if self.step_credit == "branch" and self.estimator != "multistep_grpo":
            raise ValueError(f"asyncweb.algo.step_credit=branch needs estimator multistep_grpo, got {self.estimator!r}")
        if isinstance(self.step_credit_weight, bool) or not isinstance(self.step_credit_weight, int | float):
            raise ValueError(f"asyncweb.algo.step_credit_weight must be a number, got {self.step_credit_weight!r}")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k <= 0:
            raise ValueError(f"asyncweb.algo.k must be an integer > 0, got {self.k!r}")
        if not isinstance(self.norm_by_std, bool):
            raise ValueError(f"asyncweb.algo.norm_by_std must be true or false, got {self.norm_by_std!r}")
        if not isinstance(self.eps, int | float) or not self.eps >= 0:
            raise ValueError(f"asyncweb.algo.eps must be a number >= 0, got {self.eps!r}")
        check_behav_cap("asyncweb.algo", self.behav_cap, self.behav_cap_mode)
        if not isinstance(self.dynamic_sampling, bool):
            raise ValueError(f"asyncweb.algo.dynamic_sampling must be true or false, got {self.dynamic_sampling!r}")
        if not isinstance(self.negate_advantage, bool):
            raise ValueError(f"asyncweb.algo.negate_advantage must be true or false, got {self.negate_advantage!r}")
        if isinstance(self.success_threshold, bool) or not isinstance(self.success_threshold, int | float):
            raise ValueError(f"asyncweb.algo.success_threshold must be a number, got {self.success_threshold!r}")

    @classmethod
    def from_dict(cls, node: Mapping[str, Any] | DictConfig | None) -> AsyncWebAlgoConfig:
        """Build from a plain dict or a (Hydra-composed) ``DictConfig`` node, rejecting unknown keys.

        Args:
            node: The ``asyncweb.algo`` node; ``None`` or empty gives the defaults. A ``_target_`` key is
                ignored, so the same node also works with verl's ``omega_conf_to_dataclass``.

        Returns:
            The validated config.

        Raises:
            ValueError: On an unknown key or an invalid value.
        """
        from verl_asyncweb.config.build import build_config

        return build_config(cls, "asyncweb.algo", node)


@dataclass
class DecoupledPolicyLossConfig(PolicyLossConfig):
    """verl's ``actor_rollout_ref.actor.policy_loss`` section plus the behaviour-weight cap of ``decoupled_ppo``.

    Selected in a recipe with ``policy_loss._target_: verl_asyncweb.algo.config.DecoupledPolicyLossConfig``;
    verl's workers build the actor config through Hydra's ``instantiate``, which honours the ``_target_``.

    Args:
        behav_cap: See :class:`AsyncWebAlgoConfig`.
        behav_cap_mode: See :class:`AsyncWebAlgoConfig`.
    """

    behav_cap: float | None = 5.0
    behav_cap_mode: str = "drop"

    def __post_init__(self):
        parent_post_init = getattr(super(), "__post_init__", None)
        if parent_post_init is not None:
            parent_post_init()
        check_behav_cap("actor_rollout_ref.actor.policy_loss", self.behav_cap, self.behav_cap_mode)
