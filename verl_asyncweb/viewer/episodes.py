"""Read ``RUN_DIR/episodes/episodes*.jsonl`` into display-ready records, collecting warnings instead of raising.

Every model-written field is kept as plain text here and rendered with ``textContent`` by the page.
Screenshot paths are checked on disk and turned into URLs relative to the page, never into other schemes.
"""

from __future__ import annotations

import logging
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from verl_asyncweb.compare.jsonl import CorruptLine, attempt_ordered, iter_objects
from verl_asyncweb.run_folder import RunFolder
from verl_asyncweb.viewer.memory_diff import diff_memory, value_text

logger = logging.getLogger(__name__)

SLICES = ("easy", "medium", "hard")


@dataclass
class EpisodeSet:
    """Episodes of one run, ready to embed.

    Attributes:
        episodes: One dict per episode (see :func:`normalize_episode`), ordered by global step.
        total: Episodes found before ``max_episodes`` was applied.
        corrupt_lines: Skipped lines.
        missing_screenshots: ``(traj_id, step_index, path)`` for each screenshot not on disk.
        warnings: Human-readable problems, shown at the top of the page.
    """

    episodes: list[dict[str, Any]] = field(default_factory=list)
    total: int = 0
    corrupt_lines: list[CorruptLine] = field(default_factory=list)
    missing_screenshots: list[tuple[str, int, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _text(value: Any) -> str:
    return "" if value is None else value_text(value)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def screenshot_url(rel: Any, episodes_dir: Path, page_dir: Path) -> tuple[str | None, bool]:
    """The page-relative URL of a screenshot and whether the file exists.

    Args:
        rel: The step's ``screenshot`` field: a path relative to ``episodes_dir``.
        episodes_dir: ``RUN_DIR/episodes``.
        page_dir: Folder of the written ``index.html``.

    Returns:
        ``(url, exists)``; ``url`` is ``None`` when the path is absent or points outside ``episodes_dir``.
    """
    if not isinstance(rel, str) or not rel:
        return None, False
    parts = PurePosixPath(rel.replace("\\", "/")).parts
    if PurePosixPath(rel).is_absolute() or ".." in parts or ":" in rel.split("/", 1)[0]:
        return None, False
    target = episodes_dir.joinpath(*parts)
    rel_to_page = os.path.relpath(target, page_dir).replace(os.sep, "/")
    return "/".join(quote(part) for part in rel_to_page.split("/")), target.is_file()


def _pair(value: Any) -> tuple[float, float] | None:
    if isinstance(value, list | tuple) and len(value) == 2:
        x, y = _number(value[0]), _number(value[1])
        if x is not None and y is not None:
            return x, y
    return None


def _viewport(value: Any) -> list[float] | None:
    pair = _pair(value)
    return list(pair) if pair and pair[0] > 0 and pair[1] > 0 else None


def click_fraction(click: Any, viewport: Any) -> list[float] | None:
    """``click_xy`` (viewport pixels) as fractions of the viewport, clamped to [0, 1]; ``None`` if unusable."""
    xy, size = _pair(click), _viewport(viewport)
    if xy is None or size is None:
        return None
    return [min(max(xy[0] / size[0], 0.0), 1.0), min(max(xy[1] / size[1], 0.0), 1.0)]


def normalize_step(step: dict[str, Any], prev_memory: Any, first: bool, paths: tuple[Path, Path]) -> dict[str, Any]:
    """One step as embedded in the page (all model text as strings)."""
    url, exists = screenshot_url(step.get("screenshot"), *paths)
    action = step.get("action") if isinstance(step.get("action"), dict) else None
    click = step.get("click_xy")
    return {
        "index": _int(step.get("step_index")),
        "screenshot": url,
        "screenshot_path": _text(step.get("screenshot")),
        "screenshot_missing": not exists,
        "viewport": _viewport(step.get("viewport")),
        "policy_version": _int(step.get("policy_version")),
        "intention": _text(step.get("intention")),
        "memory": diff_memory(prev_memory, step.get("memory"), first).to_json(),
        "progress": _text(step.get("progress")),
        "action_name": _text(action.get("name")) if action else "",
        "action_arguments": _text(action.get("arguments")) if action else "",
        "action_text": _text(step.get("action_text")),
        "action_result": _text(step.get("action_result")),
        "invalid_reason": _text(step.get("invalid_reason")),
        "click_px": list(_pair(click) or ()) or None,
        "click_frac": click_fraction(click, step.get("viewport")),
        "typed_text": _text(step.get("typed_text")),
        "response_tokens": _int(step.get("response_tokens")),
    }


def normalize_episode(record: dict[str, Any], paths: tuple[Path, Path]) -> tuple[dict[str, Any], list[tuple[int, str]]]:
    """An episode record as embedded in the page, plus ``(step_index, path)`` of screenshots missing on disk."""
    raw_steps = record.get("steps") if isinstance(record.get("steps"), list) else []
    steps, prev, missing = [], None, []
    for i, raw in enumerate(s for s in raw_steps if isinstance(s, dict)):
        step = normalize_step(raw, prev, i == 0, paths)
        prev = raw.get("memory")
        steps.append(step)
        if step["screenshot_missing"]:
            missing.append((i if step["index"] is None else step["index"], step["screenshot_path"] or "(none)"))
    versions = [s["policy_version"] for s in steps if s["policy_version"] is not None]
    success, env_failed = record.get("success") is True, record.get("env_failed") is True
    branch, replay = branch_view(record, paths[0])
    slice_ = record.get("difficulty_slice")
    return {
        "traj_id": _text(record.get("traj_id")),
        "task_id": _text(record.get("task_id")),
        "instruction": _text(record.get("instruction")),
        "source": _text(record.get("source")),
        "difficulty": _int(record.get("difficulty")),
        "difficulty_slice": slice_ if slice_ in SLICES else "unknown",
        "reward": _number(record.get("reward")),
        "success": success,
        "env_failed": env_failed,
        "outcome": "env_failed" if env_failed else "success" if success else "failure",
        "evaluator_reasons": [_text(r) for r in record.get("evaluator_reasons") or [] if r is not None]
        if isinstance(record.get("evaluator_reasons"), list)
        else [],
        "global_step": _int(record.get("global_step")),
        "pv_min": min(versions) if versions else None,
        "pv_max": max(versions) if versions else None,
        "steps": steps,
        "branch": branch,
        "replay_command": replay,
    }, missing


def branch_view(record: dict[str, Any], episodes_dir: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The episode's branch rollout (role, shared point, step) and the command restoring that point, if kept."""
    raw = record.get("branch") if isinstance(record.get("branch"), dict) else {}
    point, step = _text(raw.get("point")), _int(raw.get("step"))
    if not point or step is None:
        return None, None
    branch = {"role": _text(raw.get("role")), "point": point, "step": step}
    if not RunFolder(episodes_dir.parent).branch_point_path(point).is_file():
        return branch, None
    args = [str(episodes_dir.parent.resolve()), _text(record.get("traj_id")), str(step)]
    return branch, "python -m verl_asyncweb.replay " + " ".join(shlex.quote(arg) for arg in args)


def load_episodes(run_dir: Path, page_dir: Path, max_episodes: int | None = None) -> EpisodeSet:
    """Read and normalize a run's episodes.

    Later files and lines win for a repeated ``traj_id``. With ``max_episodes`` only the newest (by global
    step) are kept, with a warning.

    Args:
        run_dir: The run folder.
        page_dir: Where ``index.html`` will be written (screenshot URLs are relative to it).
        max_episodes: Keep at most this many episodes (``None``: all).

    Returns:
        The episodes and every warning.
    """
    result = EpisodeSet()
    episodes_dir = run_dir / "episodes"
    files = attempt_ordered([p for p in episodes_dir.glob("episodes*.jsonl") if p.is_file()])
    if not files:
        result.warnings.append(f"no episodes found: {episodes_dir}/episodes*.jsonl does not exist")
        return result
    records: dict[str, dict[str, Any]] = {}
    for path in files:
        for line_no, obj in iter_objects(path, result.corrupt_lines):
            key = _text(obj.get("traj_id")) or f"{path.name}:{line_no}"
            records.pop(key, None)
            records[key] = obj
    ordered = sorted(records.values(), key=lambda r: _int(r.get("global_step")) or 0)
    result.total = len(ordered)
    if max_episodes is not None and len(ordered) > max_episodes:
        result.warnings.append(f"showing the newest {max_episodes} of {len(ordered)} episodes (--max-episodes)")
        ordered = ordered[-max_episodes:]
    for record in ordered:
        episode, missing = normalize_episode(record, (episodes_dir, page_dir))
        result.episodes.append(episode)
        result.missing_screenshots += [(episode["traj_id"], index, path) for index, path in missing]
    _summarize(result)
    return result


def _summarize(result: EpisodeSet) -> None:
    if result.corrupt_lines:
        shown = "; ".join(c.describe() for c in result.corrupt_lines[:3])
        more = f" and {len(result.corrupt_lines) - 3} more" if len(result.corrupt_lines) > 3 else ""
        result.warnings.append(f"skipped {len(result.corrupt_lines)} corrupt episode line(s): {shown}{more}")
    if result.missing_screenshots:
        traj, index, path = result.missing_screenshots[0]
        result.warnings.append(
            f"{len(result.missing_screenshots)} screenshot(s) missing on disk, e.g. episodes/{path} "
            f"(episode {traj}, step {index}); those steps show a placeholder"
        )
    for warning in result.warnings:
        logger.warning("%s", warning)
