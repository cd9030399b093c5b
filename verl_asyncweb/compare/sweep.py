"""Sweeps: expand ``key=v1,v2`` overrides into variants and train them one after another into one folder.

Each variant runs as ``<command> key=value ... trainer.default_local_dir=<sweep_dir>/<variant>``; the default
command is ``python -m verl_asyncweb.main``. A variant whose folder already has ``summary.json`` is finished and
skipped, so re-running the same sweep resumes it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from verl_asyncweb.console import StepReporter
from verl_asyncweb.run_folder import RunFolder

logger = logging.getLogger(__name__)

DEFAULT_COMMAND: tuple[str, ...] = (sys.executable, "-m", "verl_asyncweb.main")
RUN_DIR_KEY = "trainer.default_local_dir"
_OPEN, _CLOSE = "[({", "])}"


@dataclass(frozen=True)
class SweepAxis:
    """One swept key and its values (a single value means the key is fixed)."""

    key: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Variant:
    """One point of the sweep.

    Attributes:
        name: Folder name, from the keys that vary, e.g. ``step_norm-traj__estimator-grpo`` (no ``=`` or ``,``,
            which Hydra would parse inside the ``trainer.default_local_dir`` override).
        overrides: Every ``key=value`` override, fixed keys included, in the order given.
    """

    name: str
    overrides: tuple[str, ...]


@dataclass(frozen=True)
class VariantOutcome:
    """What happened to one variant.

    Attributes:
        name: Variant name.
        run_dir: Its run folder.
        status: ``skipped`` (already finished), ``ok``, ``failed`` (non-zero exit or no summary) or ``timeout``.
        returncode: The subprocess exit status (``None`` when skipped or timed out).
        log_path: Combined stdout/stderr of the subprocess.
        seconds: Wall time spent.
    """

    name: str
    run_dir: str
    status: Literal["skipped", "ok", "failed", "timeout"]
    returncode: int | None
    log_path: str
    seconds: float


def split_values(text: str) -> list[str]:
    """Split ``a,b,[c,d]`` on the commas outside brackets and quotes -> ``['a', 'b', '[c,d]']``."""
    parts, current, depth, quote = [], [], 0, ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth -= 1
        elif char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return parts


def parse_axes(tokens: Sequence[str]) -> list[SweepAxis]:
    """Parse ``KEY=V1[,V2...]`` tokens.

    Raises:
        ValueError: On a token without ``=``, an empty key or value, or a key given twice.
    """
    axes: list[SweepAxis] = []
    seen: set[str] = set()
    for token in tokens:
        key, sep, raw = token.partition("=")
        key = key.strip()
        values = tuple(v.strip() for v in split_values(raw))
        if not sep or not key or any(not v for v in values):
            raise ValueError(f"--sweep arguments must be KEY=V1[,V2,...] with non-empty values, got {token!r}")
        if key in seen:
            raise ValueError(f"--sweep key {key!r} is given twice; list all its values once, e.g. {key}=a,b")
        if key == RUN_DIR_KEY:
            raise ValueError(f"--sweep must not set {RUN_DIR_KEY} (each variant gets its own); use --sweep-dir")
        seen.add(key)
        axes.append(SweepAxis(key, values))
    if not axes:
        raise ValueError("--sweep needs at least one KEY=V1[,V2,...] argument, e.g. recipe=cpu_smoke")
    return axes


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", text).strip("_") or "_"


def expand(axes: Sequence[SweepAxis]) -> list[Variant]:
    """Cartesian product of the axes, in the order given (last axis varies fastest)."""
    varying = [axis for axis in axes if len(axis.values) > 1]
    short = [axis.key.rsplit(".", 1)[-1] for axis in varying]
    labels = [axis.key if short.count(s) > 1 else s for axis, s in zip(varying, short, strict=True)]
    variants = []
    for combo in itertools.product(*(axis.values for axis in axes)):
        chosen = dict(zip((axis.key for axis in axes), combo, strict=True))
        name = "__".join(_safe(f"{label}-{chosen[axis.key]}") for axis, label in zip(varying, labels, strict=True))
        variants.append(Variant(name or "base", tuple(f"{k}={v}" for k, v in chosen.items())))
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise ValueError(f"sweep values collide after making folder names safe: {names}; use distinct values")
    return variants


def default_sweep_dir(axes: Sequence[SweepAxis], root: Path = Path("sweeps")) -> Path:
    """``sweeps/<recipe>-<hash of the sweep spec>``: the same command line resumes the same folder."""
    spec = json.dumps([[a.key, list(a.values)] for a in axes])
    recipe = next((a.values[0] for a in axes if a.key == "recipe" and len(a.values) == 1), "sweep")
    return root / f"{_safe(recipe)}-{hashlib.sha1(spec.encode()).hexdigest()[:8]}"


def is_finished(run_dir: Path) -> bool:
    """A run is finished once it wrote ``summary.json``."""
    return (run_dir / "summary.json").is_file()


def launch_variant(
    variant: Variant, sweep_dir: Path, command: Sequence[str], timeout_s: float | None = None
) -> VariantOutcome:
    """Run one variant to completion (or skip it when already finished).

    Args:
        variant: The variant.
        sweep_dir: Sweep folder; the run goes to ``sweep_dir/<variant.name>``, its log to ``sweep_dir/logs``.
        command: Argument vector before the overrides.
        timeout_s: Kill the run after this many seconds (``None``: no limit).

    Returns:
        The outcome.
    """
    run_dir = sweep_dir / variant.name
    log_path = sweep_dir / "logs" / f"{variant.name}.log"
    if is_finished(run_dir):
        logger.info("sweep: %s already finished, skipping", variant.name)
        return VariantOutcome(variant.name, str(run_dir), "skipped", None, str(log_path), 0.0)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    argv = [*command, *variant.overrides, f"{RUN_DIR_KEY}={run_dir}"]
    logger.info("sweep: launching %s: %s", variant.name, " ".join(argv))
    start = time.monotonic()
    metrics_path = RunFolder(run_dir).next_metrics_path()
    with log_path.open("ab") as log, StepReporter(metrics_path, total_steps=None, label=variant.name):
        log.write(f"$ {' '.join(argv)}\n".encode())
        log.flush()
        try:
            proc = subprocess.run(
                argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=timeout_s, check=False
            )
        except subprocess.TimeoutExpired:
            logger.error("sweep: %s timed out after %ss (log: %s)", variant.name, timeout_s, log_path)
            return VariantOutcome(variant.name, str(run_dir), "timeout", None, str(log_path), time.monotonic() - start)
    seconds = time.monotonic() - start
    ok = proc.returncode == 0 and is_finished(run_dir)
    if not ok:
        logger.error(
            "sweep: %s failed (exit %s, summary.json %s; log: %s)",
            variant.name,
            proc.returncode,
            "present" if is_finished(run_dir) else "missing",
            log_path,
        )
    return VariantOutcome(variant.name, str(run_dir), "ok" if ok else "failed", proc.returncode, str(log_path), seconds)


def run_sweep(
    axes: Sequence[SweepAxis],
    sweep_dir: Path,
    command: Sequence[str] = DEFAULT_COMMAND,
    timeout_s: float | None = None,
) -> list[VariantOutcome]:
    """Launch every variant one after another, continuing past failures; record them in ``sweep.json``.

    Args:
        axes: Parsed ``--sweep`` arguments.
        sweep_dir: Folder that holds one run folder per variant.
        command: Argument vector before the overrides (tests inject a small script here).
        timeout_s: Per-variant time limit.

    Returns:
        One outcome per variant, in launch order.
    """
    variants = expand(axes)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    outcomes = []
    for variant in variants:
        outcomes.append(launch_variant(variant, sweep_dir, command, timeout_s))
        _write_manifest(sweep_dir, axes, command, outcomes)
    return outcomes


def _write_manifest(sweep_dir: Path, axes: Sequence[SweepAxis], command: Sequence[str], outcomes: list) -> None:
    manifest = {
        "axes": [{"key": a.key, "values": list(a.values)} for a in axes],
        "command": list(command),
        "variants": [asdict(o) for o in outcomes],
    }
    (sweep_dir / "sweep.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
