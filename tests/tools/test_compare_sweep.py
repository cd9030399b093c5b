"""compare --sweep: expansion of comma lists, sequential launches, resume by skipping finished variants."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from compare_checks import assert_comparison_matches_metrics

from verl_asyncweb.compare.cli import main
from verl_asyncweb.compare.sweep import default_sweep_dir, expand, parse_axes, run_sweep, split_values

FAKE_MAIN = [sys.executable, str(Path(__file__).with_name("fake_trainer_main.py"))]


def launches(sweep_dir: Path) -> list[list[str]]:
    path = sweep_dir / "launches.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_split_values_keeps_bracketed_lists_whole():
    assert split_values("a,[1,2],'x,y',b") == ["a", "[1,2]", "'x,y'", "b"]


def test_expand_is_cartesian_product_with_fixed_keys_in_every_variant():
    axes = parse_axes(["recipe=cpu_smoke", "asyncweb.algo.step_norm=traj,const", "asyncweb.algo.estimator=grpo,rloo"])
    variants = expand(axes)
    assert [v.name for v in variants] == [
        "step_norm-traj__estimator-grpo",
        "step_norm-traj__estimator-rloo",
        "step_norm-const__estimator-grpo",
        "step_norm-const__estimator-rloo",
    ]
    assert variants[3].overrides == (
        "recipe=cpu_smoke",
        "asyncweb.algo.step_norm=const",
        "asyncweb.algo.estimator=rloo",
    )


@pytest.mark.parametrize(
    "tokens, message",
    [
        (["recipe"], "must be KEY=V1"),
        (["a=1,"], "must be KEY=V1"),
        (["a=1", "a=2"], "given twice"),
        (["trainer.default_local_dir=x"], "use --sweep-dir"),
    ],
)
def test_parse_axes_rejects_bad_tokens_with_clear_error(tokens, message):
    with pytest.raises(ValueError, match=message):
        parse_axes(tokens)


def test_default_sweep_dir_is_stable_for_the_same_spec():
    axes = parse_axes(["recipe=cpu_smoke", "asyncweb.algo.step_norm=traj,const"])
    assert default_sweep_dir(axes) == default_sweep_dir(
        parse_axes(["recipe=cpu_smoke", "asyncweb.algo.step_norm=traj,const"])
    )
    assert default_sweep_dir(axes).name.startswith("cpu_smoke-")


def test_run_sweep_launches_each_variant_then_skips_finished_on_rerun(tmp_path):
    axes = parse_axes(["recipe=cpu_smoke", "asyncweb.algo.step_norm=traj,const"])
    first = run_sweep(axes, tmp_path / "sweep", FAKE_MAIN, timeout_s=120)
    assert [o.status for o in first] == ["ok", "ok"]
    calls = launches(tmp_path / "sweep")
    assert calls[0] == [
        "recipe=cpu_smoke",
        "asyncweb.algo.step_norm=traj",
        f"trainer.default_local_dir={tmp_path / 'sweep' / 'step_norm-traj'}",
    ]
    again = run_sweep(axes, tmp_path / "sweep", FAKE_MAIN, timeout_s=120)
    assert [o.status for o in again] == ["skipped", "skipped"]
    assert len(launches(tmp_path / "sweep")) == 2
    manifest = json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    assert [v["status"] for v in manifest["variants"]] == ["skipped", "skipped"]


def test_sweep_cli_failed_variant_continues_compares_and_resumes(tmp_path, capsys):
    sweep_dir = tmp_path / "sweep"
    argv = [
        "--sweep",
        "recipe=cpu_smoke",
        "fake.fail=0,1",
        "asyncweb.algo.step_norm=traj,const",
        "--sweep-dir",
        str(sweep_dir),
        "--sweep-command",
        " ".join(FAKE_MAIN),
        "--sweep-timeout-s",
        "120",
    ]
    assert main(argv) == 1  # two variants with fake.fail=1 never write summary.json
    printed = capsys.readouterr().out
    assert "2 variant(s) did not finish" in printed
    names = ["fail-0__step_norm-traj", "fail-0__step_norm-const", "fail-1__step_norm-traj", "fail-1__step_norm-const"]
    assert_comparison_matches_metrics(sweep_dir / "comparison", [sweep_dir / n for n in names])
    assert "summary.json is missing" in (sweep_dir / "comparison" / "table.md").read_text()
    assert main(argv) == 1
    # Resume: only the two unfinished variants are launched again.
    assert [call[-1].rsplit("/", 1)[-1] for call in launches(sweep_dir)[4:]] == names[2:]
