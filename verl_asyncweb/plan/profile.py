"""The capacity planner's input: a profile of per-component costs and the pipeline's shape.

Every number the simulation uses comes from a profile file (``profiles/*.yaml``, read by
:mod:`verl_asyncweb.plan.profile_file`), never from code: the GPU paper profile cites its sources line by line, a
CPU profile is written from a run folder by ``python -m verl_asyncweb.bench profile``. The dataclasses follow verl's
config style (typed, nested, units in the names, validated in ``__post_init__`` with the dotted key in the message)
but are plain frozen dataclasses: verl's ``BaseConfig`` would import verl and torch (~10 s), and the planner must
run in well under a second on any laptop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

MODES = ("async", "sync")


def require(ok: bool, key: str, value: Any, allowed: str) -> None:
    """Raise ``ValueError`` naming ``key`` and ``value`` unless ``ok``."""
    if not ok:
        raise ValueError(f"{key} must be {allowed}, got {value!r}")


class _Section:
    """Mixin: the dotted prefix of a section's keys, for error messages."""

    SECTION: ClassVar[str] = ""

    def _key(self, name: str) -> str:
        return f"{self.SECTION}.{name}"

    def _positive(self, *names: str) -> None:
        for name in names:
            value = getattr(self, name)
            require(value > 0, self._key(name), value, "> 0")

    def _non_negative(self, *names: str) -> None:
        for name in names:
            value = getattr(self, name)
            require(value >= 0, self._key(name), value, ">= 0")


@dataclass(frozen=True)
class PipelineShape(_Section):
    """How the trainer consumes rollouts (``pipeline:``).

    Args:
        mode: ``async`` overlaps rollout with training under the staleness bound; ``sync`` rolls out one batch, then
            trains on it with generation stopped (the WebGym baseline; the same as ``async`` with ``staleness: 0``).
        staleness: eta: a group whose episodes started at policy version v is dropped once the trainer's version
            exceeds v + eta; it also bounds admission (AReaL's controller, see :mod:`verl_asyncweb.plan.simulate`).
        groups_per_batch: Prompt groups (tasks) per training step (verl's ``data.train_batch_size``).
        group_size: Trajectories per group (``rollout.n``).
        max_concurrent_episodes: Browser pages: episodes that can run at once.
        dynamic_sampling: Discard groups whose rewards are all equal (probability p^n + (1-p)^n).
    """

    SECTION: ClassVar[str] = "pipeline"
    mode: str
    staleness: int
    groups_per_batch: int
    group_size: int
    max_concurrent_episodes: int
    dynamic_sampling: bool

    def __post_init__(self):
        require(self.mode in MODES, self._key("mode"), self.mode, f"one of {list(MODES)}")
        self._non_negative("staleness")
        self._positive("groups_per_batch", "group_size")
        require(
            self.max_concurrent_episodes >= self.group_size,
            self._key("max_concurrent_episodes"),
            self.max_concurrent_episodes,
            f">= pipeline.group_size ({self.group_size}): a group's episodes start together",
        )

    @property
    def effective_staleness(self) -> int:
        """eta as the simulation applies it: sync is eta = 0."""
        return self.staleness if self.mode == "async" else 0


@dataclass(frozen=True)
class Workload(_Section):
    """What an episode is (``workload:``).

    Args:
        success_prob: Mean probability that an episode succeeds.
        success_concentration: ``null``: every episode succeeds with ``success_prob`` independently. A number kappa:
            each group (one task) first draws its own success probability from Beta(p kappa, (1-p) kappa), so tasks
            differ and all-equal groups are more frequent than p^n + (1-p)^n (smaller kappa, more spread).
        steps_success: Mean steps of a successful episode.
        steps_failure: Mean steps of a failed episode.
        max_steps: Step limit; steps are 1 + Geometric truncated here, with the parameter set so the mean is exact.
        prompt_tokens_per_step: Prompt tokens of one step-sample (the trainer's forward covers prompt + response).
        response_tokens_success: Response tokens per step of a successful episode.
        response_tokens_failure: Response tokens per step of a failed episode.
    """

    SECTION: ClassVar[str] = "workload"
    success_prob: float
    success_concentration: float | None
    steps_success: float
    steps_failure: float
    max_steps: int
    prompt_tokens_per_step: float
    response_tokens_success: float
    response_tokens_failure: float

    def __post_init__(self):
        require(0.0 <= self.success_prob <= 1.0, self._key("success_prob"), self.success_prob, "in [0, 1]")
        if self.success_concentration is not None:
            self._positive("success_concentration")
        self._positive("max_steps")
        for name in ("steps_success", "steps_failure"):
            value = getattr(self, name)
            require(1 <= value <= self.max_steps, self._key(name), value, f"in [1, max_steps={self.max_steps}]")
        self._non_negative("prompt_tokens_per_step")
        self._positive("response_tokens_success", "response_tokens_failure")


@dataclass(frozen=True)
class LatencySpec(_Section):
    """Web latency of a step, the same model and names as ``asyncweb.env.latency`` (``env.latency:``).

    A step waits ``min(LogNormal(ln median_s, sigma), max_delay_s)`` seconds when enabled, exactly as
    :class:`verl_asyncweb.env.latency.LatencyModel` draws it.
    """

    SECTION: ClassVar[str] = "env.latency"
    enable: bool
    median_s: float
    sigma: float
    max_delay_s: float

    def __post_init__(self):
        self._positive("median_s", "max_delay_s")
        self._non_negative("sigma")

    @property
    def mu(self) -> float:
        """Log-space mean, as ``LatencyConfig.mu``."""
        return math.log(self.median_s)


