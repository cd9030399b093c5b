"""Turn ``asyncweb.tasks`` sources into the parquet files verl's dataloader reads (one row per task)."""

from __future__ import annotations

import dataclasses
import json
import logging
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verl_asyncweb.env import Task, load_tasks
from verl_asyncweb.env.tasks.task import RubricFact

logger = logging.getLogger(__name__)

AGENT_NAME = "web_agent"


def parse_source(spec: str) -> tuple[str, dict[str, Any]]:
    """``miniwob`` | ``miniwob:a,b`` | ``sites`` | ``sites:id,…`` | ``browsergym:bench.glob`` | ``path.jsonl`` →
    (source, loader kwargs)."""
    name, _, selection = spec.partition(":")
    if name == "miniwob" and selection:
        return "miniwob", {"names": [s for s in selection.split(",") if s]}
    if name == "sites" and selection:
        return "sites", {"task_ids": [s for s in selection.split(",") if s]}
    return spec, {}


def load_task_sources(specs: list[str], seed: int = 0, max_tasks: int = 0, miniwob_instances: int = 1) -> list[Task]:
    """Load and concatenate task sources; keep ``max_tasks`` of them (0 = all), sampled with ``seed``.

    MiniWoB++ sources give ``miniwob_instances`` seeded instances of each task, from base seed ``seed``.
    """
    tasks: list[Task] = []
    for spec in specs:
        source, kwargs = parse_source(spec)
        if source == "miniwob" or source.startswith("browsergym:"):
            kwargs.update(seed=seed, episodes_per_task=miniwob_instances)
        if source == "sites" and "task_ids" in kwargs:
            wanted = {name if name.startswith("site/") else f"site/{name}" for name in kwargs.pop("task_ids")}
            selected = [task for task in load_tasks("sites") if task.task_id in wanted]
            missing = sorted(wanted - {task.task_id for task in selected})
            if missing:
                raise ValueError(f"asyncweb.tasks: unknown bundled site tasks {missing}")
            tasks.extend(selected)
            continue
        tasks.extend(load_tasks(source, **kwargs))
    if max_tasks and len(tasks) > max_tasks:
        tasks = random.Random(seed).sample(tasks, max_tasks)
    return tasks


def run_task_sets(
    train: Sequence[str], val: Sequence[str], seed: int, max_train_tasks: int, miniwob_instances: int
) -> tuple[list[Task], list[Task]]:
    """(training, validation) tasks of the ``asyncweb.tasks`` values; validation defaults to the first quarter of
    the training tasks. Raises ``ValueError`` naming the sources that give none."""
    train_tasks = load_task_sources(
        list(train), seed=seed, max_tasks=max_train_tasks, miniwob_instances=miniwob_instances
    )
    val_tasks = load_task_sources(list(val), seed=seed) if val else train_tasks[: max(1, len(train_tasks) // 4)]
    if not train_tasks:
        raise ValueError(f"train={list(train)} holds no tasks (an empty task file?)")
    if not val_tasks:
        raise ValueError(f"val={list(val)} holds no tasks (an empty task file?)")
    return train_tasks, val_tasks


def task_to_json(task: Task) -> str:
    return json.dumps(dataclasses.asdict(task), sort_keys=True)


def task_from_json(text: str) -> Task:
    """Inverse of :func:`task_to_json`; raises ``ValueError`` naming the bad field."""
    try:
        values = json.loads(text)
        values["allowed_origins"] = tuple(values.get("allowed_origins", ()))
        values["rubric"] = tuple(RubricFact(**fact) for fact in values.get("rubric", ()))
        return Task(**values)
    except (TypeError, KeyError, json.JSONDecodeError) as exc:
        raise ValueError(f"bad task record in the dataset: {exc}") from exc


def task_rows(tasks: list[Task], split: str = "train") -> list[dict[str, Any]]:
    """verl dataset rows: the instruction as the raw prompt, the whole task in ``extra_info.task``, the dataset's
    ``split`` (``train`` or ``val``) in ``extra_info.split``."""
    return [
        {
            "data_source": f"asyncweb/{task.source}",
            "prompt": [{"role": "user", "content": task.instruction or f"Solve the web task {task.task_id}."}],
            "agent_name": AGENT_NAME,
            "ability": "web",
            "reward_model": {"style": "environment", "ground_truth": task.reference_answer or ""},
            "extra_info": {"index": index, "task_id": task.task_id, "task": task_to_json(task), "split": split},
        }
        for index, task in enumerate(tasks)
    ]


def write_task_dataset(tasks: list[Task], path: Path, split: str = "train") -> Path:
    import pandas as pd

    if not tasks:
        raise ValueError(f"no tasks to write to {path}: check asyncweb.tasks")
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(task_rows(tasks, split)).to_parquet(path)
    logger.info("wrote %d tasks to %s", len(tasks), path)
    return path
