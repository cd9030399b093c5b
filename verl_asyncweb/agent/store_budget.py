"""The screenshot store's byte budget, derived from the recipe and its tasks: what a run holds at its peak.

A trajectory's screenshots stay in the store while its prompt group is in TransferQueue (in flight, finished and
waiting to be sampled, or being trained on); the trainer's sweep releases them once the group leaves
(:mod:`~verl_asyncweb.trainer.screenshot_sweep`), and a failed episode releases its own at once. At the peak the
store therefore holds

* the batches submitted ahead and in flight or waiting in verl's buffer: ``eta + 1`` consumer batches (the
  everlasting pool; refills replace the groups dynamic sampling filters, one for one);
* the batch being trained on, until verl clears its rows after the step;

each batch being ``data.train_batch_size x rollout.n`` episodes, each up to its task's step cap (failed episodes run
to the cap), one new screenshot per step. :data:`HEADROOM` covers refills in flight and screenshots larger than
:data:`JPEG_BYTES_PER_PIXEL`; the store itself follows the sizes it measures (``peak_screenshots``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from verl_asyncweb.config.batch_shape import steps_per_episode

JPEG_BYTES_PER_PIXEL = 0.12
"""Assumed stored bytes per pixel of a page screenshot at JPEG quality 80 (~110 KB at 1280x720). Measured on the
suite's runs at 480x320: 0.03 on MiniWoB++ pages, up to 0.125 on the bundled sites (docs/benchmarks.md)."""
HEADROOM = 1.5
MIN_BUDGET_BYTES = 64 * 1024 * 1024
BUDGET_KEY = "asyncweb.agent.screenshot_store_budget_bytes"
PEAK_SCREENSHOTS_KEY = "asyncweb.agent.screenshot_store_peak_screenshots"


@dataclass(frozen=True)
class StoreNeed:
    """Peak screenshots held by a run, and the budget that covers them."""

    episodes: int
    steps_per_episode: int
    screenshot_bytes: int

    @property
    def screenshots(self) -> int:
        return self.episodes * self.steps_per_episode

    @property
    def peak_bytes(self) -> int:
        return self.screenshots * self.screenshot_bytes

    @property
    def budget_bytes(self) -> int:
        return max(MIN_BUDGET_BYTES, math.ceil(self.peak_bytes * HEADROOM))

    def describe(self) -> str:
        return (
            f"{self.episodes} episodes x {self.steps_per_episode} steps x ~{self.screenshot_bytes // 1024} KiB "
            f"= {self.peak_bytes / 2**20:.0f} MiB at the peak, {self.budget_bytes / 2**20:.0f} MiB with headroom"
        )


def episode_step_cap(max_steps: int, task_caps: Sequence[int] | None) -> int:
    """Steps of the longest episode: the longest task's own cap (under ``asyncweb.agent.max_steps`` when set); the
    recipe's planning figure (:func:`~verl_asyncweb.config.batch_shape.steps_per_episode`) when no tasks are known."""
    if not task_caps:
        return steps_per_episode(max_steps)
    longest = max(task_caps)
    return min(longest, max_steps) if max_steps else longest


def store_need(
    *,
    staleness: int,
    prompts_per_step: int,
    samples_per_prompt: int,
    steps: int,
    viewport: tuple[int, int],
    max_side: int | None = None,
) -> StoreNeed:
    """The peak the store must hold for these recipe values (see the module docstring); ``steps`` is
    :func:`episode_step_cap`, ``max_side`` the longest side screenshots are stored at."""
    scale = min(1.0, max_side / max(viewport)) if max_side else 1.0
    pixels = viewport[0] * viewport[1] * scale * scale
    batches = staleness + 2
    return StoreNeed(
        episodes=batches * prompts_per_step * samples_per_prompt,
        steps_per_episode=steps,
        screenshot_bytes=math.ceil(pixels * JPEG_BYTES_PER_PIXEL),
    )
