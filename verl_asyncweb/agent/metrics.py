"""Per-batch behaviour metrics of the web agent (DESIGN.md section 6) from per-trajectory summaries.

The agent loop fills one :class:`TrajectorySummary` per episode; :func:`aggregate` turns a batch of them into
the ``asyncweb/...`` scalars logged through verl's tracking. Metric names come from
:mod:`verl_asyncweb.compare.metric_names` so that writers and readers cannot drift apart.

Conventions:

* Trajectories failed by the environment are masked from training, so they are left out of every rate and
  mean here and only counted in ``asyncweb/env_failures``.
* A metric without data in the batch (no successes, no hard tasks, no valid memory) is absent, not 0.
* Per-step quantities (response tokens, invalid actions, stuck steps, memory sizes) are averaged over steps,
  pooled across trajectories; ``generic_key_ratio`` is pooled over keys (generic keys / all keys, every step),
  the form of AsyncWebRL's "34% of memory keys are generic".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from verl_asyncweb.agent.memory import MemoryStats, keeps_key_set
from verl_asyncweb.compare import metric_names as names

DIFFICULTY_SLICES = ("easy", "medium", "hard")
_SLICE_METRIC = {
    "easy": names.SUCCESS_RATE_EASY,
    "medium": names.SUCCESS_RATE_MEDIUM,
    "hard": names.SUCCESS_RATE_HARD,
}


def difficulty_slice(difficulty: int | None) -> str | None:
    """WebGym difficulty slice of an integer difficulty: easy <= 3, medium 4-6, hard >= 7, ``None`` if unknown."""
    if difficulty is None or isinstance(difficulty, bool):
        return None
    if difficulty <= 3:
        return "easy"
    return "medium" if difficulty <= 6 else "hard"


@dataclass
class TrajectorySummary:
    """What one episode contributes to the batch metrics.

    Args:
        traj_id: Trajectory id.
        task_id: Task id (the GRPO group).
        difficulty_slice: ``easy``, ``medium``, ``hard`` or ``None`` (no difficulty; counted only overall).
        success: The evaluator judged the task accomplished.
        reward: Trajectory reward.
        env_failed: The environment (browser, evaluator, blocking page) failed; the episode is masked.
        num_steps: Steps taken.
        response_tokens: Response length in tokens of each step.
        invalid_actions: Steps whose response did not parse into an executable action.
        stuck_steps: Steps that repeated an action on an unchanged screenshot
            (``asyncweb.agent.stuck_repeat_limit``).
        memory_stats: :class:`~verl_asyncweb.agent.memory.MemoryStats` of each step's Memory, ``None`` for
            steps without a Memory section.
        policy_versions: Earliest policy (weight) version each step's generation used.
        context_overflow: The episode ended because the prompt exceeded ``asyncweb.agent.max_prompt_tokens``.
    """

    traj_id: str
    task_id: str
    difficulty_slice: str | None = None
    success: bool = False
    reward: float = 0.0
    env_failed: bool = False
    num_steps: int = 0
    response_tokens: list[int] = field(default_factory=list)
    invalid_actions: int = 0
    stuck_steps: int = 0
    memory_stats: list[MemoryStats | None] = field(default_factory=list)
    policy_versions: list[int] = field(default_factory=list)
    context_overflow: bool = False

    def __post_init__(self):
        if self.difficulty_slice is not None and self.difficulty_slice not in DIFFICULTY_SLICES:
            raise ValueError(
                f"TrajectorySummary.difficulty_slice must be one of {list(DIFFICULTY_SLICES)} or None, "
                f"got {self.difficulty_slice!r}"
            )
        if self.num_steps < 0:
            raise ValueError(f"TrajectorySummary.num_steps must be >= 0, got {self.num_steps}")
        for name in ("invalid_actions", "stuck_steps"):
            value = getattr(self, name)
            if not 0 <= value <= self.num_steps:
                raise ValueError(f"TrajectorySummary.{name} must lie in [0, num_steps={self.num_steps}], got {value}")

    def keeps_key_set(self) -> bool | None:
        """Whether the Memory kept every key it wrote; ``None`` when no step had a valid Memory."""
        key_sets = [s.keys if s is not None and s.valid_json else None for s in self.memory_stats]
        if all(keys is None for keys in key_sets):
            return None
        return keeps_key_set(key_sets)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def aggregate(summaries: Sequence[TrajectorySummary]) -> dict[str, float]:
    """Batch metrics of DESIGN.md section 6 from per-trajectory summaries.

    Args:
        summaries: The batch's trajectories.

    Returns:
        ``{metric name: value}``; metrics without data are absent.
    """
    out: dict[str, float | None] = {
        names.TRAJECTORIES: float(len(summaries)),
        names.ENV_STEPS: float(sum(s.num_steps for s in summaries)),
        names.ENV_FAILURES: float(sum(s.env_failed for s in summaries)),
        names.CONTEXT_OVERFLOWS: float(sum(s.context_overflow for s in summaries)),
    }
    valid = [s for s in summaries if not s.env_failed]
    successes = [s for s in valid if s.success]
    failures = [s for s in valid if not s.success]

    out[names.SUCCESS_RATE] = _mean([float(s.success) for s in valid])
    for slice_name, metric in _SLICE_METRIC.items():
        out[metric] = _mean([float(s.success) for s in valid if s.difficulty_slice == slice_name])

    out[names.STEPS_PER_TRAJ_SUCCESS] = _mean([s.num_steps for s in successes])
    out[names.STEPS_PER_TRAJ_FAILURE] = _mean([s.num_steps for s in failures])
    out[names.RESPONSE_TOKENS_PER_STEP_SUCCESS] = _mean([t for s in successes for t in s.response_tokens])
    out[names.RESPONSE_TOKENS_PER_STEP_FAILURE] = _mean([t for s in failures for t in s.response_tokens])

    total_steps = sum(s.num_steps for s in valid)
    if total_steps:
        out[names.INVALID_ACTION_RATE] = sum(s.invalid_actions for s in valid) / total_steps
        out[names.STUCK_RATE] = sum(s.stuck_steps for s in valid) / total_steps

    memory = [m for s in valid for m in s.memory_stats if m is not None and m.valid_json]
    out[names.MEMORY_JSON_BYTES] = _mean([m.json_bytes for m in memory])
    out[names.MEMORY_KEY_COUNT] = _mean([m.key_count for m in memory])
    total_keys = sum(m.key_count for m in memory)
    if total_keys:
        out[names.MEMORY_GENERIC_KEY_RATIO] = sum(len(m.generic_keys) for m in memory) / total_keys
    kept = [k for k in (s.keeps_key_set() for s in valid) if k is not None]
    out[names.MEMORY_KEYSET_KEPT_FRAC] = _mean([float(k) for k in kept])

    return {name: float(value) for name, value in out.items() if value is not None}
