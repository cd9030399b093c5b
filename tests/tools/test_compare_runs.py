"""compare: reading run folders, the table's numbers, the written files and the CLI."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from compare_checks import assert_comparison_matches_metrics
from runfolder_fixtures import build_run

from verl_asyncweb.compare import metric_names as M
from verl_asyncweb.compare.cli import main
from verl_asyncweb.compare.plots import PLOT_METRICS, plot_filename, wall_series
from verl_asyncweb.compare.runs import load_run, read_metrics, unique_names
from verl_asyncweb.compare.table import TABLE_ROWS, build_table, format_number, render_markdown

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def two_runs(tmp_path: Path) -> list[Path]:
    return [
        build_run(tmp_path / "runs" / "norm_traj", seed=1, step_norm="traj", episodes=False),
        build_run(tmp_path / "runs" / "norm_const", seed=2, step_norm="const", episodes=False, resumed=True),
    ]


def test_compare_cli_two_runs_writes_table_and_pngs_matching_metrics(two_runs, tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main([*map(str, two_runs), "--out", str(out)]) == 0
    assert assert_comparison_matches_metrics(out, two_runs) == 2 * len(TABLE_ROWS)
    for metric in PLOT_METRICS:
        for axis in ("step", "wall"):
            png = out / "plots" / axis / plot_filename(metric)
            assert png.read_bytes()[:8] == PNG_MAGIC, f"{png} is not a PNG"
    markdown = (out / "table.md").read_text()
    assert "| metric | norm_traj | norm_const |" in markdown
    printed = capsys.readouterr().out
    assert "success rate, final" in printed and "norm_const" in printed


def test_compare_with_one_run_says_there_is_nothing_to_compare_it_to(two_runs, tmp_path, capsys):
    assert main([str(two_runs[0]), "--out", str(tmp_path / "cmp")]) == 0
    assert (
        capsys.readouterr()
        .out.rstrip()
        .endswith(
            "one run: the report holds its own figures, with nothing to compare them to (give two or more RUN_DIRs)"
        )
    )


def test_compare_markdown_cells_equal_formatted_metric_values(two_runs, tmp_path):
    runs = [load_run(p) for p in two_runs]
    markdown = render_markdown(build_table(runs))
    final = runs[1].series(M.SUCCESS_RATE)[-1][1]
    assert (
        f"| success rate, final | {format_number(runs[0].series(M.SUCCESS_RATE)[-1][1])} | {format_number(final)} |"
        in (markdown)
    )


def test_read_metrics_resumed_attempt_overrides_earlier_steps(tmp_path):
    run = build_run(tmp_path / "r", seed=2, steps=5, resumed=True, episodes=False)
    metrics, corrupt = read_metrics(sorted(run.glob("metrics*.jsonl"), reverse=True))
    assert not corrupt
    # Whatever order the glob returns, load_run must order attempts oldest first.
    series = load_run(run).series(M.SUCCESS_RATE)
    assert [s for s, _ in series] == [1, 2, 3, 4, 5]
    assert all(v >= 0 for _, v in series), "stale -1.0 values from the first attempt leaked through"


def test_read_metrics_skips_null_bool_and_string_values(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"step": 1, "data": {"a": None, "b": True, "c": "x", "d": 2}}) + "\n")
    metrics, corrupt = read_metrics([path])
    assert metrics == {"d": [(1, 2.0)]} and not corrupt


def test_load_run_corrupt_metrics_line_is_skipped_counted_and_warned(tmp_path):
    run = load_run(build_run(tmp_path / "r", corrupt_metrics=True, episodes=False))
    assert len(run.corrupt_lines) == 1 and run.corrupt_lines[0].line_no == 2
    assert any("corrupt metrics line" in w for w in run.warnings)
    assert 99 not in dict(run.series(M.SUCCESS_RATE))


def test_compare_corrupt_line_and_missing_metrics_show_warning_not_crash(tmp_path, capsys):
    good = build_run(tmp_path / "good", corrupt_metrics=True, episodes=False)
    sparse = tmp_path / "sparse"
    sparse.mkdir()
    (sparse / "metrics.jsonl").write_text(json.dumps({"step": 3, "data": {M.SUCCESS_RATE: 0.5}}) + "\n")
    out = tmp_path / "cmp"
    assert main([str(good), str(sparse), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "WARNING: good: skipped 1 corrupt metrics line" in printed
    assert "config.yaml is missing" in printed and "summary.json is missing" in printed
    markdown = (out / "table.md").read_text()
    never_logged = next(line for line in markdown.splitlines() if line.startswith("- sparse: never logged"))
    assert "**Warnings**" in markdown and M.DECOUPLED_CLIP_FRAC in never_logged
    rows = list(csv.DictReader((out / "table.csv").open()))
    assert rows[1][f"{M.SUCCESS_RATE}:final"] == "0.5" and rows[1][f"{M.TRAJS_PER_HOUR}:final"] == ""
    assert_comparison_matches_metrics(out, [good, sparse])
    assert not (out / "plots" / "wall" / plot_filename(M.SUCCESS_RATE)).read_bytes() == b""


def test_compare_run_without_any_metrics_file_is_reported(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    # Alone: nothing to compare, one line and exit code 2; beside a run that logged: a warning in the table.
    assert main([str(empty), "--out", str(tmp_path / "alone")]) == 2
    assert "nothing to compare" in capsys.readouterr().err and not (tmp_path / "alone").exists()
    good = build_run(tmp_path / "good", seed=1, step_norm="traj", episodes=False)
    assert main([str(empty), str(good), "--out", str(tmp_path / "cmp")]) == 0
    assert "no metrics*.jsonl file" in capsys.readouterr().out


def test_compare_cli_not_a_directory_is_a_usage_error(tmp_path, capsys):
    assert main([str(tmp_path / "nope")]) == 2
    assert "run folder must be an existing directory" in capsys.readouterr().err


def test_unique_names_disambiguates_same_folder_names(tmp_path):
    assert unique_names([tmp_path / "a" / "run", tmp_path / "b" / "run"]) == ["a/run", "b/run"]


def test_variant_and_recipe_read_from_config(tmp_path):
    run = load_run(build_run(tmp_path / "r", recipe=None, step_norm="const", loss_mode="vanilla", episodes=False))
    assert run.recipe is None
    assert run.variant == "step_norm=const estimator=grpo loss_mode=vanilla"


def _evaluation(folder: Path, temperature: str, success: float, invalid: float) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    record = {"success": success, "metrics": {M.INVALID_ACTION_RATE: invalid}, "seeds": "held-out"}
    (folder / f"eval_held-out_T{temperature}.json").write_text(json.dumps(record), encoding="utf-8")


def test_held_out_evaluations_of_the_start_and_checkpoints_are_compared_per_temperature(tmp_path):
    warm = tmp_path / "warm_start"
    rl = build_run(tmp_path / "runs" / "rl", seed=1, episodes=False, model_path=warm)
    control = build_run(tmp_path / "runs" / "control", seed=2, episodes=False, model_path=warm, negate_advantage=True)
    _evaluation(warm, "0.7", 0.35, 0.4)
    _evaluation(rl / "global_step_2", "0.7", 0.6, 0.1)
    _evaluation(rl / "global_step_4", "0.7", 0.55, 0.05)
    _evaluation(rl / "global_step_4", "1", 0.3, 0.2)
    _evaluation(control / "global_step_2", "0.7", 0.05, 0.9)
    (control / "global_step_4").mkdir()
    (control / "global_step_4" / "eval_held-out_T0.7.json").write_text('{"success": 0.', encoding="utf-8")

    runs = [load_run(rl), load_run(control)]
    success = "eval/held-out_T0.7/success_rate"
    assert runs[0].series(success) == [(0, 0.35), (2, 0.6), (4, 0.55)]
    assert runs[0].series("eval/held-out_T1/success_rate") == [(4, 0.3)]
    assert runs[1].series(success) == [(0, 0.35), (2, 0.05)]
    # The starting model is drawn at 0 h, each checkpoint at its step's wall time (60 s per step, +5 s for seed 1).
    assert wall_series(runs[0], success) == [(0.0, 0.35), (125 / 3600, 0.6), (245 / 3600, 0.55)]
    assert any("global_step_4/eval_held-out_T0.7.json" in w for w in runs[1].warnings)
    assert (runs[0].variant, runs[1].variant) == (
        "step_norm=traj estimator=grpo loss_mode=decoupled_ppo",
        "step_norm=traj estimator=grpo loss_mode=decoupled_ppo negate_advantage=True",
    )
    table = build_table(runs)
    by_label = {row.label: values for row, values in zip(table.rows, table.values, strict=True)}
    assert by_label["held-out success rate (T=0.7), last checkpoint"] == [0.55, 0.05]
    assert by_label["held-out success rate (T=0.7), best evaluated"] == [0.6, 0.35]
    assert by_label["held-out invalid action rate (T=0.7), last checkpoint"] == [0.05, 0.9]
    assert by_label["held-out success rate (T=1), last checkpoint"] == [0.3, None]

    out = tmp_path / "comparison"
    assert main([str(rl), str(control), "--out", str(out)]) == 0
    for axis in ("step", "wall"):
        assert (out / "plots" / axis / plot_filename(success)).read_bytes().startswith(PNG_MAGIC)
    assert "held-out success rate (T=0.7), last checkpoint" in (out / "table.md").read_text(encoding="utf-8")
