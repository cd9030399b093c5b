"""Typed view of the ``asyncweb:`` node that every recipe carries next to verl's own trainer config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from omegaconf import DictConfig
from verl.base_config import BaseConfig

from verl_asyncweb.agent.config import AgentConfig
from verl_asyncweb.algo.config import AsyncWebAlgoConfig
from verl_asyncweb.config.build import build_config, check_int, plain_dict
from verl_asyncweb.env.config import BrowserPoolConfig, JudgeConfig
from verl_asyncweb.trainer.config import PixelRebuildConfig

PLATFORMS = ("cpu", "auto")
ROLLOUT_MODES = ("async", "sync")


@dataclass
class TaskSetConfig(BaseConfig):
    """Which tasks the run trains and validates on (``asyncweb.tasks``).

    Args:
        train: Task sources for training, each ``miniwob`` (all tasks), ``miniwob:NAME,NAME``, ``sites``
            (the bundled offline sites), ``sites:TASK_ID,…``, ``browsergym:BENCHMARK.TASK_GLOB`` (BrowserGym's
            task classes) or a path to a WebGym JSONL file.
        val: Task sources for validation (same forms); empty means no validation set.
        max_train_tasks: Keep at most this many training tasks (0 = all), chosen with ``seed``.
        seed: Seed of task sampling and MiniWoB episode seeds.
        miniwob_instances: Seeded instances of each MiniWoB++ or BrowserGym task (one dataset row each); the
            evaluator's held-out instances come from another base seed (:mod:`verl_asyncweb.learning.splits`).
    """

    train: list[str] = field(default_factory=lambda: ["sites"])
    val: list[str] = field(default_factory=list)
    max_train_tasks: int = 0
    seed: int = 0
    miniwob_instances: int = 1

    def __post_init__(self):
        if not self.train:
            raise ValueError("asyncweb.tasks.train must name at least one task source, got []")
        if self.max_train_tasks < 0:
            raise ValueError(f"asyncweb.tasks.max_train_tasks must be >= 0, got {self.max_train_tasks}")
        check_int("asyncweb.tasks.miniwob_instances", self.miniwob_instances, 1)
        from verl_asyncweb.learning.splits import HELD_OUT_SEED

        if self.seed == HELD_OUT_SEED:
            raise ValueError(
                f"asyncweb.tasks.seed must not be {HELD_OUT_SEED}: it is the evaluator's held-out base seed"
            )


@dataclass
class AsyncWebConfig(BaseConfig):
    """The ``asyncweb:`` node.

    Args:
        recipe: Name of the recipe that produced this config (set by ``verl_asyncweb.main``).
        platform: ``cpu`` selects this plugin's CPU backend in every process; ``auto`` keeps verl's own
            accelerator detection (cuda, npu).
        build_tiny_model: Build an offline tiny Qwen-VL and use it as ``actor_rollout_ref.model.path`` when no
            path is given.
        tiny_model_size: Which one (:data:`~verl_asyncweb.backends.tiny_model.MODEL_SIZES`): ``tiny``
            (Qwen2.5-VL), ``small``, ``qwen3-tiny`` (the GPU recipes' Qwen3-VL family), or ``tiny-vllm`` /
            ``qwen3-tiny-vllm`` (32-wide heads, which vLLM's CPU attention serves).
        rollout_mode: ``async`` overlaps rollout with training (the paper); ``sync`` pauses generation from the
            moment a batch is sampled until the new weights are synced (WebGym's synchronous baseline).
        staleness: The staleness bound eta: the most weight versions a trained trajectory may lag the policy it
            updates, counted from the prompt's submission (the paper's ``max_head_offpolicyness``; 0 is
            on-policy). ``verl_asyncweb.main`` sets verl's ``trainer.v1.sampler.max_off_policy_threshold``,
            which counts the versions a trajectory spans, to ``staleness + 1``; older groups are dropped.
        stall_timeout_s: Seconds without a training step in which not one group finished without an episode failed
            by the environment (a judge or site down) after which ``verl_asyncweb.main`` stops the run with exit
            code 1, naming the failures; 0 never stops (the console still reports them after a minute).
        algo: Advantage estimator, step normalizer and behaviour-weight cap.
        agent: Context window, token limits and screenshot store of the ``web_agent`` loop.
        env: Browser pool.
        judge: The WebGym rubric judge (an OpenAI-compatible endpoint); needed only for WebGym tasks.
        tasks: Task sources.
        pixels: How the trainer rebuilds a batch's pixels from screenshot keys (chunks, parallel workers).
    """

    recipe: str = ""
    platform: str = "cpu"
    build_tiny_model: bool = False
    tiny_model_size: str = "tiny"
    rollout_mode: str = "async"
    staleness: int = 2
    stall_timeout_s: float = 900.0
    algo: AsyncWebAlgoConfig = field(default_factory=AsyncWebAlgoConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    env: BrowserPoolConfig = field(default_factory=BrowserPoolConfig)
    judge: JudgeConfig | None = None
    tasks: TaskSetConfig = field(default_factory=TaskSetConfig)
    pixels: PixelRebuildConfig = field(default_factory=PixelRebuildConfig)

    def __post_init__(self):
        if self.platform not in PLATFORMS:
            raise ValueError(f"asyncweb.platform must be one of {list(PLATFORMS)}, got {self.platform!r}")
        if self.rollout_mode not in ROLLOUT_MODES:
            raise ValueError(f"asyncweb.rollout_mode must be one of {list(ROLLOUT_MODES)}, got {self.rollout_mode!r}")
        check_int("asyncweb.staleness", self.staleness, 0)
        if not isinstance(self.stall_timeout_s, int | float) or self.stall_timeout_s < 0:
            raise ValueError(f"asyncweb.stall_timeout_s must be a number >= 0, got {self.stall_timeout_s!r}")
        from verl_asyncweb.backends.tiny_model import MODEL_SIZES

        if self.tiny_model_size not in MODEL_SIZES:
            raise ValueError(
                f"asyncweb.tiny_model_size must be one of {list(MODEL_SIZES)}, got {self.tiny_model_size!r}"
            )
        if self.algo.step_credit == "branch" and not self.agent.branch_step:
            raise ValueError(
                "asyncweb.algo.step_credit=branch compares actions taken from branch points: set "
                "asyncweb.agent.branch_step (> 0) to play a group's members from its first member's state"
            )
        if self.agent.shows_elements:
            # The prompt shows the element list, so the pool collects it: one switch, not two that must agree.
            object.__setattr__(self, "env", replace(self.env, accessibility_text=True))

    @classmethod
    def from_config(cls, node: DictConfig | Mapping[str, Any]) -> AsyncWebConfig:
        """Build and validate from the composed ``asyncweb`` node."""
        values = plain_dict(node)
        sections = {
            "algo": AsyncWebAlgoConfig,
            "agent": AgentConfig,
            "env": BrowserPoolConfig,
            "tasks": TaskSetConfig,
            "pixels": PixelRebuildConfig,
        }
        built = {
            name: build_config(kind, f"asyncweb.{name}", values.pop(name, None)) for name, kind in sections.items()
        }
        judge = values.pop("judge", None)
        built["judge"] = build_config(JudgeConfig, "asyncweb.judge", judge) if judge is not None else None
        return build_config(cls, "asyncweb", {**values, **built})
