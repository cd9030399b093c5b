"""browsergym:workarena.* offline, up to the network boundary: BrowserGym's WorkArena package (installed into the
environment by scripts/install_browsergym.py workarena) lists its tasks and builds a task with its config, and the
pool runs its setup against a loopback HTTP server standing in for the ServiceNow instance
(tests/env/browsergym_standins.py), which has no REST API: the setup's first API call fails, and the reset with it.

Each check runs in a fresh process with the ``SNOW_INSTANCE_*`` variables set (WorkArena reads them when a task is
built; without them it would fetch a pool of hosted instances from the Hugging Face hub, which the loader's
variable check rules out).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import os
import sys
import time

import pytest
from browsergym_standins import origin, run_probe, stand_ins

logger = logging.getLogger(__name__)

TASK = "workarena.servicenow.order-ipad-pro"
START = "/now/nav/ui/classic/params/target/catalog_home.do%3Fsysparm_view%3Dcatalog_default"
ORDER_TASKS = [
    f"workarena.servicenow.order-{item}"
    for item in (
        "apple-mac-book-pro15",
        "apple-watch",
        "developer-laptop",
        "development-laptop-p-c",
        "ipad-mini",
        "ipad-pro",
        "loaner-laptop",
        "sales-laptop",
        "standard-laptop",
    )
]
USER_API = "/api/now/table/sys_user?sysparm_input_display_value=True"  # setup's first call: the episode's user
DELAY_S = 2.0  # each GET of the instance, in the episode test: what a task's constructor waits for, twice

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(
        importlib.util.find_spec("browsergym.workarena") is None,
        reason="browsergym-workarena is not installed (python scripts/install_browsergym.py workarena)",
    ),
]


def probe(name: str, server, tmp_path) -> dict:
    """This file's probe ``name`` in a fresh process, on the stand-in instance with made-up credentials."""
    variables = {"SNOW_INSTANCE_URL": origin(server), "SNOW_INSTANCE_UNAME": "admin", "SNOW_INSTANCE_PWD": "stand-in"}
    return run_probe(__file__, name, tmp_path, variables)


def test_the_tasks_their_config_and_the_checks_come_from_workarena_and_its_import_reaches_no_server(tmp_path):
    with stand_ins(["SNOW_INSTANCE_URL"]) as servers:
        found = probe("listing", servers["SNOW_INSTANCE_URL"], tmp_path)
        paths = servers["SNOW_INSTANCE_URL"].paths
    instance = origin(servers["SNOW_INSTANCE_URL"])
    assert found["count"] == 716
    assert found["glob"] == ORDER_TASKS
    assert found["missing"] == (
        "browsergym:workarena needs the environment variables ['SNOW_INSTANCE_PWD'] (BrowserGym's) set"
    )
    assert found["not_a_url"] == "SNOW_INSTANCE_URL='127.0.0.1:8080' is not an http(s) URL of the benchmark's server"
    assert found["allowed_origins"] == [instance]
    # Importing WorkArena and listing its tasks opens no connection; building a task checks the instance: two GETs.
    assert found["import_connects"] == []
    assert found["build_connects"] == [instance.removeprefix("http://")] * 2 and paths == ["/", "/"]
    assert found["config"] == {
        "start_url": instance + START,
        "item": "iPad pro",
        "configs": 60,
        "first": {
            "configuration": {"Choose the colour": ["radio", "Space Grey"], "Choose the storage": ["radio", "128"]},
            "description": "Request for iPad pro",
            "item": "iPad pro",
            "quantity": 1,
        },
    }


