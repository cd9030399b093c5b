"""Browser fixtures: one session-scoped pool (its Chromium reused by every test), a fixture-page server on
127.0.0.1:0, and Chromium flags that make every non-loopback host unresolvable."""

import asyncio
from pathlib import Path

import pytest
from aiohttp import web

from verl_asyncweb.env import BrowserPool, BrowserPoolConfig
from verl_asyncweb.env.config import DEFAULT_CHROMIUM_ARGS, LOOPBACK_ONLY_ARGS

SITES = Path(__file__).resolve().parents[1] / "data" / "sites"
NEVER = web.AppKey("never", asyncio.Event)


def pool_config(**overrides) -> BrowserPoolConfig:
    """Small pool for the 2-core test machine, loopback only, element list on, fixed viewport/locale/timezone."""
    base = dict(
        num_browsers=1,
        pages_per_browser=2,
        accessibility_text=True,
        chromium_args=DEFAULT_CHROMIUM_ARGS + LOOPBACK_ONLY_ARGS,
        step_timeout_s=6.0,
        action_timeout_s=3.0,
        navigation_timeout_s=4.0,
        reset_timeout_s=10.0,
        locale="en-US",
        timezone_id="UTC",
    )
    base.update(overrides)
    return BrowserPoolConfig(**base)


@pytest.fixture(scope="session")
async def pool():
    async with BrowserPool(pool_config()) as shared:
        yield shared


@pytest.fixture(scope="session")
async def deterministic_pool():
    """A second shared pool with ``deterministic_clock`` on (snapshot and replay tests, issue #16), MiniWoB++'s
    score panel shown so that restores are checked to bring back the counters it shows."""
    async with BrowserPool(pool_config(deterministic_clock=True, miniwob_score_panel=True)) as shared:
        yield shared


@pytest.fixture
async def session(pool):
    """A pool session for one test (fresh cookie jar and site state at each reset), always released."""
    async with pool.session() as borrowed:
        yield borrowed


async def _never_respond(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "font/woff2"})
    await response.prepare(request)
    await request.app[NEVER].wait()  # set at teardown, so the server can stop
    return response


async def _download(request: web.Request) -> web.Response:
    return web.Response(
        body=b"secret,data\n1,2\n",
        headers={"Content-Type": "text/csv", "Content-Disposition": 'attachment; filename="report.csv"'},
    )


@pytest.fixture(scope="session")
async def fixture_origin():
    """Serves tests/data/sites on 127.0.0.1:0; ``/never/*`` never answers, ``/download`` is an attachment."""
    app = web.Application()
    app[NEVER] = asyncio.Event()
    app.router.add_get("/never/{name}", _never_respond)
    app.router.add_get("/download", _download)
    app.router.add_static("/", SITES)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    app[NEVER].set()
    await runner.cleanup()


@pytest.fixture
def make_config():
    """Factory of test pool configs (see :func:`pool_config`)."""
    return pool_config
