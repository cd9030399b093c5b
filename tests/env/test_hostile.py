"""Hostile pages: every step returns within its timeout, the pool recovers, and blocked attempts are counted."""

import asyncio
import time

import pytest

from verl_asyncweb.env import Task
from verl_asyncweb.env.oracle import click, tool_call

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]
HANG_BOUND = 3
"""A step ends within this many step timeouts: the timeout itself, then recovery (closing the context, opening a new
page) inside the failing step, with room for a busy machine. A hang is unbounded."""


def hostile_task(origin, page, **kw):
    return Task(
        task_id=f"hostile/{page}",
        instruction="survive",
        source="site",
        difficulty=1,
        max_steps=20,
        start_url=f"{origin}/hostile/{page}",
        allowed_origins=(origin,),
        evaluator="site",
        **kw,
    )


def px(x, y):
    """Normalised coordinate of a viewport pixel (1280x720)."""
    return [round(x / 1280 * 1000), round(y / 720 * 1000)]


async def timed_step(pool, session, text):
    start = time.monotonic()
    result = await pool.step(session, text)
    elapsed = time.monotonic() - start
    assert elapsed < HANG_BOUND * pool.config.step_timeout_s, elapsed
    return result


async def assert_pool_recovers(pool, session, origin):
    obs = await pool.reset(session, hostile_task(origin, "font.html"))
    assert not obs.env_failed, obs.error
    result = await timed_step(pool, session, click(px(200, 130)))
    assert not result.env_failed and result.observation.title == "clicked"


async def test_infinite_loop_step_times_out_as_env_failure_and_pool_recovers(pool, session, fixture_origin):
    before = pool.stats()
    obs = await pool.reset(session, hostile_task(fixture_origin, "loop.html"))
    assert not obs.env_failed
    result = await timed_step(pool, session, click(px(200, 130)))
    assert result.env_failed and result.done and "timed out" in result.error
    assert (await pool.evaluate(session, session.task)).env_failed
    after = pool.stats()
    assert after["timeouts"] == before["timeouts"] + 1
    assert after["env_failures"] == before["env_failures"] + 1
    assert (
        after["recoveries_context"] + after["recoveries_relaunch"]
        > before["recoveries_context"] + before["recoveries_relaunch"]
    )
    await assert_pool_recovers(pool, session, fixture_origin)


async def test_never_loading_font_does_not_stall_steps(pool, session, fixture_origin):
    obs = await pool.reset(session, hostile_task(fixture_origin, "font.html"))
    assert not obs.env_failed and obs.screenshot
    result = await timed_step(pool, session, click(px(200, 130)))
    assert not result.env_failed and result.observation.title == "clicked"


async def test_popup_storm_is_refused_and_counted(pool, session, fixture_origin):
    before = pool.stats()["blocked_popups"]
    await pool.reset(session, hostile_task(fixture_origin, "popups.html"))
    storm = await timed_step(pool, session, click(px(200, 130)))
    tab = await timed_step(pool, session, click(px(200, 320)))
    assert not storm.env_failed and not tab.env_failed
    assert "blocked popup" in storm.info
    # A refused popup is counted and closed by the end of its step, or within the close timeout when its page
    # event arrives late (the target=_blank tab's can land after the step has settled).
    for _ in range(int(pool.config.close_timeout_s / 0.05)):
        if pool.stats()["blocked_popups"] >= before + 51 and len(session.context.pages) == 1:
            break
        await asyncio.sleep(0.05)
    assert pool.stats()["blocked_popups"] >= before + 51
    assert len(session.context.pages) == 1
    await assert_pool_recovers(pool, session, fixture_origin)


@pytest.mark.parametrize(
    "y, counter, marker",
    [
        (70, "blocked_navigations", "file:///etc/passwd"),
        (140, "blocked_navigations", "http://example.com/"),
        (210, "blocked_downloads", "report.csv"),
        (280, "blocked_navigations", "javascript:"),
        (350, "blocked_navigations", "data:"),
    ],
)
async def test_hostile_link_is_blocked_counted_and_page_stays(pool, session, fixture_origin, y, counter, marker):
    before = pool.stats()[counter]
    obs = await pool.reset(session, hostile_task(fixture_origin, "links.html"))
    result = await timed_step(pool, session, click(px(200, y)))
    assert not result.env_failed, result.error
    assert pool.stats()[counter] == before + 1, result.info
    assert marker in result.info
    assert result.observation.url == obs.url and result.observation.title == "Hostile links"


async def test_non_allowlisted_subresource_is_aborted_and_counted(pool, session, fixture_origin):
    before = pool.stats()["blocked_requests"]
    obs = await pool.reset(session, hostile_task(fixture_origin, "links.html"))
    assert not obs.env_failed
    assert pool.stats()["blocked_requests"] >= before + 1  # the tracker pixel


@pytest.mark.parametrize("url", ["file:///etc/passwd", "http://example.com/", "javascript:alert(1)", "data:,x"])
async def test_navigate_action_outside_policy_is_refused(pool, session, fixture_origin, url):
    before = pool.stats()["blocked_navigations"]
    obs = await pool.reset(session, hostile_task(fixture_origin, "links.html"))
    result = await timed_step(pool, session, tool_call("navigate", url=url))
    assert not result.env_failed and result.info.startswith("blocked navigation")
    assert pool.stats()["blocked_navigations"] == before + 1
    assert result.observation.url == obs.url


async def test_allowed_link_navigates_and_settles(pool, session, fixture_origin):
    await pool.reset(session, hostile_task(fixture_origin, "links.html"))
    result = await timed_step(pool, session, click(px(200, 420)))
    assert result.observation.url.endswith("/hostile/font.html") and result.observation.title == "Never-loading font"
