"""Snapshots of episodes (issue #16): a restored episode repeats the original step for step (same screenshot hash,
same reward), another action leads elsewhere; on MiniWoB++, every bundled site, after a Chromium relaunch, and with
the live-web fallback (action replay) flagged as inexact."""

import dataclasses
import hashlib
import pickle

import pytest
from aiohttp import web
from chromium_processes import chromium_since, kill_browser, our_chromium_pids

from verl_asyncweb.env import BrowserPool, EnvSnapshot, Task, load_tasks
from verl_asyncweb.env.actions import Answer, GoBack, KeyPress, LeftClick, Navigate, Scroll, TypeText, Wait
from verl_asyncweb.env.clock import EPOCH_MS
from verl_asyncweb.env.miniwob_oracle import ORACLE_TASKS, miniwob_actions
from verl_asyncweb.env.oracle import answer, click, tool_call
from verl_asyncweb.env.snapshot import decode_action, encode_action
from verl_asyncweb.env.tasks.site_checks import plan_step_actions
from verl_asyncweb.env.tasks.sites import site_task_spec

pytestmark = [pytest.mark.timeout(240)]
SITE_TASKS = {t.task_id: t for t in load_tasks("sites")}
MAX_SNAPSHOT_BYTES = 8 * 1024  # an observation's JPEG alone is ~50 KB; a snapshot holds no screenshot
COUNTER_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>counter</title>
<style>body{margin:0;font:16px 'DejaVu Sans'} button{position:absolute;left:100px;top:100px;width:200px;height:60px}
p{position:absolute;left:100px;top:200px}</style></head><body>
<button onclick="count += 1; out.textContent = 'clicked ' + count">Add</button><p id="out">clicked 0</p>
<script>let count = 0;</script></body></html>"""


def digest(obs) -> str:
    """sha256 of the observation's JPEG bytes."""
    assert not obs.env_failed, obs.error
    return hashlib.sha256(obs.screenshot).hexdigest()


def outcome(result) -> tuple:
    return digest(result.observation), result.done, result.reward


def px(x, y):
    """Normalised coordinate of a viewport pixel (1280x720)."""
    return [round(x / 1280 * 1000), round(y / 720 * 1000)]


def other_action(name, first, good, k) -> str:
    """The oracle's wrong plan at step ``k`` where it differs from the right one, else a click on empty page."""
    try:
        wrong = miniwob_actions(name, first, correct=False)
    except (LookupError, StopIteration):  # this instance has no distractor for the wrong plan
        wrong = []
    if len(wrong) > k and wrong[k].tool_call != good[k].tool_call:
        return wrong[k].tool_call
    return click([900, 900])


async def oracle_steps(pool, session, obs, plan):
    """Yield ``(text, result)`` for each step of a site oracle plan (targets resolved in the latest observation)."""
    for op, *args in plan:
        for text in plan_step_actions(op, args, obs):
            result = await pool.step(session, text)
            assert not result.env_failed and not result.invalid_action, (op, args, result.error)
            yield text, result
            obs = result.observation


async def site_episode(pool, session, task_id, cut):
    """Run the oracle of ``task_id``, snapshotting after ``cut`` steps.

    Returns:
        ``(snapshot, observation at the snapshot, [(text, outcome)] of the remaining steps, final evaluation)``.
    """
    task = SITE_TASKS[task_id]
    obs = await pool.reset(session, task)
    snap, tail, taken = None, [], 0
    async for text, result in oracle_steps(pool, session, obs, site_task_spec(task).plan):
        if snap is not None:
            tail.append((text, outcome(result)))
            continue
        obs, taken = result.observation, taken + 1
        if taken == cut:
            snap = await pool.snapshot(session)
    return snap, obs, tail, await pool.evaluate(session, task, session.answer)


