"""The rubric judge against a real local HTTP server on 127.0.0.1 that plays an OpenAI-compatible judge."""

import asyncio
import json
import logging

import pytest
from aiohttp import web

from verl_asyncweb.env import JudgeConfig, RubricFact, Task
from verl_asyncweb.env.evaluators.judge import RubricJudge, select_screenshots

pytestmark = [pytest.mark.timeout(60)]
KEY = "sk-test-SECRET-0123456789"
BEHAVIOUR = web.AppKey("behaviour", dict)
SEEN = web.AppKey("seen", list)
TASK = Task(
    task_id="wg-1",
    instruction="Find the library opening hours",
    source="webgym",
    difficulty=2,
    max_steps=10,
    start_url="https://library.example",
    reference_answer="9-17",
    rubric=(RubricFact("The opening hours page is shown"), RubricFact("Hours for Monday are visible")),
)
SHOTS = [b"\xff\xd8jpeg-%d" % i for i in range(6)]


def reply(content):
    return web.json_response({"choices": [{"message": {"role": "assistant", "content": content}}]})


async def chat(request):
    behaviour, seen = request.app[BEHAVIOUR], request.app[SEEN]
    body = await request.json()
    seen.append({"auth": request.headers.get("Authorization"), "body": body})
    mode = behaviour["mode"]
    if behaviour.get("fail_first", 0) > 0:
        behaviour["fail_first"] -= 1
        return web.Response(status=503, text="overloaded")
    if mode == "slow":
        await asyncio.sleep(5)
    if mode == "unauthorized":
        return web.Response(status=401, text=f"bad key {request.headers.get('Authorization')}")
    if mode == "garbage":
        return reply("I think it is fine")
    prompt = body["messages"][0]["content"][0]["text"]
    if "Rubric fact" in prompt:
        ok = not (mode == "fail_fact" and "Monday" in prompt)
        return reply(f"```json\n{json.dumps({'satisfied': ok, 'reason': 'seen'})}\n```")
    verdict = {"supported": mode != "unsupported", "blocked": mode == "blocked", "reason": "checked"}
    return reply(json.dumps(verdict))


@pytest.fixture(scope="module")
async def judge_server():
    app = web.Application()
    app[BEHAVIOUR] = {"mode": "pass"}
    app[SEEN] = []
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    yield app, f"http://127.0.0.1:{port}/v1"
    await runner.cleanup()


@pytest.fixture
async def judge(judge_server, monkeypatch):
    app, url = judge_server
    app[BEHAVIOUR].clear()
    app[BEHAVIOUR]["mode"] = "pass"
    app[SEEN].clear()
    monkeypatch.setenv("TEST_JUDGE_KEY", KEY)
    config = JudgeConfig(base_url=url, api_key_env="TEST_JUDGE_KEY", timeout_s=1.0, max_retries=2, retry_backoff_s=0.01)
    async with RubricJudge(config) as rubric_judge:
        yield app, rubric_judge


async def test_all_criteria_pass_gives_reward_one(judge):
    app, rubric_judge = judge
    result = await rubric_judge.evaluate(TASK, "9-17", SHOTS)
    assert result.success and result.reward == 1.0 and not result.masked
    assert len(app[SEEN]) == 3  # one call per rubric fact + one for the answer
    images = [p for p in app[SEEN][0]["body"]["messages"][0]["content"] if p["type"] == "image_url"]
    assert len(images) == 4 and images[0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert app[SEEN][0]["auth"] == f"Bearer {KEY}"


@pytest.mark.parametrize("mode", ["fail_fact", "unsupported"])
async def test_a_failed_criterion_gives_reward_zero(judge, mode):
    app, rubric_judge = judge
    app[BEHAVIOUR]["mode"] = mode
    result = await rubric_judge.evaluate(TASK, "9-17", SHOTS)
    assert not result.success and result.reward == 0.0 and not result.masked
    assert any(r.startswith("FAIL") for r in result.reasons)


async def test_blocked_page_is_flagged_and_masked(judge):
    app, rubric_judge = judge
    app[BEHAVIOUR]["mode"] = "blocked"
    result = await rubric_judge.evaluate(TASK, "9-17", SHOTS)
    assert result.blocked and result.masked and not result.success


async def test_transient_errors_are_retried(judge):
    app, rubric_judge = judge
    app[BEHAVIOUR]["fail_first"] = 2
    result = await rubric_judge.evaluate(TASK, "9-17", SHOTS)
    assert result.success and len(app[SEEN]) == 5


@pytest.mark.parametrize("mode", ["slow", "garbage", "unauthorized"])
async def test_judge_failure_is_a_clear_masked_state_and_key_never_leaks(judge, mode, caplog):
    app, rubric_judge = judge
    app[BEHAVIOUR]["mode"] = mode
    caplog.set_level(logging.DEBUG)
    result = await rubric_judge.evaluate(TASK, "9-17", SHOTS)
    assert result.evaluator_failed and result.masked and not result.success
    assert "judge failed" in result.reasons[0]
    assert KEY not in caplog.text and KEY not in " ".join(result.reasons)
    assert KEY not in repr(rubric_judge.config) and KEY not in json.dumps(dict(rubric_judge.config))
    calls_per_prompt = 1 if mode == "unauthorized" else 3
    assert len(app[SEEN]) >= calls_per_prompt


async def test_unreachable_endpoint_fails_cleanly(monkeypatch):
    config = JudgeConfig(base_url="http://127.0.0.1:9/v1", timeout_s=0.5, max_retries=1, retry_backoff_s=0.01)
    async with RubricJudge(config) as rubric_judge:
        result = await rubric_judge.evaluate(TASK, "x", SHOTS)
    assert result.evaluator_failed


def test_screenshot_selection_is_even_and_keeps_the_last():
    assert select_screenshots(list(range(10)), 4) == [0, 3, 6, 9]
    assert select_screenshots(list(range(3)), 4) == [0, 1, 2]
    assert select_screenshots(list(range(5)), 1) == [4]


def test_judge_config_validates_url():
    with pytest.raises(ValueError, match="asyncweb.judge.base_url must start with http"):
        JudgeConfig(base_url="localhost:8000")
