"""Evaluate a policy on fixed held-out task instances with the ``web_agent`` loop itself.

``python -m verl_asyncweb.evaluate (RUN_DIR | MODEL_DIR) [--tasks ...] [--seeds held-out] [--temperature T]``

The policy runs through :class:`~verl_asyncweb.agent.loop.WebAgentLoop` (the same prompts, parsing, browser pool
and evaluators as training) with an in-process :class:`~verl_asyncweb.backends.hf_server.HFRolloutServer` behind
verl's ``generate`` contract. Held-out instances come from :data:`~verl_asyncweb.learning.splits.HELD_OUT_SEED`;
before anything runs, they are checked against every instance the model was trained on (the run's task data,
the demonstrations behind its warm start). Writes success overall, per task and per difficulty, steps per
trajectory by outcome, invalid-action rate, the memory metrics and each instance's outcome
(:mod:`verl_asyncweb.learning.outcomes`) as JSON, and prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from omegaconf import DictConfig, OmegaConf

from verl_asyncweb.console import refuse
from verl_asyncweb.learning.outcomes import Outcome, outcomes_to_json
from verl_asyncweb.learning.splits import HELD_OUT_SEED, check_disjoint, instance_keys

logger = logging.getLogger(__name__)

SEED_SPLITS = {"held-out": HELD_OUT_SEED}


def checkpoint_steps(run_dir: Path) -> list[int]:
    """Steps of a run folder's ``global_step_K`` checkpoints that hold HF weights, oldest first."""
    steps = [int(path.name.rsplit("_", 1)[1]) for path in run_dir.glob("global_step_*")]
    return sorted(step for step in steps if any(checkpoint_model_dir(run_dir, step).glob("*.safetensors")))


def checkpoint_model_dir(run_dir: Path, step: int) -> Path:
    return run_dir / f"global_step_{step}" / "actor" / "huggingface"


def checkpoint_model(run_dir: Path, step: int | None = None) -> Path:
    """The HF model saved with checkpoint ``global_step_{step}`` of a run folder (the newest when ``step`` is None).

    Raises:
        FileNotFoundError: If there is no such checkpoint with HF weights (``checkpoint.save_contents`` needs
            ``hf_model``, as the learning recipes set).
    """
    steps = checkpoint_steps(run_dir)
    if step is None and steps:
        return checkpoint_model_dir(run_dir, steps[-1])
    if step in steps:
        return checkpoint_model_dir(run_dir, step)
    wanted = f"checkpoint global_step_{step}" if step is not None else "checkpoint"
    raise FileNotFoundError(
        f"{run_dir} has no {wanted} with HF weights (global_step_K/actor/huggingface/*.safetensors; saved steps: "
        f"{steps}): set actor_rollout_ref.actor.checkpoint.save_contents to include hf_model"
    )


def output_file(folder: Path, seeds: str, temperature: float) -> Path:
    """The evaluation file of ``seeds`` at ``temperature`` in ``folder`` (a checkpoint's or a model's folder)."""
    return folder / f"eval_{seeds}_T{temperature:g}.json"


def default_output(result: dict[str, Any]) -> Path:
    """Where an evaluation is written by default: a run folder's goes next to its checkpoint (one file per step, so
    a run that goes on never reuses an older step's figures), a model folder's into that folder."""
    model = Path(result["model"])
    folder = model.parent.parent if result["run_dir"] else model
    return output_file(folder, result["seeds"], result["temperature"])


SCORE_PANEL_UNRECORDED = True
"""Whether MiniWoB++'s score panel was shown in a record (demonstrations' manifest, run config, ``results.json``)
written before ``asyncweb.env.miniwob_score_panel`` existed: it was."""


def recorded_score_panel(record: Mapping[str, Any]) -> bool:
    """Whether a record (a mapping that may hold ``miniwob_score_panel``) was made with the score panel shown.

    Raises:
        ValueError: If it holds something other than true or false (a hand-edited file).
    """
    shown = record.get("miniwob_score_panel", SCORE_PANEL_UNRECORDED)
    if not isinstance(shown, bool):
        raise ValueError(f"miniwob_score_panel is true or false in a record, not {shown!r}")
    return shown