@dataclass(frozen=True)
class EnvCost(_Section):
    """Browser-side time of an episode (``env:``).

    Args:
        step_s: Fixed seconds of every step in the browser (action, settling, screenshot) before its generation.
        episode_end_s: Seconds after the last step until the episode counts as finished (reward, e.g. a judge call).
        latency: Heavy-tailed web latency added to every step.
    """

    SECTION: ClassVar[str] = "env"
    step_s: float
    episode_end_s: float
    latency: LatencySpec

    def __post_init__(self):
        self._non_negative("step_s", "episode_end_s")


MAX_REPLICAS = 4096
"""The most rollout replicas the planner simulates."""


@dataclass(frozen=True)
class RolloutCost(_Section):
    """Rollout servers (``rollout:``).

    A request alone on a replica takes ``prefill_s + decode_s_per_token * response_tokens``. A replica runs at most
    ``max_concurrency`` requests (more wait in its queue). Prefill is compute-bound: it takes the replica, one
    request at a time, and decoding stalls meanwhile. Decoding batches: while m requests decode, each progresses at
    rate 1 / (1 + slowdown (m - 1)); slowdown 0 is perfect batching, 1 is one request at a time. Replicas pause
    during weight sync.

    Args:
        gpus: Rollout GPUs.
        gpus_per_replica: GPUs of one server (tensor parallel size); replicas = gpus // gpus_per_replica.
        max_concurrency: Requests one replica runs at once.
        prefill_s: Seconds of a request's prompt processing, with the replica to itself.
        decode_s_per_token: Seconds per generated token, alone on the replica.
        concurrency_slowdown: Growth of a request's decode time per extra request decoding beside it.
    """

    SECTION: ClassVar[str] = "rollout"
    gpus: int
    gpus_per_replica: int
    max_concurrency: int
    prefill_s: float
    decode_s_per_token: float
    concurrency_slowdown: float

    def __post_init__(self):
        self._positive("gpus", "gpus_per_replica", "max_concurrency", "decode_s_per_token")
        self._non_negative("prefill_s", "concurrency_slowdown")
        require(
            self.gpus % self.gpus_per_replica == 0,
            self._key("gpus"),
            self.gpus,
            f"a multiple of rollout.gpus_per_replica ({self.gpus_per_replica})",
        )
        # The simulator plays every replica's requests: 4096 replicas take ~2 s, a million would take hours.
        require(
            self.replicas <= MAX_REPLICAS,
            self._key("gpus"),
            self.gpus,
            f"at most {MAX_REPLICAS * self.gpus_per_replica} ({MAX_REPLICAS} replicas, each simulated; plan a slice "
            "of a larger cluster)",
        )

    @property
    def replicas(self) -> int:
        return self.gpus // self.gpus_per_replica


@dataclass(frozen=True)
class TrainerCost(_Section):
    """Trainer (``trainer:``). A step takes ``overhead_s + (recompute + update) * batch tokens / gpus``, then weight
    sync; the GPU-second costs scale linearly with the trainer's GPUs (an optimistic assumption for large splits).

    Args:
        gpus: Trainer GPUs.
        recompute_gpu_s_per_token: GPU-seconds per token of the pi_prox forward (``timing_s/old_log_prob``).
        update_gpu_s_per_token: GPU-seconds per token of the whole update, all PPO epochs (``timing_s/update_actor``).
        overhead_s: Fixed seconds per step (advantages, pixel rebuild, bookkeeping).
        weight_sync_s: Seconds of weight sync per step; rollout replicas are paused meanwhile.
        rollout_contention: For a trainer that shares its compute with rollout (the CPU backend: one machine's
            cores): while the trainer computes and a replica generates, each progresses at 1 / (1 + this) of its
            speed alone. 0 for separate devices.
    """

    SECTION: ClassVar[str] = "trainer"
    gpus: int
    recompute_gpu_s_per_token: float
    update_gpu_s_per_token: float
    overhead_s: float
    weight_sync_s: float
    rollout_contention: float

    def __post_init__(self):
        self._positive("gpus")
        self._non_negative(
            "recompute_gpu_s_per_token", "update_gpu_s_per_token", "overhead_s", "weight_sync_s", "rollout_contention"
        )


@dataclass(frozen=True)
class SimSettings(_Section):
    """The simulation itself (``sim:``).

    Args:
        seed: Seed of every random draw; a profile and a seed give the same prediction every time.
        train_steps: Training steps to simulate.
        warmup_steps: Steps left out of the figures (start-up: the first batches arrive from an empty pipeline).
    """

    SECTION: ClassVar[str] = "sim"
    seed: int
    train_steps: int
    warmup_steps: int

    def __post_init__(self):
        self._non_negative("warmup_steps")
        require(
            self.train_steps > self.warmup_steps,
            self._key("train_steps"),
            self.train_steps,
            f"> sim.warmup_steps ({self.warmup_steps})",
        )


@dataclass(frozen=True)
class Profile:
    """A whole planner input; ``name`` says where it came from."""

    name: str
    pipeline: PipelineShape
    workload: Workload
    env: EnvCost
    rollout: RolloutCost
    trainer: TrainerCost
    sim: SimSettings
