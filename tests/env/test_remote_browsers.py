"""Remote browsers (issue #17, item 2): pools connect to hardened browser servers (real Chromium, on loopback).

Episodes run through a server with their oracle rewards, the origin allowlist still holds, a killed server is an
env failure and leaves the rotation, launch options are the server's, and the CLI prints its endpoint and cleans up.
"""

import asyncio
import json
import os
import re
import signal
import socket
import sys

import psutil
import pytest
from chromium_processes import chromium_since, chromium_under, gone, is_chromium, our_chromium_pids
from conftest import pool_config
from test_hostile import hostile_task

from verl_asyncweb.browser_server import BrowserServer
from verl_asyncweb.config.schema import AsyncWebConfig
from verl_asyncweb.env import BrowserPool, BrowserPoolConfig, Task, load_tasks
from verl_asyncweb.env.miniwob_oracle import miniwob_actions
from verl_asyncweb.env.oracle import click
from verl_asyncweb.env.remote import RemoteBrowsersUnavailable, RemoteEndpoints
from verl_asyncweb.env.server import public_host
from verl_asyncweb.env.stats import PoolStats
from verl_asyncweb.env.tasks.site_checks import run_oracle
from verl_asyncweb.env.tasks.sites import site_task_spec

pytestmark = [pytest.mark.timeout(120)]
browser = pytest.mark.browser
WAIT_ACTION = '<tool_call>{"name":"wait","arguments":{"time":0}}</tool_call>'
ENDPOINT = re.compile(r"ws://127\.0\.0\.1:\d+/[A-Za-z0-9_-]{32}")


def shop_task() -> Task:
    return next(t for t in load_tasks("sites") if t.task_id == "site/shop/add-p1")


async def wait_until(predicate, timeout_s: float = 10.0) -> None:
    """Poll ``predicate`` until it holds (process exits and disconnects have no event to await here)."""
    for _ in range(int(timeout_s / 0.05)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"condition not reached within {timeout_s}s")


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def solve_shop(pool, session, task) -> None:
    obs = await pool.reset(session, task)
    assert not obs.env_failed, obs.error
    await run_oracle(pool, session, obs, site_task_spec(task).plan)
    evaluation = await pool.evaluate(session, task)
    assert evaluation.success and evaluation.reward == 1.0, evaluation.reasons


@pytest.fixture(scope="module")
def server():
    """One browser server for the module's non-destructive tests (only loopback names resolve in its Chromium)."""
    with BrowserServer(loopback_only=True) as started:
        yield started


@pytest.fixture(scope="module")
async def remote_pool(server):
    """A pool whose one browser is the module server's; browsers reach the site server as ``localhost``."""
    config = pool_config(
        pages_per_browser=1, remote_endpoints=(server.endpoint,), site_public_host="localhost", launch_timeout_s=10
    )
    before = our_chromium_pids()  # the server's browser and other tests' pools, alive in this session
    async with BrowserPool(config) as pool:
        # Connecting launches nothing here: no new browser, nor any process of one.
        assert chromium_since(before) == set()
        yield pool


@browser
async def test_remote_browser_runs_miniwob_and_site_episodes_with_oracle_rewards(remote_pool, server):
    assert remote_pool.site_origin.startswith("http://localhost:")
    async with remote_pool.session() as session:
        assert session.slot.endpoint == server.endpoint
        task = load_tasks("miniwob", names=["click-button"], seed=7)[0]
        obs = await remote_pool.reset(session, task)
        assert not obs.env_failed and obs.url.startswith(remote_pool.site_origin), obs.error
        results = [await remote_pool.step(session, a.tool_call) for a in miniwob_actions("click-button", obs, True)]
        assert results[-1].done and results[-1].reward == 1.0, [r.info for r in results]
        await solve_shop(remote_pool, session, shop_task())
    stats = remote_pool.stats()
    assert stats["env_failures"] == 0 and stats["relaunches"] == 0
    assert stats["remote_endpoints_lost"] == stats["remote_connect_failures"] == 0


