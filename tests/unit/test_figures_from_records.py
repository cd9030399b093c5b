"""The learning figures the docs state for an experiment with a stored record (docs/results/) are what the record
gives: the tables as ``bench learning`` prints them, and the figures quoted in prose."""

import json
from pathlib import Path

import pytest

from verl_asyncweb.bench.learning.tables import arm_figure_rows, arm_summaries

ROOT = Path(__file__).parents[2]
RECORDS = {"branch_credit": ROOT / "docs" / "results" / "branch_credit.json"}


def _points(value: float) -> str:
    """A difference in points as the prose writes it: +14.6, −1.3 (a minus sign)."""
    return f"{100 * value:+.1f}".replace("-", "−")


@pytest.fixture(scope="module")
def branch_credit() -> dict:
    return json.loads(RECORDS["branch_credit"].read_text())


def test_the_step_credit_tables_are_the_records(branch_credit):
    page = (ROOT / "docs" / "learning.md").read_text()
    rows = [row for row in [*arm_summaries(branch_credit), *arm_figure_rows(branch_credit)] if row.startswith("|")]
    assert len(rows) >= 12
    assert [row for row in rows if row not in page] == []


def test_the_step_credit_figures_in_prose_are_the_records(branch_credit):
    from verl_asyncweb.compare.confidence import difference_interval, holm

    seeds: dict[str, list[list[float]]] = {}
    for run in branch_credit["arms"]:  # this record predates per-instance outcomes: one 0/1 per episode
        seeds.setdefault(run["arm"], []).append([float(value) for value in run["held_out_after_outcomes"]])
    pairs = [("rl", "branch_credit"), ("rl", "branch"), ("branch_credit", "branch")]
    intervals = holm([lambda level, p=p: difference_interval(*map(seeds.get, p), level) for p in pairs])
    found = dict(zip(pairs, intervals, strict=True))
    credit, plain = found[("branch_credit", "branch")], found[("rl", "branch_credit")]
    before = branch_credit["held_out_before"]
    gain = sum(sum(s) / len(s) for s in seeds["branch_credit"]) / 3 - before
    welch = f"[{_points(credit.seed_low)}, {_points(credit.seed_high)}]"
    stated = {
        "README.md": [f"ended {_points(credit.mean)[1:]} points above", welch],
        "docs/algorithms.md": [f"{_points(gain)} points", f"{_points(credit.mean)} points", welch],
        "docs/learning.md": [
            f"{before:.1%} warm start ({_points(gain)} points)",
            f"`branch_credit` − `branch` is {_points(credit.mean)} points, Welch\n{welch}",
            f"is {_points(plain.mean)} points",
            f"(Welch [{_points(plain.seed_low)}, {_points(plain.seed_high)}] after Holm)",
        ],
    }
    assert not credit.resolved and not plain.resolved
    for name, figures in stated.items():
        text = (ROOT / name).read_text()
        assert [figure for figure in figures if figure not in text] == [], name
