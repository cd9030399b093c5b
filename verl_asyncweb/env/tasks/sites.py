"""The bundled offline task suite over the shop, wiki and admin sites: 35 tasks, each with a verifier and an oracle.

Difficulty follows the oracle's step count on WebGym's scale (Easy <= 3, Medium 4-6, Hard >= 7). Tasks marked
``memory`` need a fact read on an earlier page (or another site) later in the episode. Definitions live in
:mod:`verl_asyncweb.env.tasks.site_catalog`.
"""

from __future__ import annotations

from verl_asyncweb.env.tasks.site_catalog import SiteTask, all_site_tasks
from verl_asyncweb.env.tasks.task import Task, difficulty_slice

SITE_TASKS: dict[str, SiteTask] = {t.task_id: t for t in all_site_tasks()}


def load_site_tasks(difficulty: str | None = None) -> list[Task]:
    """The bundled suite as :class:`Task` objects.

    Args:
        difficulty: Keep only one slice (``"easy"``, ``"medium"``, ``"hard"``); ``None`` keeps all.
    """
    if difficulty not in (None, "easy", "medium", "hard"):
        raise ValueError(f"difficulty must be 'easy', 'medium', 'hard' or None, got {difficulty!r}")
    tasks = []
    for spec in SITE_TASKS.values():
        task = Task(
            task_id=f"site/{spec.task_id}",
            instruction=spec.instruction,
            source="site",
            difficulty=spec.difficulty,
            max_steps=min(40, 2 * spec.steps + 6),
            start_url=spec.start,
            evaluator="site",
            metadata={"oracle_steps": spec.steps, "memory": spec.memory},
        )
        if difficulty is None or difficulty_slice(task.difficulty) == difficulty:
            tasks.append(task)
    return tasks


def site_task_spec(task: Task) -> SiteTask:
    """The definition behind a bundled-site :class:`Task`."""
    return SITE_TASKS[task.task_id.removeprefix("site/")]


def verify_site_task(task: Task, state: dict, answer: str | None) -> tuple[bool, list[str]]:
    """Run every check of ``task`` on the episode's site state; returns ``(success, reasons)``."""
    results = [check(state, answer) for check in site_task_spec(task).checks]
    return all(ok for _, ok in results), [("PASS " if ok else "FAIL ") + text for text, ok in results]