PROMPT_SETTINGS = ("observation", "system_prompt", "click_target", "max_element_lines")
"""``asyncweb.agent`` keys that shape the prompt and the action form: a warm start is evaluated with its own."""


class Resolved(NamedTuple):
    """What an evaluation of a run folder or a model folder runs, and what its held-out instances are checked
    against."""

    model_dir: Path
    """The HF weights: the model folder, or the run's checkpoint."""
    cfg: DictConfig
    """The trainer config the episodes run with."""
    run_dir: Path | None
    """The run folder, None for a model folder."""
    demos: dict[str, Any] | None
    """The manifest of the demonstrations behind the weights' warm start (the model folder's, or the one the run
    started from), None when there is none to read."""


def resolve(path: Path, recipe: str, step: int | None = None, overrides: Sequence[str] = ()) -> Resolved:
    """A run folder (checkpoint ``step``, else the newest) or a model folder, resolved for evaluation.

    A model folder gets the recipe's settings with ``overrides`` (``key=value``), except that a warm start keeps
    the prompt settings and MiniWoB++ score panel its demonstrations were recorded with (:data:`PROMPT_SETTINGS`,
    :func:`recorded_score_panel`): it was trained on those observations. A run folder is evaluated with the config it
    trained with (one written before ``asyncweb.env.miniwob_score_panel`` existed showed the panel).
    """
    if (path / "config.json").is_file():
        if step is not None:
            raise ValueError(f"--step picks a checkpoint of a run folder; {path} is a model folder")
        from verl_asyncweb.main import load_config

        cfg, _ = load_config([f"recipe={recipe}", *overrides])
        manifest = demo_manifest(path)
        if manifest is None:
            return Resolved(path, cfg, None, None)
        for key, value in demo_prompt_settings(manifest).items():
            if cfg.asyncweb.agent[key] != value:
                logger.warning("%s: asyncweb.agent.%s=%s as in its demonstrations", path, key, value)
                cfg.asyncweb.agent[key] = value
        panel = recorded_score_panel(manifest)
        if cfg.asyncweb.env.miniwob_score_panel != panel:
            logger.warning("%s: asyncweb.env.miniwob_score_panel=%s as in its demonstrations", path, panel)
            cfg.asyncweb.env.miniwob_score_panel = panel
        return Resolved(path, cfg, None, manifest)
    if (path / "config.yaml").is_file():
        if overrides:
            raise ValueError(f"{path} is a run folder, evaluated with the config it trained with: --set is for a model")
        cfg = OmegaConf.load(path / "config.yaml")
        env = cfg.get("asyncweb", {}).get("env")
        if env is not None and "miniwob_score_panel" not in env:
            env.miniwob_score_panel = SCORE_PANEL_UNRECORDED
        started_from = OmegaConf.select(cfg, "actor_rollout_ref.model.path")
        demos = demo_manifest(Path(started_from)) if started_from else None
        return Resolved(checkpoint_model(path, step), cfg, path, demos)
    raise FileNotFoundError(f"{path} is neither a model folder (config.json) nor a run folder (config.yaml)")


def demo_manifest(model_dir: Path) -> dict[str, Any] | None:
    """The manifest of the demonstrations behind a warm start: its own copy, else the one in the demonstrations
    folder it names (warm starts written before the copy); None for any other model folder, with a warning when a
    warm start's manifest is nowhere (its held-out instances cannot be checked against the demonstrations)."""
    from verl_asyncweb.learning.demos import MANIFEST_FILE
    from verl_asyncweb.learning.warm_start import DEMOS_MANIFEST_FILE, WARM_START_FILE

    record = model_dir / WARM_START_FILE
    if not record.is_file():
        return None
    demos = json.loads(record.read_text())["demos"]
    for manifest in (model_dir / DEMOS_MANIFEST_FILE, Path(demos) / MANIFEST_FILE):
        if manifest.is_file():
            return json.loads(manifest.read_text())
    logger.warning(
        "%s: the manifest of its demonstrations is missing (%s, %s): held-out instances are not checked against "
        "them (and evaluated on its own, it gets the recipe's prompt settings and score panel)",
        model_dir,
        DEMOS_MANIFEST_FILE,
        demos,
    )
    return None


