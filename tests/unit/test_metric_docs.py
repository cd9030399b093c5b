"""The Metrics table of docs/metrics.md is the list the end-to-end runs check (one place, shown in both)."""

import re
from pathlib import Path

from verl_asyncweb.compare.metric_names import DOCUMENTED_METRICS, documented_metrics_table, promised_every_step

METRICS_DOC = Path(__file__).parents[2] / "docs" / "metrics.md"


def _metrics_section() -> str:
    text = METRICS_DOC.read_text()
    return text[text.index("## Metrics\n") : text.index("\n## ", text.index("## Metrics\n") + 1)]


def test_docs_metrics_table_is_the_documented_list():
    section = _metrics_section()
    assert documented_metrics_table() in section
    rows = re.findall(r"^\| `([^`]+)` \|", section, flags=re.MULTILINE)
    assert rows == list(DOCUMENTED_METRICS)


def test_every_step_promises_depend_on_the_loss():
    decoupled, vanilla = promised_every_step("decoupled_ppo"), promised_every_step("vanilla")
    assert "actor/decoupled_clip_rate" in decoupled and "actor/decoupled_clip_rate" not in vanilla
    assert set(vanilla) < set(decoupled)
    assert "asyncweb/screenshots/from_run_folder" in vanilla and "asyncweb/success_rate" not in vanilla


def test_every_metric_name_the_docs_cite_is_one_the_code_logs():
    """A backticked ``asyncweb/...`` name in a user page (dated ``history-*`` records excepted) is a string the
    package writes: a renamed or misspelt metric in the docs (``asyncweb/branch_fallbacks`` for
    ``asyncweb/branch/fallbacks``) fails here."""
    import re

    package = Path(__file__).parents[2] / "verl_asyncweb"
    logged = {
        match.group(1)
        for source in package.rglob("*.py")
        for match in re.finditer(r'(?<!f)"(asyncweb/[A-Za-z0-9_/.\-]+)"', source.read_text())
    }
    cited = {
        (match.group(1), page.name)
        for page in METRICS_DOC.parent.glob("*.md")
        if not page.name.startswith("history-")
        for match in re.finditer(r"`(asyncweb/[A-Za-z0-9_/.\-]+)`", page.read_text())
    }
    assert len(cited) > 40 and len(logged) > 40
    assert sorted((name, page) for name, page in cited if name not in logged) == []
