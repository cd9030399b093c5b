"""Per-step rollout metrics from the episodes that finished since the last training step.

The agent loop reports every finished episode (env failures included) to the rollout-stats actor; here the
trainer drains it once per step, turns the summaries into DESIGN section 6 metrics, appends the episodes to
``RUN_DIR/episodes/episodes.jsonl`` for the viewer, and measures the overlap of rollout with the update.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import ray

logger = logging.getLogger(__name__)

DRAIN_TIMEOUT_S = 60.0


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def episode_metrics(episodes: list[dict[str, Any]]) -> dict[str, float]:
    """DESIGN section 6 metrics of a list of episode summaries (env-failed episodes only counted)."""
    scored = [e for e in episodes if not e["env_failed"]]
    metrics: dict[str, float | None] = {
        "asyncweb/trajectories": float(len(scored)),
        "asyncweb/env_failures": float(len(episodes) - len(scored)),
        "asyncweb/context_overflows": float(sum(e["context_overflow"] for e in scored)),
    }
    if not scored:
        return {k: v for k, v in metrics.items() if v is not None}
    metrics["asyncweb/success_rate"] = _mean([float(e["success"]) for e in scored])
    for slice_name in ("easy", "medium", "hard"):
        in_slice = [float(e["success"]) for e in scored if e["difficulty_slice"] == slice_name]
        if in_slice:
            metrics[f"asyncweb/success_rate/{slice_name}"] = _mean(in_slice)
    for outcome, wanted in (("success", True), ("failure", False)):
        group = [e for e in scored if e["success"] == wanted]
        metrics[f"asyncweb/steps_per_traj/{outcome}"] = _mean([e["num_steps"] for e in group])
        tokens = [s["response_tokens"] for e in group for s in e["steps"]]
        metrics[f"asyncweb/response_tokens_per_step/{outcome}"] = _mean(tokens)
    steps = sum(e["num_steps"] for e in scored) or 1
    metrics["asyncweb/invalid_action_rate"] = sum(e["invalid_actions"] for e in scored) / steps
    metrics["asyncweb/stuck_rate"] = sum(e["stuck_steps"] for e in scored) / steps
    metrics["asyncweb/memory/json_bytes"] = _mean([b for e in scored for b in e["memory_json_bytes"]])
    metrics["asyncweb/memory/key_count"] = _mean([k for e in scored for k in e["memory_key_counts"]])
    metrics["asyncweb/memory/generic_key_ratio"] = _mean([r for e in scored for r in e["memory_generic_ratio"]])
    metrics["asyncweb/memory/keyset_kept_frac"] = _mean([float(_keeps_keys(e["memory_key_sets"])) for e in scored])
    return {k: float(v) for k, v in metrics.items() if v is not None}


def _keeps_keys(key_sets: list[list[str]]) -> bool:
    seen: set[str] = set()
    for keys in key_sets:
        if not seen.issubset(keys):
            return False
        seen |= set(keys)
    return True


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


def write_episodes(run_dir: str | None, episodes: list[dict[str, Any]], global_step: int) -> None:
    if not run_dir or not episodes:
        return
    path = Path(run_dir) / "episodes" / "episodes.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        for episode in episodes:
            out.write(json.dumps({**episode, "global_step": global_step}, default=str) + "\n")


def drain_episode_metrics(trainer, global_step: int) -> dict[str, float]:
    """Drain the rollout-stats actor and return this step's rollout metrics."""
    from verl_asyncweb.agent.rollout_stats import stats_actor

    now = time.time()
    try:
        drained = ray.get(stats_actor().drain.remote(), timeout=DRAIN_TIMEOUT_S)
    except (ray.exceptions.RayError, TimeoutError) as exc:
        logger.warning("could not drain rollout stats: %s", exc)
        return {}
    episodes, intervals = drained["episodes"], drained["intervals"]
    window_start = getattr(trainer, "_last_drain_at", trainer._started_at)
    trainer._last_drain_at = now
    metrics = episode_metrics(episodes)
    hours = max(now - window_start, 1e-6) / 3600.0
    metrics["asyncweb/trajs_per_hour"] = len([e for e in episodes if not e["env_failed"]]) / hours
    metrics["asyncweb/rollout_idle_frac"] = 1.0 - busy_fraction(intervals, window_start, now)
    update = getattr(trainer, "_last_update_interval", None)
    if update is not None:
        overlap = busy_fraction(intervals, *update) * (update[1] - update[0])
        metrics["asyncweb/overlap/generation_during_update_s"] = overlap
    metrics["asyncweb/env_failures_total"] = float(drained["totals"]["env_failures"])
    write_episodes(os.environ.get("ASYNCWEB_RUN_DIR"), episodes, global_step)
    return metrics