@pytest.mark.browser
def test_setup_fails_at_the_instances_missing_api_as_a_counted_env_failure_without_blocking_the_loop(tmp_path):
    with stand_ins(["SNOW_INSTANCE_URL"], delays_s={"SNOW_INSTANCE_URL": DELAY_S}) as servers:
        found = probe("episode", servers["SNOW_INSTANCE_URL"], tmp_path)
        server = servers["SNOW_INSTANCE_URL"]
    # Each of the two attempts: the constructor's status check (two GETs), then setup's first REST call, creating
    # the episode's user, which gets the stand-in's 404 page instead of JSON.
    assert server.paths == ["/"] * 4 and server.posts == [USER_API] * 2, (server.paths, server.posts)
    assert found["env_failed"] and found["env_failures"] == 1, found
    assert found["error"].startswith("reset failed: JSONDecodeError"), found
    assert found["evaluation"] == [True, 0.0]  # env_failed, reward: masked, not scored
    assert found["seconds"] < 60, found  # not a hang: 4 x 2 s of stand-in delay and a context rebuild
    # The task object is built in a worker thread: the pool's event loop kept running through the 2 s GETs.
    assert found["max_loop_gap_s"] < 2.0, found  # 0.7 s measured on the loaded 2-core machine; >= 4 s blocked


# ---- the probes, run in a fresh process -------------------------------------------------------------------------


def _connects() -> list[str]:
    """The addresses this process connects sockets to, from now on (``host:port``)."""
    found: list[str] = []

    def hook(event: str, args: tuple) -> None:
        if event == "socket.connect" and isinstance(args[1], tuple):
            found.append(f"{args[1][0]}:{args[1][1]}")

    sys.addaudithook(hook)
    return found


def probe_listing() -> dict:
    """Task listing, one task's config, the allowlist, the variable checks and the connections made."""
    from verl_asyncweb.env.tasks.browsergym import load_browsergym_tasks, task_entrypoint

    connects = _connects()
    password = os.environ.pop("SNOW_INSTANCE_PWD")
    try:
        load_browsergym_tasks(TASK)
    except ValueError as exc:
        missing = str(exc)
    os.environ["SNOW_INSTANCE_PWD"] = password
    found = {
        "missing": missing,
        "count": len(load_browsergym_tasks("workarena.*")),
        "glob": [task.metadata["name"] for task in load_browsergym_tasks("workarena.servicenow.order-*")],
        "allowed_origins": list(load_browsergym_tasks(TASK)[0].allowed_origins),
        "import_connects": list(connects),
    }
    url, os.environ["SNOW_INSTANCE_URL"] = os.environ["SNOW_INSTANCE_URL"], "127.0.0.1:8080"
    try:
        load_browsergym_tasks(TASK)
    except ValueError as exc:
        found["not_a_url"] = str(exc)
    os.environ["SNOW_INSTANCE_URL"] = url
    task = task_entrypoint(TASK)(seed=0)
    found["build_connects"] = connects[len(found["import_connects"]) :]
    found["config"] = {
        "start_url": task.start_url,
        "item": task.fixed_request_item,
        "configs": len(task.all_configs),
        "first": task.all_configs[0],
    }
    return found


async def _episode() -> dict:
    from conftest import pool_config  # tests/env/conftest.py: this script's folder is sys.path[0]

    from verl_asyncweb.env import BrowserPool
    from verl_asyncweb.env.tasks.browsergym import load_browsergym_tasks

    task = load_browsergym_tasks(TASK)[0]
    gaps = [0.0]

    async def tick() -> None:  # the loop's longest pause while the reset runs
        while True:
            before = time.monotonic()
            await asyncio.sleep(0.05)
            gaps.append(time.monotonic() - before - 0.05)

    config = pool_config(pages_per_browser=1, navigation_timeout_s=20.0, reset_timeout_s=60.0, step_timeout_s=30.0)
    async with BrowserPool(config) as pool, pool.session() as session:
        ticker = asyncio.create_task(tick())
        start = time.monotonic()
        obs = await pool.reset(session, task)
        seconds = time.monotonic() - start
        ticker.cancel()
        evaluation = await pool.evaluate(session, task)
        return {
            "env_failed": obs.env_failed,
            "error": obs.error,
            "seconds": seconds,
            "env_failures": pool.stats()["env_failures"],
            "evaluation": [evaluation.env_failed, evaluation.reward],
            "max_loop_gap_s": max(gaps),
        }


def probe_episode() -> dict:
    """The order task's failed setup on a pool of one page."""
    return asyncio.run(_episode())


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    print(json.dumps({"listing": probe_listing, "episode": probe_episode}[sys.argv[1]]()))
