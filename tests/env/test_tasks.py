"""load_tasks: MiniWoB++ registry, WebGym JSONL validation, difficulty slices."""

import json

import pytest

from verl_asyncweb.env.tasks import Task, difficulty_slice, load_tasks
from verl_asyncweb.env.tasks.webgym import TaskFileError


def webgym_row(**overrides):
    row = {
        "task_id": "t1",
        "task_name": "Find the opening hours of the library",
        "website": "https://library.example",
        "domain": "education",
        "subdomain": "libraries",
        "difficulty": 5,
        "evaluator_reference": [{"description": "Shows the opening hours page", "difficulty": 1}],
        "reference_answer": "9-17",
        "benchmark_name": "webgym",
    }
    row.update(overrides)
    return row


def write_jsonl(tmp_path, rows, raw_lines=()):
    path = tmp_path / "tasks.jsonl"
    lines = [json.dumps(r) for r in rows] + list(raw_lines)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("difficulty, expected", [(1, "easy"), (3, "easy"), (4, "medium"), (6, "medium"), (7, "hard")])
def test_difficulty_slices_follow_webgym(difficulty, expected):
    assert difficulty_slice(difficulty) == expected


def test_miniwob_loads_every_registered_task_with_html():
    tasks = load_tasks("miniwob")
    assert len(tasks) >= 100
    assert all(t.source == "miniwob" and t.evaluator == "miniwob" for t in tasks)


def test_miniwob_seed_is_reproducible_and_distinct_per_episode():
    a = load_tasks("miniwob", names=["click-test"], seed=3, episodes_per_task=3)
    b = load_tasks("miniwob", names=["click-test"], seed=3, episodes_per_task=3)
    c = load_tasks("miniwob", names=["click-test"], seed=4, episodes_per_task=3)
    assert [t.seed for t in a] == [t.seed for t in b]
    assert len({t.seed for t in a}) == 3 and [t.seed for t in a] != [t.seed for t in c]


def test_miniwob_unknown_name_gets_the_nearest_names_and_the_count():
    with pytest.raises(
        ValueError,
        match=r"unknown MiniWoB\+\+ task\(s\) \['click-tset'\]; click-tset: did you mean "
        r"click-test.*\(\d{3} tasks: python -c",
    ):
        load_tasks("miniwob", names=["click-tset"])


def test_webgym_jsonl_loads_fields_and_step_budgets(tmp_path):
    path = write_jsonl(tmp_path, [webgym_row(), webgym_row(task_id="t2", difficulty=8, website="shop.example")])
    train = load_tasks(str(path))
    assert [t.max_steps for t in train] == [20, 30]
    assert train[0].rubric[0].description == "Shows the opening hours page"
    assert train[0].reference_answer == "9-17" and train[0].slice == "medium"
    assert train[1].start_url == "https://shop.example"
    (tmp_path / "ported").mkdir()
    ported = write_jsonl(tmp_path / "ported", [webgym_row(website="localhost:8000/shop")])
    assert load_tasks(str(ported))[0].start_url == "https://localhost:8000/shop"
    assert [t.max_steps for t in load_tasks(path, split="test")] == [50, 70]


@pytest.mark.parametrize(
    "row_or_line, message",
    [
        ('{"task_id": "x",', r"tasks.jsonl:2: invalid JSON"),
        ("[1, 2]", r"tasks.jsonl:2: each line must be a JSON object"),
        (webgym_row(task_id="t2", task_name=None), r"tasks.jsonl:2: field 'task_name' is missing"),
        (webgym_row(task_id="t2", difficulty="hard"), r"tasks.jsonl:2: field 'difficulty' must be int"),
        (webgym_row(task_id="t2", evaluator_reference=[{}]), r"tasks.jsonl:2: field 'evaluator_reference\[0\]"),
        (webgym_row(task_id="t1"), r"tasks.jsonl:2: field 'task_id' repeats"),
        (webgym_row(task_id="t2", website=""), r"tasks.jsonl:2: field 'website' must not be empty"),
        *(
            (webgym_row(task_id="t2", website=url), r"tasks.jsonl:2: field 'website' must be an http\(s\) URL")
            for url in ("file:///etc/passwd", "javascript:alert(1)", "data:text/html,<b>x</b>", "ftp://files.example")
        ),
    ],
)
def test_bad_webgym_line_names_line_number_and_field(tmp_path, row_or_line, message):
    if isinstance(row_or_line, dict):
        path = write_jsonl(tmp_path, [webgym_row(), row_or_line])
    else:
        path = write_jsonl(tmp_path, [webgym_row()], [row_or_line])
    with pytest.raises(TaskFileError, match=message):
        load_tasks(path)


def test_unknown_source_says_what_is_allowed():
    with pytest.raises(ValueError, match="'sites', 'browsergym:<benchmark>.<task glob>' or an existing WebGym .jsonl"):
        load_tasks("nothing-here.jsonl")


def test_task_validates_max_steps():
    with pytest.raises(ValueError, match="max_steps must be > 0, got 0"):
        Task("x", "do", "site", 1, 0, "/shop/")