def demo_prompt_settings(manifest: dict[str, Any]) -> dict[str, Any]:
    """The prompt settings a demonstrations' manifest records (the defaults of those it does not)."""
    from verl_asyncweb.agent.config import AgentConfig

    recorded = manifest.get("agent", {})
    return {key: recorded.get(key, getattr(AgentConfig(), key)) for key in PROMPT_SETTINGS}


def trained_instances(resolved: Resolved) -> set[tuple[str, int]]:
    """Keys of every instance the resolved model was trained on that we can see: the run's task data and the
    demonstrations behind its warm start (see :func:`~verl_asyncweb.learning.splits.instance_keys`)."""
    from verl_asyncweb.task_dataset import task_from_json

    seen: set[tuple[str, int]] = set()
    if resolved.run_dir is not None:
        import pandas as pd

        train = resolved.run_dir / "data" / "train.parquet"
        if train.is_file():
            seen |= instance_keys(task_from_json(row["task"]) for row in pd.read_parquet(train)["extra_info"])
    if resolved.demos is not None:
        seen |= {(name, seed) for name, seed in resolved.demos["instances"]}
    return seen


class LocalServerManager:
    """verl's ``server_manager.generate`` contract over an in-process HF server at a fixed temperature."""

    def __init__(self, server: Any, temperature: float):
        self.server, self.temperature = server, temperature

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, **kwargs):
        params = {**sampling_params, "temperature": self.temperature}
        return await self.server.generate(prompt_ids, params, request_id, image_data=image_data, **kwargs)


def local_server(cfg: DictConfig, model_dir: Path):
    """An in-process HF rollout server for ``model_dir`` with the run's prompt and response lengths and sampling
    seed (``actor_rollout_ref.rollout.seed``)."""
    from verl_asyncweb.backends.hf_server import HFRolloutServer

    rollout = cfg.actor_rollout_ref.rollout
    return HFRolloutServer(
        str(model_dir), rollout.response_length, rollout.prompt_length + rollout.response_length, seed=rollout.seed
    )


def agent_loop_kwargs(cfg: DictConfig, model_dir: Path, server_manager: Any) -> dict[str, Any]:
    """What verl's agent-loop worker gives a ``web_agent`` loop, for a loop run in this process on ``model_dir``."""
    from transformers import AutoProcessor
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    processor = AutoProcessor.from_pretrained(model_dir)
    OmegaConf.set_struct(cfg, False)
    cfg.actor_rollout_ref.model.path = str(model_dir)
    return dict(
        trainer_config=DictConfigWrap(cfg),
        server_manager=server_manager,
        tokenizer=processor.tokenizer,
        processor=processor,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(cfg.data),
        hf_model_type=json.loads((model_dir / "config.json").read_text())["model_type"],
    )


