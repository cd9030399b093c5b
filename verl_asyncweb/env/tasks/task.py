"""The :class:`Task` record shared by every task source."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SOURCES = ("miniwob", "webgym", "site", "browsergym")
EVALUATORS = ("miniwob", "site", "judge", "browsergym")


def difficulty_slice(difficulty: int) -> str:
    """WebGym's difficulty slices: Easy <= 3, Medium 4-6, Hard >= 7."""
    if difficulty <= 3:
        return "easy"
    if difficulty <= 6:
        return "medium"
    return "hard"


@dataclass(frozen=True)
class RubricFact:
    """One WebGym rubric fact (criterion A of the judge)."""

    description: str
    difficulty: int | None = None


@dataclass(frozen=True)
class Task:
    """One web task.

    Args:
        task_id: Unique id within its source.
        instruction: What the agent is asked to do. Empty for MiniWoB++, whose instruction is generated in the page
            at reset and returned in ``Observation.instruction``.
        source: ``"miniwob"``, ``"webgym"``, ``"site"`` (the bundled offline sites) or ``"browsergym"``.
        difficulty: Integer difficulty (WebGym scale: Easy <= 3, Medium 4-6, Hard >= 7).
        max_steps: Step budget of one episode.
        start_url: Absolute URL, or a path starting with ``/`` served by the pool's local site server.
        allowed_origins: Origins the page may contact besides the local site server, e.g.
            ``"https://shop.example"``, ``"https://*.example.com"`` or ``"*"`` (any http(s) origin).
        evaluator: ``"miniwob"`` (in-page outcome), ``"site"`` (programmatic verifier), ``"judge"`` or
            ``"browsergym"`` (the BrowserGym task's own ``validate``).
        reference_answer: Expected answer, where the task has one.
        rubric: Rubric facts for the judge.
        seed: Seed of in-page task generation (MiniWoB++).
        allow_popups: Let the page open new windows.
        allow_downloads: Let the page download files.
        metadata: Source-specific extras (website, domain, benchmark name, ...).
    """

    task_id: str
    instruction: str
    source: str
    difficulty: int
    max_steps: int
    start_url: str
    allowed_origins: tuple[str, ...] = ()
    evaluator: str = "judge"
    reference_answer: str | None = None
    rubric: tuple[RubricFact, ...] = ()
    seed: int | None = None
    allow_popups: bool = False
    allow_downloads: bool = False
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self):
        if self.source not in SOURCES:
            raise ValueError(f"task {self.task_id!r}: source must be one of {SOURCES}, got {self.source!r}")
        if self.evaluator not in EVALUATORS:
            raise ValueError(f"task {self.task_id!r}: evaluator must be one of {EVALUATORS}, got {self.evaluator!r}")
        if self.max_steps <= 0:
            raise ValueError(f"task {self.task_id!r}: max_steps must be > 0, got {self.max_steps}")
        if not self.start_url.startswith(("http://", "https://", "/")):
            raise ValueError(f"task {self.task_id!r}: start_url must be http(s):// or a /path, got {self.start_url!r}")

    @property
    def slice(self) -> str:
        """Difficulty slice: ``"easy"``, ``"medium"`` or ``"hard"``."""
        return difficulty_slice(self.difficulty)
