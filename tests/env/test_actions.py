"""parse_action: the closed WebGym/Qwen action set, and never an exception on model output."""

import json
import random
import re

import pytest

from verl_asyncweb.env.actions import (
    Answer,
    GoBack,
    KeyPress,
    LeftClick,
    Navigate,
    Scroll,
    TypeText,
    Wait,
    parse_action,
)


def call(name, **arguments):
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def test_left_click_normalized_coordinates_map_to_viewport_pixels():
    parsed = parse_action("Intention: click\n" + call("left_click", coordinate=[500, 500]))
    assert parsed.valid and parsed.action == LeftClick(640.0, 360.0)


def test_left_click_pixel_mode_keeps_pixels():
    parsed = parse_action(call("left_click", coordinate=[10, 20]), coordinate_mode="pixel")
    assert parsed.action == LeftClick(10.0, 20.0)


def test_qwen_computer_use_form_is_accepted():
    text = call("computer_use", action="left_click", coordinate=[0, 1000])
    assert parse_action(text).action == LeftClick(0.0, 719.0)


def test_every_action_of_the_set_parses():
    assert parse_action(call("type", text="hi", press_enter=True)).action == TypeText("hi", True, None)
    assert parse_action(call("key", keys=["ctrl", "a"])).action == KeyPress(("Control", "a"))
    assert parse_action(call("key", keys="Enter")).action == KeyPress(("Enter",))
    assert parse_action(call("scroll", direction="down")).action == Scroll(0, 500, None)
    assert parse_action(call("computer_use", action="scroll", pixels=300)).action == Scroll(0, -300, None)
    assert parse_action(call("wait", time=2)).action == Wait(2.0)
    assert parse_action(call("go_back")).action == GoBack()
    assert parse_action(call("navigate", url="http://127.0.0.1/x")).action == Navigate("http://127.0.0.1/x")
    assert parse_action(call("answer", text="42")).action == Answer("42")


def test_arguments_encoded_as_a_string_are_accepted():
    text = '<tool_call>{"name": "left_click", "arguments": "{\\"coordinate\\": [1, 2]}"}</tool_call>'
    assert parse_action(text).valid


@pytest.mark.parametrize(
    "text, reason",
    [
        ("no tool call here", "no <tool_call>"),
        ("<tool_call>{bad json</tool_call>", "malformed JSON"),
        ("<tool_call>{}", "unterminated"),
        ("<tool_call>[1, 2]</tool_call>", "JSON object"),
        (call("left_click"), "missing field 'coordinate'"),
        (call("left_click", coordinate=[1001, 5]), "out of range"),
        (call("left_click", coordinate=[-1, 5]), "out of range"),
        (call("left_click", coordinate=[1, 2, 3]), "two finite numbers"),
        (call("left_click", coordinate=[True, 2]), "two finite numbers"),
        ('<tool_call>{"name": "left_click", "arguments": {"coordinate": [NaN, 1]}}</tool_call>', "finite"),
        (call("double_click", coordinate=[1, 2]), "unknown action"),
        (call("type"), "missing field 'text'"),
        (call("type", text=5), "must be a string"),
        (call("scroll", direction="sideways"), "direction"),
        (call("wait", time=-1), "'time'"),
        (call("navigate"), "missing field 'url'"),
        (call("key", keys=[]), "'keys'"),
        ('<tool_call>{"arguments": {}}</tool_call>', "missing field 'name'"),
        (call("computer_use"), "missing field 'action'"),
        (call("left_click", coordinate=[1, 2]) + call("answer", text="x"), "several tool calls"),
        (None, "must be a string"),
    ],
)
def test_bad_model_output_gives_invalid_action_with_reason(text, reason):
    parsed = parse_action(text)
    assert not parsed.valid and parsed.action is None
    assert reason in parsed.error


def test_pixel_mode_rejects_coordinates_outside_viewport():
    parsed = parse_action(call("left_click", coordinate=[1280, 5]), coordinate_mode="pixel")
    assert not parsed.valid and "out of range" in parsed.error


def test_100kb_of_junk_is_an_invalid_action():
    rng = random.Random(0)
    junk = "".join(rng.choice('<>{}[]":,tool_call/ \nabc0123') for _ in range(100_000))
    parsed = parse_action(junk)
    assert not parsed.valid and parsed.error


def test_huge_response_is_refused_before_parsing():
    parsed = parse_action("x" * 300_000 + call("go_back"))
    assert not parsed.valid and "too long" in parsed.error


def test_deeply_nested_json_is_an_invalid_action():
    parsed = parse_action("<tool_call>" + "[" * 50_000 + "]" * 50_000 + "</tool_call>")
    assert not parsed.valid


def test_fuzzed_tool_calls_never_raise():
    rng = random.Random(1234)
    values = [None, True, 0, -5, 1e309, "x", [], {}, [1], [1, 2], ["a", "b"], "enter", 10**20]
    names = ["left_click", "type", "key", "scroll", "wait", "go_back", "navigate", "answer", "computer_use", 7]
    keys = ["coordinate", "text", "keys", "direction", "amount", "time", "url", "action", "pixels", "press_enter"]
    for _ in range(3000):
        args = {rng.choice(keys): rng.choice(values) for _ in range(rng.randint(0, 4))}
        if rng.random() < 0.3:
            args["action"] = rng.choice(names)
        payload = json.dumps({"name": rng.choice(names), "arguments": args})
        if rng.random() < 0.2:
            cut = rng.randint(0, len(payload))
            payload = payload[:cut]
        parsed = parse_action(f"<tool_call>{payload}</tool_call>")
        assert parsed.valid == (parsed.error is None)


def test_element_target_clicks_the_centre_of_the_listed_element():
    targets = {0: (100, 200), 3: (500, 500)}
    assert parse_action(call("left_click", element=3), element_targets=targets).action == LeftClick(640.0, 360.0)
    typed = parse_action(call("type", text="hi", element=0, press_enter=True), element_targets=targets)
    assert typed.action == TypeText("hi", True, (128.0, 144.0))


@pytest.mark.parametrize(
    ("arguments", "targets", "reason"),
    [
        ({"element": 1}, None, "'element' needs the page's element list in the prompt"),
        ({"element": 7}, {0: (1, 1)}, r"no element \[7\] in the list"),
        ({"element": "0"}, {0: (1, 1)}, "'element' must be the index i of a listed element"),
        ({"element": True}, {1: (1, 1)}, "'element' must be the index i of a listed element"),
    ],
)
def test_bad_element_targets_are_invalid_actions_with_reason(arguments, targets, reason):
    parsed = parse_action(call("left_click", **arguments), element_targets=targets)
    assert not parsed.valid and re.search(reason, parsed.error), parsed.error