async def run_episodes(cfg: DictConfig, model_dir: Path, tasks: list, temperature: float) -> list[dict]:
    """Run one ``web_agent`` episode per task; returns the episode reports (env failures included)."""
    from tqdm import tqdm

    from verl_asyncweb.agent.loop import EnvironmentFailure, WebAgentLoop, _SharedPool, _SharedScreenshots
    from verl_asyncweb.task_dataset import task_to_json

    reports: list[dict] = []

    class EvalAgentLoop(WebAgentLoop):
        report: dict[str, Any] | None = None

        def _summary(self, task, state, evaluation, started: float) -> dict[str, Any]:
            summary = super()._summary(task, state, evaluation, started)
            return {**summary, "seed": task.seed, "raw_score": evaluation.raw_score}

        def report_episode(self, summary: dict[str, Any]) -> None:
            self.report = summary
            reports.append(summary)

    loop_kwargs = agent_loop_kwargs(cfg, model_dir, LocalServerManager(local_server(cfg, model_dir), temperature))
    queue: asyncio.Queue = asyncio.Queue()
    for task in tasks:
        queue.put_nowait(task)
    progress = tqdm(total=len(tasks), desc="evaluate", unit="episode")

    async def worker():
        while not queue.empty():
            task = queue.get_nowait()
            loop = EvalAgentLoop(**loop_kwargs)
            try:
                # Held-out episodes are validation: they play whole, never joining a branch rollout as a run's do.
                extra_info = {"task": task_to_json(task), "split": "val"}
                await loop.run({"temperature": temperature}, uid=task.task_id, extra_info=extra_info)
            except EnvironmentFailure as exc:
                logger.warning("%s", exc)
            progress.update()
            if loop.report is not None:
                await _SharedScreenshots.get(loop.agent_config).arelease(loop.report["traj_id"])

    try:
        pool = await _SharedPool.get(_env_config(cfg), None)
        await asyncio.gather(*(worker() for _ in range(pool.config.size)))
    finally:
        progress.close()
        if _SharedPool.pool is not None:
            await _SharedPool.pool.close()
            _SharedPool.pool = None
    return reports


def _env_config(cfg: DictConfig):
    from verl_asyncweb.config.schema import AsyncWebConfig

    return AsyncWebConfig.from_config(cfg.asyncweb).env


def _task_name(task_id: str) -> str:
    """A seeded instance's task: ``miniwob/click-test/3`` -> ``click-test``, ``browsergym/miniwob.click-test/0`` ->
    ``miniwob.click-test``; other task ids as they are."""
    return task_id.split("/")[1] if task_id.startswith(("miniwob/", "browsergym/")) else task_id


def _outcome(report: dict) -> Outcome:
    raw = report.get("raw_score")
    task = _task_name(report["task_id"])
    return Outcome(task, report.get("seed"), raw, int(report["success"]), len(report["steps"]))


def summarize(reports: list[dict], tasks: list, temperature: float, seconds: float) -> dict[str, Any]:
    """Success overall / per task / per difficulty, steps to success per task, each counted episode's outcome and
    the agent metrics of the episodes; environment-failed episodes are counted apart and excluded from the rates."""
    from verl_asyncweb.agent.metrics import aggregate

    valid = [r for r in reports if not r["env_failed"]]
    by_task: dict[str, list[float]] = defaultdict(list)
    by_slice: dict[str, list[float]] = defaultdict(list)
    steps_to_success: dict[str, list[float]] = defaultdict(list)
    for report in valid:
        name = _task_name(report["task_id"])
        by_task[name].append(float(report["success"]))
        if report["success"]:
            steps_to_success[name].append(float(len(report["steps"])))
        if report["difficulty_slice"] is not None:  # a task without difficulty counts overall only
            by_slice[report["difficulty_slice"]].append(float(report["success"]))

    def rate(values: list[float]) -> float | None:
        return round(sum(values) / len(values), 4) if values else None

    return {
        "episodes": len(reports),
        "env_failures": len(reports) - len(valid),
        "instances": len(tasks),
        "temperature": temperature,
        "success": rate([float(r["success"]) for r in valid]),
        "success_by_task": {name: rate(values) for name, values in sorted(by_task.items())},
        "success_by_difficulty": {name: rate(values) for name, values in sorted(by_slice.items())},
        "steps_to_success_by_task": {name: rate(values) for name, values in sorted(steps_to_success.items())},
        # One per counted instance, by (task, seed): what confidence intervals resample and pair (compare, bench).
        "outcomes": outcomes_to_json([_outcome(report) for report in valid]),
        "metrics": aggregate([r["summary"] for r in reports]),
        "eval_s": round(seconds, 1),
    }


