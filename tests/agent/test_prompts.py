"""build_messages and SYSTEM_PROMPT: images vs text history, and an action schema the env parser accepts."""

from __future__ import annotations

import json
import re

import pytest

from verl_asyncweb.agent.prompts import (
    COMPACT_SYSTEM_PROMPT,
    SYSTEM_PROMPT,
    SYSTEM_PROMPTS,
    USER_INSTRUCTION,
    StepRecord,
    build_messages,
    element_targets,
    format_elements,
    format_step_line,
    system_prompt,
)
from verl_asyncweb.env.actions import ACTION_NAMES, parse_action


def _history(n: int) -> list[StepRecord]:
    return [
        StepRecord(
            step_index=i,
            intention=f"intent {i}",
            action_text=f"click thing {i}",
            action_result=f"left_click ({i},{i})",
            screenshot=f"key-{i}",
            invalid_reason="no <tool_call> block found" if i == 1 else None,
        )
        for i in range(n)
    ]


def _image_items(messages: list[dict]) -> int:
    return sum(1 for item in messages[1]["content"] if item["type"] == "image")


def _user_text(messages: list[dict]) -> str:
    return "\n".join(item["text"] for item in messages[1]["content"] if item["type"] == "text")


def test_build_messages_h1_only_current_screenshot_is_an_image():
    messages, images = build_messages("Buy a mug", {"a": 1}, {"done": []}, _history(3), "key-now", history_images=1)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == SYSTEM_PROMPT
    assert images == ["key-now"]
    assert _image_items(messages) == len(images) == 1
    text = _user_text(messages)
    assert "Task: Buy a mug" in text and 'Memory: {"a": 1}' in text and 'Progress: {"done": []}' in text
    for i in range(3):
        assert f"Step {i}: intention: intent {i}; action: click thing {i};" in text
    assert "result: invalid action (no <tool_call> block found)" in text


def test_build_messages_h2_previous_screenshot_is_an_image_and_older_rounds_text():
    messages, images = build_messages("t", None, None, _history(3), "key-now", history_images=2)
    assert images == ["key-2", "key-now"]
    assert _image_items(messages) == len(images) == 2
    text = _user_text(messages)
    assert "Earlier steps:" in text and "Step 0:" in text and "Step 1:" in text
    assert text.count("Step 2:") == 1  # the image round keeps its text line once
    assert "Memory: {}" in text
    content = messages[1]["content"]
    first_image = next(i for i, item in enumerate(content) if item["type"] == "image")
    assert "Screenshot of step 2" in content[first_image - 1]["text"]


def test_build_messages_first_step_and_large_h_use_what_exists():
    messages, images = build_messages("t", None, None, [], b"jpeg", history_images=3)
    assert images == [b"jpeg"] and _image_items(messages) == 1
    assert "Earlier steps" not in _user_text(messages)
    messages, images = build_messages("t", None, None, _history(2), b"jpeg", history_images=5)
    assert images == ["key-0", "key-1", b"jpeg"] and _image_items(messages) == 3


def test_build_messages_limits_text_rounds_and_says_how_many_left_out():
    messages, _ = build_messages("t", None, None, _history(12), "now", history_images=1, max_history_text_rounds=3)
    text = _user_text(messages)
    assert "(9 earlier steps not shown)" in text
    assert "Step 8:" not in text and all(f"Step {i}:" in text for i in (9, 10, 11))


def test_build_messages_skips_missing_screenshots():
    history = _history(2)
    history[1].screenshot = None
    messages, images = build_messages("t", None, None, history, None, history_images=2)
    assert images == [] and _image_items(messages) == 0
    assert "(not available)" in _user_text(messages)


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_build_messages_rejects_bad_history_images(bad):
    with pytest.raises(ValueError, match="asyncweb.agent.history_images must be >= 1"):
        build_messages("t", None, None, [], "k", history_images=bad)


