"""browsergym:webarena.* offline, up to the network boundary: BrowserGym's WebArena package (installed into its own
folder by scripts/install_browsergym.py webarena) lists its tasks, builds their configs from libwebarena's bundled
file and runs their setup on the pool's page against loopback HTTP servers standing in for the deployment's sites.

Each check runs in a fresh process (this file run as a script): the folder goes on ``PYTHONPATH``, ``NLTK_DATA`` on
an empty ``tokenizers/punkt_tab`` (BrowserGym's import looks it up and would download it otherwise), and
libwebarena reads the ``WA_*`` variables once, at its first import. Only the servers are stood in for: the
stand-ins answer every GET with a blank page, so a site with a login form is as far as setup gets here.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time

import pytest
from browsergym_standins import INSTALLER, origin, run_probe, stand_ins

logger = logging.getLogger(__name__)

FOLDER = INSTALLER.isolated_dir("webarena")
SITES = ("SHOPPING", "SHOPPING_ADMIN", "REDDIT", "GITLAB", "WIKIPEDIA", "MAP", "HOMEPAGE")
# Task 70 logs into no site ("map": a page load) and is scored by exact match; task 310 logs into GitLab.
MAP_TASK, MAP_INTENT, MAP_ANSWER = 70, "What is the zip code of Carnegie Mellon University?", "15213"
LOGIN_TASK = 310
LOGIN_INTENT = (
    "Tell me who has made the most contributions, in terms of number of commits, to the AndroidSlidingUpPanel project"
)

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(
        not (FOLDER / "browsergym" / "webarena").is_dir(),
        reason=f"browsergym-webarena is not installed in {FOLDER} (python scripts/install_browsergym.py webarena)",
    ),
]


def probe(name: str, servers: dict, tmp_path) -> dict:
    """This file's probe ``name`` in a fresh process, with the folder and the WA_* URLs of the stand-ins."""
    return run_probe(
        __file__, name, tmp_path, {variable: origin(server) for variable, server in servers.items()}, FOLDER
    )


def test_the_tasks_their_configs_and_the_allowlist_come_from_browsergym_and_libwebarena(tmp_path):
    with stand_ins(f"WA_{site}" for site in SITES) as servers:
        found = probe("listing", servers, tmp_path)
    assert found["count"] == 812
    assert found["glob"] == ["webarena.31", *(f"webarena.{n}" for n in range(310, 320))]
    # The config is libwebarena's, with __GITLAB__ replaced by WA_GITLAB (libwebarena read it at its import).
    gitlab = origin(servers["WA_GITLAB"])
    assert found["config"] == {"intent": LOGIN_INTENT, "start_url": gitlab, "sites": ["gitlab"], "task_id": 310}
    assert found["allowed_origins"] == [origin(servers[f"WA_{site}"]) for site in SITES]
    assert found["missing"] == "browsergym:webarena needs the environment variables ['WA_MAP'] (BrowserGym's) set"
    assert found["not_a_url"] == "WA_MAP='127.0.0.1:3000' is not an http(s) URL of the benchmark's server"
    # BrowserGym's status check reached every site but the homepage, which it does not check.
    assert {site: server.paths for site, server in servers.items() if server.paths} == {
        f"WA_{site}": ["/"] for site in SITES if site != "HOMEPAGE"
    }


@pytest.mark.browser
def test_setup_runs_on_the_pool_page_up_to_the_sites_login_forms(tmp_path):
    with stand_ins(f"WA_{site}" for site in SITES) as servers:
        found = probe("episodes", servers, tmp_path)
    paths = {site: server.paths for site, server in servers.items()}
    # Task 70 sets up (its map "login" is a page load), shows the intent, starts on WA_MAP and is scored by
    # libwebarena's exact match on the answer: 1 for the reference, 0 for another.
    assert found["map"]["instruction"] == MAP_INTENT and not found["map"]["env_failed"], found
    assert found["map"]["url"].startswith(origin(servers["WA_MAP"]))
    assert (found["map"]["right"], found["map"]["wrong"]) == ([True, 1.0], [True, 0.0]), found
    # Each of its 3 resets: the login tab's load, then the start URL (and whatever favicon Chromium asks for).
    assert [path for path in paths["WA_MAP"] if path != "/favicon.ico"] == ["/"] * 6, paths
    # Task 310 reaches GitLab's sign-in page and waits for its form, which the stand-in lacks: the reset fails after
    # its two attempts (each ended by Playwright's 3 s action timeout), is counted, and says why.
    login = found["login"]
    assert paths["WA_GITLAB"].count("/users/sign_in") == 2, paths
    assert login["env_failed"] and login["env_failures"] == 1, login
    assert login["error"].startswith("reset failed: TimeoutError: Locator.fill: Timeout 3000ms exceeded"), login
    assert login["seconds"] < 60, login  # not a hang: 2 x 3 s and a context rebuild (~8 s on an idle machine)
    assert login["evaluation"] == [True, 0.0]  # env_failed, reward: masked, not scored
    assert paths["WA_REDDIT"] == paths["WA_SHOPPING"] == []


