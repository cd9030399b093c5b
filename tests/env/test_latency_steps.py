"""The web-latency model charges every step of an episode, executed or invalid (real Chromium)."""

import time

import pytest

from verl_asyncweb.env import BrowserPool, load_tasks
from verl_asyncweb.env.config import LatencyConfig

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

DELAY_S = 0.5


async def test_latency_is_paid_on_valid_and_invalid_steps(make_config):
    config = make_config(pages_per_browser=1, latency=LatencyConfig(enable=True, median_s=DELAY_S, sigma=0.0))
    task = load_tasks("miniwob", names=["click-test"])[0]
    async with BrowserPool(config) as pool, pool.session() as session:
        assert not (await pool.reset(session, task)).env_failed
        durations = {}
        for name, action in [
            ("invalid", "no tool call here"),
            ("valid", '<tool_call>{"name": "wait", "arguments": {"time": 0}}</tool_call>'),
        ]:
            started = time.monotonic()
            result = await pool.step(session, action)
            durations[name] = time.monotonic() - started
            assert result.invalid_action == (name == "invalid")
        assert all(d >= DELAY_S for d in durations.values()), durations
        assert pool.stats()["invalid_actions"] == 1