def test_format_step_line_cuts_long_fields():
    line = format_step_line(StepRecord(0, intention="x" * 1000, action_text="a\n\nb", action_result="ok"))
    assert len(line) < 300 and "action: a b;" in line


@pytest.mark.parametrize("prompt", list(SYSTEM_PROMPTS.values()), ids=list(SYSTEM_PROMPTS))
def test_system_prompt_examples_parse_with_env_action_parser(prompt):
    examples = re.findall(r'(\{"name": "(\w+)", "arguments": .*?\}\})', prompt)
    names = {name for _, name in examples}
    assert names == set(ACTION_NAMES)
    for example, name in examples:
        example = example.replace("[x, y]", "[500, 300]")  # the schema's placeholders, filled in
        parsed = parse_action(f"<tool_call>{example}</tool_call>")
        assert parsed.valid, (name, parsed.error)
        assert json.loads(example)["name"] == name


@pytest.mark.parametrize("prompt", list(SYSTEM_PROMPTS.values()), ids=list(SYSTEM_PROMPTS))
def test_system_prompt_states_layout_and_append_only_memory(prompt):
    for header in ("Memory:", "Progress:", "Intention:", "Action:", "<tool_call>"):
        assert header in prompt
    assert "only be appended" in prompt and "0 to 1000" in prompt


def test_compact_system_prompt_is_less_than_half_the_full_one():
    assert len(COMPACT_SYSTEM_PROMPT) * 2 < len(SYSTEM_PROMPT)


def test_build_messages_renders_with_qwen_chat_template():
    jinja2 = pytest.importorskip("jinja2", reason="install jinja2: pip install jinja2")
    from verl_asyncweb.backends.tiny_model import CHAT_TEMPLATE

    messages, images = build_messages("t", {"k": "v"}, None, _history(3), "now", history_images=2)
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    rendered = env.from_string(CHAT_TEMPLATE).render(messages=messages, add_generation_prompt=True)
    assert rendered.count("<|image_pad|>") == len(images) == 2
    assert rendered.rstrip().endswith("<|im_start|>assistant")


ELEMENTS = '[0] button "Submit" @(120,340)\n[1] span "next" @(500,80)\n[2] input[text] "" @(300,200)'


def test_build_messages_shows_the_element_list_after_the_screenshot_when_given():
    messages, images = build_messages("t", None, None, [], "shot", elements=ELEMENTS)
    text = _user_text(messages)
    assert len(images) == 1
    assert text.index("Current screenshot:") < text.index("Elements on the page") < text.index(USER_INSTRUCTION)
    assert '[1] span "next" @(500,80)' in text
    assert "Elements" not in _user_text(build_messages("t", None, None, [], "shot")[0])


def test_format_elements_caps_lines_and_says_how_many_were_left_out():
    text = format_elements(ELEMENTS, max_lines=2)
    assert '[1] span "next"' in text and "[2]" not in text and "(1 more not shown)" in text
    assert format_elements("", max_lines=5) == "Elements: none"


@pytest.mark.parametrize("name", ["full", "compact"])
def test_element_click_target_prompt_names_elements_not_coordinates_for_click_and_type(name):
    assert system_prompt(name) == SYSTEM_PROMPTS[name]
    text = system_prompt(name, "element")
    assert '{"name": "left_click", "arguments": {"element": i}}' in text
    assert '{"name": "type", "arguments": {"text": "...", "element": i' in text
    assert '"left_click", "arguments": {"coordinate"' not in text and '"...", "coordinate"' not in text


def test_element_targets_are_the_listed_lines_only():
    elements = '[0] button "ok" @(100,200)\n\n[2] span "a b" @(300,400)\n[5] input[text] name=q "" @(7,8)'
    assert element_targets(elements, 2) == {0: (100, 200), 2: (300, 400)}
    assert element_targets(elements, 40) == {0: (100, 200), 2: (300, 400), 5: (7, 8)}
    assert element_targets(None, 40) is None