def format_table(result: dict[str, Any]) -> str:
    """A plain-text table of the evaluation (success per task, then the summary figures)."""
    lines = [f"{'task':<24}{'success':>9}"]
    lines += [f"{name:<24}{value:>9.3f}" for name, value in result["success_by_task"].items()]
    lines.append(f"{'overall':<24}{result['success'] or 0.0:>9.3f}")
    metrics = result["metrics"]
    for key in ("asyncweb/steps_per_traj/success", "asyncweb/steps_per_traj/failure", "asyncweb/invalid_action_rate"):
        if key in metrics:
            lines.append(f"{key:<40}{metrics[key]:>9.3f}")
    lines.append(f"{result['episodes']} episodes ({result['env_failures']} env failures), T={result['temperature']}")
    return "\n".join(lines)


def evaluate(
    path: str | Path,
    recipe: str = "laptop_learning",
    task_specs: list[str] | None = None,
    seeds: str = "held-out",
    instances: int = 10,
    temperature: float = 1.0,
    step: int | None = None,
    overrides: Sequence[str] = (),
) -> dict[str, Any]:
    """Evaluate a run folder's checkpoint (``step``, else the newest) or a model folder; see the module docstring."""
    import ray

    from verl_asyncweb.config.schema import AsyncWebConfig
    from verl_asyncweb.task_dataset import load_task_sources

    resolved = resolve(Path(path), recipe, step, overrides)
    model_dir, cfg, run_dir = resolved.model_dir, resolved.cfg, resolved.run_dir
    asyncweb = AsyncWebConfig.from_config(cfg.asyncweb)
    if seeds not in SEED_SPLITS:
        raise ValueError(f"--seeds must be one of {list(SEED_SPLITS)}, got {seeds!r}")
    specs = task_specs or [spec for spec in asyncweb.tasks.train if spec.startswith(("miniwob", "browsergym:"))]
    if not specs:
        raise ValueError(
            "no seeded task source to hold out: pass --tasks miniwob:NAME,... or browsergym:BENCHMARK.TASK_GLOB"
        )
    tasks = load_task_sources(specs, seed=SEED_SPLITS[seeds], miniwob_instances=instances)
    check_disjoint(tasks, trained_instances(resolved))
    started = time.time()
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    reports = asyncio.run(run_episodes(cfg, model_dir, tasks, temperature))
    result = summarize(reports, tasks, temperature, time.time() - started)
    result.update(
        model=str(model_dir),
        run_dir=str(run_dir) if run_dir else None,
        seeds=seeds,
        tasks=specs,
        overrides=list(overrides),
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_asyncweb.evaluate", description=__doc__.splitlines()[0])
    parser.add_argument("path", help="a run folder (its latest checkpoint) or a model folder")
    parser.add_argument("--step", type=int, default=None, help="a run folder's checkpoint global_step_STEP")
    parser.add_argument("--recipe", default="laptop_learning", help="agent/env settings for a model folder")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override of the recipe for a model folder (repeatable), e.g. asyncweb.agent.max_steps=3",
    )
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=None,
        help="seeded task sources: miniwob:NAME,... or browsergym:BENCHMARK.TASK_GLOB (default: the run's)",
    )
    parser.add_argument("--seeds", default="held-out", choices=sorted(SEED_SPLITS))
    parser.add_argument("--instances", type=int, default=10, help="held-out instances per task")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (0 = greedy)")
    parser.add_argument(
        "--out",
        default=None,
        help="JSON output (default: eval_<seeds>_T<temperature>.json in the model folder, or in a run folder's "
        "global_step_K folder)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    path = Path(args.path)
    if not (path / "config.json").is_file() and not (path / "config.yaml").is_file():
        return refuse(parser.prog, f"{path} is neither a model folder (config.json) nor a run folder (config.yaml)")
    # After the arguments, so that --help and a usage error answer at once, without verl's import warnings.
    # Importing verl loads this plugin (see verl_asyncweb.main).
    import verl  # noqa: F401

    try:
        result = evaluate(
            args.path, args.recipe, args.tasks, args.seeds, args.instances, args.temperature, args.step, args.set
        )
    except (FileNotFoundError, ValueError) as exc:
        return refuse(parser.prog, str(exc))
    out = Path(args.out) if args.out else default_output(result)
    out.write_text(json.dumps(result, indent=1))
    print(format_table(result))
    print(f"written to {out}")
    return 0
