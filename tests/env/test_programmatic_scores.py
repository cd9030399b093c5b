"""MiniWoB++'s raw in-page reward against success and the trained reward, without a browser."""

from types import SimpleNamespace

import pytest

from verl_asyncweb.env.evaluators.programmatic import evaluate_programmatic
from verl_asyncweb.env.tasks.task import Task


class _Page:
    def __init__(self, status: dict):
        self.status = status

    async def evaluate(self, script: str) -> dict:
        return self.status


async def _evaluate(done: bool, raw: float):
    session = SimpleNamespace(page=_Page({"done": done, "raw": raw, "reason": ""}))
    task = Task(
        "miniwob/click-checkboxes/0", "", "miniwob", 1, 5, "/miniwob/click-checkboxes.html", evaluator="miniwob"
    )
    return await evaluate_programmatic(session, task, None, None, timeout_s=1.0)


@pytest.mark.parametrize(
    ("raw", "success"),
    [(1.0, True), (1.0 - 1e-9, True), (0.6, False), (1 / 3, False), (0.0, False), (-1.0, False)],
)
async def test_only_the_full_raw_score_is_a_success(raw, success):
    evaluation = await _evaluate(True, raw)
    assert (evaluation.success, evaluation.reward, evaluation.raw_score) == (success, float(success), raw)
    assert evaluation.reasons == [f"raw reward {raw:g}"]


async def test_an_unfinished_episode_scores_what_miniwob_gives_it():
    # MiniWoB++ scores an episode left unfinished 0, as BrowserGym reports it (tests/env/test_browsergym.py).
    evaluation = await _evaluate(False, 0.0)
    assert (evaluation.success, evaluation.reward, evaluation.raw_score) == (False, 0.0, 0.0)
