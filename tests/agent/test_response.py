"""parse_response: the WebGym/AsyncWebRL layout, broken inputs, and merge_memory."""

from __future__ import annotations

import json
import random

import pytest

from verl_asyncweb.agent.response import ParsedResponse, merge_memory, parse_response
from verl_asyncweb.env.actions import Answer, LeftClick

GOOD = """Memory: {"target_product": "blue mug", "price_seen": "$12"}
Progress: {"done": ["opened shop"], "next": "open cart"}
Intention: Open the cart to check the total.
Action: Click the cart icon at the top right.
<tool_call>{"name": "left_click", "arguments": {"coordinate": [950, 40]}}</tool_call>"""


def test_parse_response_good_layout_fills_every_field():
    parsed = parse_response(GOOD)
    assert parsed.memory == {"target_product": "blue mug", "price_seen": "$12"}
    assert parsed.memory_error is None and parsed.progress_error is None
    assert parsed.progress == {"done": ["opened shop"], "next": "open cart"}
    assert parsed.intention == "Open the cart to check the total."
    assert parsed.action_text == "Click the cart icon at the top right."
    assert json.loads(parsed.tool_call_text)["name"] == "left_click"
    assert parsed.action.valid and isinstance(parsed.action.action, LeftClick)
    assert parsed.action.action.x == pytest.approx(1216.0)
    assert parsed.invalid_reason is None


def test_parse_response_braces_and_headers_inside_json_strings():
    text = (
        'Memory: {"note}": "a } brace {", "q": "say \\"hi\\" {x}",\n"multi": "line\\nAction: not a header"}\n'
        "Progress: {}\nIntention: x\nAction: y\n"
        '<tool_call>{"name": "answer", "arguments": {"text": "done"}}</tool_call>'
    )
    parsed = parse_response(text)
    assert parsed.memory == {"note}": "a } brace {", "q": 'say "hi" {x}', "multi": "line\nAction: not a header"}
    assert parsed.progress == {}
    assert parsed.action_text == "y"
    assert isinstance(parsed.action.action, Answer)


def test_parse_response_an_odd_number_of_escaped_quotes_keeps_the_string_open():
    # One escaped quote: a scanner that ends the string at it reads ' {' as a nested object and never balances,
    # and the whole line, with the words after the object, is not JSON.
    text = (
        'Memory: {"screen": "27\\" monitor {", "next": "}"} (kept from step 2)\n'
        "Progress: {}\nIntention: x\nAction: y\n"
        '<tool_call>{"name": "answer", "arguments": {"text": "done"}}</tool_call>'
    )
    parsed = parse_response(text)
    assert parsed.memory_error is None
    assert parsed.memory == {"screen": '27" monitor {', "next": "}"}


def test_parse_response_multiline_json_markdown_headers_and_fence():
    text = (
        '<think>Memory: {"ignored": 1}</think>\n**Memory:**\n```json\n{\n  "a": 1,\n  "b": [1, 2]\n}\n```\n'
        '## Progress:\n{"step": 2}\n**Intention:** look\n**Action:** scroll down\n'
        '<tool_call>{"name": "scroll", "arguments": {"direction": "down"}}</tool_call>'
    )
    parsed = parse_response(text)
    assert parsed.memory == {"a": 1, "b": [1, 2]}
    assert parsed.progress == {"step": 2}
    assert parsed.intention == "look" and parsed.action_text == "scroll down"
    assert parsed.action.valid


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("Intention: x\nAction: y", "missing Memory section"),
        ("Memory:\nProgress: {}", "empty Memory section"),
        ('Memory: {"a": 1,,}\nProgress: {}', "invalid JSON in Memory"),
        ('Memory: {"a": "unterminated\nProgress: {}', "invalid JSON in Memory"),
        ("Memory: [1, 2]\nProgress: {}", "Memory must be a JSON object, got list"),
        ("Memory: not json at all\nProgress: {}", "invalid JSON in Memory"),
    ],
)
def test_parse_response_bad_memory_reports_error_not_raises(text, error):
    parsed = parse_response(text)
    assert parsed.memory is None
    assert error in parsed.memory_error
    assert not parsed.action.valid and parsed.invalid_reason


def test_parse_response_missing_tool_call_is_invalid_action_with_reason():
    parsed = parse_response('Memory: {"a": 1}\nProgress: {}\nIntention: i\nAction: a\n')
    assert parsed.memory == {"a": 1}
    assert parsed.tool_call_text == ""
    assert "no <tool_call>" in parsed.invalid_reason


def test_parse_response_out_of_range_coordinates_invalid():
    parsed = parse_response('<tool_call>{"name": "left_click", "arguments": {"coordinate": [1500, 3]}}</tool_call>')
    assert not parsed.action.valid and "out of range" in parsed.invalid_reason


def test_parse_response_sections_out_of_order_still_found():
    parsed = parse_response('Intention: first\nMemory: {"k": 1}\nAction: act')
    assert parsed.memory == {"k": 1}
    assert parsed.intention == "first"
    assert parsed.action_text == "act"


def test_parse_response_long_text_sections_are_cut():
    parsed = parse_response("Intention: " + "x" * 10_000)
    assert len(parsed.intention) == 2_000


@pytest.mark.parametrize("junk", [None, 42, b"bytes", ["list"], {"a": 1}])
def test_parse_response_non_string_input_never_raises(junk):
    parsed = parse_response(junk)
    assert isinstance(parsed, ParsedResponse)
    assert parsed.memory is None and not parsed.action.valid


def test_parse_response_fuzz_random_junk_never_raises():
    rng = random.Random(0)
    alphabet = list('{}[]"\\:,\n \t') + ["Memory:", "Progress:", "Action:", "<tool_call>", "</tool_call>", "</think>"]
    alphabet += list("abcxyz0123")
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 400)))
        parsed = parse_response(text)
        assert isinstance(parsed, ParsedResponse)
        assert parsed.memory is None or isinstance(parsed.memory, dict)


def test_parse_response_100kb_junk_and_deep_nesting_never_raise():
    rng = random.Random(1)
    junk = "".join(rng.choice('{}"\\Memory:\n ') for _ in range(100_000))
    assert isinstance(parse_response(junk), ParsedResponse)
    deep = "Memory: " + "{" * 50_000 + "}" * 50_000 + "\nProgress: " + '{"a":' * 5_000 + "1" + "}" * 5_000
    parsed = parse_response(deep)
    assert parsed.memory is None and parsed.memory_error
    huge = GOOD + "x" * 300_000
    parsed = parse_response(huge)
    assert parsed.memory is not None and not parsed.action.valid  # too long for an action, memory still read


def test_merge_memory_keeps_previous_on_missing_or_invalid():
    previous = {"a": 1}
    assert merge_memory(previous, parse_response("Memory: {broken")) == {"a": 1}
    assert merge_memory(previous, parse_response("no sections")) == {"a": 1}
    assert merge_memory(None, None) == {}


def test_merge_memory_takes_new_memory_as_written_and_copies():
    previous = {"a": 1, "b": 2}
    new = merge_memory(previous, parse_response('Memory: {"a": 1, "c": 3}'))
    assert new == {"a": 1, "c": 3}  # the dropped key is measured, not repaired
    parsed_dict = {"z": 0}
    merged = merge_memory(previous, parsed_dict)
    assert merged == parsed_dict and merged is not parsed_dict