@pytest.mark.browser
@pytest.mark.parametrize("name", ORACLE_TASKS)
async def test_miniwob_restore_repeats_the_next_step_and_another_action_differs(deterministic_pool, name):
    pool = deterministic_pool
    task = load_tasks("miniwob", names=[name], seed=7)[0]
    async with pool.session() as s:
        first = obs = await pool.reset(s, task)
        good = miniwob_actions(name, first, correct=True)
        k = 1 if len(good) >= 2 else 0  # snapshot after step 0 where the oracle needs two steps or more
        for action in good[:k]:
            obs = (await pool.step(s, action.tool_call)).observation
        snap = await pool.snapshot(s)
        assert (snap.kind, snap.exact) == ("miniwob", True), snap.reason
        assert snap.steps == k and snap.clock_ms == EPOCH_MS + k * pool.config.clock_step_ms
        same, other = good[k].tool_call, other_action(name, first, good, k)
        original = await pool.step(s, same)
        original_reward = (await pool.evaluate(s, task)).reward

        restored = await pool.restore(s, EnvSnapshot.from_json(snap.to_json()))
        assert digest(restored) == digest(obs) and restored.instruction == first.instruction
        again = await pool.step(s, same)
        assert outcome(again) == outcome(original)
        assert (await pool.evaluate(s, task)).reward == original_reward
    forked = await pool.fork(snap)
    try:
        assert digest(forked.last_observation) == digest(obs)
        branch = await pool.step(forked, other)
        assert outcome(branch) != outcome(original)
    finally:
        await pool.release(forked)


SITE_CASES = [  # (task, oracle steps before the snapshot): each bundled site and a cross-site task
    ("site/shop/buy-p7", 5),  # checkout form with a typed name: server cart, form value, focus and caret
    ("site/wiki/bookmark-two", 3),  # bookmarks page after one bookmark: server state, three pages of history
    ("site/admin/email-cleo", 7),  # signed in, e-mail field selected by ctrl+a: session, text selection
    ("site/cross/lumen-year-sku", 3),  # navigated from the wiki to the shop
]


@pytest.mark.browser
@pytest.mark.parametrize(("task_id", "cut"), SITE_CASES, ids=[c[0] for c in SITE_CASES])
async def test_site_restore_repeats_the_rest_of_the_episode_and_another_action_differs(
    deterministic_pool, task_id, cut
):
    pool = deterministic_pool
    replayed_before = pool.stats()["snapshots_replayed"]
    async with pool.session() as s:
        snap, snap_obs, tail, original = await site_episode(pool, s, task_id, cut)
    assert original.success, original.reasons
    assert (snap.kind, snap.exact, snap.steps) == ("site", True, cut), snap.reason
    assert snap.site_state is not None and snap.url.startswith("/") and snap.history
    assert EnvSnapshot.from_json(snap.to_json()) == snap and pickle.loads(pickle.dumps(snap)) == snap
    assert len(snap.to_json()) < MAX_SNAPSHOT_BYTES

    forked = await pool.fork(EnvSnapshot.from_json(snap.to_json()))
    try:
        assert digest(forked.last_observation) == digest(snap_obs)
        assert forked.steps == cut
        for text, expected in tail:
            assert outcome(await pool.step(forked, text)) == expected, text
        evaluation = await pool.evaluate(forked, forked.task, forked.answer)
        assert (evaluation.success, evaluation.reward) == (original.success, original.reward)

        assert digest(await pool.restore(forked, snap)) == digest(snap_obs)
        branch = await pool.step(forked, answer("I do not know"))
        assert outcome(branch) != tail[0][1]
    finally:
        await pool.release(forked)
    assert pool.stats()["snapshots_replayed"] == replayed_before


