"""The comparison table: one row per (metric, aggregate), one column per run; rendered for terminal, Markdown, CSV.

"final" is the value at the last step that logged the metric; "best" is the maximum over steps (only for the
success rates, where higher is better). Held-out evaluations of the runs' checkpoints add rows of their own.
A run that never logged a metric gets an empty cell and a note.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Literal

from verl_asyncweb.compare import held_out
from verl_asyncweb.compare import metric_names as M
from verl_asyncweb.compare.runs import Run

Aggregate = Literal["final", "best"]
MISSING = "n/a"


@dataclass(frozen=True)
class TableRow:
    """One metric row of the table.

    Attributes:
        label: Human label, e.g. ``success rate (easy)``.
        metric: Metric name as logged.
        aggregate: ``final`` or ``best``.
    """

    label: str
    metric: str
    aggregate: Aggregate

    @property
    def key(self) -> str:
        """Machine column name used in the CSV, e.g. ``asyncweb/success_rate:best``."""
        return f"{self.metric}:{self.aggregate}"


def _success_rows() -> list[TableRow]:
    rows = []
    for metric, label in (
        (M.SUCCESS_RATE, "success rate"),
        (M.SUCCESS_RATE_EASY, "success rate (easy)"),
        (M.SUCCESS_RATE_MEDIUM, "success rate (medium)"),
        (M.SUCCESS_RATE_HARD, "success rate (hard)"),
    ):
        rows.append(TableRow(f"{label}, final", metric, "final"))
        rows.append(TableRow(f"{label}, best", metric, "best"))
    return rows


TABLE_ROWS: tuple[TableRow, ...] = (
    *_success_rows(),
    TableRow("steps/traj (success)", M.STEPS_PER_TRAJ_SUCCESS, "final"),
    TableRow("steps/traj (failure)", M.STEPS_PER_TRAJ_FAILURE, "final"),
    TableRow("response tokens/step (success)", M.RESPONSE_TOKENS_PER_STEP_SUCCESS, "final"),
    TableRow("response tokens/step (failure)", M.RESPONSE_TOKENS_PER_STEP_FAILURE, "final"),
    TableRow("memory JSON bytes", M.MEMORY_JSON_BYTES, "final"),
    TableRow("memory key count", M.MEMORY_KEY_COUNT, "final"),
    TableRow("memory generic-key ratio", M.MEMORY_GENERIC_KEY_RATIO, "final"),
    TableRow("invalid-action rate", M.INVALID_ACTION_RATE, "final"),
    TableRow("clip frac (decoupled)", M.DECOUPLED_CLIP_FRAC, "final"),
    TableRow("clip frac (naive ratio)", M.DECOUPLED_NAIVE_CLIP_FRAC, "final"),
    TableRow("dropped frac (decoupled)", M.DECOUPLED_DROPPED_FRAC, "final"),
    TableRow("pg clipfrac (verl)", M.VERL_PG_CLIPFRAC, "final"),
    TableRow("trajectories/hour", M.TRAJS_PER_HOUR, "final"),
)
"""Rows of the comparison table, in display order (issue 7)."""


def held_out_rows(runs: list[Run]) -> list[TableRow]:
    """Rows for the held-out evaluations any of the runs has (:mod:`verl_asyncweb.compare.held_out`): the last
    evaluated checkpoint's figure, and for success also the best of the start and every checkpoint."""
    rows = []
    metrics = {name for run in runs for name in run.metrics if name.startswith(held_out.PREFIX)}
    for metric in sorted(metrics, key=lambda name: (not name.endswith("/success_rate"), name)):
        split, figure = metric.removeprefix(held_out.PREFIX).split("/", 1)
        seeds, temperature = split.rsplit("_T", 1)
        label = f"{seeds} {figure.replace('_', ' ')} (T={temperature})"
        rows.append(TableRow(f"{label}, last checkpoint", metric, "final"))
        if figure == "success_rate":
            rows.append(TableRow(f"{label}, best evaluated", metric, "best"))
    return rows


def cell_value(run: Run, row: TableRow) -> float | None:
    """The number shown for ``run`` in ``row``, or ``None`` if the run never logged the metric."""
    series = run.series(row.metric)
    if not series:
        return None
    if row.aggregate == "best":
        return max(value for _, value in series)
    return series[-1][1]