# ---- the probes, run in a fresh process -------------------------------------------------------------------------


def probe_listing() -> dict:
    """Task listing, one task's config, the allowlist and the variable checks."""
    from verl_asyncweb.env.tasks.browsergym import load_browsergym_tasks, task_entrypoint

    url = os.environ.pop("WA_MAP")
    try:
        load_browsergym_tasks("webarena.70")
    except ValueError as exc:
        missing = str(exc)
    os.environ["WA_MAP"] = "127.0.0.1:3000"
    try:
        load_browsergym_tasks("webarena.70")
    except ValueError as exc:
        not_a_url = str(exc)
    os.environ["WA_MAP"] = url
    task = task_entrypoint(f"webarena.{LOGIN_TASK}")(seed=0)
    task.webarena_instance.check_status()  # BrowserGym's reachability check: a GET to each site, raises if refused
    config = task.task_configs[0]
    return {
        "count": len(load_browsergym_tasks("webarena.*")),
        "glob": [task.metadata["name"] for task in load_browsergym_tasks("webarena.31*")],
        "config": {key: config[key] for key in ("intent", "start_url", "sites", "task_id")},
        "allowed_origins": list(load_browsergym_tasks("webarena.70")[0].allowed_origins),
        "missing": missing,
        "not_a_url": not_a_url,
    }


async def _answer(pool, session, task, text: str) -> list:
    """A reset, then the answer action: ``[done, reward]``."""
    await pool.reset(session, task)
    call = "<tool_call>" + json.dumps({"name": "answer", "arguments": {"text": text}}) + "</tool_call>"
    result = await pool.step(session, call)
    return [result.done, result.reward]


async def _episodes() -> dict:
    from conftest import pool_config  # tests/env/conftest.py: this script's folder is sys.path[0]

    from verl_asyncweb.env import BrowserPool
    from verl_asyncweb.env.tasks.browsergym import load_browsergym_tasks

    map_task = load_browsergym_tasks(f"webarena.{MAP_TASK}")[0]
    login_task = load_browsergym_tasks(f"webarena.{LOGIN_TASK}")[0]
    # conftest's pool, with room for a loaded machine everywhere but the action timeout (Playwright's, 3 s).
    config = pool_config(pages_per_browser=1, navigation_timeout_s=20.0, reset_timeout_s=60.0, step_timeout_s=30.0)
    async with BrowserPool(config) as pool, pool.session() as session:
        obs = await pool.reset(session, map_task)
        found = {"map": {"instruction": obs.instruction, "env_failed": obs.env_failed, "url": session.page.url}}
        found["map"]["right"] = await _answer(pool, session, map_task, MAP_ANSWER)
        found["map"]["wrong"] = await _answer(pool, session, map_task, "15200")
        start = time.monotonic()
        obs = await pool.reset(session, login_task)
        seconds = time.monotonic() - start
        evaluation = await pool.evaluate(session, login_task)
        found["login"] = {
            "env_failed": obs.env_failed,
            "error": obs.error,
            "seconds": seconds,
            "env_failures": pool.stats()["env_failures"],
            "evaluation": [evaluation.env_failed, evaluation.reward],
        }
    return found


def probe_episodes() -> dict:
    """Task 70's episodes and task 310's failed setup on a pool of one page."""
    return asyncio.run(_episodes())


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    print(json.dumps({"listing": probe_listing, "episodes": probe_episodes}[sys.argv[1]]()))