@pytest.mark.browser
async def test_go_back_after_restore_walks_the_episodes_history_and_stops_at_its_start(deterministic_pool):
    pool, back = deterministic_pool, tool_call("go_back")
    async with pool.session() as s:
        obs = await pool.reset(s, SITE_TASKS["site/cross/lumen-year-sku"])
        steps = oracle_steps(pool, s, obs, site_task_spec(s.task).plan)
        for _ in range(3):  # search the wiki, open the article, navigate to the shop
            await anext(steps)
        await steps.aclose()
        snap = await pool.snapshot(s)
        urls = [entry["url"] for entry in snap.history]
        assert urls == ["/wiki/", "/wiki/search?q=Lumen", "/wiki/a/lumen-x2"]
        assert snap.history[0]["form"][0]["value"] == "Lumen"  # typed into the search box before leaving
        original = [await pool.step(s, back) for _ in range(4)]
        assert [r.observation.url.removeprefix(pool.site_origin) for r in original[:3]] == urls[::-1]
        assert original[3].info == "no page to go back to"
        await pool.restore(s, snap)
        restored = [await pool.step(s, back) for _ in range(4)]
    assert [outcome(r) for r in restored] == [outcome(r) for r in original]
    assert restored[3].info == "no page to go back to"


@pytest.mark.browser
async def test_restore_after_chromium_relaunch_repeats_the_original(make_config):
    before = our_chromium_pids()
    async with BrowserPool(make_config(pages_per_browser=1, deterministic_clock=True)) as pool:
        mine = chromium_since(before)
        async with pool.session() as s:
            task = load_tasks("miniwob", names=["enter-text"], seed=7)[0]
            first = await pool.reset(s, task)
            good = miniwob_actions("enter-text", first)
            await pool.step(s, good[0].tool_call)
            wob = await pool.snapshot(s)
            wob_next = outcome(await pool.step(s, good[1].tool_call))
            site, _, tail, _ = await site_episode(pool, s, "site/shop/buy-p7", 5)
        await kill_browser(mine, [s])
        forked = await pool.fork(wob)
        try:
            assert not forked.env_failed, forked.error
            assert outcome(await pool.step(forked, good[1].tool_call)) == wob_next
            await pool.restore(forked, site)
            for text, expected in tail:
                assert outcome(await pool.step(forked, text)) == expected, text
        finally:
            await pool.release(forked)
        assert pool.stats()["relaunches"] >= 1 and pool.stats()["env_failures"] == 0


async def _counter(request: web.Request) -> web.Response:
    return web.Response(text=COUNTER_PAGE, content_type="text/html")


@pytest.fixture(scope="module")
async def live_origin():
    """A page whose state lives in a script variable, served on 127.0.0.1:0 (stands for a live website)."""
    app = web.Application()
    app.router.add_get("/counter", _counter)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
    await runner.cleanup()


@pytest.mark.browser
async def test_live_web_snapshot_is_inexact_and_restores_by_replaying_its_actions(deterministic_pool, live_origin):
    pool = deterministic_pool
    task = Task("live/counter", "Click Add.", "webgym", 1, 10, f"{live_origin}/counter", allowed_origins=(live_origin,))
    async with pool.session() as s:
        await pool.reset(s, task)
        await pool.step(s, "no tool call")  # an invalid action is a step too
        await pool.step(s, click(px(200, 130)))
        obs = (await pool.step(s, tool_call("wait", time=4))).observation  # page time passes (clock_ms below)
        snap = await pool.snapshot(s)
        assert (snap.kind, snap.exact, snap.site_state) == ("web", False, None)
        assert "replays the 3 recorded actions" in snap.reason and snap.actions[0] is None
        assert snap.clock_ms == EPOCH_MS + 4000 + 2 * pool.config.clock_step_ms
        original = outcome(await pool.step(s, click(px(200, 130))))
        stats = pool.stats()
        restored = await pool.restore(s, snap)
        assert digest(restored) == digest(obs) and s.steps == 3
        assert outcome(await pool.step(s, click(px(200, 130)))) == original
        assert pool.stats()["snapshots_replayed"] == stats["snapshots_replayed"] + 1
        assert await s.page.evaluate("() => count") == 2  # the script state was rebuilt by replay

        # A replay that does not reproduce the page is counted, not hidden; the episode goes on.
        await pool.restore(s, dataclasses.replace(snap, fingerprint="0" * 16))
        assert not s.env_failed and pool.stats()["snapshots_diverged"] == stats["snapshots_diverged"] + 1


