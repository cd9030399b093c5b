"""Record demonstrations from the scripted oracles in exactly the ``web_agent`` prompt/response format.

``python -m verl_asyncweb.learning.demos --tasks miniwob:click-test,click-button --instances 40 --out DIR``

Each oracle episode runs through :meth:`BrowserPool.step` like a model's would: per step the prompt is built by
the agent loop's own :func:`~verl_asyncweb.agent.loop.step_messages` (system prompt, task, Memory, Progress,
history, screenshot, optional element list), the response is written in the agent's layout (Memory, Progress,
Intention, Action, ``<tool_call>``) and parsed back by :func:`~verl_asyncweb.agent.response.parse_response`
before it acts, and the episode state advances with :func:`~verl_asyncweb.agent.loop.advance_state`. Only
episodes the evaluator scores as successes are kept. Only training seeds are used (``--seed``, never the
held-out base seed of :mod:`verl_asyncweb.learning.splits`).

``DIR`` gets ``demos.jsonl`` (one line per step: task, seed, step, messages, screenshot files, response),
``screenshots/`` and ``manifest.json`` (tasks, seeds, counts, agent settings, recording time).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from verl_asyncweb.agent.config import AgentConfig
from verl_asyncweb.agent.loop import EpisodeState, advance_state, shown_element_targets, step_messages
from verl_asyncweb.agent.response import format_response, parse_response
from verl_asyncweb.agent.screenshots import screenshot_key
from verl_asyncweb.env import BrowserPool, BrowserPoolConfig, Task
from verl_asyncweb.env.miniwob_oracle import OracleAction, miniwob_actions
from verl_asyncweb.env.tasks.site_checks import plan_step_actions, plan_steps
from verl_asyncweb.env.tasks.sites import site_task_spec
from verl_asyncweb.learning.splits import HELD_OUT_SEED

logger = logging.getLogger(__name__)

DEMOS_FILE = "demos.jsonl"
MANIFEST_FILE = "manifest.json"
SCREENSHOT_DIR = "screenshots"


def element_tool_call(tool_call: str, targets: Mapping[int, tuple[int, int]]) -> str:
    """The oracle's tool call with its coordinate replaced by the listed element centred there (``click_target:
    element``); raises ``ValueError`` when no listed element is (the target is beyond the lines shown)."""
    payload = json.loads(tool_call.removeprefix("<tool_call>").removesuffix("</tool_call>"))
    arguments = payload["arguments"]
    if "coordinate" not in arguments:
        return tool_call
    point = tuple(arguments["coordinate"])
    index = next((i for i, centre in targets.items() if tuple(centre) == point), None)
    if index is None:
        raise ValueError(f"no listed element is centred at {list(point)}")
    payload["arguments"] = {("element" if k == "coordinate" else k): v for k, v in arguments.items()}
    payload["arguments"]["element"] = index
    return f"<tool_call>{json.dumps(payload)}</tool_call>"


def demo_response(step_index: int, num_steps: int, action: OracleAction) -> str:
    """The oracle step as the agent writes it: Memory, Progress, Intention, Action (the tool's name), tool call."""
    name = json.loads(action.tool_call.removeprefix("<tool_call>").removesuffix("</tool_call>"))["name"]
    progress = {"done": step_index, "left": num_steps - step_index}
    return format_response({}, progress, action.intention, name, action.tool_call)


async def record_episode(
    pool: BrowserPool, session: Any, task: Task, agent: AgentConfig, out_dir: Path
) -> list[dict] | None:
    """Run the oracle on ``task``; returns its demonstration steps, or ``None`` if it did not succeed."""
    observation = await pool.reset(session, task)
    if observation.env_failed:
        logger.warning("reset of %s failed: %s", task.task_id, observation.error)
        return None
    state = EpisodeState(traj_id=uuid.uuid4().hex[:8], instruction=observation.instruction or task.instruction)
    env = pool.config
    viewport = (env.viewport_width, env.viewport_height)
    steps: list[dict] = []
    result = None

    async def act(action: OracleAction, num_steps: int):
        nonlocal observation, result
        messages, screenshots = step_messages(agent, state, observation)
        targets = shown_element_targets(agent, observation)
        if agent.click_target == "element":
            action = replace(action, tool_call=element_tool_call(action.tool_call, targets))
        response = demo_response(len(steps), num_steps, action)
        parsed = parse_response(
            response, coordinate_mode=env.coordinate_mode, viewport=viewport, element_targets=targets
        )
        result = await pool.step(session, parsed.action)
        advance_state(state, len(steps), parsed, observation, result)
        steps.append(
            {
                "task_id": task.task_id,
                "name": task.metadata.get("name", task.task_id),
                "seed": task.seed,
                "step_index": len(steps),
                "messages": messages,
                "images": [_save_screenshot(blob, out_dir) for blob in screenshots],
                "response": response,
            }
        )
        if result.env_failed or result.invalid_action:
            raise RuntimeError(f"oracle step failed on {task.task_id}: {result.info} {result.error or ''}")
        observation = result.observation

    if task.source == "miniwob":
        actions = miniwob_actions(task.metadata["name"], observation)
        for action in actions:
            await act(action, len(actions))
    else:
        plan = site_task_spec(task).plan
        total = plan_steps(plan)
        for op, *args in plan:
            for text in plan_step_actions(op, args, observation):
                await act(OracleAction(text, f"{op} {' '.join(map(str, args))}"[:80]), total)
    if result is not None and result.reward is not None:
        success = result.reward > 0
    else:
        success = (await pool.evaluate(session, task, state.answer, state.screenshots)).success
    return steps if success else None


def _save_screenshot(blob: bytes, out_dir: Path) -> str:
    relative = f"{SCREENSHOT_DIR}/{screenshot_key(blob)}.jpg"
    path = out_dir / relative
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(blob)
    return relative


async def record(tasks: list[Task], agent: AgentConfig, env: BrowserPoolConfig, out_dir: Path) -> tuple[list, list]:
    """Run every task's oracle episode; returns (kept episodes' steps, task ids without a successful run)."""
    kept: list[list[dict]] = []
    failed: list[str] = []
    progress = tqdm(total=len(tasks), desc="demonstrations", unit="episode")
    queue: asyncio.Queue[Task] = asyncio.Queue()
    for task in tasks:
        queue.put_nowait(task)

    async with BrowserPool(env) as pool:

        async def worker():
            while not queue.empty():
                task = queue.get_nowait()
                async with pool.session() as session:
                    try:
                        steps = await record_episode(pool, session, task, agent, out_dir)
                    except Exception as exc:  # an oracle that cannot act on this instance: counted, not fatal
                        logger.warning("no demonstration for %s: %s", task.task_id, exc)
                        steps = None
                (kept.append(steps) if steps else failed.append(task.task_id))
                progress.update()

        await asyncio.gather(*(worker() for _ in range(env.size)))
    progress.close()
    return kept, failed


def record_demos(tasks: list[Task], agent: AgentConfig, env: BrowserPoolConfig, out_dir: Path) -> dict[str, Any]:
    """Record the tasks' oracle episodes into ``out_dir`` (see the module docstring); returns the manifest."""
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    kept, failed = asyncio.run(record(tasks, agent, env, out_dir))
    episodes = sorted(kept, key=lambda steps: steps[0]["task_id"])
    lines = [json.dumps(step) + "\n" for episode in episodes for step in episode]
    (out_dir / DEMOS_FILE).write_text("".join(lines), encoding="utf-8")
    manifest = {
        "episodes": len(kept),
        "steps": len(lines),
        "failed": failed,
        "instances": sorted({(t.metadata.get("name", t.task_id), t.seed) for t in tasks}, key=str),
        "agent": asdict(agent),
        "viewport": [env.viewport_width, env.viewport_height],
        "miniwob_score_panel": env.miniwob_score_panel,
        "record_s": round(time.time() - started, 1),
    }
    (out_dir / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1))
    return manifest


