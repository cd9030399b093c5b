"""Killing Chromium mid-episode: in-flight episodes fail by environment, later ones succeed, nothing leaks."""

import asyncio

import pytest
from chromium_processes import chromium_since, descendants, gone, is_chromium, kill_browser, our_chromium_pids

from verl_asyncweb.env import BrowserPool, load_tasks
from verl_asyncweb.env.tasks.site_checks import run_oracle
from verl_asyncweb.env.tasks.sites import site_task_spec

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


WAIT_ACTION = '<tool_call>{"name":"wait","arguments":{"time":0}}</tool_call>'


@pytest.mark.parametrize("action", [WAIT_ACTION, "no tool call at all"], ids=["valid", "invalid"])
async def test_killed_browser_fails_in_flight_episodes_and_later_episodes_succeed(make_config, action):
    tasks = {t.task_id: t for t in load_tasks("sites")}
    task = tasks["site/shop/add-p1"]
    shared_before = our_chromium_pids()
    async with BrowserPool(make_config(num_browsers=1, pages_per_browser=2)) as pool:
        mine = chromium_since(shared_before)
        assert mine
        sessions = [await pool.acquire() for _ in range(2)]
        for s in sessions:
            assert not (await pool.reset(s, task)).env_failed
        await kill_browser(mine, sessions)
        # Even an action that never reaches the browser ends the episode: its page (and next screenshot) is gone.
        results = await asyncio.gather(*(pool.step(s, action) for s in sessions))
        assert all(r.env_failed and r.done and r.error for r in results), [r.error for r in results]
        for s in sessions:
            assert (await pool.evaluate(s, task)).env_failed
        stats = pool.stats()
        assert stats["relaunches"] >= 1 and stats["env_failures"] >= 2
        for s in sessions:
            await pool.release(s)
        for _ in range(2):  # the next episodes on every page succeed
            async with pool.session() as s:
                obs = await pool.reset(s, task)
                assert not obs.env_failed, obs.error
                await run_oracle(pool, s, obs, site_task_spec(task).plan)
                assert (await pool.evaluate(s, task)).success
        assert pool.stats()["relaunches"] == stats["relaunches"]
    leaked = [p for p in chromium_since(shared_before) if not gone(p)]
    assert not leaked, leaked


async def test_pool_close_leaves_no_chromium_process(make_config):
    before = our_chromium_pids()
    pool = BrowserPool(make_config(num_browsers=2, pages_per_browser=1))
    await pool.start()
    assert chromium_since(before)
    await pool.close()
    await pool.close()  # idempotent
    assert not chromium_since(before)


async def test_reset_on_dead_browser_relaunches_before_the_episode(make_config):
    async with BrowserPool(make_config(num_browsers=1, pages_per_browser=1)) as pool:
        task = load_tasks("miniwob", names=["click-test"])[0]
        async with pool.session() as s:
            assert not (await pool.reset(s, task)).env_failed
            await asyncio.wait_for(s.slot.browser.close(), 10)  # browser gone between episodes
            obs = await pool.reset(s, task)
            assert not obs.env_failed, obs.error
        assert pool.stats()["relaunches"] == 1


def _is_playwright_driver(process) -> bool:
    """Playwright's node driver. Chromium's own processes name ``playwright`` in their command line too (the
    profile folder): a session fixture's pool starting a renderer meanwhile is not a leaked driver (CI saw it)."""
    return not is_chromium(process) and "playwright" in " ".join(process.cmdline())


def _our_playwright_drivers() -> set[int]:
    """Playwright drivers of this test process that are still running (one exited but not yet reaped is gone)."""
    return {pid for pid in descendants(None, _is_playwright_driver) if not gone(pid)}


async def test_a_start_that_fails_half_way_leaves_no_browser_or_driver(make_config, monkeypatch):
    """A page that cannot be opened after the browsers launched (a timeout under load, here injected) fails the
    start; before the fix its Playwright driver and browsers stayed, and every retried start added more."""
    import verl_asyncweb.env.pool as pool_module

    async def failing_build_context(*args, **kwargs):
        raise TimeoutError("context creation timed out")

    before_chromium, before_drivers = our_chromium_pids(), _our_playwright_drivers()
    monkeypatch.setattr(pool_module, "build_context", failing_build_context)
    for _ in range(2):  # a retried start cleans up after itself too
        pool = BrowserPool(make_config(num_browsers=2, pages_per_browser=1))
        with pytest.raises(TimeoutError, match="context creation"):
            await pool.start()
        await pool.close()  # nothing started: a no-op
    await asyncio.sleep(0.5)
    alive = [p for p in chromium_since(before_chromium) if not gone(p)]
    assert not alive, alive
    assert not (_our_playwright_drivers() - before_drivers)
