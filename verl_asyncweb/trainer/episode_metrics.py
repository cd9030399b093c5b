"""Per-step rollout metrics from the episodes that finished since the last training step.

The agent loop reports every finished episode (env failures included) to the rollout-stats actor; here the
trainer drains it once per step, aggregates the summaries (:func:`verl_asyncweb.agent.metrics.aggregate`),
appends the episodes to ``RUN_DIR/episodes/episodes.jsonl`` for the viewer, and measures the overlap of rollout
with the update.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from pathlib import Path
from typing import Any

import ray

from verl_asyncweb.agent.branch import FALLBACK, MEMBER
from verl_asyncweb.compare import metric_names as names
from verl_asyncweb.run_folder import RunFolder, find_screenshot

logger = logging.getLogger(__name__)

DRAIN_TIMEOUT_S = 60.0

ATTEMPT = uuid.uuid4().hex[:12]
"""This trainer process's id in the episode records it writes (with ``attempt_from_step``, the checkpoint it resumed
from): a reader leaves out what an interrupted attempt played past the checkpoint the next attempt resumed from."""


def busy_fraction(intervals: list[tuple[float, float]], start: float, end: float) -> float:
    """Fraction of [start, end] covered by the union of ``intervals``."""
    if end <= start:
        return 0.0
    clipped = sorted((max(a, start), min(b, end)) for a, b in intervals if b > start and a < end)
    covered, cursor = 0.0, start
    for a, b in clipped:
        a = max(a, cursor)
        if b > a:
            covered += b - a
            cursor = b
    return covered / (end - start)


def write_episodes(
    run_dir: str | None, episodes: list[dict[str, Any]], global_step: int, screenshots, attempt_from_step: int
) -> None:
    """Append the episodes to the run folder, each with the step that drained it and its :data:`ATTEMPT`, which
    resumed from checkpoint ``attempt_from_step``; their screenshots go to ``episodes/screens/`` (the agent loop
    usually wrote them already)."""
    if not run_dir or not episodes:
        return
    path = RunFolder(Path(run_dir)).episodes_path
    path.parent.mkdir(parents=True, exist_ok=True)
    # One lookup per distinct screenshot: where it is (or, missing, where it goes), for the copy and the records.
    keys = sorted({step["screenshot_key"] for e in episodes for step in e["steps"] if step.get("screenshot_key")})
    found = {key: find_screenshot(path.parent, key) for key in keys}
    missing = [key for key, target in found.items() if not target.exists()]
    try:
        blobs = dict(zip(missing, screenshots.get(missing), strict=True)) if missing else {}
    except (ray.exceptions.RayError, TimeoutError) as exc:
        logger.warning("could not fetch screenshots for the viewer: %s", exc)
        blobs = {}
    for key, blob in blobs.items():
        if blob is not None:
            found[key].parent.mkdir(parents=True, exist_ok=True)
            found[key].write_bytes(blob)
    for episode in episodes:
        for step in episode["steps"]:
            if step.get("screenshot_key"):
                step["screenshot"] = found[step["screenshot_key"]].relative_to(path.parent).as_posix()
    with path.open("a") as out:
        for episode in episodes:
            record = {key: value for key, value in episode.items() if key != "summary"}
            out.write(
                json.dumps(
                    {**record, "global_step": global_step, "attempt": ATTEMPT, "attempt_from_step": attempt_from_step},
                    default=str,
                )
                + "\n"
            )


def drain_episode_metrics(trainer, global_step: int) -> dict[str, float]:
    """Drain the rollout-stats actor and return this step's rollout metrics."""
    from verl_asyncweb.agent.metrics import aggregate
    from verl_asyncweb.agent.rollout_stats import stats_actor
    from verl_asyncweb.run_folder import RUN_DIR_ENV

    now = time.time()
    try:
        drained = ray.get(stats_actor().drain.remote(), timeout=DRAIN_TIMEOUT_S)
    except (ray.exceptions.RayError, TimeoutError) as exc:
        logger.warning("could not drain rollout stats: %s", exc)
        return {}
    recorded, intervals = drained["episodes"], drained["intervals"]
    # Validation episodes (verl's trainer.test_freq) make verl's validation metrics, not this step's rollout's: they
    # are recorded, and left out of the rollout metrics.
    episodes = [episode for episode in recorded if episode.get("split") != "val"]
    window_start = trainer._last_drain_at
    trainer._last_drain_at = now
    metrics = aggregate([episode["summary"] for episode in episodes])
    hours = max(now - window_start, 1e-6) / 3600.0
    metrics[names.TRAJS_PER_HOUR] = len([e for e in episodes if not e["env_failed"]]) / hours
    metrics[names.ROLLOUT_IDLE_FRAC] = 1.0 - busy_fraction(intervals, window_start, now)
    updates, trainer._update_intervals = trainer._update_intervals, []
    if updates:  # every local update of the cycle
        overlap = sum(busy_fraction(intervals, start, end) * (end - start) for start, end in updates)
        metrics[names.OVERLAP_GENERATION_DURING_UPDATE] = overlap
    metrics[names.ENV_FAILED_GROUPS] = float(len({e["group"] for e in episodes if e["env_failed"]}))
    metrics[names.ENV_FAILURES_TOTAL] = float(drained["totals"]["env_failures"])
    metrics[names.EPISODE_ERRORS_TOTAL] = float(drained["totals"]["episode_errors"])
    pools = drained["pools"]
    metrics[names.ENV_RELAUNCHES_TOTAL] = float(pools.get("relaunches", 0))
    if trainer.config.asyncweb.env.get("remote_endpoints"):
        metrics[names.ENV_REMOTE_ENDPOINTS_LOST_TOTAL] = float(pools.get("remote_endpoints_lost", 0))
        metrics[names.ENV_REMOTE_CONNECT_FAILURES_TOTAL] = float(pools.get("remote_connect_failures", 0))
    if trainer.config.asyncweb.agent.get("branch_step"):
        roles = [(episode.get("branch") or {}).get("role") for episode in episodes if not episode["env_failed"]]
        metrics[names.BRANCH_MEMBERS] = float(roles.count(MEMBER))
        metrics[names.BRANCH_FALLBACKS] = float(roles.count(FALLBACK))
    write_episodes(os.environ.get(RUN_DIR_ENV), recorded, global_step, trainer.screenshots, trainer._attempt_from_step)
    return metrics
