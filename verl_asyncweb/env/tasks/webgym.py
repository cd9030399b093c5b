"""WebGym task files (JSONL, fields as in microsoft/webgym_tasks); a bad line stops loading with its number."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from verl_asyncweb.env.tasks.task import RubricFact, Task, difficulty_slice

# WebGym step budgets per difficulty slice (REFERENCE.md).
MAX_STEPS = {"train": {"easy": 10, "medium": 20, "hard": 30}, "test": {"easy": 30, "medium": 50, "hard": 70}}


class TaskFileError(ValueError):
    """A WebGym task file has a bad line; the message names the file, line number and field."""


def load_webgym_tasks(path: str | Path, split: str = "train", allowed_origins: tuple[str, ...] = ("*",)) -> list[Task]:
    """Read a WebGym JSONL task file.

    Args:
        path: The ``.jsonl`` file, one task object per line (blank lines are skipped).
        split: ``"train"`` or ``"test"``; picks the step budget per difficulty slice.
        allowed_origins: Network allowlist of every task. Live WebGym sites pull assets from CDNs, so the
            default allows any http(s) origin; schemes, downloads and popups stay restricted.

    Returns:
        The tasks in file order.

    Raises:
        TaskFileError: On invalid JSON, a missing field or a field of the wrong type.
        ValueError: On an unknown ``split``.
    """
    if split not in MAX_STEPS:
        raise ValueError(f"split must be one of {sorted(MAX_STEPS)}, got {split!r}")
    path = Path(path)
    tasks, seen = [], set()
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            task = _parse_line(path, lineno, line, split, allowed_origins)
            if task.task_id in seen:
                raise TaskFileError(f"{path}:{lineno}: field 'task_id' repeats {task.task_id!r}")
            seen.add(task.task_id)
            tasks.append(task)
    return tasks


_OTHER_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:(?!\d)")
"""A URL that names a scheme (``file:``, ``javascript:``, ``data:``, ``ftp://``): not a host followed by a port."""


def _parse_line(path: Path, lineno: int, line: str, split: str, origins: tuple[str, ...]) -> Task:
    where = f"{path}:{lineno}"
    try:
        row = json.loads(line)
    except ValueError as exc:
        raise TaskFileError(f"{where}: invalid JSON ({exc})") from None
    if not isinstance(row, dict):
        raise TaskFileError(f"{where}: each line must be a JSON object, got {type(row).__name__}")
    task_id = str(_field(row, where, "task_id", (str, int)))
    instruction = _field(row, where, "task_name", str)
    website = _field(row, where, "website", str)
    scheme = urlsplit(website).scheme.lower()
    if scheme not in ("http", "https"):
        # A scheme other than the web's (file:, javascript:, data:, ftp://) is refused; a host name, with a port
        # (localhost:8000) or a path, gets https:// in front.
        if _OTHER_SCHEME.match(website):
            raise TaskFileError(f"{where}: field 'website' must be an http(s) URL or a host name, got {website!r:.80}")
        website = "https://" + website
    difficulty = _field(row, where, "difficulty", int)
    rubric_rows = _field(row, where, "evaluator_reference", list)
    rubric = []
    for i, fact in enumerate(rubric_rows):
        if not isinstance(fact, dict) or not isinstance(fact.get("description"), str):
            raise TaskFileError(f"{where}: field 'evaluator_reference[{i}].description' must be a string")
        rubric.append(RubricFact(fact["description"], fact.get("difficulty")))
    answer = row.get("reference_answer", row.get("definite_answer"))
    if answer is not None and not isinstance(answer, str):
        answer = json.dumps(answer)
    return Task(
        task_id=task_id,
        instruction=instruction,
        source="webgym",
        difficulty=difficulty,
        max_steps=MAX_STEPS[split][difficulty_slice(difficulty)],
        start_url=website,
        allowed_origins=tuple(origins),
        evaluator="judge",
        reference_answer=answer,
        rubric=tuple(rubric),
        metadata={k: row.get(k) for k in ("website", "domain", "subdomain", "benchmark_name") if k in row},
    )


def _field(row: dict, where: str, name: str, kind: type | tuple[type, ...]) -> Any:
    if name not in row or row[name] is None:
        raise TaskFileError(f"{where}: field '{name}' is missing")
    value = row[name]
    if isinstance(value, bool) or not isinstance(value, kind):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        wanted = " or ".join(k.__name__ for k in kinds)
        raise TaskFileError(f"{where}: field '{name}' must be {wanted}, got {value!r:.60}")
    if isinstance(value, str) and not value.strip():
        raise TaskFileError(f"{where}: field '{name}' must not be empty")
    return value
