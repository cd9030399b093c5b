"""viewer: episode normalization, memory diffs, safe embedding, and the page in headless Chromium."""

from __future__ import annotations

import json

import pytest
from runfolder_fixtures import HOSTILE, SCREEN_SIZE, VIEWPORT, build_run, episode

from verl_asyncweb.viewer.__main__ import main
from verl_asyncweb.viewer.episodes import load_episodes, screenshot_url
from verl_asyncweb.viewer.memory_diff import diff_memory
from verl_asyncweb.viewer.page import embed_json, write_viewer


def test_diff_memory_object_marks_added_changed_removed_keys():
    view = diff_memory({"a": 1, "b": "x", "gone": 0}, {"a": 1, "b": "y", "new": [1]}, first=False)
    assert [(r.key, r.status) for r in view.rows] == [("a", "same"), ("b", "changed"), ("new", "added")]
    assert view.removed == ["gone"] and view.kind == "object"


def test_diff_memory_first_step_and_raw_text_by_line():
    assert {r.status for r in diff_memory(None, {"a": 1}, first=True).rows} == {"initial"}
    view = diff_memory({"a": 1}, "a: 1\nnew line", first=False)
    assert view.kind == "text" and [r.status for r in view.rows] == ["same", "added"]


def test_screenshot_url_is_relative_to_page_and_refuses_escapes(tmp_path):
    episodes, page = tmp_path / "episodes", tmp_path / "viewer"
    assert screenshot_url("screens/a b.jpg", episodes, page) == ("../episodes/screens/a%20b.jpg", False)
    for bad in ("../config.yaml", "/etc/passwd", "javascript:alert(1)", "", None):
        assert screenshot_url(bad, episodes, page) == (None, False)


def test_embed_json_cannot_close_the_script_element():
    text = embed_json({"x": "</script><script>alert(1)</script>&"})
    assert "<" not in text and ">" not in text and json.loads(text)["x"].startswith("</script>")


def test_load_episodes_missing_screenshot_and_corrupt_line_become_warnings(tmp_path):
    run = build_run(tmp_path / "run", missing_screenshot=True, corrupt_episode=True, episodes=True)
    result = load_episodes(run, run / "viewer")
    assert len(result.episodes) == 4 and result.total == 4
    assert result.missing_screenshots == [("t-ok-1", 1, "screens/" + "0" * 64 + ".jpg")]
    assert any("corrupt episode line" in w for w in result.warnings)
    assert any("screenshot(s) missing" in w for w in result.warnings)


def test_viewer_cli_writes_index_next_to_run(tmp_path, capsys):
    run = build_run(tmp_path / "run")
    assert main([str(run)]) == 0
    assert (run / "viewer" / "index.html").is_file()
    assert "4 episodes, 0 warnings" in capsys.readouterr().out


def test_write_viewer_max_episodes_keeps_newest_with_warning(tmp_path):
    report = write_viewer(build_run(tmp_path / "run"), max_episodes=2)
    assert report.episodes == 2 and any("newest 2 of 4" in w for w in report.warnings)


async def _open(page, uri: str) -> None:
    await page.goto(uri)
    await page.wait_for_selector("body[data-ready='true']")


def _assert_clean(log) -> None:
    assert log.console_errors == [] and log.page_errors == [], (log.console_errors, log.page_errors)
    assert log.blocked == []


@pytest.mark.browser
async def test_viewer_page_renders_filters_and_shows_screenshot_with_click_marker(viewer_page, tmp_path):
    page, log = viewer_page
    run = build_run(tmp_path / "run", hostile=True)
    report = write_viewer(run)
    await _open(page, report.index.as_uri())

    rows = page.locator("tr.episode-row")
    assert await rows.count() == 4
    await page.select_option("#filter-outcome", "success")
    visible = page.locator("tr.episode-row:visible")
    assert await visible.count() == 2
    assert set(await visible.evaluate_all("rows => rows.map(r => r.dataset.outcome)")) == {"success"}
    assert await page.locator("#episode-count").text_content() == "showing 2 of 4"
    await page.fill("#filter-pv-min", "3")  # t-ok-1 ran on policy versions 1-2 only
    assert await visible.evaluate_all("rows => rows.map(r => r.dataset.trajId)") == ["t-ok-2"]
    await page.fill("#filter-pv-min", "")
    await page.select_option("#filter-task", "book-flight")
    assert await visible.evaluate_all("rows => rows.map(r => r.dataset.trajId)") == ["t-ok-1"]
    await page.select_option("#filter-task", "all")
    await page.select_option("#filter-outcome", "all")
    await page.select_option("#filter-difficulty", "easy")  # t-ok-1 (success) and t-fail-2 (failure)
    assert await visible.evaluate_all("rows => rows.map(r => r.dataset.trajId)") == ["t-ok-1", "t-fail-2"]
    await page.select_option("#filter-outcome", "failure")
    assert await visible.evaluate_all("rows => rows.map(r => r.dataset.trajId)") == ["t-fail-2"]
    await page.select_option("#filter-difficulty", "hard")
    assert await visible.evaluate_all("rows => rows.map(r => r.dataset.trajId)") == ["t-fail-1"]
    assert await page.locator("#episode-count").text_content() == "showing 1 of 4"
    await page.select_option("#filter-difficulty", "all")
    await page.select_option("#filter-outcome", "all")

    await page.locator("tr.episode-row[data-traj-id='t-ok-2']").click()
    step = page.locator("#episode-detail article.step").first
    image = step.locator("img.screenshot")
    await image.scroll_into_view_if_needed()
    await page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=await image.element_handle())
    assert await image.evaluate("img => img.naturalWidth") == SCREEN_SIZE[0]
    marker = step.locator(".click-marker")
    assert await marker.is_visible()
    img_box, marker_box = await image.bounding_box(), await marker.bounding_box()
    # click_xy (480, 120) in a 640x480 viewport, scaled to the displayed screenshot.
    expected_x = img_box["x"] + 480 / VIEWPORT[0] * img_box["width"]
    expected_y = img_box["y"] + 120 / VIEWPORT[1] * img_box["height"]
    assert abs(marker_box["x"] + marker_box["width"] / 2 - expected_x) < 2
    assert abs(marker_box["y"] + marker_box["height"] / 2 - expected_y) < 2
    typed = page.locator("#episode-detail article.step").nth(1).locator(".typed-overlay")
    assert (await typed.text_content()).startswith("\u2328 Paris")

    detail = page.locator("#episode-detail")
    assert "final reward 1" in await detail.locator(".final-reward").text_content()
    assert await detail.locator(".evaluator-reasons li").first.text_content() == "flight booked"
    assert await detail.locator("tr.mem-added, tr.mem-changed").count() > 0
    # Hostile model text is shown as text, never parsed as HTML.
    assert HOSTILE in await detail.locator(".intention pre").first.text_content()
    assert await page.evaluate("window.__pwned") is None
    assert await page.locator("#episode-detail img:not(.screenshot)").count() == 0
    await page.screenshot(path=str(tmp_path / "viewer.png"), full_page=True)
    assert (tmp_path / "viewer.png").stat().st_size > 0
    _assert_clean(log)


