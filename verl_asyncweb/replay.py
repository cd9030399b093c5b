"""``python -m verl_asyncweb.replay RUN_DIR TRAJ_ID STEP [--model PATH] [--temperature T] [--out FILE]``

Restores the page and the agent state a trajectory had before step STEP (a branch point the run kept in
``episodes/branch_points``, see :mod:`verl_asyncweb.agent.branch`) and plays the rest of the episode with the
``web_agent`` loop itself: by default with the trajectory's own recorded responses (a scripted replay, which shows
whether the episode is reproduced from that state), or with ``--model`` (a model folder, or a run folder's latest
checkpoint) at ``--temperature``. Prints one line per step and the outcome next to the recorded one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from verl_asyncweb.run_folder import RunFolder

logger = logging.getLogger(__name__)


class ReplayDiverged(RuntimeError):
    """The replay needed a response the recorded trajectory does not have (it took another path)."""


class RecordedResponses:
    """verl's ``server_manager.generate`` contract answering with a trajectory's recorded responses, in order."""

    def __init__(self, tokenizer: Any, responses: list[str], first_step: int):
        self.tokenizer, self.responses, self.step = tokenizer, list(responses), first_step

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        if not self.responses:
            raise ReplayDiverged(f"the recorded trajectory ended before step {self.step}: the replay went on longer")
        self.step += 1
        token_ids = self.tokenizer.encode(self.responses.pop(0), add_special_tokens=False)
        return TokenOutput(token_ids=token_ids, log_probs=None, stop_reason="completed", extra_fields={})


def read_episode(run_dir: Path, traj_id: str) -> dict[str, Any] | None:
    """The run folder's record of trajectory ``traj_id`` (``episodes/episodes.jsonl``), if it has one."""
    path = RunFolder(run_dir).episodes_path
    if not path.is_file():
        return None
    with path.open() as lines:
        for line in lines:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a killed run
            if record.get("traj_id") == traj_id:
                return record
    return None


def find_point(run_dir: Path, traj_id: str, step: int, episode: dict[str, Any] | None) -> Path:
    """The branch point file of ``traj_id`` before ``step``: its own (an anchor) or the one it started from.

    Raises:
        FileNotFoundError: Naming the points the trajectory does have, or how to make a run keep them.
    """
    run = RunFolder(run_dir)
    own = run.branch_point_path(f"{traj_id}@{step}")
    if own.is_file():
        return own
    branch = (episode or {}).get("branch") or {}
    if branch.get("point") and branch.get("step") == step and run.branch_point_path(branch["point"]).is_file():
        return run.branch_point_path(branch["point"])
    known = sorted(path.stem for path in run.branch_points_dir.glob(f"{traj_id}@*.json"))
    if branch.get("point"):
        known.append(f"{branch['point']} (where it started)")
    if known:
        raise FileNotFoundError(f"trajectory {traj_id} has no branch point before step {step}; it has: {known}")
    raise FileNotFoundError(
        f"{run_dir} has no branch point of trajectory {traj_id}: runs keep them with branch rollouts on "
        "(asyncweb.agent.branch_step=K; the first member of each group keeps its state before step K)"
    )


def recorded_responses(episode: dict[str, Any] | None, step: int) -> list[str]:
    """The trajectory's recorded responses from ``step`` on."""
    steps = sorted((episode or {}).get("steps") or [], key=lambda item: item.get("step_index", 0))
    return [item.get("response") or "" for item in steps if item.get("step_index", 0) >= step]


async def _play(cfg, model_dir: Path, server_manager, point) -> dict[str, Any]:
    from verl_asyncweb.agent.loop import EnvironmentFailure, WebAgentLoop, _SharedPool
    from verl_asyncweb.learning.evaluate import agent_loop_kwargs
    from verl_asyncweb.task_dataset import task_to_json

    reports: list[dict[str, Any]] = []

    class ReplayLoop(WebAgentLoop):
        def report_episode(self, summary: dict[str, Any]) -> None:
            reports.append(summary)

    loop = ReplayLoop(**agent_loop_kwargs(cfg, model_dir, server_manager))
    task = task_to_json(point.snapshot.task_obj)
    try:
        await loop.run({"temperature": 1.0}, uid=f"replay-{point.id}", extra_info={"task": task}, branch_from=point)
    except (EnvironmentFailure, ReplayDiverged) as exc:
        logger.warning("%s", exc)
    finally:
        if _SharedPool.pool is not None:
            await _SharedPool.pool.close()
            _SharedPool.pool = None
    return reports[0]