def format_number(value: float | None) -> str:
    """Display form: 4 significant digits, integers without a decimal point, :data:`MISSING` for ``None``."""
    if value is None:
        return MISSING
    if float(value).is_integer() and abs(value) < 1e12:
        return str(int(value))
    return f"{value:.4g}"


@dataclass
class ComparisonTable:
    """The computed table.

    Attributes:
        runs: Compared runs, in column order.
        rows: Metric rows.
        values: ``values[i][j]`` is row ``i`` for run ``j``.
        notes: Per-run notes about metrics a run never logged.
        warnings: Per-run problems found while reading (corrupt lines, missing files).
    """

    runs: list[Run]
    rows: list[TableRow]
    values: list[list[float | None]]
    notes: list[str]
    warnings: list[str]

    def header_rows(self) -> list[tuple[str, list[str]]]:
        """Descriptive rows shown above the metrics: recipe, variant, steps, wall time, finished."""

        def wall_h(run: Run) -> str:
            series = run.series(M.WALL_S)
            return f"{series[-1][1] / 3600:.2f}" if series else MISSING

        return [
            ("recipe", [run.recipe or MISSING for run in self.runs]),
            ("variant", [run.variant for run in self.runs]),
            ("last step", [MISSING if run.last_step is None else str(run.last_step) for run in self.runs]),
            ("wall time (h)", [wall_h(run) for run in self.runs]),
            ("finished", ["yes" if run.finished else "no" for run in self.runs]),
        ]

    def display_rows(self) -> list[list[str]]:
        """Header plus body as strings, first column the label."""
        body = [[row.label, *map(format_number, vals)] for row, vals in zip(self.rows, self.values, strict=True)]
        return [["metric", *(run.name for run in self.runs)], *([k, *v] for k, v in self.header_rows()), *body]


def build_table(runs: list[Run], rows: tuple[TableRow, ...] | None = None) -> ComparisonTable:
    """Compute every cell and the notes on what each run lacks; the rows are :data:`TABLE_ROWS` and the runs'
    :func:`held_out_rows` unless given."""
    rows = rows if rows is not None else (*TABLE_ROWS, *held_out_rows(runs))
    values = [[cell_value(run, row) for run in runs] for row in rows]
    notes: list[str] = []
    for j, run in enumerate(runs):
        missing = sorted({row.metric for i, row in enumerate(rows) if values[i][j] is None})
        if missing:
            notes.append(f"{run.name}: never logged {', '.join(missing)} (shown as {MISSING})")
    warnings = [f"{run.name}: {warning}" for run in runs for warning in run.warnings]
    return ComparisonTable(list(runs), list(rows), values, notes, warnings)


def render_terminal(table: ComparisonTable) -> str:
    """Fixed-width plain-text table, followed by warnings and notes."""
    rows = table.display_rows()
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]

    def line(cells: list[str]) -> str:
        return "  ".join([cells[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))])

    lines = [line(r) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    if table.warnings:
        lines += ["", "Warnings:"] + [f"  WARNING: {w}" for w in table.warnings]
    if table.notes:
        lines += ["", "Notes:"] + [f"  - {note}" for note in table.notes]
    return "\n".join(lines)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(table: ComparisonTable) -> str:
    """GitHub Markdown table followed by a Notes list when there is anything to note."""
    rows = table.display_rows()
    lines = [
        "| " + " | ".join(_md_cell(c) for c in rows[0]) + " |",
        "|" + "|".join([" --- "] + [" ---: "] * (len(rows[0]) - 1)) + "|",
    ]
    lines += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows[1:]]
    if table.warnings:
        lines += ["", "**Warnings**", ""] + [f"- WARNING: {_md_cell(w)}" for w in table.warnings]
    if table.notes:
        lines += ["", "**Notes**", ""] + [f"- {_md_cell(note)}" for note in table.notes]
    return "\n".join(lines) + "\n"


def render_csv(table: ComparisonTable) -> str:
    """One row per run; metric columns named ``<metric>:<final|best>`` with full precision, empty when missing."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["run", "path", "recipe", "variant", "last_step", "finished", *(row.key for row in table.rows)])
    for j, run in enumerate(table.runs):
        cells = ["" if table.values[i][j] is None else repr(table.values[i][j]) for i in range(len(table.rows))]
        last = "" if run.last_step is None else str(run.last_step)
        writer.writerow([run.name, str(run.path), run.recipe or "", run.variant, last, int(run.finished), *cells])
    return out.getvalue()
