"""BrowserGym task sources on the pool: BrowserGym's own MiniWoB++ task classes (browsergym-miniwob, installed
without its Playwright pin) set up and validate episodes on the pool's async page through the sync facade, and
give the rewards and raw scores our MiniWoB++ loader gives to the same scripted actions on the same instances."""

import asyncio
import dataclasses
import os
import threading

import numpy as np
import pytest

from verl_asyncweb.env import load_tasks
from verl_asyncweb.env.miniwob_oracle import miniwob_actions
from verl_asyncweb.env.tasks.browsergym import (
    BENCHMARKS,
    check_url_vars,
    load_browsergym_tasks,
    missing_env_vars,
    parse_pattern,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

PARITY_TASKS = ["click-test", "click-button", "enter-text", "login-user", "click-checkboxes"]
# The oracle's wrong plan exists on every instance of these (a wrong click, a misspelt text); click-button's needs a
# second button, which some instances lack.
WRONG_PLANS = {"click-test", "enter-text", "login-user"}


def same_instance_of_our_loader(task):
    """Our loader's task for BrowserGym's instance: BrowserGym seeds the page with RandomState(seed).randint(1e6)."""
    name = task.metadata["name"].split(".", 1)[1]
    ours = load_tasks("miniwob", names=[name])[0]
    return dataclasses.replace(ours, seed=int(np.random.RandomState(task.seed).randint(0, 1000000)))


async def play(pool, session, task, name, correct):
    obs = await pool.reset(session, task)
    assert not obs.env_failed, obs.error
    results = [await pool.step(session, a.tool_call) for a in miniwob_actions(name, obs, correct=correct)]
    evaluation = await pool.evaluate(session, task)
    return obs.instruction, results[-1].done, evaluation.reward, evaluation.raw_score


@pytest.mark.parametrize("name", PARITY_TASKS)
async def test_browsergym_and_our_loader_give_the_same_rewards_to_the_same_actions(pool, session, name):
    for bg_task in load_browsergym_tasks(f"miniwob.{name}", seed=3, episodes_per_task=2):
        ours = same_instance_of_our_loader(bg_task)
        for correct in (True, False) if name in WRONG_PLANS else (True,):
            bg_goal, bg_done, bg_reward, bg_raw = await play(pool, session, bg_task, name, correct)
            goal, done, reward, raw = await play(pool, session, ours, name, correct)
            # The same page instance: the same goal, the same outcome and raw score of the same plan.
            assert bg_goal == goal and bg_goal
            assert (bg_done, bg_reward, bg_raw) == (done, reward, raw)
            assert (done, reward, raw) == (True, 1.0, 1.0) if correct else reward == 0.0 and raw < 1.0


async def test_the_task_validates_after_every_action_and_ends_the_episode_itself(pool, session):
    task = load_browsergym_tasks("miniwob.login-user", seed=5)[0]
    obs = await pool.reset(session, task)
    plan = miniwob_actions("login-user", obs)
    first = await pool.step(session, plan[0].tool_call)
    assert not first.done and session.browsergym.reward == 0.0  # validated: not done after one field
    for action in plan[1:]:
        last = await pool.step(session, action.tool_call)
    assert last.done and last.reward == 1.0 and session.browsergym.done
    assert (await pool.evaluate(session, task)).reasons == ["browsergym reward 1"]


async def test_a_benchmark_whose_setup_changes_the_context_gets_a_new_one_after_each_episode(
    pool, session, monkeypatch
):
    """WorkArena's setup sets a page timeout and adds init scripts to the context at every episode
    (``Benchmark.fresh_context``): the next episode starts on a new context, built once with the task's popup
    switch (WorkArena's tasks allow popups). Other benchmarks keep theirs."""
    import verl_asyncweb.env.pool as pool_module

    task = dataclasses.replace(load_browsergym_tasks("miniwob.click-test", seed=5)[0], allow_popups=True)
    pollute = "window.__episodes = (window.__episodes || 0) + 1"
    builds = []

    def counted(*args):
        builds.append(args)
        return build_context(*args)

    build_context = pool_module.build_context
    monkeypatch.setattr(pool_module, "build_context", counted)

    async def after_another_episode():
        await pool.reset(session, task)
        await session.context.add_init_script(pollute)  # what WorkArena's setup does to the context
        before, built = pool.stats(), len(builds)
        await pool.reset(session, task)  # tears the first episode down, then sets up the next
        after = pool.stats()
        assert not session.last_observation.env_failed and session.context_popups
        ran = await session.page.evaluate("window.__episodes || 0")
        renewed, recovered = (after[name] - before[name] for name in ("contexts_renewed", "recoveries_context"))
        return ran, renewed, recovered, len(builds) - built

    assert await after_another_episode() == (1, 0, 0, 0)
    monkeypatch.setitem(BENCHMARKS, "miniwob", dataclasses.replace(BENCHMARKS["miniwob"], fresh_context=True))
    assert await after_another_episode() == (0, 1, 0, 1)


def test_globs_select_tasks_and_bad_sources_are_named():
    names = {task.metadata["name"] for task in load_browsergym_tasks("miniwob.click-tab*")}
    assert names == {
        "miniwob.click-tab",
        "miniwob.click-tab-2",
        "miniwob.click-tab-2-easy",
        "miniwob.click-tab-2-hard",
        "miniwob.click-tab-2-medium",
    }
    tasks = load_browsergym_tasks("miniwob.click-test", seed=10, episodes_per_task=3, max_steps=4)
    assert [(t.task_id, t.seed, t.max_steps, t.start_url) for t in tasks] == [
        (f"browsergym/miniwob.click-test/{i}", 10 + i, 4, "/miniwob/miniwob/click-test.html") for i in range(3)
    ]
    with pytest.raises(ValueError, match=r"matches none of the 125 tasks of browsergym:miniwob"):
        load_browsergym_tasks("miniwob.no-such-*")
    with pytest.raises(ValueError, match=r"benchmark of \['assistantbench', 'miniwob', 'visualwebarena'"):
        parse_pattern("nosuch.task")


def test_servers_of_the_webarena_family_are_checked_before_anything_starts(monkeypatch):
    """WebArena cannot be reached here: its source is tested up to the network boundary."""
    webarena = BENCHMARKS["webarena"]
    for name in webarena.env_vars:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match=r"browsergym:webarena needs the environment variables \['WA_SHOPPING'"):
        load_browsergym_tasks("webarena.310")
    environ = {name: f"http://127.0.0.1:{7770 + i}" for i, name in enumerate(webarena.env_vars)}
    assert missing_env_vars(webarena, environ) == []
    assert check_url_vars(webarena, environ)[:2] == ("http://127.0.0.1:7770", "http://127.0.0.1:7771")
    with pytest.raises(ValueError, match=r"WA_MAP='localhost:3000' is not an http\(s\) URL"):
        check_url_vars(webarena, {**environ, "WA_MAP": "localhost:3000"})