@pytest.mark.browser
async def test_viewer_page_missing_screenshot_and_corrupt_metrics_show_visible_warning(viewer_page, tmp_path):
    page, log = viewer_page
    run = build_run(tmp_path / "run", missing_screenshot=True, corrupt_metrics=True, corrupt_episode=True)
    await _open(page, write_viewer(run).index.as_uri())
    warnings = page.locator("#warnings")
    assert await warnings.is_visible()
    text = await warnings.text_content()
    assert "corrupt metrics line" in text and "corrupt episode line" in text and "screenshot(s) missing" in text
    await page.locator("tr.episode-row[data-traj-id='t-ok-1']").click()
    placeholder = page.locator("#episode-detail article.step").nth(1).locator(".shot-missing")
    assert await placeholder.is_visible()
    assert "screenshot missing" in await placeholder.text_content()
    await page.screenshot(path=str(tmp_path / "viewer-warnings.png"), full_page=True)
    _assert_clean(log)


def _branch_run(run_dir):
    """A run folder whose group branched at step 1: the anchor's kept point, the anchor and two members."""
    run = build_run(run_dir, episodes=False)
    episodes_dir = run / "episodes"
    episodes_dir.mkdir(parents=True, exist_ok=True)
    point = "g-anchor@1"
    records = []
    for traj, role, success in (("g-anchor", "anchor", True), ("g-m1", "member", False), ("g-m2", "member", True)):
        record = episode(episodes_dir, traj, "click-test", "easy", success, 1, n_steps=3)
        if role == "member":
            record["steps"] = record["steps"][1:]  # members play from the anchor's state before step 1
        records.append({**record, "branch": {"role": role, "point": point, "step": 1}})
    (episodes_dir / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (episodes_dir / "branch_points").mkdir()
    (episodes_dir / "branch_points" / f"{point}.json").write_text("{}")
    return run


def test_branch_view_offers_the_replay_command_only_for_a_kept_point(tmp_path):
    run = _branch_run(tmp_path / "run")
    episodes = {ep["traj_id"]: ep for ep in load_episodes(run, run).episodes}
    assert episodes["g-m1"]["branch"] == {"role": "member", "point": "g-anchor@1", "step": 1}
    assert episodes["g-m1"]["replay_command"] == f"python -m verl_asyncweb.replay {run.resolve()} g-m1 1"
    (run / "episodes" / "branch_points" / "g-anchor@1.json").unlink()
    assert load_episodes(run, run).episodes[0]["replay_command"] is None


@pytest.mark.browser
async def test_viewer_page_shows_a_groups_branches_side_by_side(viewer_page, tmp_path):
    page, log = viewer_page
    await _open(page, write_viewer(_branch_run(tmp_path / "run")).index.as_uri())
    await page.locator("tr.episode-row[data-traj-id='g-m1']").click()
    columns = page.locator("#episode-detail .branches .branch-column")
    assert await columns.evaluate_all("cols => cols.map(c => c.dataset.trajId)") == ["g-anchor", "g-m1", "g-m2"]
    assert "3 branches from state g-anchor@1 (before step 1)" in await page.locator(".branches h3").text_content()
    for i in range(3):  # every column starts at the shared state: steps 1 and 2, side by side
        assert await columns.nth(i).locator(".branch-step > .muted").all_text_contents() == ["step 1", "step 2"]
    boxes = [await columns.nth(i).bounding_box() for i in range(3)]
    assert boxes[0]["x"] < boxes[1]["x"] < boxes[2]["x"] and abs(boxes[0]["y"] - boxes[2]["y"]) < 1
    command = page.locator("#episode-detail article.step[data-step-index='1'] .replay-command")
    assert (await command.text_content()).endswith(" g-m1 1")
    await columns.nth(0).locator(".branch-head").click()
    assert await page.locator("#episode-detail").get_attribute("data-traj-id") == "g-anchor"
    assert await page.locator("#episode-detail article.step[data-step-index='0'] .replay-command").count() == 0
    _assert_clean(log)
