"""The run folder: resolved config, metrics (one JSONL per attempt), task data, checkpoints and a final summary.

Layout (``RUN_DIR`` = ``trainer.default_local_dir``)::

    config.yaml                 resolved config of the latest attempt (no secrets: keys come from env vars)
    metrics.jsonl               verl FileLogger lines {"step", "data"} of the first attempt
    metrics.attempt-N.jsonl     the same for resumed attempts N = 1, 2, ... (verl truncates the file it opens)
    data/train.parquet, data/val.parquet
    episodes/episodes.jsonl     one record per finished episode
    episodes/screens/KK/KEY.jpg its screenshots, in 256 folders by the key's first two hex digits
    episodes/branch_points/     the shared states of branch rollouts (``<traj_id>@<step>.json``)
    global_step_K/              verl checkpoints
    summary.json                written when a run finishes
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

_ATTEMPT = re.compile(r"^metrics\.attempt-(\d+)\.jsonl$")
RUN_DIR_ENV = "ASYNCWEB_RUN_DIR"


def current_run() -> RunFolder | None:
    """The run folder of the job this process belongs to (``$ASYNCWEB_RUN_DIR``); None outside a run."""
    run_dir = os.environ.get(RUN_DIR_ENV)
    return RunFolder(Path(run_dir)) if run_dir else None


def screenshot_relpath(key: str) -> str:
    """A screenshot's path under ``episodes/``: one of 256 folders by the key's first two hex digits, so that a long
    run's million screenshots are not one flat folder."""
    return f"screens/{key[:2]}/{key}.jpg"


def find_screenshot(episodes_dir: Path, key: str) -> Path:
    """The screenshot ``key`` under ``episodes_dir``: its sharded path, or the flat ``screens/KEY.jpg`` of run folders
    written before 2026-12-07 where only that exists."""
    sharded = episodes_dir / screenshot_relpath(key)
    flat = episodes_dir / "screens" / f"{key}.jpg"
    return flat if not sharded.exists() and flat.exists() else sharded


def screenshot_path(key: str) -> Path | None:
    """Where a screenshot (by store key) lives in the current run folder; None outside a run."""
    run = current_run()
    return find_screenshot(run.episodes_dir, key) if run else None


def persist_screenshots(keys: list[str], blobs: list[bytes]) -> None:
    """Keep a copy of each screenshot in the current run folder (none outside a run): the viewer links it, and the
    trainer rebuilds pixels from it after a resume. Blocking file writes: the agent loop calls it in a thread."""
    for key, blob in zip(keys, blobs, strict=True):
        path = screenshot_path(key)
        if path is not None and not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(blob)


def branch_point_path(point: str) -> Path | None:
    """Where a branch point (by id, ``<traj_id>@<step>``) lives in the current run folder; None outside a run."""
    run = current_run()
    return run.branch_point_path(point) if run else None


@dataclass(frozen=True)
class RunFolder:
    root: Path

    @property
    def config_path(self) -> Path:
        return self.root / "config.yaml"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def episodes_dir(self) -> Path:
        return self.root / "episodes"

    @property
    def episodes_path(self) -> Path:
        return self.episodes_dir / "episodes.jsonl"

    def read_episodes(self, corrupt: list | None = None) -> list[dict]:
        """The run's episode records, none before its first episode; a line cut by a killed run is skipped
        (appended to ``corrupt`` as a :class:`~verl_asyncweb.compare.jsonl.CorruptLine` when given)."""
        from verl_asyncweb.compare.jsonl import iter_objects

        if not self.episodes_path.exists():
            return []
        return [record for _, record in iter_objects(self.episodes_path, [] if corrupt is None else corrupt)]

    @property
    def branch_points_dir(self) -> Path:
        return self.episodes_dir / "branch_points"

    def branch_point_path(self, point: str) -> Path:
        """The file of branch point ``point`` (``<traj_id>@<step>``)."""
        return self.branch_points_dir / f"{point}.json"

    @property
    def summary_path(self) -> Path:
        return self.root / "summary.json"

    def metrics_files(self) -> list[Path]:
        """Metrics files oldest first."""
        first = [self.root / "metrics.jsonl"] if (self.root / "metrics.jsonl").exists() else []
        attempts = sorted(
            (int(m.group(1)), p) for p in self.root.glob("metrics.attempt-*.jsonl") if (m := _ATTEMPT.match(p.name))
        )
        return first + [p for _, p in attempts]

    def next_metrics_path(self) -> Path:
        """Where this attempt logs: never a file an earlier attempt wrote."""
        files = self.metrics_files()
        if not files:
            return self.root / "metrics.jsonl"
        return self.root / f"metrics.attempt-{len(files)}.jsonl"

    def prepare(self) -> RunFolder:
        self.root.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(exist_ok=True)
        self.episodes_dir.mkdir(exist_ok=True)
        return self

    def write_config(self, cfg: DictConfig) -> None:
        self.config_path.write_text(OmegaConf.to_yaml(cfg, resolve=True))

    def read_metrics(self) -> dict[int, dict[str, float]]:
        """Step → metrics over every attempt (later lines win); unreadable lines are skipped."""
        steps: dict[int, dict[str, float]] = {}
        for path in self.metrics_files():
            for line in path.read_text(errors="replace").splitlines():
                try:
                    record = json.loads(line)
                    steps.setdefault(int(record["step"]), {}).update(record["data"])
                except (ValueError, KeyError, TypeError):
                    continue
        return steps

    def write_summary(self, started_at: float, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        steps = self.read_metrics()
        last_step = max(steps, default=0)
        final = {k: v for k, v in steps.get(last_step, {}).items() if is_finite_number(v)}
        summary = {
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "wall_s": round(time.time() - started_at, 2),
            "last_step": last_step,
            "final_metrics": final,
            **(extra or {}),
        }
        self.summary_path.write_text(json.dumps(summary, indent=2, sort_keys=True))
        return summary


def is_finite_number(value: Any) -> bool:
    """A metric value worth showing: a real, finite number (not a bool, NaN or inf)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
