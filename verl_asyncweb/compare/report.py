"""Write a full comparison into one folder: table.md, table.csv, table.txt and plots/{step,wall}/*.png."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from verl_asyncweb.compare.plots import PLOT_METRICS, write_plots, write_variant_plots
from verl_asyncweb.compare.runs import Run
from verl_asyncweb.compare.table import build_table, render_csv, render_markdown, render_terminal
from verl_asyncweb.compare.variants import group_variants, is_success_row, render_variants

VARIANTS_NOTE = (
    "mean [95% CI]: bootstrap over seeds and held-out episodes; a difference is resolved when that interval and "
    "Welch's t over the runs' means both exclude zero (one run of a variant resolves nothing)"
)

logger = logging.getLogger(__name__)


@dataclass
class ComparisonReport:
    """Paths and text of a written comparison.

    Attributes:
        out_dir: The folder written.
        terminal: The table as plain text, followed by notes (what the CLI prints).
        markdown: Path of ``table.md``.
        csv: Path of ``table.csv``.
        plots: Written PNG files.
        notes: Missing metrics and plot notes.
        warnings: Problems found while reading the runs.
    """

    out_dir: Path
    terminal: str
    markdown: Path
    csv: Path
    plots: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def write_comparison(runs: list[Run], out_dir: str | Path) -> ComparisonReport:
    """Compute the table, write it in three formats and draw the plots.

    Args:
        runs: Loaded runs (see :func:`verl_asyncweb.compare.runs.load_runs`); at least one.
        out_dir: Destination folder (created).

    Returns:
        What was written.

    Raises:
        ValueError: If ``runs`` is empty.
    """
    if not runs:
        raise ValueError("compare needs at least one run folder, got none")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = build_table(runs)
    plots = write_plots(runs, out / "plots", tuple(dict.fromkeys((*PLOT_METRICS, *(row.metric for row in table.rows)))))
    table.notes.extend(plots.notes)
    pooled = []
    variants = group_variants(runs)
    if any(len(variant.runs) > 1 for variant in variants):
        pooled = [
            f"Variants: runs of one setup (seeds) pooled, {VARIANTS_NOTE}",
            "",
            *render_variants(variants, table.rows),
        ]
        success = tuple(row.metric for row in table.rows if is_success_row(row))
        plots.files.extend(write_variant_plots(variants, out / "plots" / "variants", success).files)
    md_path, csv_path = out / "table.md", out / "table.csv"
    md_path.write_text(render_markdown(table) + "".join(f"\n{line}" for line in pooled), encoding="utf-8")
    csv_path.write_text(render_csv(table), encoding="utf-8")
    text = "\n".join([render_terminal(table), *([""] + pooled if pooled else [])])
    (out / "table.txt").write_text(text + "\n", encoding="utf-8")
    logger.info("comparison of %d runs written to %s", len(runs), out)
    return ComparisonReport(out, text, md_path, csv_path, plots.files, table.notes, table.warnings)
