"""Read one run folder (config.yaml, metrics*.jsonl, summary.json, held-out evaluations) into a :class:`Run`,
tolerating damage.

Nothing here raises for a damaged or partial run: every problem becomes a line in :attr:`Run.warnings`.
Only a path that is not a directory is a user error.
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verl_asyncweb.compare import metric_names as M
from verl_asyncweb.compare.held_out import read_held_out
from verl_asyncweb.compare.jsonl import CorruptLine, attempt_ordered, iter_objects

logger = logging.getLogger(__name__)

Series = list[tuple[int, float]]
"""One metric's values, ``(training_step, value)`` sorted by step."""


@dataclass
class Run:
    """Everything the comparison needs from one run folder.

    Attributes:
        path: The run folder.
        name: Label shown in tables and legends (unique among the compared runs).
        config: Selected config values (dotted key -> value); absent keys are not present.
        metrics: Metric name -> :data:`Series`; held-out evaluations under ``eval/`` (see
            :mod:`verl_asyncweb.compare.held_out`).
        finished: Whether ``summary.json`` exists and parses.
        summary: The parsed ``summary.json`` (empty if missing).
        corrupt_lines: Metrics lines that were skipped.
        warnings: Human-readable problems found while reading (shown in every report).
        setup: :func:`setup_key` of its config (``None`` without a readable config): runs with the same one are
            seeds of one variant (:mod:`verl_asyncweb.compare.variants`).
        held_out_episodes: Held-out success metric -> step -> the evaluated episodes' successes (0/1), where the
            evaluation recorded them.
        held_out_instances: Held-out success metric -> step -> (task, page seed) -> success, where the evaluation
            recorded its instances.
    """

    path: Path
    name: str
    config: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Series] = field(default_factory=dict)
    finished: bool = False
    summary: dict[str, Any] = field(default_factory=dict)
    corrupt_lines: list[CorruptLine] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    setup: str | None = None
    held_out_episodes: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    held_out_instances: dict[str, dict[int, dict[tuple[str, int], float]]] = field(default_factory=dict)

    @property
    def recipe(self) -> str | None:
        """The recipe name from the config, if recorded."""
        value = self.config.get(M.CONFIG_RECIPE)
        return None if value is None else str(value)

    @property
    def variant(self) -> str:
        """Short description of the loss variant, e.g. ``step_norm=traj estimator=grpo loss_mode=decoupled``."""
        # A switch that is off (the sign-flip control's) says nothing about the variant.
        shown = [key for key in M.VARIANT_CONFIG_KEYS if key in self.config and self.config[key] is not False]
        parts = [f"{key.rsplit('.', 1)[-1]}={self.config[key]}" for key in shown]
        return " ".join(parts) if parts else "unknown variant"

    @property
    def last_step(self) -> int | None:
        """The largest training step that logged anything."""
        steps = [series[-1][0] for series in self.metrics.values() if series]
        return max(steps) if steps else None

    def series(self, metric: str) -> Series:
        """The metric's values, or an empty list when the run never logged it."""
        return self.metrics.get(metric, [])


def metrics_files(run_dir: Path) -> list[Path]:
    """The run's metrics files, oldest attempt first."""
    return attempt_ordered([p for p in run_dir.glob("metrics*.jsonl") if p.is_file()])


def _as_number(value: Any) -> float | None:
    # orjson writes NaN as null; bools are flags, not measurements.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def read_metrics(paths: list[Path]) -> tuple[dict[str, Series], list[CorruptLine]]:
    """Merge verl FileLogger lines ``{"step": int, "data": {name: number}}`` from several files.

    Later lines win per (step, metric); a line for a step that was logged before (a resumed attempt replaying
    steps, or validation metrics logged separately) only overrides the metrics it carries. Non-numeric values
    are ignored. ``asyncweb/wall_s`` goes on over a resume (:func:`_continue_wall`).

    Args:
        paths: Files in the order they were written.

    Returns:
        Metric name -> series sorted by step, and the lines that were skipped.
    """
    corrupt: list[CorruptLine] = []
    by_metric: dict[str, dict[int, float]] = {}
    for path in paths:
        attempt_wall: dict[int, float] = {}
        for line_no, obj in iter_objects(path, corrupt):
            step = obj.get("step")
            data = obj.get("data")
            if isinstance(step, bool) or not isinstance(step, int):
                corrupt.append(CorruptLine(path, line_no, f"'step' must be an integer, got {step!r}", str(obj)[:60]))
                continue
            if not isinstance(data, dict):
                # Tolerate a flat {"step": .., name: value} line.
                data = {k: v for k, v in obj.items() if k != "step"}
            for name, value in data.items():
                number = _as_number(value)
                if number is not None:
                    (attempt_wall if name == M.WALL_S else by_metric.setdefault(str(name), {}))[step] = number
        if attempt_wall:
            _continue_wall(by_metric.setdefault(M.WALL_S, {}), attempt_wall)
    return {name: sorted(values.items()) for name, values in by_metric.items()}, corrupt


def _continue_wall(wall: dict[int, float], attempt: dict[int, float]) -> None:
    """Add a resumed attempt's wall times; an attempt whose clock restarted (logged before the trainer carried it
    over a resume) goes on from the wall time of the step it resumed from."""
    first = min(attempt)
    resumed_from = wall.get(first - 1, 0.0)
    offset = resumed_from if attempt[first] < resumed_from else 0.0
    wall.update({step: seconds + offset for step, seconds in attempt.items()})


