"""MiniWoB++ through the pool: scripted correct actions give reward 1, wrong ones reward 0 (never the raw -1)."""

import re

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


def _centre(obs, text: str) -> tuple[int, int]:
    """Centre (0-1000 coordinates) of the button labelled ``text`` in ``obs``'s element list."""
    x, y = re.search(rf'button "{text}" @\((\d+),(\d+)\)', obs.accessibility_text).groups()
    return int(x), int(y)


async def _first_observations(pool, name: str) -> tuple:
    """An instance of ``name``'s first observation, and again after its page played (and solved) another one."""
    one, other = load_tasks("miniwob", names=[name], seed=0, episodes_per_task=2)
    async with pool.session() as s:
        first = await pool.reset(s, one)
        obs = await pool.reset(s, other)
        assert (await solve(pool, s, obs, name, correct=True))[-1].reward == 1.0
        return first, await pool.reset(s, one)


async def test_the_score_panel_is_hidden_so_an_instance_looks_the_same_after_any_episode(pool, deterministic_pool):
    """MiniWoB++'s score panel shows the page's previous reward and episode count: shown, the same instance looks
    different after another episode on its page; hidden (the default), it looks the same."""
    first, again = await _first_observations(deterministic_pool, "click-checkboxes")
    assert "Episodes done" in again.accessibility_text and again.screenshot != first.screenshot
    assert not pool.config.miniwob_score_panel and not pool.config.deterministic_clock
    first, again = await _first_observations(pool, "click-checkboxes")
    assert again.screenshot == first.screenshot and again.accessibility_text == first.accessibility_text
    assert "Episodes done" not in again.accessibility_text and "reward" not in again.accessibility_text.lower()


async def test_a_button_the_mouse_was_left_over_is_not_drawn_hovered_at_the_next_reset(pool):
    """The mouse stays where the previous episode left it (here over click-checkboxes' Submit button, drawn
    otherwise when hovered) unless the reset puts it back. With the wall clock running."""
    one = load_tasks("miniwob", names=["click-checkboxes"], seed=1)[0]
    async with pool.session() as s:
        first = await pool.reset(s, one)
        x, y = _centre(first, "Submit")
        away = await s.page.screenshot()
        await s.page.mouse.move(x * pool.config.viewport_width / 1000, y * pool.config.viewport_height / 1000)
        assert await s.page.screenshot() != away, "hovered, the button is drawn otherwise"
        again = await pool.reset(s, one)
    assert again.screenshot == first.screenshot


_SUBMIT_UNCHECKED_JS = """() => {
    const boxes = document.querySelectorAll('#boxes input[type=checkbox]').length;
    const query = document.getElementById('query').textContent;
    const named = query === 'Select nothing and click Submit.' ? 0 : query.split(',').length;
    document.getElementById('subbtn').click();
    return {boxes, named};
}"""


async def test_partial_credit_is_kept_as_the_raw_score_and_is_no_success(pool, session):
    """Submitting click-checkboxes untouched scores (unnamed - named) / boxes, above 0 whenever most boxes are not
    named: the raw score is kept, but only the full score counts as success."""
    seen = set()
    for task in load_tasks("miniwob", names=["click-checkboxes"], seed=3, episodes_per_task=12):
        assert not (await pool.reset(session, task)).env_failed
        counts = await session.page.evaluate(_SUBMIT_UNCHECKED_JS)
        evaluation = await pool.evaluate(session, task)
        expected = (counts["boxes"] - 2 * counts["named"]) / counts["boxes"]
        assert evaluation.raw_score == pytest.approx(expected), evaluation.reasons
        assert evaluation.success is (counts["named"] == 0) and evaluation.reward == float(evaluation.success)
        seen.add("full" if counts["named"] == 0 else "partial" if expected > 0 else "none")
    assert "partial" in seen, "some instance gave partial credit, which counted as success before"
