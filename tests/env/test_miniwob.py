"""MiniWoB++ through the pool: scripted correct actions give reward 1, wrong ones reward 0 (never the raw -1)."""

import pytest

from verl_asyncweb.env import load_tasks
from verl_asyncweb.env.miniwob_oracle import ORACLE_TASKS, miniwob_actions

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]


async def solve(pool, session, obs, name, correct):
    """Run the scripted oracle of ``name`` (with ``correct=False`` a plausible wrong plan) through ``step``."""
    return [await pool.step(session, action.tool_call) for action in miniwob_actions(name, obs, correct=correct)]


TASKS = list(ORACLE_TASKS)


@pytest.mark.parametrize("name", TASKS)
async def test_scripted_correct_actions_give_raw_reward_one(pool, session, name):
    for task in load_tasks("miniwob", names=[name], seed=7, episodes_per_task=2):
        obs = await pool.reset(session, task)
        assert not obs.env_failed, obs.error
        assert obs.instruction and obs.screenshot[:2] == b"\xff\xd8"
        results = await solve(pool, session, obs, name, correct=True)
        assert results[-1].done and results[-1].reward == 1.0, [r.info for r in results]
        evaluation = await pool.evaluate(session, task)
        assert evaluation.success and evaluation.reward == 1.0


@pytest.mark.parametrize("name", TASKS)
async def test_scripted_wrong_actions_do_not_give_reward_one(pool, session, name):
    task = load_tasks("miniwob", names=[name], seed=11)[0]
    obs = await pool.reset(session, task)
    results = await solve(pool, session, obs, name, correct=False)
    assert results[-1].reward != 1.0
    evaluation = await pool.evaluate(session, task)
    # Binary like the paper's reward: a wrong click (raw -1) must not rank below an unfinished episode (0).
    assert not evaluation.success and evaluation.reward == 0.0, evaluation.reasons


async def test_in_page_reset_reuses_the_page_and_changes_the_instance(pool, session):
    first, second = load_tasks("miniwob", names=["click-button"], seed=1, episodes_per_task=2)
    obs1 = await pool.reset(session, first)
    page = session.page
    obs2 = await pool.reset(session, second)
    assert session.page is page and obs1.url == obs2.url
    again = await pool.reset(session, first)
    assert again.instruction == obs1.instruction