async def test_a_branch_point_restores_the_task_and_its_actions_on_another_page(pool, session):
    """Branch rollouts on BrowserGym tasks: the fork sets the task up again from its seed and replays the prefix."""
    from verl_asyncweb.env.snapshot import EnvSnapshot

    task = load_browsergym_tasks("miniwob.login-user", seed=8)[0]
    obs = await pool.reset(session, task)
    plan = miniwob_actions("login-user", obs)
    await pool.step(session, plan[0].tool_call)
    snap = await pool.snapshot(session)
    assert (snap.kind, snap.exact, snap.steps) == ("browsergym", False, 1)
    forked = await pool.fork(EnvSnapshot.from_json(snap.to_json()))
    try:
        assert forked.last_observation.instruction == obs.instruction
        for action in plan[1:]:
            last = await pool.step(forked, action.tool_call)
        assert last.done and last.reward == 1.0
        assert pool.stats()["snapshots_replayed"] >= 1
    finally:
        await pool.release(forked)


def test_a_fresh_process_finds_the_task_class_without_loading_the_tasks_first():
    """An agent-loop worker gets tasks as JSON and builds the task object itself (a Ray worker's first import)."""
    import subprocess
    import sys

    probe = (
        "from verl_asyncweb.env.tasks.browsergym import task_entrypoint\n"
        "print(type(task_entrypoint('miniwob.click-button')(seed=0, base_url='http://127.0.0.1:1/')).__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["ClickButtonTask"], done.stderr[-2000:]


async def test_an_episode_of_invalid_actions_still_gets_the_tasks_verdict(pool, session):
    task = load_browsergym_tasks("miniwob.click-button", seed=2, max_steps=2)[0]
    await pool.reset(session, task)
    for _ in range(2):
        result = await pool.step(session, "no tool call here")
    assert result.done and session.browsergym.message == []  # no action reached the page
    evaluation = await pool.evaluate(session, task)
    assert (evaluation.reward, evaluation.env_failed, evaluation.reasons) == (0.0, False, ["browsergym reward 0"])


async def test_a_setup_that_fails_is_torn_down_and_its_error_raised(monkeypatch):
    """WorkArena's setup creates a ServiceNow user before it logs in; only ``teardown`` deletes it, so a setup that
    fails is torn down before its error goes on (to the pool, which counts an environment failure)."""
    from verl_asyncweb.env.tasks import browsergym

    calls = []

    class FailingTask:  # a task class whose instance is down once its setup has made something
        def __init__(self, **kwargs):
            calls.append("init")

        def setup(self, page):
            calls.append("setup")
            raise ConnectionError("instance unreachable")

        def teardown(self):
            calls.append("teardown")

    monkeypatch.setattr(browsergym, "task_entrypoint", lambda name: FailingTask)
    task = load_browsergym_tasks("miniwob.click-test")[0]
    with pytest.raises(ConnectionError, match="instance unreachable"):
        await browsergym.LiveTask.start(task, None, "http://127.0.0.1:9", timeout_s=5)
    assert calls == ["init", "setup", "teardown"]


async def test_setups_hanging_on_their_server_keep_threads_of_their_own(monkeypatch, caplog):
    """A setup blocked on its server (WorkArena's instance check waits up to 30000 s) runs on after the pool's reset
    timeout. More of them than the event loop's default executor has threads leave that executor free (name lookups
    of the rollout's HTTP calls use it), and each one left running is logged."""
    from verl_asyncweb.env.task_threads import MAX_TASK_THREADS, busy_task_threads
    from verl_asyncweb.env.tasks import browsergym

    release, entered = threading.Event(), []

    class HangingTask:  # a task class whose server does not answer until released
        def __init__(self, **kwargs):
            pass

        def setup(self, page):
            entered.append(1)
            release.wait(60)
            raise ConnectionError("instance unreachable")

    monkeypatch.setattr(browsergym, "task_entrypoint", lambda name: HangingTask)
    task = load_browsergym_tasks("miniwob.click-test")[0]
    hung = min(32, (os.cpu_count() or 1) + 4) + 1  # one more than the default executor's threads
    loop = asyncio.get_running_loop()
    try:
        for started in range(1, hung + 1):  # the pool's reset timeout, given up once the setup hangs
            reset = asyncio.create_task(browsergym.LiveTask.start(task, None, "http://127.0.0.1:9", 5))
            await wait_until(lambda started=started: len(entered) == started)
            reset.cancel()
            with pytest.raises(asyncio.CancelledError):
                await reset
        assert busy_task_threads() == hung
        assert await asyncio.wait_for(asyncio.to_thread(lambda: "free"), 5) == "free"
        assert await asyncio.wait_for(loop.getaddrinfo("127.0.0.1", 80), 5)
    finally:
        release.set()
    gave_up = [r.getMessage() for r in caplog.records if "goes on in its thread after its caller gave up" in r.msg]
    assert len(gave_up) == hung and f"({hung} of {MAX_TASK_THREADS} task threads busy)" in gave_up[-1]
    await wait_until(lambda: busy_task_threads() == 0)


async def wait_until(condition, timeout_s: float = 10.0):
    for _ in range(int(timeout_s / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met in time")


def test_visualwebarenas_captioning_model_loads_once_only_for_the_tasks_it_scores_and_a_failure_is_kept():
    import threading

    from verl_asyncweb.env.tasks import browsergym

    loads, results = [], {}

    def load(device, dtype, model_name):
        loads.append(model_name)
        if model_name == "offline-model":
            raise OSError("hub unreachable")
        return f"captioner:{model_name}"

    get = browsergym._captioning_once(load)
    scored = type("Task", (), {"task_configs": [{"eval": {"eval_types": ["page_image_query"]}}]})()
    plain = type("Task", (), {"task_configs": [{"eval": {"eval_types": ["url_match"]}}]})()

    def set_up(task, name):
        with browsergym.captioning_for(task):
            results[name] = get("cpu", "float32", "blip")

    threads = [threading.Thread(target=set_up, args=(scored, f"scored{i}")) for i in range(3)]
    threads.append(threading.Thread(target=set_up, args=(plain, "plain")))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {**{f"scored{i}": "captioner:blip" for i in range(3)}, "plain": browsergym._no_captioning}
    assert loads == ["blip"]
    assert get("cpu", "float32", "blip") == "captioner:blip"  # outside a setup: the upstream behaviour, loaded
    with browsergym.captioning_for(scored), pytest.raises(OSError, match="hub unreachable"):
        get("cpu", "float32", "offline-model")
    with browsergym.captioning_for(scored), pytest.raises(RuntimeError, match="failed to load earlier"):
        get("cpu", "float32", "offline-model")  # at once, without trying the hub again
    assert loads == ["blip", "offline-model"]
    with browsergym.captioning_for(plain):
        assert get("cpu", "float32", "other") is browsergym._no_captioning
    assert not hasattr(browsergym._captioning, "needed"), "the flag is this setup's only"
