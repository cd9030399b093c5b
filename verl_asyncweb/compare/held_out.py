"""Held-out evaluations of a run's checkpoints, read as metric series so that runs compare on them.

``python -m verl_asyncweb.evaluate RUN_DIR --step K`` writes ``global_step_K/eval_<seeds>_T<temperature>.json``;
an evaluation of the run's starting model (``actor_rollout_ref.model.path``, e.g. a warm start) is step 0. Each
(seed split, temperature) is its own series, :func:`metric`: evaluations at different temperatures never mix.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verl_asyncweb.compare import metric_names as M
from verl_asyncweb.learning.outcomes import by_instance, read_outcomes

PREFIX = "eval/"
_EVAL_FILE = re.compile(r"eval_(?P<seeds>[\w-]+)_T(?P<temperature>[0-9.]+)\.json")
_STEP_FOLDER = re.compile(r"global_step_(\d+)")
VALUES = {"success_rate": "success", "invalid_action_rate": M.INVALID_ACTION_RATE}
"""Series name -> the evaluation JSON's key (top level, else under ``metrics``)."""


def metric(seeds: str, temperature: str, name: str) -> str:
    """Series name of one evaluation figure, e.g. ``eval/held-out_T0.7/success_rate``."""
    return f"{PREFIX}{seeds}_T{temperature}/{name}"


def _evaluations(run_dir: Path, start_model: str | None) -> list[tuple[int, Path]]:
    found = []
    for path in run_dir.glob("global_step_*/eval_*.json"):
        step = _STEP_FOLDER.fullmatch(path.parent.name)
        if step:
            found.append((int(step.group(1)), path))
    if start_model:
        found += [(0, path) for path in Path(start_model).glob("eval_*.json")]
    return found


@dataclass
class HeldOut:
    """A run's held-out evaluations.

    Attributes:
        series: Metric name -> :data:`verl_asyncweb.compare.runs.Series`.
        episodes: Success metric -> step -> the evaluated episodes' successes (0/1), where the evaluation recorded
            them (what confidence intervals resample).
        instances: Success metric -> step -> (task, page seed) -> success, where the evaluation recorded its
            instances (what paired comparisons match).
    """

    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    episodes: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    instances: dict[str, dict[int, dict[tuple[str, int], float]]] = field(default_factory=dict)


def read_held_out(run_dir: Path, start_model: str | None, warnings: list[str]) -> HeldOut:
    """Every evaluation of the run's checkpoints (and of its starting model, as step 0), see :class:`HeldOut`.

    Args:
        run_dir: The run folder.
        start_model: The run's ``actor_rollout_ref.model.path`` (relative paths as the run was started), or None.
        warnings: Unreadable evaluation files are reported here and skipped.
    """
    by_metric: dict[str, dict[int, float]] = {}
    found = HeldOut()
    for step, path in _evaluations(run_dir, start_model):
        name = _EVAL_FILE.fullmatch(path.name)
        if name is None:
            continue
        try:
            record: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            warnings.append(f"{path}: held-out evaluation could not be read: {err}")
            continue
        for series, key in VALUES.items():
            value = record.get(key, record.get("metrics", {}).get(key))
            if isinstance(value, int | float) and not isinstance(value, bool):
                by_metric.setdefault(metric(name["seeds"], name["temperature"], series), {})[step] = float(value)
        try:
            outcomes = read_outcomes(record.get("outcomes") or [])
        except (KeyError, TypeError, ValueError) as err:
            warnings.append(f"{path}: its outcomes could not be read: {err}")
            outcomes = []
        if outcomes:
            success = metric(name["seeds"], name["temperature"], "success_rate")
            found.episodes.setdefault(success, {})[step] = [float(o.success) for o in outcomes]
            if instances := by_instance(outcomes):
                found.instances.setdefault(success, {})[step] = instances
    found.series = {name: sorted(values.items()) for name, values in by_metric.items()}
    return found