@browser
async def test_origin_allowlist_holds_through_a_remote_browser(remote_pool, fixture_origin):
    """``context.route`` runs on the client: the remote browser's off-allowlist requests are still aborted."""
    task = hostile_task(fixture_origin, "links.html")
    before = remote_pool.stats()
    async with remote_pool.session() as session:
        obs = await remote_pool.reset(session, task)
        assert not obs.env_failed, obs.error
        assert remote_pool.stats()["blocked_requests"] >= before["blocked_requests"] + 1  # the page's tracker pixel
        # A link off the allowlist (its host resolves nowhere: the server runs with --loopback-only).
        result = await remote_pool.step(session, click([round(200 / 1280 * 1000), round(140 / 720 * 1000)]))
        assert not result.env_failed and "blocked navigation to http://example.com/" in result.info, result.info
        assert result.observation.url == obs.url
    assert remote_pool.stats()["blocked_navigations"] == before["blocked_navigations"] + 1


@browser
async def test_client_launch_options_are_ignored_and_wrong_tokens_refused(server):
    from playwright.async_api import async_playwright

    def server_browsers() -> list[psutil.Process]:  # browsers the server launched (not their helper processes)
        return [p for p in psutil.Process(server.pid).children() if is_chromium(p)]

    assert [p.pid for p in server_browsers()] == [server.chromium_pid]
    asked = {"executablePath": "/bin/false", "args": ["--asked-by-client"], "headless": False}
    async with async_playwright() as playwright:
        connected = await playwright.chromium.connect(
            server.endpoint, timeout=10_000, headers={"x-playwright-launch-options": json.dumps(asked)}
        )
        page = await connected.new_page()
        await page.set_content("<title>served</title>")
        assert await page.title() == "served"
        assert "HeadlessChrome" in await page.evaluate("navigator.userAgent")
        await connected.close()
        wrong = server.endpoint.rsplit("/", 1)[0] + "/not-the-token"
        with pytest.raises(Exception, match="400 Bad Request"):
            await playwright.chromium.connect(wrong, timeout=10_000)
    # Still the one browser the server launched, with the server's flags only.
    assert [p.pid for p in server_browsers()] == [server.chromium_pid]
    cmdline = psutil.Process(server.chromium_pid).cmdline()
    assert "--asked-by-client" not in cmdline and any(a.startswith("--host-resolver-rules=") for a in cmdline)


@browser
async def test_killed_server_fails_its_episodes_leaves_rotation_and_the_other_server_takes_over(make_config):
    task = shop_task()
    first, second = BrowserServer(loopback_only=True), BrowserServer(loopback_only=True)
    await asyncio.gather(asyncio.to_thread(first.start), asyncio.to_thread(second.start))
    try:
        config = make_config(
            num_browsers=2, pages_per_browser=1, remote_endpoints=(first.endpoint, second.endpoint), launch_timeout_s=10
        )
        async with BrowserPool(config) as pool:
            on_first, on_second = [await pool.acquire() for _ in range(2)]
            assert (on_first.slot.endpoint, on_second.slot.endpoint) == (first.endpoint, second.endpoint)
            for s in (on_first, on_second):
                assert not (await pool.reset(s, task)).env_failed
            os.killpg(first.pid, signal.SIGKILL)  # server and (its pipe closed) its Chromium die mid-episode
            await wait_until(lambda: not on_first.slot.alive)
            failed, fine = await asyncio.gather(pool.step(on_first, WAIT_ACTION), pool.step(on_second, WAIT_ACTION))
            assert failed.env_failed and failed.done and failed.reward is None and failed.error, failed
            assert not fine.env_failed and not fine.done, fine.error
            assert (await pool.evaluate(on_first, task)).env_failed
            stats = pool.stats()
            assert stats["env_failures"] == 1 and stats["remote_endpoints_lost"] == 1
            assert stats["remote_connect_failures"] == 1 and stats["relaunches"] == 1  # reconnected to the second
            assert on_first.slot.endpoint == second.endpoint
            for s in (on_first, on_second):
                await pool.release(s)
            for _ in range(2):  # the next episodes, on both sessions, succeed on the second server
                async with pool.session() as s:
                    await solve_shop(pool, s, task)
            assert pool.stats()["env_failures"] == 1 and pool.stats()["relaunches"] == 1
            await wait_until(lambda: gone(first.chromium_pid))

            # With the second server gone too, episodes fail by environment and say why (the token redacted).
            async with pool.session() as s:
                assert not (await pool.reset(s, task)).env_failed
                second.stop()
                await wait_until(lambda: not s.slot.alive)
                result = await pool.step(s, WAIT_ACTION)
                assert result.env_failed and result.reward is None
                assert "no endpoint of asyncweb.env.remote_endpoints is in rotation" in result.error, result.error
                obs = await pool.reset(s, task)
            assert obs.env_failed and "no endpoint of asyncweb.env.remote_endpoints is in rotation" in obs.error
            assert first.endpoint.rsplit("/", 1)[1] not in obs.error + result.error
            assert pool.stats()["remote_endpoints_lost"] == 2 and pool.stats()["env_failures"] == 3
    finally:
        first.stop()
        second.stop()


