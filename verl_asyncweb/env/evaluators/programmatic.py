"""Programmatic evaluation: MiniWoB++'s in-page outcome and the bundled sites' verifiers, as binary rewards."""

from __future__ import annotations

import asyncio
from typing import Any

from verl_asyncweb.env.results import EvalResult
from verl_asyncweb.env.tasks.task import Task

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
        MiniWoB++: success = raw in-page reward (wall-clock decay excluded) > 0, reward 1.0 on success else 0.0,
        the raw reward in the reasons. Binary like the paper's judge: MiniWoB++ gives a wrong click -1 and an
        episode left unfinished 0, so the raw reward would rank an unparseable action above a wrong click and
        teach a policy to write invalid actions.
        Sites: reward 1.0 when every verifier check passes, else 0.0.
    """
    if task.evaluator == "miniwob":
        status = await asyncio.wait_for(session.page.evaluate(_WOB_STATUS_JS), timeout_s)
        if not status["done"]:
            return EvalResult(0.0, False, ["episode did not end in the page"])
        raw = float(status["raw"])
        reason = f"raw reward {raw:g}" + (f" ({status['reason']})" if status["reason"] else "")
        return EvalResult(1.0 if raw > 0 else 0.0, raw > 0, [reason])
    if task.evaluator == "site":
        from verl_asyncweb.env.tasks.sites import verify_site_task

        if store is None:
            return EvalResult(evaluator_failed=True, reasons=["site tasks need the pool's site server"])
        success, reasons = verify_site_task(task, store.get(session.episode_token), answer)
        return EvalResult(1.0 if success else 0.0, success, reasons)
    raise ValueError(f"task {task.task_id!r}: evaluator {task.evaluator!r} is not programmatic")
