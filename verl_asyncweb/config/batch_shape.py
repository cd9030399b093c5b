"""How many step-samples a recipe trains on: the one formula behind recipe comments, ``main``'s start-up line, the
screenshot store's budget and ``bench pixels``' default.

Every episode step is one training sample (a row). A local update trains ``ppo_mini_batch_size`` groups of
``rollout.n`` episodes; a training step runs ``parameter_sync_step`` local updates. Episodes take
``asyncweb.agent.max_steps`` steps at most, and :data:`MEAN_STEPS_PER_EPISODE` on average when tasks set their own
budgets (``max_steps: 0``).
"""

from __future__ import annotations

from dataclasses import dataclass

MEAN_STEPS_PER_EPISODE = 10
"""Steps per episode assumed when ``asyncweb.agent.max_steps`` is 0: AsyncWebRL's k (WebGym tasks average ~10)."""


def steps_per_episode(max_steps: int) -> int:
    """Steps per episode to plan for: the cap when the recipe sets one, else :data:`MEAN_STEPS_PER_EPISODE`."""
    return max_steps or MEAN_STEPS_PER_EPISODE


@dataclass(frozen=True)
class BatchShape:
    """One training step of a recipe, in groups, episodes and step-samples."""

    groups_per_update: int
    episodes_per_group: int
    steps_per_episode: int
    local_updates: int

    @classmethod
    def from_config(cls, cfg) -> BatchShape:
        """From a composed recipe (``trainer.v1.separate_async.parameter_sync_step`` local updates per step)."""
        return cls(
            groups_per_update=cfg.actor_rollout_ref.actor.ppo_mini_batch_size,
            episodes_per_group=cfg.actor_rollout_ref.rollout.n,
            steps_per_episode=steps_per_episode(cfg.asyncweb.agent.max_steps),
            local_updates=cfg.trainer.v1.separate_async.parameter_sync_step,
        )

    @property
    def step_samples_per_update(self) -> int:
        return self.groups_per_update * self.episodes_per_group * self.steps_per_episode

    @property
    def step_samples_per_step(self) -> int:
        return self.step_samples_per_update * self.local_updates

    def describe(self) -> str:
        return (
            f"~{self.step_samples_per_update:,} step-samples per local update ({self.groups_per_update} groups x "
            f"{self.episodes_per_group} episodes x ~{self.steps_per_episode} steps), {self.local_updates} local "
            f"update(s) per step: ~{self.step_samples_per_step:,} per step"
        )
