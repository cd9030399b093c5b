"""Run folder: one metrics file per attempt, later attempts win, corrupt lines skipped; task datasets."""

import json

import pytest

from verl_asyncweb.run_folder import RunFolder
from verl_asyncweb.task_dataset import load_task_sources, parse_source, task_from_json, task_rows


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_attempts_get_new_metrics_files_and_later_lines_win(tmp_path):
    run = RunFolder(tmp_path).prepare()
    first = run.next_metrics_path()
    assert first.name == "metrics.jsonl"
    _write(first, [{"step": 1, "data": {"a": 1.0}}, {"step": 2, "data": {"a": 2.0}}])
    second = run.next_metrics_path()
    assert second.name == "metrics.attempt-1.jsonl"
    _write(second, [{"step": 2, "data": {"a": 20.0, "b": 1.0}}, {"step": 3, "data": {"a": 3.0}}])
    second.write_text(second.read_text() + '{"step": 4, "data": {"a"\n')  # a line cut by a kill
    assert run.next_metrics_path().name == "metrics.attempt-2.jsonl"
    assert run.read_metrics() == {1: {"a": 1.0}, 2: {"a": 20.0, "b": 1.0}, 3: {"a": 3.0}}
    summary = run.write_summary(started_at=0.0, extra={"recipe": "x"})
    assert summary["last_step"] == 3 and summary["final_metrics"] == {"a": 3.0}
    assert json.loads(run.summary_path.read_text())["recipe"] == "x"


def test_task_sources_parse_and_round_trip():
    assert parse_source("miniwob:click-test,enter-text") == ("miniwob", {"names": ["click-test", "enter-text"]})
    assert parse_source("sites") == ("sites", {})
    tasks = load_task_sources(["miniwob:click-test", "sites:shop/sku-p6"], seed=3)
    assert [t.source for t in tasks] == ["miniwob", "site"]
    assert tasks[-1].task_id == "site/shop/sku-p6"
    rows = task_rows(tasks)
    assert all(row["agent_name"] == "web_agent" for row in rows)
    assert [task_from_json(row["extra_info"]["task"]) for row in rows] == tasks
    assert {row["extra_info"]["split"] for row in rows} == {"train"}
    assert {row["extra_info"]["split"] for row in task_rows(tasks, "val")} == {"val"}


def test_unknown_site_task_is_named():
    with pytest.raises(ValueError, match="unknown bundled site tasks \\['site/shop/nope'\\]"):
        load_task_sources(["sites:shop/nope"])


def test_bad_task_record_is_a_clear_error():
    with pytest.raises(ValueError, match="bad task record"):
        task_from_json('{"task_id": "x"}')


def test_screenshots_are_sharded_and_a_flat_folder_of_an_older_run_is_still_read(tmp_path):
    from verl_asyncweb.run_folder import find_screenshot, screenshot_relpath

    key = "ab" + "0" * 62
    assert screenshot_relpath(key) == f"screens/ab/{key}.jpg"
    assert find_screenshot(tmp_path, key) == tmp_path / "screens" / "ab" / f"{key}.jpg", "new screenshots: sharded"
    flat = tmp_path / "screens" / f"{key}.jpg"
    flat.parent.mkdir(parents=True)
    flat.write_bytes(b"jpeg")
    assert find_screenshot(tmp_path, key) == flat, "a run folder written before sharding"
    sharded = tmp_path / screenshot_relpath(key)
    sharded.parent.mkdir(parents=True)
    sharded.write_bytes(b"jpeg")
    assert find_screenshot(tmp_path, key) == sharded
