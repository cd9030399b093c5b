"""Programmatic evaluation: MiniWoB++'s in-page outcome and the bundled sites' verifiers, as binary rewards.

MiniWoB++ scores some tasks with partial credit: click-checkboxes (and its -soft, -large, -transfer variants) end
with (correct - wrong) / boxes, so a submission that gets most boxes right scores above 0 without doing what the
instruction says; right-angle scores by closeness. A task is a success only at its full raw score
(:data:`FULL_SCORE`, within :data:`SCORE_TOLERANCE`). BrowserGym's MiniWoB++ tasks count any raw score above 0 as
reward 1 (``browsergym.miniwob``'s ``validate``), so their success rates read higher than ours on those tasks.
"""

from __future__ import annotations

import asyncio
from typing import Any

from verl_asyncweb.env.results import EvalResult
from verl_asyncweb.env.tasks.task import Task

FULL_SCORE = 1.0
SCORE_TOLERANCE = 1e-6
"""Slack below :data:`FULL_SCORE` that still counts as full: the page's score is a float quotient."""

_WOB_STATUS_JS = "() => ({done: WOB_DONE_GLOBAL, raw: WOB_RAW_REWARD_GLOBAL, reason: WOB_REWARD_REASON})"


async def evaluate_programmatic(
    session: Any, task: Task, answer: str | None, store: Any, timeout_s: float
) -> EvalResult:
    """Evaluate a MiniWoB++ or bundled-site episode.

    Args:
        session: The pool session that ran the episode (its page, for MiniWoB++; its episode token, for sites).
        task: The task (``evaluator`` is ``"miniwob"`` or ``"site"``).
        answer: The agent's final answer, if any.
        store: The site server's :class:`~verl_asyncweb.env.server.EpisodeStore`.
        timeout_s: Bound of reading the page.

    Returns:
        MiniWoB++: success = :func:`full_score` of the raw in-page reward (wall-clock decay excluded), reward 1.0 on
        success else 0.0, the raw reward in ``raw_score`` and the reasons. Binary like the paper's judge: MiniWoB++
        gives a wrong click -1 and an episode left unfinished 0, so the raw reward would rank an unparseable action
        above a wrong click and teach a policy to write invalid actions.
        Sites: reward and raw score 1.0 when every verifier check passes, else 0.0.
    """
    if task.evaluator == "miniwob":
        status = await asyncio.wait_for(session.page.evaluate(_WOB_STATUS_JS), timeout_s)
        if not status["done"]:
            return EvalResult(0.0, False, ["episode did not end in the page"], raw_score=0.0)  # MiniWoB++'s score
        raw = float(status["raw"])
        reason = f"raw reward {raw:g}" + (f" ({status['reason']})" if status["reason"] else "")
        success = full_score(raw)
        return EvalResult(float(success), success, [reason], raw_score=raw)
    if task.evaluator == "site":
        from verl_asyncweb.env.tasks.sites import verify_site_task

        if store is None:
            return EvalResult(evaluator_failed=True, reasons=["site tasks need the pool's site server"])
        success, reasons = verify_site_task(task, store.get(session.episode_token), answer)
        return EvalResult(float(success), success, reasons, raw_score=float(success))
    raise ValueError(f"task {task.task_id!r}: evaluator {task.evaluator!r} is not programmatic")


def full_score(raw: float) -> bool:
    """Whether a MiniWoB++ raw reward is the task's full score: the task done as its instruction says."""
    return raw >= FULL_SCORE - SCORE_TOLERANCE
