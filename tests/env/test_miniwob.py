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


async def _first_observations(pool, name: str, before: str, seed: int) -> tuple:
    """An instance of ``name``'s first observation on a fresh page, and again after its session played (and
    solved) another instance of ``before``."""
    one = load_tasks("miniwob", names=[name], seed=seed)[0]
    other = load_tasks("miniwob", names=[before], seed=seed + 1)[0]
    async with pool.session() as s:
        first = await pool.reset(s, one)
        obs = await pool.reset(s, other)
        assert (await solve(pool, s, obs, before, correct=True))[-1].reward == 1.0
        return first, await pool.reset(s, one)


async def test_the_score_panel_is_hidden_so_an_instance_looks_the_same_after_any_episode(pool, deterministic_pool):
    """MiniWoB++'s score panel shows the page's previous reward and episode count: shown, the same instance looks
    different after another episode on its page; hidden (the default), it looks the same."""
    first, again = await _first_observations(deterministic_pool, "click-checkboxes", "click-checkboxes", 0)
    assert "Episodes done" in again.accessibility_text and again.screenshot != first.screenshot
    assert not pool.config.miniwob_score_panel and not pool.config.deterministic_clock
    first, again = await _first_observations(pool, "click-checkboxes", "click-checkboxes", 0)
    assert again.screenshot == first.screenshot and again.accessibility_text == first.accessibility_text
    assert "Episodes done" not in again.accessibility_text and "reward" not in again.accessibility_text.lower()


async def test_the_mouse_left_by_another_task_does_not_hover_the_next_one(pool):
    """The mouse stays where the previous episode clicked unless the reset puts it back: here enter-text's Submit
    button, over the Submit button of click-checkboxes' instance (seed 1; seeds 0, 2 and 3 do not overlap), which
    is then hovered on its fresh page. With the wall clock running."""
    first, again = await _first_observations(pool, "click-checkboxes", "enter-text", 1)
    assert again.screenshot == first.screenshot
