"""Bundled sites: every task is solved by its scripted oracle through ``step``, and an idle agent fails it."""

import aiohttp
import pytest

from verl_asyncweb.env import load_tasks
from verl_asyncweb.env.oracle import answer
from verl_asyncweb.env.tasks.site_checks import run_oracle
from verl_asyncweb.env.tasks.sites import site_task_spec

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]
SITE_TASKS = load_tasks("sites")


def test_suite_covers_three_sites_and_all_slices():
    assert len(SITE_TASKS) >= 30
    assert {t.start_url for t in SITE_TASKS} >= {"/shop/", "/wiki/", "/admin/"}
    assert {t.slice for t in SITE_TASKS} == {"easy", "medium", "hard"}
    assert all(3 <= t.metadata["oracle_steps"] <= 25 for t in SITE_TASKS)
    assert sum(t.metadata["memory"] for t in SITE_TASKS) >= 5


@pytest.mark.parametrize("task", SITE_TASKS, ids=lambda t: t.task_id)
async def test_oracle_solves_task_through_step(pool, session, task):
    obs = await pool.reset(session, task)
    assert not obs.env_failed, obs.error
    last = await run_oracle(pool, session, obs, site_task_spec(task).plan)
    evaluation = await pool.evaluate(session, task, session.answer)
    assert evaluation.success and evaluation.reward == 1.0, evaluation.reasons
    if last.done:
        assert last.reward == 1.0


@pytest.mark.parametrize("task", SITE_TASKS, ids=lambda t: t.task_id)
async def test_idle_agent_fails_task(pool, session, task):
    obs = await pool.reset(session, task)
    assert not obs.env_failed
    result = await pool.step(session, answer(""))
    assert result.done and result.reward == 0.0
    assert not (await pool.evaluate(session, task)).success


async def test_site_state_is_isolated_per_episode_and_exposed_as_json(pool):
    task = next(t for t in SITE_TASKS if t.task_id == "site/shop/add-p1")
    async with pool.session() as a, pool.session() as b:
        await pool.reset(a, task)
        await pool.reset(b, task)
        await run_oracle(pool, a, a.last_observation, site_task_spec(task).plan)
        assert (await pool.evaluate(a, task)).success
        assert not (await pool.evaluate(b, task)).success
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{pool.site_origin}/api/state", params={"episode": a.episode_token}) as reply:
                assert (await reply.json())["cart"] == {"p1": 1}
