"""``results.json``, the experiment's record: the evaluation settings it was made under, the warm start's held-out
figures and each run's, written whole, read back by a later invocation and checked before its runs are kept
(the same evaluation, the same warm-start weights, demonstrations with the same score panel)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from omegaconf import DictConfig

from verl_asyncweb.learning.evaluate import SCORE_PANEL_UNRECORDED, recorded_score_panel
from verl_asyncweb.learning.outcomes import outcomes_to_json, read_outcomes

HELD_OUT_BEFORE = (
    "held_out_before",
    "held_out_before_by_task",
    "held_out_before_steps_by_task",
    "held_out_before_outcomes",
)
"""The warm start's held-out figures in ``results.json``: success rate, per task, steps to success per task, and
per instance (:mod:`verl_asyncweb.learning.outcomes`; 0/1 per episode in records written before)."""


EVALUATION_DEFAULTS = {
    "recipe": "laptop_learning",
    "recipe_overrides": [],
    "miniwob_score_panel": SCORE_PANEL_UNRECORDED,
}
"""Evaluation settings of a ``results.json`` written before it recorded them."""


SCORE_PANEL_KEY = "asyncweb.env.miniwob_score_panel"

logger = logging.getLogger(__name__)


def evaluation_settings(
    config: DictConfig, recipe: str, overrides: Sequence[str], eval_instances: int, temperature: float
) -> dict:
    """What held-out figures depend on besides the weights, as ``results.json`` records them: recipe, overrides,
    instances, temperature, and whether observations showed MiniWoB++'s score panel (as ``config``, the recipe
    composed with the overrides, has it; recorded on its own, so that a record from before the key existed is
    continued by setting it)."""
    return {
        "recipe": recipe,
        "recipe_overrides": [o for o in overrides if o.split("=", 1)[0].lstrip("+~") != SCORE_PANEL_KEY],
        "eval_instances": eval_instances,
        "temperature": temperature,
        "miniwob_score_panel": bool(config.asyncweb.env.miniwob_score_panel),
    }


def check_score_panel(manifest: dict, evaluation: dict, where: Path) -> None:
    """Refuse demonstrations (and so the warm start trained on them) whose observations showed MiniWoB++'s score
    panel otherwise than the evaluations and runs would (a manifest that does not say was recorded with it shown)."""
    recorded = recorded_score_panel(manifest)
    if recorded != evaluation["miniwob_score_panel"]:
        shown = "shown" if recorded else "hidden"
        raise SystemExit(
            f"{where}: the demonstrations were recorded with MiniWoB++'s score panel {shown}: run with --set "
            f"{SCORE_PANEL_KEY}={str(recorded).lower()}, or give another --out"
        )


def recorded_outcomes(evaluation: dict) -> list:
    """The held-out outcomes to record: per instance (:mod:`verl_asyncweb.learning.outcomes`) as the evaluation
    wrote them; one number, the rate, for an evaluation written without them."""
    if "outcomes" in evaluation:
        return outcomes_to_json(read_outcomes(evaluation["outcomes"]))
    return [float(evaluation["success"])]


def recorded_runs(record: dict) -> dict[str, dict]:
    """Run folder name -> the run's figures in a ``results.json`` record (a run reported before seeds existed is
    named after its arm)."""
    return {run.get("run", run["arm"]): run for run in record.get("arms", [])}


def earlier_record(results: Path, evaluation: dict) -> dict:
    """What an earlier invocation into the same ``--out`` (or on another machine) wrote ({} if nothing): its runs
    are kept and only runs it lacks are run. Refused, before any stage runs, when it was evaluated otherwise
    (``evaluation``: :func:`evaluation_settings`; their arms would not compare)."""
    if not results.exists():
        return {}
    try:
        record = json.loads(results.read_text())
    except json.JSONDecodeError as error:
        raise SystemExit(
            f"{results} is not JSON ({error}): a copy cut short? Copy it again, or give another --out"
        ) from None
    differing = [
        f"{key}: {record.get(key, EVALUATION_DEFAULTS.get(key))!r} there, {value!r} here"
        for key, value in evaluation.items()
        if record.get(key, EVALUATION_DEFAULTS.get(key)) != value
    ]
    if differing:
        panel = recorded_score_panel(record)
        only_the_panel = len(differing) == 1 and panel != evaluation["miniwob_score_panel"]
        hint = f"run with --set {SCORE_PANEL_KEY}={str(panel).lower()}, or " if only_the_panel else ""
        raise SystemExit(f"{results} was evaluated otherwise ({'; '.join(differing)}): {hint}give another --out")
    if "warm_start_digest" not in record and record.get("arms"):
        logger.warning("%s records no warm-start digest (written before it did): its runs are kept unchecked", results)
    return record


def write_record(results: Path, record: dict) -> None:
    """Write ``results.json`` whole or not at all (the runs it records took hours): into a partial file first,
    which then replaces it."""
    partial = results.with_suffix(".partial")
    with partial.open("w") as out:
        json.dump(record, out, indent=1)
        out.flush()
        os.fsync(out.fileno())
    partial.replace(results)


def weights_digest(model: Path) -> str:
    """SHA-256 over a model folder's ``*.safetensors`` files (name, size, bytes): which warm start the arms
    trained from."""
    files = sorted(model.glob("*.safetensors"))
    if not files:
        raise SystemExit(f"{model} holds no *.safetensors weights")
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.name}\0{path.stat().st_size}\0".encode())
        with path.open("rb") as weights:
            while chunk := weights.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()


def check_weights(record: dict, digest: str, results: Path, made_here: bool = False) -> None:
    """Refuse a ``results.json`` record whose runs trained from other warm-start weights than ``digest`` (those of
    a warm start ``made_here`` by this invocation, or of one found in ``--out``)."""
    earlier = record.get("warm_start_digest")
    if earlier is None or earlier == digest:
        return
    weights = f"sha256 {earlier[:12]}, these {digest[:12]}"
    if made_here:
        raise SystemExit(
            f"the warm start made again here is other weights than the one {results} holds runs of ({weights}); "
            "demonstrations recorded again come out the same only with MiniWoB++'s score panel hidden and a "
            "deterministic page clock: copy that warm_start folder here in place of this one, give another --out, "
            "or move results.json away to start over"
        )
    raise SystemExit(
        f"{results} holds runs trained from other warm-start weights ({weights}): copy its warm_start folder here, "
        "give another --out, or move results.json away to start over"
    )


def runs_by_arm(runs: Iterable[dict]) -> dict[str, list[dict]]:
    """``runs`` grouped by arm, in the order the arms first appear."""
    by_arm: dict[str, list[dict]] = {}
    for run in runs:
        by_arm.setdefault(run["arm"], []).append(run)
    return by_arm


def by_arm_and_seed(runs: Iterable[dict]) -> list[dict]:
    """``runs`` grouped by arm (in the order the arms first appear), each arm's by seed."""
    return [run for group in runs_by_arm(runs).values() for run in sorted(group, key=lambda r: r.get("seed", 0))]