def load_demos(demo_dir: str | Path) -> list[dict]:
    """The recorded steps of ``demo_dir`` (raises ``FileNotFoundError`` naming the folder if there are none)."""
    path = Path(demo_dir) / DEMOS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no {DEMOS_FILE} in {demo_dir}: record with python -m verl_asyncweb.learning.demos")
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m verl_asyncweb.learning.demos``."""
    parser = argparse.ArgumentParser(prog="python -m verl_asyncweb.learning.demos", description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="laptop_learning", help="recipe whose agent and env settings to use")
    parser.add_argument("--tasks", nargs="+", default=None, help="task sources (default: the recipe's)")
    parser.add_argument("--instances", type=int, default=None, help="seeded instances per MiniWoB++ task")
    parser.add_argument("--seed", type=int, default=None, help="training base seed (default: the recipe's)")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument(
        "overrides", nargs="*", help="key=value overrides of the recipe (e.g. asyncweb.agent.click_target=element)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    from verl_asyncweb.config.schema import AsyncWebConfig
    from verl_asyncweb.main import load_config
    from verl_asyncweb.task_dataset import load_task_sources

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    cfg, _ = load_config([f"recipe={args.recipe}", *args.overrides])
    asyncweb = AsyncWebConfig.from_config(cfg.asyncweb)
    seed = asyncweb.tasks.seed if args.seed is None else args.seed
    if seed == HELD_OUT_SEED:
        raise SystemExit(f"--seed {seed} is the held-out base seed; demonstrations use training seeds only")
    instances = args.instances or asyncweb.tasks.miniwob_instances
    tasks = load_task_sources(args.tasks or asyncweb.tasks.train, seed=seed, miniwob_instances=instances)
    env = replace(asyncweb.env, accessibility_text=True)
    manifest = record_demos(tasks, asyncweb.agent, env, Path(args.out))
    print(
        f"recorded {manifest['episodes']} episodes ({manifest['steps']} steps) in {manifest['record_s']} s "
        f"to {args.out}; {len(manifest['failed'])} without a successful oracle run"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