@pytest.mark.browser
async def test_exact_restore_that_does_not_reproduce_the_page_fails_by_environment(deterministic_pool):
    pool = deterministic_pool
    async with pool.session() as s:
        await pool.reset(s, SITE_TASKS["site/shop/add-p1"])
        snap = await pool.snapshot(s)
        diverged = pool.stats()["snapshots_diverged"]
        obs = await pool.restore(s, dataclasses.replace(snap, fingerprint="0" * 16))
        assert obs.env_failed and s.env_failed and "did not reproduce" in obs.error
        assert pool.stats()["snapshots_diverged"] == diverged + 1
        with pytest.raises(ValueError, match="failed in the environment"):
            await pool.snapshot(s)
        with pytest.raises(ValueError, match="viewport 800x600"):
            await pool.restore(s, dataclasses.replace(snap, viewport=(800, 600)))
        assert not (await pool.restore(s, snap)).env_failed
    with pytest.raises(ValueError, match="acquired session"):
        await pool.snapshot(s)


@pytest.mark.browser
async def test_cookies_and_web_storage_are_restored_before_page_scripts(deterministic_pool):
    pool = deterministic_pool
    async with pool.session() as s:
        await pool.reset(s, SITE_TASKS["site/shop/add-p1"])
        await s.page.evaluate(
            "() => { localStorage.setItem('theme', 'dark'); sessionStorage.setItem('tab', '2');"
            " document.cookie = 'seen=1; path=/'; }"
        )
        snap = await pool.snapshot(s)
        assert (snap.local_storage, snap.session_storage) == ({"theme": "dark"}, {"tab": "2"})
        assert [c["name"] for c in snap.cookies] == ["seen"]
        await s.page.evaluate("() => { localStorage.clear(); localStorage.setItem('stale', '1'); }")
    forked = await pool.fork(snap)
    try:
        got = await forked.page.evaluate(
            "() => [JSON.stringify(localStorage), sessionStorage.getItem('tab'), document.cookie.includes('seen=1')]"
        )
        assert got == ['{"theme":"dark"}', "2", True]
    finally:
        await pool.release(forked)


@pytest.mark.browser
async def test_miniwob_snapshot_without_deterministic_clock_is_flagged_inexact(pool, session):
    await pool.reset(session, load_tasks("miniwob", names=["click-test"])[0])
    snap = await pool.snapshot(session)
    assert (snap.kind, snap.exact, snap.clock_ms) == ("miniwob", False, None)
    assert "deterministic_clock is off" in snap.reason


def test_actions_round_trip_through_json_with_site_paths():
    origin = "http://127.0.0.1:4242"
    actions = [
        LeftClick(10.0, 20.5),
        TypeText("hi", True, (3.0, 4.0)),
        KeyPress(("Control", "a")),
        Scroll(0, 500, None),
        Wait(1.5),
        GoBack(),
        Navigate(origin + "/shop/cart"),
        Navigate("https://example.com/x"),
        Answer("42"),
    ]
    encoded = [encode_action(a, origin) for a in actions]
    assert encoded[6]["url"] == "/shop/cart" and encoded[7]["url"] == "https://example.com/x"
    assert [decode_action(e, origin) for e in encoded] == actions
    assert decode_action(encoded[6], "http://127.0.0.1:9") == Navigate("http://127.0.0.1:9/shop/cart")


def test_snapshot_json_errors_name_the_field():
    snap = EnvSnapshot(task={}, kind="site", exact=True, reason="", url="/", viewport=(1280, 720))
    assert EnvSnapshot.from_json(snap.to_json()) == snap
    with pytest.raises(ValueError, match="unknown field"):
        EnvSnapshot.from_json(snap.to_json()[:-1] + ',"extra":1}')
    with pytest.raises(ValueError, match="kind must be one of"):
        dataclasses.replace(snap, kind="disk")
    with pytest.raises(ValueError, match="version must be 1"):
        dataclasses.replace(snap, version=0)
