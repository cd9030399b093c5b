"""MiniWoB++ through the pool: scripted correct actions give raw reward 1, wrong ones do not."""

import re

import pytest

from verl_asyncweb.env import load_tasks
from verl_asyncweb.env.oracle import click, elements, find, type_text

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(120)]


def quoted(instruction):
    return re.findall(r'"([^"]*)"', instruction)


async def solve(pool, session, obs, name, correct):
    """Scripted solution of ``name``; with ``correct=False`` a plausible wrong one."""
    text = obs.instruction
    if name == "click-test":
        target = find(obs, "Click Me!") if correct else [900, 900]
        return [await pool.step(session, click(target))]
    if name == "click-button":
        wanted = quoted(text)[0]
        buttons = [b for b in elements(obs) if b["kind"] == "button"]
        target = next(b for b in buttons if (b["text"] == wanted) == correct)
        return [await pool.step(session, click([target["x"], target["y"]]))]
    if name == "enter-text":
        word = quoted(text)[0] if correct else quoted(text)[0] + "zz"
        r1 = await pool.step(session, type_text(word, coordinate=find(obs, kind="input")))
        return [r1, await pool.step(session, click(find(r1.observation, "Submit")))]
    if name == "focus-text":
        return [await pool.step(session, click(find(obs, kind="input") if correct else [600, 600]))]
    if name in ("enter-password", "login-user"):
        values = quoted(text)
        if not correct:
            values = [v + "x" for v in values]
        if name == "enter-password":
            values = [values[0], values[0]]
        inputs = [[e["x"], e["y"]] for e in elements(obs) if e["kind"].startswith("input")]
        results = []
        for xy, value in zip(inputs, values, strict=True):
            results.append(await pool.step(session, type_text(value, coordinate=xy)))
        button = "Login" if name == "login-user" else "Submit"
        results.append(await pool.step(session, click(find(results[-1].observation, button))))
        return results
    if name in ("click-checkboxes", "click-option"):
        words = re.match(r"Select (.*?) and click Submit", text).group(1).replace(" and ", ", ").split(", ")
        words = [w.strip() for w in words if w.strip() and w != "nothing"]
        labels = [e for e in elements(obs) if e["kind"] == "label"]
        picks = [lab for lab in labels if (lab["text"] in words) == correct][: max(len(words), 1)]
        results = []
        for lab in picks:
            results.append(await pool.step(session, click([lab["x"], lab["y"]])))
        results.append(await pool.step(session, click(find(obs, "Submit"))))
        return results
    if name == "click-dialog":
        return [await pool.step(session, click(find(obs, "Close") if correct else find(obs, kind="p")))]
    if name == "click-tab":
        wanted = re.search(r"Tab #\d+", text).group(0)
        tabs = [e for e in elements(obs) if e["kind"] == "a"]
        target = next(t for t in tabs if (t["text"] == wanted) == correct)
        return [await pool.step(session, click([target["x"], target["y"]]))]
    raise AssertionError(name)


TASKS = [
    "click-test",
    "click-button",
    "enter-text",
    "focus-text",
    "enter-password",
    "login-user",
    "click-checkboxes",
    "click-option",
    "click-dialog",
    "click-tab",
]


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
    assert not (await pool.evaluate(session, task)).success


async def test_in_page_reset_reuses_the_page_and_changes_the_instance(pool, session):
    first, second = load_tasks("miniwob", names=["click-button"], seed=1, episodes_per_task=2)
    obs1 = await pool.reset(session, first)
    page = session.page
    obs2 = await pool.reset(session, second)
    assert session.page is page and obs1.url == obs2.url
    again = await pool.reset(session, first)
    assert again.instruction == obs1.instruction