KILLED_CLIENT = """
import asyncio, sys
from playwright.async_api import async_playwright

async def main():
    browser = await (await async_playwright().start()).chromium.connect(sys.argv[1])
    for _ in range(4):
        await (await (await browser.new_context()).new_page()).goto("about:blank")
    print("ready", flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


@browser
async def test_a_killed_client_leaves_no_page_on_the_server(server):
    """A rollout worker killed mid-episode: its contexts belong to its connection and close with it."""
    idle = len(chromium_under(server.pid))
    client = await asyncio.create_subprocess_exec(
        sys.executable, "-c", KILLED_CLIENT, server.endpoint, stdout=asyncio.subprocess.PIPE, start_new_session=True
    )
    try:
        assert (await asyncio.wait_for(client.stdout.readline(), 60)).strip() == b"ready"
        await wait_until(lambda: len(chromium_under(server.pid)) >= idle + 4)  # a renderer per page
    finally:
        os.killpg(client.pid, signal.SIGKILL)
        await client.wait()
    await wait_until(lambda: len(chromium_under(server.pid)) <= idle)


@browser
async def test_start_fails_naming_the_endpoint_when_none_answers_and_skips_a_dead_one_otherwise(server, make_config):
    dead = f"ws://127.0.0.1:{closed_port()}/sometoken"
    with pytest.raises(RemoteBrowsersUnavailable, match=re.escape(dead.rsplit("/", 1)[0] + "/***")):
        await BrowserPool(make_config(remote_endpoints=(dead,), launch_timeout_s=5)).start()
    config = make_config(num_browsers=2, pages_per_browser=1, remote_endpoints=(dead, server.endpoint))
    async with BrowserPool(config) as pool:
        assert [s.endpoint for s in pool._slots] == [server.endpoint, server.endpoint]
        assert pool.stats()["remote_endpoints_lost"] == 1


@browser
async def test_cli_prints_one_endpoint_line_and_sigterm_leaves_no_chromium():
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "verl_asyncweb.browser_server", "--port", "0", "--loopback-only",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode().strip()
        assert ENDPOINT.fullmatch(line), line
        chromium = chromium_under(process.pid)
        assert chromium
        process.send_signal(signal.SIGTERM)
        rest, stderr = await asyncio.wait_for(process.communicate(), 30)
        assert process.returncode == 0, stderr.decode()[-2000:]
        assert rest == b""  # the endpoint is the only stdout line; logs went to stderr
        assert "stopping the browser server" in stderr.decode()
        await wait_until(lambda: all(gone(pid) for pid in chromium))
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"remote_endpoints": ("http://127.0.0.1:1/x",)},
            "asyncweb.env.remote_endpoints entries must start with ws://",
        ),
        ({"remote_endpoints": "ws://127.0.0.1:1/x"}, "asyncweb.env.remote_endpoints must be a list"),
        ({"remote_retry_s": 0}, "asyncweb.env.remote_retry_s must be > 0, got 0"),
        ({"site_public_host": "http://host"}, "asyncweb.env.site_public_host must be a bare host name"),
        ({"site_public_host": "host:8000"}, "asyncweb.env.site_public_host must be a bare host name"),
    ],
)
def test_remote_config_errors_name_the_key(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BrowserPoolConfig(**kwargs)


def test_remote_config_from_yaml_lists_and_keys():
    config = AsyncWebConfig.from_config({"env": {"remote_endpoints": ["ws://a:1/t", "wss://b:2/u"]}})
    assert config.env.remote_endpoints == ("ws://a:1/t", "wss://b:2/u")
    with pytest.raises(ValueError, match="asyncweb.env.remote_endpoints entries must start with ws://"):
        AsyncWebConfig.from_config({"env": {"remote_endpoints": ["tcp://a:1"]}})
    assert BrowserPoolConfig(site_public_host="::1").site_public_host == "::1"


def test_lost_endpoint_leaves_rotation_until_its_retry_and_is_counted_once():
    now = [0.0]
    stats = PoolStats()
    remotes = RemoteEndpoints(("ws://a:1/t", "ws://b:2/u"), stats, retry_s=30.0, clock=lambda: now[0])
    assert [remotes.assign(i) for i in range(3)] == ["ws://a:1/t", "ws://b:2/u", "ws://a:1/t"]
    remotes.failed("ws://a:1/t", ConnectionRefusedError("refused by ws://a:1/t"))
    remotes.failed("ws://a:1/t", ConnectionRefusedError("refused"))
    assert remotes.candidates("ws://a:1/t") == ["ws://b:2/u"]
    now[0] = 30.0
    assert remotes.candidates("ws://a:1/t") == ["ws://a:1/t", "ws://b:2/u"]
    remotes.reached("ws://a:1/t")
    counts = stats.snapshot()
    assert counts["remote_endpoints_lost"] == 1 and counts["remote_connect_failures"] == 2
    assert counts["remote_endpoints_restored"] == 1
    remotes.failed("ws://b:2/u", TimeoutError())
    remotes.failed("ws://a:1/t", ConnectionRefusedError("refused by ws://a:1/t"))
    assert remotes.candidates("ws://a:1/t") == []
    error = str(remotes.unavailable())
    assert error.startswith("no endpoint of asyncweb.env.remote_endpoints is in rotation (ws://b:2/***: connect timed")
    assert "ws://a:1/***: ConnectionRefusedError: refused by ws://a:1/***)" in error  # tokens never shown


def test_remote_browsers_sent_to_a_loopback_site_origin_are_warned_about(caplog):
    remotes = RemoteEndpoints(("ws://127.0.0.1:1/t", "ws://cpu-7:4000/u"), PoolStats(), retry_s=60.0)
    remotes.warn_if_unreachable("http://worker-3:41234")
    assert not caplog.records
    remotes.warn_if_unreachable("http://127.0.0.1:41234")
    assert "(ws://cpu-7:4000/***) are sent to the site server at http://127.0.0.1:41234," in caplog.text
    assert "ws://127.0.0.1:1" not in caplog.text and "site_public_host" in caplog.text


def test_site_public_host_defaults_to_the_bind_host_or_this_hosts_name():
    assert public_host("127.0.0.1", None) == "127.0.0.1"
    assert public_host("0.0.0.0", None) == public_host("::", None) == socket.gethostname()
    assert public_host("0.0.0.0", "worker-3.internal") == "worker-3.internal"
