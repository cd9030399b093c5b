"""``bench choices``: clicks on the options an instruction names, against chance, from hand-made episode records."""

import json

import pytest

from verl_asyncweb.bench.choices import choice_table, element_lines, main, named_options, page_options

OPTION_PAGE = """[0] label "Abc" @(44,202)
[1] input[radio] name=radio "Abc" @(35,192)
[2] label "pf5I" @(51,258)
[3] input[radio] name=radio "pf5I" @(35,248)
[4] label "Mx" @(53,314)
[5] input[radio] name=radio "Mx" @(35,305)
[6] label "o3T" @(51,370)
[7] input[radio] name=radio "o3T" @(35,361)
[8] button "Submit" @(104,470)
[9] label "Last reward:" @(434,56)"""

BOX_PAGE = """[0] input[checkbox] "x" @(10,10)
[1] input[checkbox] "y" @(10,30)
[2] input[checkbox] "z" @(10,50)
[3] button "Submit" @(10,70)"""


def click(element):
    return json.dumps({"name": "left_click", "arguments": {"element": element}})


def step(elements, action_text, intention=""):
    return {"elements": elements, "action_text": action_text, "intention": intention}


EPISODES = [
    {
        "task_id": "miniwob/click-option/3",
        "instruction": "Select pf5I and click Submit.",
        "global_step": 1,
        "steps": [
            step(OPTION_PAGE, click(2), 'click "pf5I"'),  # the named option's label
            step(OPTION_PAGE, click(7), 'click "zz"'),  # another option's radio; a label the page lacks
            step(OPTION_PAGE, click(9)),  # the score panel: not an option
            step(OPTION_PAGE, click(8), 'click "Submit"'),
            step(OPTION_PAGE, None),  # an invalid action
        ],
    },
    {
        "task_id": "miniwob/click-checkboxes/8",
        "instruction": "Select x, y and click Submit.",
        "global_step": 2,
        "steps": [step(BOX_PAGE, click(0), 'click "z"')],
    },
    {
        "task_id": "miniwob/click-checkboxes/9",
        "instruction": "Select nothing and click Submit.",
        "global_step": 4,
        "steps": [step(BOX_PAGE, click(2))],
    },
    {"task_id": "miniwob/click-button/1", "instruction": "Click on the button.", "global_step": 3, "steps": []},
    {  # names words similar to the options, not the options: left out
        "task_id": "miniwob/click-checkboxes-soft/2",
        "instruction": "Select words similar to big, small and click Submit.",
        "global_step": 3,
        "steps": [step(BOX_PAGE, click(0))],
    },
]
EPISODES = [{**episode, "traj_id": f"g{i}-0"} for i, episode in enumerate(EPISODES)]  # each its own group


def test_named_options_and_page_options():
    assert named_options("Select x, y and click Submit.") == {"x", "y"}
    assert named_options("Select nothing and click Submit.") == set()
    assert named_options("Click on the button.") is None
    assert page_options(element_lines(OPTION_PAGE)) == {
        i: label for i, label in enumerate(["Abc"] * 2 + ["pf5I"] * 2 + ["Mx"] * 2 + ["o3T"] * 2)
    }
    assert page_options(element_lines(BOX_PAGE)) == {0: "x", 1: "y", 2: "z"}


def test_choices_count_named_clicks_chance_and_intentions_per_task_and_window():
    table = choice_table(EPISODES, windows=2)
    assert list(table) == ["miniwob/click-checkboxes", "miniwob/click-option"]
    option = {span: counts.row() for span, counts in table["miniwob/click-option"]}
    assert option[(1, 2)] == {
        "option_clicks": 2,
        "named_rate": 0.5,
        "chance_rate": 0.25,
        "intentions": 2,
        "on_page_rate": 0.5,
        "in_instruction_rate": 0.5,
    }
    assert option[(3, 4)]["option_clicks"] == 0 and option[(3, 4)]["named_rate"] is None
    boxes = {span: counts.row() for span, counts in table["miniwob/click-checkboxes"]}
    assert (boxes[(1, 2)]["named_rate"], boxes[(1, 2)]["chance_rate"]) == (1.0, 0.667)  # ticked x: 2 of 3 are named
    assert (boxes[(1, 2)]["on_page_rate"], boxes[(1, 2)]["in_instruction_rate"]) == (1.0, 0.0)
    assert (boxes[(3, 4)]["named_rate"], boxes[(3, 4)]["chance_rate"]) == (0.0, 0.0)


def test_the_command_prints_each_runs_table_and_the_pooled_rows(tmp_path, capsys):
    runs = []
    for name in ("a", "b"):
        (tmp_path / name / "episodes").mkdir(parents=True)
        in_order = sorted(EPISODES, key=lambda e: e["global_step"])  # as a run writes them
        (tmp_path / name / "episodes" / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in in_order))
        runs.append(str(tmp_path / name))
    # Run b was killed while writing a line and resumed from step 0: neither its cut line nor what the killed
    # attempt played (the same episodes, written again by the resumed one) counts.
    killed = [{**e, "attempt": "killed", "attempt_from_step": 0} for e in in_order]
    resumed = [{**e, "attempt": "resumed", "attempt_from_step": 0} for e in in_order]
    lines_b = [json.dumps(e) for e in killed] + ['{"traj_id": "cut', *(json.dumps(e) for e in resumed)]
    (tmp_path / "b" / "episodes" / "episodes.jsonl").write_text("\n".join(lines_b) + "\n")
    assert main([*runs, "--windows", "2"]) == 0
    captured = capsys.readouterr()
    assert captured.err.strip() == f"{runs[1]}: 1 unreadable episode line(s) skipped"
    lines = captured.out.splitlines()
    assert lines.count("| miniwob/click-option | 1-2 | 2 | 0.5 | 0.25 | 2 | 0.5 | 0.5 |") == 2
    # Pooled: 4 clicks, 2 named, chance 0.25 each; each run's one episode is +0.25 over chance, so no spread.
    assert "| miniwob/click-option | 2 | 4 | 0.5 | 0.25 | +0.250 [+0.250, +0.250] | 4 | 0.5 | 0.5 |" in lines
    # click-checkboxes: one episode +1/3 (x ticked, 2 of 3 named), one -0 (nothing named, z ticked): mean +1/6.
    pooled = next(line for line in lines if line.startswith("| miniwob/click-checkboxes | 2 |"))
    assert pooled.split(" | ")[5].startswith("+0.167 [+0.000, +0.333]")
    with pytest.raises(SystemExit, match="must be a run folder"):
        main([str(tmp_path / "nothing")])


def test_a_run_whose_clicks_name_no_element_has_no_difference(tmp_path, capsys):
    coordinates = json.dumps({"name": "left_click", "arguments": {"x": 40, "y": 200}})
    episode = {**EPISODES[0], "steps": [step(OPTION_PAGE, coordinates)]}
    (tmp_path / "episodes").mkdir()
    (tmp_path / "episodes" / "episodes.jsonl").write_text(json.dumps(episode) + "\n")
    assert main([str(tmp_path)]) == 0
    assert "| miniwob/click-option | 1 | 0 | None | None | n/a | 0 | None | None |" in capsys.readouterr().out
