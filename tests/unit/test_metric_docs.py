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
