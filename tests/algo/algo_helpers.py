"""Helpers of the algorithm tests (a unique module name: tests/ has no packages)."""

from verl.workers.config import FSDPActorConfig

from verl_asyncweb.algo.config import DecoupledPolicyLossConfig


def make_actor_config(behav_cap=5.0, behav_cap_mode="drop", **overrides) -> FSDPActorConfig:
    """verl's FSDP actor config with our policy_loss section, as verl's workers build it."""
    kwargs = dict(strategy="fsdp", ppo_mini_batch_size=4, ppo_micro_batch_size_per_gpu=2, rollout_n=1)
    kwargs.update(overrides)
    policy_loss = DecoupledPolicyLossConfig(
        loss_mode="decoupled_ppo", behav_cap=behav_cap, behav_cap_mode=behav_cap_mode
    )
    return FSDPActorConfig(policy_loss=policy_loss, **kwargs)
