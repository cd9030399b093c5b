"""The stages around RL, each a ``python -m`` subprocess: demonstrations, the supervised warm start (with their
defaults per recipe) and held-out evaluation."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from verl_asyncweb.learning.evaluate import output_file

DEMO_TASKS = {
    "laptop_learning": "miniwob:click-button,click-link,click-tab",
    "laptop_multistep": "miniwob:enter-text,login-user,click-checkboxes",
}
"""Demonstrated by default, per recipe: three of its tasks. RL learned laptop_learning's click-test and focus-text
from the reward alone (docs/history-2026-12.md, bl13); a warm start shown every task left RL less to add.
laptop_multistep's demonstrations teach the multi-step layout (fill one or two fields, or tick boxes, then submit);
of its RL tasks only click-checkboxes is demonstrated, and the typing tasks it cannot learn (docs/learning.md) are
demonstrated but not trained on."""


WARM_STEPS = {"laptop_learning": 200, "laptop_multistep": 1000}
"""Warm-start steps by default, per recipe (batch 4). laptop_multistep's 200-step warm start wrote an executable
action in 3 of 100 multi-step decisions, too rarely for RL to find mixed groups; 1000 steps wrote one in ~70
(docs/learning.md)."""


def run_python(*args: str, log: Path) -> None:
    """Run ``python -m ARGS`` with its output in ``log``; raises if it fails."""
    with log.open("w") as out:
        returncode = subprocess.run([sys.executable, "-m", *args], stdout=out, stderr=subprocess.STDOUT).returncode
    if returncode != 0:
        raise RuntimeError(f"python -m {' '.join(args)} failed with {returncode}; see {log}")


def demos_args(
    instances: int, out: Path, tasks: str | None, overrides: list[str], recipe: str = "laptop_learning"
) -> list[str]:
    """Arguments of ``verl_asyncweb.learning.demos`` for the bench's demonstrations."""
    return [
        f"--recipe={recipe}",
        f"--instances={instances}",
        f"--out={out}",
        *([f"--tasks={tasks}"] if tasks else []),
        *overrides,
    ]


def warm_start_args(demos: Path, model: Path, size: str, steps: int | None, recipe: str) -> list[str]:
    """Arguments of ``verl_asyncweb.learning.warm_start``: ``steps``, or the recipe's :data:`WARM_STEPS` (200 for
    a recipe without one)."""
    steps = steps or WARM_STEPS.get(recipe, 200)
    return [f"--demos={demos}", f"--out={model}", f"--size={size}", f"--steps={steps}"]


def evaluate_held_out(
    path: Path,
    instances: int,
    temperature: float,
    log: Path,
    step: int | None = None,
    overrides: Sequence[str] = (),
    recipe: str = "laptop_learning",
) -> dict:
    """Held-out evaluation of a model folder (with the recipe ``overrides``), or of checkpoint ``step`` of a run
    folder; a result already written (next to that checkpoint) with the same overrides is reused."""
    folder = path / f"global_step_{step}" if step is not None else path
    out = output_file(folder, "held-out", temperature)
    if not out.exists() or json.loads(out.read_text()).get("overrides", []) != list(overrides):
        run_python(
            "verl_asyncweb.evaluate",
            str(path),
            f"--recipe={recipe}",
            *([f"--step={step}"] if step is not None else []),
            f"--instances={instances}",
            f"--temperature={temperature}",
            *(f"--set={override}" for override in overrides),
            f"--out={out}",
            log=log,
        )
    return json.loads(out.read_text())
