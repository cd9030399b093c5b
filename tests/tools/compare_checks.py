"""Independent checks of a written comparison against the runs' own metrics files.

Deliberately re-reads the JSONL with a few lines of plain code instead of the package's reader, so the tests
check the package and not themselves. Reusable on folders from real CPU runs (the trainer's end-to-end test).
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path


def plain_metrics(run_dir: Path) -> dict[str, dict[int, float]]:
    """metric -> {step: value}; metrics.jsonl, then attempt files by number; later lines win; bad lines skipped."""

    def order(path: Path) -> tuple[int, int]:
        match = re.search(r"attempt-(\d+)", path.name)
        return (1, int(match.group(1))) if match else (0, 0)

    out: dict[str, dict[int, float]] = {}
    for path in sorted(run_dir.glob("metrics*.jsonl"), key=order):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            for name, value in obj["data"].items():
                if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                    out.setdefault(name, {})[obj["step"]] = float(value)
    return out


def expected_cell(metrics: dict[str, dict[int, float]], column: str) -> float | None:
    """Expected CSV value for a ``<metric>:<final|best>`` column."""
    metric, _, aggregate = column.rpartition(":")
    values = metrics.get(metric)
    if not values:
        return None
    return max(values.values()) if aggregate == "best" else values[max(values)]


def assert_comparison_matches_metrics(out_dir: Path, run_dirs: list[Path]) -> int:
    """Every metric cell of ``table.csv`` equals the value recomputed from the metrics files.

    Returns:
        The number of non-empty cells checked (so callers can assert something was compared).
    """
    with (out_dir / "table.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(run_dirs), f"expected one CSV row per run, got {len(rows)} for {len(run_dirs)} runs"
    checked = 0
    for row, run_dir in zip(rows, run_dirs, strict=True):
        assert Path(row["path"]).resolve() == run_dir.resolve()
        metrics = plain_metrics(run_dir)
        for column, cell in row.items():
            if ":" not in column:
                continue
            expected = expected_cell(metrics, column)
            if expected is None:
                assert cell == "", f"{run_dir.name} {column}: expected empty (never logged), got {cell!r}"
            else:
                assert float(cell) == expected, f"{run_dir.name} {column}: table {cell}, metrics {expected}"
                checked += 1
    return checked
