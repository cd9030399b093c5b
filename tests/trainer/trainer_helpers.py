"""Shared helpers of the trainer tests."""

from verl.trainer.ppo.v1.replay_buffer import ReplayBufferAsync

from verl_asyncweb.main import load_config


def replay_buffer_for(overrides: list[str]) -> ReplayBufferAsync:
    """verl's async replay buffer as the ``asyncweb`` trainer builds it for a recipe with these overrides (its
    TransferQueue snapshot empty: tests set it by hand)."""
    cfg, _ = load_config(overrides)
    sampler = cfg.trainer.v1.sampler
    return ReplayBufferAsync(
        trainer_mode="separate_async",
        trainer_config=cfg,
        max_off_policy_threshold=sampler.max_off_policy_threshold,
        max_off_policy_strategy=sampler.max_off_policy_strategy,
        sampler_kwargs={},
    )
