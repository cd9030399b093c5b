"""Builders of small synthetic run folders that follow the run-folder contract (issue 7).

Used by the compare, viewer and sweep tests; ``fake_trainer_main.py`` uses them to stand in for
``python -m verl_asyncweb.main``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from verl_asyncweb.compare import metric_names as M

HOSTILE = '<img src=x onerror="window.__pwned=1"></script><script>window.__pwned=1</script>'
VIEWPORT = (640, 480)
SCREEN_SIZE = (320, 240)  # screenshots are stored downscaled; click_xy is in viewport pixels


def metrics_for_step(step: int, seed: int) -> dict[str, float]:
    """Deterministic, distinct-per-run metric values for one step."""
    base = 0.1 * seed
    rate = min(1.0, base + 0.05 * step)
    return {
        M.SUCCESS_RATE: rate,
        M.SUCCESS_RATE_EASY: min(1.0, rate + 0.2),
        M.SUCCESS_RATE_MEDIUM: rate,
        M.SUCCESS_RATE_HARD: max(0.0, rate - 0.2 + (0.3 if step == 1 else 0.0)),  # best != final
        M.STEPS_PER_TRAJ_SUCCESS: 4.0 + seed + 0.25 * step,
        M.STEPS_PER_TRAJ_FAILURE: 9.0 - 0.5 * step,
        M.RESPONSE_TOKENS_PER_STEP_SUCCESS: 120.0 + step,
        M.RESPONSE_TOKENS_PER_STEP_FAILURE: 150.0 - step,
        M.MEMORY_JSON_BYTES: 300.0 + 10 * step + seed,
        M.MEMORY_KEY_COUNT: 5.0 + step,
        M.MEMORY_GENERIC_KEY_RATIO: 0.5 / (1 + step),
        M.MEMORY_KEYSET_KEPT_FRAC: 0.9,
        M.INVALID_ACTION_RATE: 0.2 / (1 + step + seed),
        M.STUCK_RATE: 0.01 * step,
        M.DECOUPLED_CLIP_FRAC: 0.03 * seed + 0.001 * step,
        M.DECOUPLED_NAIVE_CLIP_FRAC: 0.1 + 0.001 * step,
        M.DECOUPLED_DROPPED_FRAC: 0.002 * step,
        M.VERL_PG_CLIPFRAC: 0.04,
        M.TRAJS_PER_HOUR: 1000.0 + 37 * step + seed,
        M.WALL_S: 60.0 * step + 5 * seed,
        M.POLICY_LAG_MEAN: 1.5,
        M.TRAINER_IDLE_FRAC: 0.2,
        M.ROLLOUT_IDLE_FRAC: 0.1,
        "val/irrelevant_string": "not a number",  # type: ignore[dict-item]
    }


def write_config(
    run_dir: Path,
    recipe: str | None,
    step_norm: str,
    estimator: str,
    loss_mode: str,
    negate_advantage: bool = False,
    model_path: Path | None = None,
) -> None:
    """A small resolved config in OmegaConf YAML."""
    recipe_line = f"  recipe: {recipe}\n" if recipe else ""
    model_lines = f"  model:\n    path: {model_path}\n" if model_path else ""
    run_dir.joinpath("config.yaml").write_text(
        "asyncweb:\n"
        f"{recipe_line}"
        f"  algo:\n    step_norm: {step_norm}\n    estimator: {estimator}\n"
        f"    negate_advantage: {str(negate_advantage).lower()}\n"
        f"actor_rollout_ref:\n{model_lines}  actor:\n    policy_loss:\n"
        f"      loss_mode: {loss_mode}\n"
        f"trainer:\n  default_local_dir: {run_dir}\n",
        encoding="utf-8",
    )


def write_metrics(run_dir: Path, seed: int, steps: int, corrupt_line: bool = False, resumed: bool = False) -> None:
    """``metrics.jsonl`` (and ``metrics.attempt-1.jsonl`` when ``resumed``), FileLogger format.

    With ``resumed`` the first file holds steps 1..steps-1 with stale values for the last two, and the attempt
    file replays them with the true values: the reader must take the later ones.
    """
    lines = [json.dumps({"step": s, "data": metrics_for_step(s, seed)}) for s in range(1, steps + 1)]
    if resumed:
        stale = [json.dumps({"step": s, "data": {M.SUCCESS_RATE: -1.0}}) for s in (steps - 1, steps)]
        run_dir.joinpath("metrics.jsonl").write_text("\n".join(lines[:-2] + stale) + "\n", encoding="utf-8")
        run_dir.joinpath("metrics.attempt-1.jsonl").write_text("\n".join(lines[-2:]) + "\n", encoding="utf-8")
        return
    if corrupt_line:
        lines.insert(1, '{"step": 99, "data": {"asyncweb/success_rate": 0.9')  # truncated by a kill
    run_dir.joinpath("metrics.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _screenshot(episodes_dir: Path, label: str) -> str:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", SCREEN_SIZE, (235, 240, 250))
    draw = ImageDraw.Draw(image)
    draw.rectangle([20, 20, 300, 60], fill=(60, 110, 200))
    draw.text((30, 30), label, fill=(255, 255, 255))
    digest = hashlib.sha256(label.encode()).hexdigest()
    rel = f"screens/{digest}.jpg"
    (episodes_dir / "screens").mkdir(parents=True, exist_ok=True)
    image.save(episodes_dir / rel, quality=80)
    return rel


def _step(episodes_dir: Path, traj: str, index: int, version: int, hostile: bool) -> dict:
    memory = {"goal": "book flight", "visited": index, "notes": [f"page {i}" for i in range(index + 1)]}
    if index == 2:
        memory = "raw memory: not JSON {" + (HOSTILE if hostile else "")
    is_click = index % 2 == 0
    return {
        "step_index": index,
        "screenshot": _screenshot(episodes_dir, f"{traj} step {index}"),
        "viewport": list(VIEWPORT),
        "policy_version": version,
        "intention": f"step {index}: look for the search box" + (HOSTILE if hostile else ""),
        "memory": memory,
        "progress": {"done": index, "todo": ["submit"]},
        "action": {"name": "click", "arguments": {"x": 480, "y": 120}}
        if is_click
        else {"name": "type", "arguments": {"text": "Paris"}},
        "action_text": '<tool_call>{"name": "click"}</tool_call>' if is_click else "<tool_call>type</tool_call>",
        "action_result": "clicked" if is_click else "typed",
        "invalid_reason": None if index != 3 else "element not found",
        "click_xy": [480, 120] if is_click else None,
        "typed_text": None if is_click else "Paris" + (HOSTILE if hostile else ""),
        "response_tokens": 100 + index,
    }


def episode(
    episodes_dir: Path,
    traj: str,
    task: str,
    slice_: str,
    success: bool,
    version: int,
    n_steps: int = 3,
    hostile: bool = False,
) -> dict:
    """One finished episode record with real screenshot files."""
    return {
        "traj_id": traj,
        "task_id": task,
        "instruction": f"Book a flight to Paris ({task})" + (HOSTILE if hostile else ""),
        "source": "miniwob",
        "difficulty": {"easy": 1, "medium": 2, "hard": 3}[slice_],
        "difficulty_slice": slice_,
        "reward": 1.0 if success else 0.0,
        "success": success,
        "env_failed": False,
        "evaluator_reasons": ["flight booked" if success else "wrong date"] + ([HOSTILE] if hostile else []),
        "global_step": version,
        "steps": [_step(episodes_dir, traj, i, version + i // 2, hostile) for i in range(n_steps)],
    }


def write_episodes(
    run_dir: Path, missing_screenshot: bool = False, corrupt_line: bool = False, hostile: bool = False
) -> list[dict]:
    """``episodes/episodes.jsonl`` with two successes and two failures over two tasks and slices."""
    episodes_dir = run_dir / "episodes"
    episodes_dir.mkdir(parents=True, exist_ok=True)
    records = [
        episode(episodes_dir, "t-ok-1", "book-flight", "easy", True, 1, hostile=hostile),
        episode(episodes_dir, "t-fail-1", "book-flight", "hard", False, 2, n_steps=4, hostile=hostile),
        episode(episodes_dir, "t-ok-2", "search-engine", "medium", True, 3, hostile=hostile),
        episode(episodes_dir, "t-fail-2", "search-engine", "easy", False, 4, hostile=hostile),
    ]
    if missing_screenshot:
        records[0]["steps"][1]["screenshot"] = "screens/" + "0" * 64 + ".jpg"
    lines = [json.dumps(r) for r in records]
    if corrupt_line:
        lines.append('{"traj_id": "t-cut", "steps": [{"step_in')
    (episodes_dir / "episodes.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return records


def build_run(
    run_dir: Path,
    seed: int = 1,
    steps: int = 5,
    recipe: str | None = "cpu_smoke",
    step_norm: str = "traj",
    estimator: str = "grpo",
    loss_mode: str = "decoupled_ppo",
    corrupt_metrics: bool = False,
    resumed: bool = False,
    episodes: bool = True,
    missing_screenshot: bool = False,
    corrupt_episode: bool = False,
    hostile: bool = False,
    finished: bool = True,
    negate_advantage: bool = False,
    model_path: Path | None = None,
) -> Path:
    """Write a complete run folder and return it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    write_config(run_dir, recipe, step_norm, estimator, loss_mode, negate_advantage, model_path)
    write_metrics(run_dir, seed, steps, corrupt_line=corrupt_metrics, resumed=resumed)
    if episodes:
        write_episodes(run_dir, missing_screenshot, corrupt_episode, hostile)
    if finished:
        run_dir.joinpath("summary.json").write_text(json.dumps({"final_step": steps}), encoding="utf-8")
    return run_dir