def replay(run_dir: str | Path, traj_id: str, step: int, model: str | None = None, temperature: float = 0.0):
    """Replay ``traj_id`` of ``run_dir`` from its state before ``step``; see the module docstring.

    Returns:
        ``point``, ``mode`` (``recorded`` or ``model``), ``model``, the replayed ``steps`` (index, action,
        result), ``reward``, ``success``, ``env_failed``, ``error``, the ``recorded`` outcome and, for a recorded
        replay, whether it was ``reproduced``.

    Raises:
        FileNotFoundError: If the run folder, its config or the branch point is missing.
    """
    import ray

    from verl_asyncweb.agent.branch import load_point
    from verl_asyncweb.learning.evaluate import LocalServerManager, checkpoint_model, local_server

    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").is_file():
        raise FileNotFoundError(f"{run_dir} is not a run folder (no config.yaml)")
    cfg = OmegaConf.load(run_dir / "config.yaml")
    episode = read_episode(run_dir, traj_id)
    point = load_point(find_point(run_dir, traj_id, step, episode), run_dir / "episodes")
    if model is None:
        model_dir = Path(cfg.actor_rollout_ref.model.path)
        responses = recorded_responses(episode, step)
        if not responses:
            raise ValueError(f"trajectory {traj_id} has no recorded steps from step {step} on; pass --model to play")
        from transformers import AutoTokenizer

        server_manager = RecordedResponses(AutoTokenizer.from_pretrained(model_dir), responses, step)
    else:
        model_dir = Path(model)
        if (model_dir / "config.yaml").is_file():  # a run folder: its latest checkpoint
            model_dir = checkpoint_model(model_dir)
        server_manager = LocalServerManager(local_server(cfg, model_dir), temperature)
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    report = asyncio.run(_play(cfg, model_dir, server_manager, point))
    recorded = {key: episode.get(key) for key in ("reward", "success")} if episode else None
    result = {
        "point": point.id,
        "snapshot": {"kind": point.snapshot.kind, "exact": point.snapshot.exact, "reason": point.snapshot.reason},
        "mode": "recorded" if model is None else "model",
        "model": str(model_dir),
        "steps": [
            {key: item.get(key) for key in ("step_index", "action_text", "action_result", "invalid_reason")}
            for item in report["steps"]
        ],
        "reward": report["reward"],
        "success": report["success"],
        "env_failed": report["env_failed"],
        "error": report.get("error"),
        "reasons": report["evaluator_reasons"],
        "recorded": recorded,
    }
    if model is None and recorded is not None:
        left = len(server_manager.responses)
        result["reproduced"] = not report.get("error") and not left and recorded["reward"] == report["reward"]
    return result


def format_result(result: dict[str, Any]) -> str:
    """The replay as lines: the point, one line per step, the outcome next to the recorded one."""
    snapshot = result["snapshot"]
    lines = [
        f"replay of {result['point']} ({snapshot['kind']} snapshot, {'exact' if snapshot['exact'] else 'replayed'}; "
        f"{result['mode']} responses)"
    ]
    for step in result["steps"]:
        outcome = f"invalid: {step['invalid_reason']}" if step["invalid_reason"] else step["action_result"]
        lines.append(f"  step {step['step_index']} | {step['action_text'] or '(no action)'} | {outcome}")
    status = "environment failed" if result["env_failed"] else f"success {result['success']}"
    lines.append(
        f"outcome: reward {result['reward']:.2f}, {status}" + (f" ({result['error']})" if result["error"] else "")
    )
    if result["recorded"] is not None:
        lines.append(f"recorded: reward {result['recorded']['reward']}, success {result['recorded']['success']}")
    if "reproduced" in result:
        lines.append("the recorded episode was reproduced" if result["reproduced"] else "the replay DIVERGED")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m verl_asyncweb.replay", description=__doc__.splitlines()[0].strip("`")
    )
    parser.add_argument("run_dir", help="the run folder")
    parser.add_argument("traj_id", help="the trajectory (the viewer shows its id)")
    parser.add_argument("step", type=int, help="play from the state before this step")
    parser.add_argument("--model", default=None, help="play with this model folder or run folder's checkpoint")
    parser.add_argument("--temperature", type=float, default=0.0, help="sampling temperature with --model")
    parser.add_argument("--out", default=None, help="also write the replay as JSON here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        result = replay(args.run_dir, args.traj_id, args.step, args.model, args.temperature)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    print(format_result(result))
    return 0 if result.get("reproduced", True) else 1


if __name__ == "__main__":
    sys.exit(main())
