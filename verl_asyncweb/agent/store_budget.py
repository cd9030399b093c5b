"""The screenshot store's byte budget, derived from the recipe: what a run holds at its peak.

A trajectory's screenshots stay in the store from its first step until the trainer releases them, which it does
``max_off_policy_threshold + 2`` steps after the episode was reported (:func:`~verl_asyncweb.trainer.
episode_metrics.release_screenshots`). At the peak the store therefore holds

* the episodes in flight and waiting in verl's buffer: ``(eta + 1)`` consumer batches (the everlasting pool);
* the finished episodes not yet released: ``(eta + 1) + 2`` batches' worth;

each batch being ``data.train_batch_size x rollout.n`` episodes of
:func:`~verl_asyncweb.config.batch_shape.steps_per_episode` steps, one new screenshot per step. Dynamic sampling
refills the groups it evicts, so :data:`HEADROOM` covers extra episodes per step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from verl_asyncweb.config.batch_shape import steps_per_episode

JPEG_BYTES_PER_PIXEL = 0.12
"""Stored bytes per viewport pixel of a page screenshot at JPEG quality 80 (~110 KB at 1280x720)."""
RELEASE_MARGIN_STEPS = 2
HEADROOM = 1.5
MIN_BUDGET_BYTES = 64 * 1024 * 1024
BUDGET_KEY = "asyncweb.agent.screenshot_store_budget_bytes"


@dataclass(frozen=True)
class StoreNeed:
    """Peak screenshots held by a run, and the budget that covers them."""

    episodes: int
    steps_per_episode: int
    screenshot_bytes: int

    @property
    def peak_bytes(self) -> int:
        return self.episodes * self.steps_per_episode * self.screenshot_bytes

    @property
    def budget_bytes(self) -> int:
        return max(MIN_BUDGET_BYTES, math.ceil(self.peak_bytes * HEADROOM))

    def describe(self) -> str:
        return (
            f"{self.episodes} episodes x {self.steps_per_episode} steps x ~{self.screenshot_bytes // 1024} KiB "
            f"= {self.peak_bytes / 2**20:.0f} MiB at the peak, {self.budget_bytes / 2**20:.0f} MiB with headroom"
        )


def store_need(
    *, staleness: int, prompts_per_step: int, samples_per_prompt: int, max_steps: int, viewport: tuple[int, int]
) -> StoreNeed:
    """The peak the store must hold for these recipe values (see the module docstring)."""
    threshold = staleness + 1
    batches = (staleness + 1) + threshold + RELEASE_MARGIN_STEPS
    return StoreNeed(
        episodes=batches * prompts_per_step * samples_per_prompt,
        steps_per_episode=steps_per_episode(max_steps),
        screenshot_bytes=math.ceil(viewport[0] * viewport[1] * JPEG_BYTES_PER_PIXEL),
    )