def _load_config(run_dir: Path, warnings: list[str]) -> Any:
    """The run's ``config.yaml`` (an OmegaConf node), or ``None`` with a warning."""
    path = run_dir / "config.yaml"
    if not path.is_file():
        warnings.append("config.yaml is missing: recipe and loss variant unknown")
        return None
    try:
        from omegaconf import OmegaConf

        return OmegaConf.load(path)
    except Exception as err:  # noqa: BLE001 - any parse failure is reported, not raised
        warnings.append(f"config.yaml could not be parsed: {err}")
        return None


def _select_config(cfg: Any, warnings: list[str]) -> dict[str, Any]:
    from omegaconf import OmegaConf

    selected: dict[str, Any] = {}
    for key in (M.CONFIG_RECIPE, *M.VARIANT_CONFIG_KEYS, M.CONFIG_MODEL_PATH):
        try:
            value = OmegaConf.select(cfg, key, default=None, throw_on_missing=False)
        except Exception as err:  # noqa: BLE001 - an unresolvable interpolation is reported, not raised
            warnings.append(f"config.yaml: cannot read {key}: {err}")
            continue
        if value is not None and not OmegaConf.is_config(value):
            selected[key] = value
    return selected


SEED_KEY = re.compile(r"(^|_)seed$")
"""A config leaf named ``seed`` or ``*_seed`` is a seed: it does not make another variant."""
RUN_DIR_KEY = "trainer.default_local_dir"
BOOKKEEPING_KEYS = frozenset(
    {
        "trainer.save_freq",
        "trainer.max_actor_ckpt_to_keep",
        "trainer.max_critic_ckpt_to_keep",
        "trainer.resume_mode",
        "trainer.resume_from_path",
        "trainer.project_name",
        "trainer.experiment_name",
        "trainer.logger",
    }
)
"""Where and how often a run saves and logs: not what it trains (``bench learning --eval-checkpoints`` keeps every
checkpoint, a seed added later may keep one)."""


def setup_key(config: dict[str, Any]) -> str:
    """What makes a run's setup: its flattened config (unresolved) less seeds, the paths inside its own folder
    (under ``trainer.default_local_dir``: checkpoints, the task parquet files) and :data:`BOOKKEEPING_KEYS`, as
    canonical JSON."""
    flat: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for name, value in node.items():
                walk(value, f"{prefix}.{name}" if prefix else str(name))
        else:
            flat[prefix] = node

    walk(config, "")
    run_dir = flat.get(RUN_DIR_KEY)
    kept = {
        key: value
        for key, value in flat.items()
        if not SEED_KEY.search(key.rsplit(".", 1)[-1])
        and key not in BOOKKEEPING_KEYS
        and not (isinstance(run_dir, str) and run_dir and isinstance(value, str) and value.startswith(run_dir))
    }
    return json.dumps(kept, sort_keys=True, default=str)


def _read_summary(run_dir: Path, warnings: list[str]) -> tuple[bool, dict[str, Any]]:
    path = run_dir / "summary.json"
    if not path.is_file():
        warnings.append("summary.json is missing: the run did not finish (killed or still running)")
        return False, {}
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        warnings.append(f"summary.json could not be parsed: {err}")
        return False, {}
    return True, summary if isinstance(summary, dict) else {"value": summary}


def load_run(run_dir: str | Path, name: str | None = None) -> Run:
    """Read a run folder.

    Args:
        run_dir: Folder holding ``config.yaml``, ``metrics*.jsonl`` and optionally ``summary.json``.
        name: Label for tables and plots; defaults to the folder name.

    Returns:
        The run, with every problem found listed in ``warnings``.

    Raises:
        ValueError: If ``run_dir`` is not a directory.
    """
    path = Path(run_dir)
    if not path.is_dir():
        raise ValueError(f"run folder must be an existing directory, got {str(run_dir)!r}")
    warnings: list[str] = []
    cfg = _load_config(path, warnings)
    config = {} if cfg is None else _select_config(cfg, warnings)
    setup = None
    if cfg is not None:
        from omegaconf import OmegaConf

        setup = setup_key(OmegaConf.to_container(cfg, resolve=False))
    files = metrics_files(path)
    if not files:
        warnings.append("no metrics*.jsonl file: nothing to compare")
    metrics, corrupt = read_metrics(files)
    held_out = read_held_out(path, config.get(M.CONFIG_MODEL_PATH), warnings)
    metrics.update(held_out.series)
    if corrupt:
        listed = "; ".join(c.describe() for c in corrupt[:3])
        more = f" and {len(corrupt) - 3} more" if len(corrupt) > 3 else ""
        warnings.append(f"skipped {len(corrupt)} corrupt metrics line(s): {listed}{more}")
    finished, summary = _read_summary(path, warnings)
    run = Run(
        path,
        name or path.resolve().name,
        config,
        metrics,
        finished,
        summary,
        corrupt,
        warnings,
        setup,
        held_out.episodes,
        held_out.instances,
    )
    logger.debug("read %s: %d metrics, %d warnings", path, len(metrics), len(warnings))
    return run


def unique_names(paths: list[Path]) -> list[str]:
    """Shortest distinct labels for run folders: the folder name, plus parents where names collide."""
    resolved = [p.resolve() for p in paths]
    depth = 1
    while True:
        names = ["/".join(p.parts[-depth:]) for p in resolved]
        if len(set(names)) == len(names) or depth >= max(len(p.parts) for p in resolved):
            return names
        depth += 1


def load_runs(run_dirs: list[str | Path]) -> list[Run]:
    """Read several run folders with distinct labels (see :func:`unique_names`)."""
    paths = [Path(p) for p in run_dirs]
    return [load_run(path, name) for path, name in zip(paths, unique_names(paths), strict=True)]
