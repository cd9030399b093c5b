"""The system prompt and the per-step chat messages of the web agent (REFERENCE.md "Agent I/O").

Each step's prompt is rebuilt from scratch (one training sample per step, DESIGN.md section 2): system prompt,
then one user message with the task, the latest Memory and Progress JSON, older rounds as short text lines, and
the screenshots of the last ``history_images`` rounds as images (AsyncWebRL keeps 1: only the current one).
Messages use the generic content-list form (``{"type": "image"}`` / ``{"type": "text", ...}``) that Qwen-VL
processors and most VLM chat templates accept; the chat template itself comes from the model's processor.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MAX_LINE_FIELD_CHARS = 200
"""Intention, action and result are cut to this many characters in text history lines."""

SYSTEM_PROMPT = """You are a web agent. You operate a web browser to complete the user's task. Each turn you see \
the task, your Memory and Progress so far, a summary of earlier steps and the current screenshot of the page \
(1280x720 pixels).

Coordinates are normalised to the screenshot: [x, y] with x and y integers from 0 to 1000, [0, 0] the top-left \
corner and [1000, 1000] the bottom-right corner.

Actions (call exactly one per turn):
- left_click: click a point. {"name": "left_click", "arguments": {"coordinate": [x, y]}}
- type: type text, optionally clicking a field first and pressing Enter after. \
{"name": "type", "arguments": {"text": "...", "coordinate": [x, y], "press_enter": true}} \
("coordinate" and "press_enter" are optional; press_enter defaults to false)
- key: press a key or key chord. {"name": "key", "arguments": {"keys": ["Control", "a"]}}
- scroll: scroll the page. {"name": "scroll", "arguments": {"direction": "down", "amount": 500}} \
(direction is up, down, left or right; amount in pixels, default 500; optional "coordinate" to scroll there)
- wait: let the page load. {"name": "wait", "arguments": {"time": 2}}
- go_back: go back to the previous page. {"name": "go_back", "arguments": {}}
- navigate: open a URL. {"name": "navigate", "arguments": {"url": "https://..."}}
- answer: finish the task and give the final answer. {"name": "answer", "arguments": {"text": "..."}}

Respond in exactly this layout:
Memory: {JSON object: facts you need later, e.g. values found on pages}
Progress: {JSON object: what is done and what remains}
Intention: one sentence saying what this step is for
Action: the action in words
<tool_call>{"name": "...", "arguments": {...}}</tool_call>

Rules:
- Memory may only be appended to: copy every key and value of your previous Memory unchanged and add new \
keys. Never remove or rename a key. Use descriptive key names.
- Progress is a JSON object; update it every turn.
- Base every answer on what the screenshots show. When the task is done or cannot be done, use answer."""

COMPACT_SYSTEM_PROMPT = """You are a web agent operating a browser. Coordinates [x, y] are normalised to the \
screenshot: integers from 0 to 1000, [0, 0] top-left.
Call one action per turn:
{"name": "left_click", "arguments": {"coordinate": [x, y]}}
{"name": "type", "arguments": {"text": "...", "coordinate": [x, y], "press_enter": false}}
{"name": "key", "arguments": {"keys": ["Enter"]}}
{"name": "scroll", "arguments": {"direction": "down", "amount": 500}}
{"name": "wait", "arguments": {"time": 1}}
{"name": "go_back", "arguments": {}}
{"name": "navigate", "arguments": {"url": "https://..."}}
{"name": "answer", "arguments": {"text": "..."}}
Respond in exactly this layout:
Memory: {JSON object; it may only be appended to}
Progress: {JSON object}
Intention: one sentence
Action: the action in words
<tool_call>{"name": "...", "arguments": {...}}</tool_call>"""

SYSTEM_PROMPTS = {"full": SYSTEM_PROMPT, "compact": COMPACT_SYSTEM_PROMPT}
"""``asyncweb.agent.system_prompt``: ``full`` (the paper's instructions) or ``compact`` (the same action schema and
layout in less than half the text, for small models on CPU, where the prompt's length is most of a step's cost)."""

_ELEMENT_TARGETS = (
    (
        '{"name": "left_click", "arguments": {"coordinate": [x, y]}}',
        '{"name": "left_click", "arguments": {"element": i}}',
    ),
    (
        '{"name": "type", "arguments": {"text": "...", "coordinate": [x, y]',
        '{"name": "type", "arguments": {"text": "...", "element": i',
    ),
    ('("coordinate" and "press_enter" are optional', '("element" and "press_enter" are optional'),
)
ELEMENT_TARGET_NOTE = "Click and type target an element of the element list by its index i ([i] in the list)."


def system_prompt(name: str, click_target: str = "coordinate") -> str:
    """The system prompt ``name`` (:data:`SYSTEM_PROMPTS`); with ``click_target="element"`` its click and type
    actions name an element of the listed ones (``{"element": i}``) instead of a coordinate."""
    text = SYSTEM_PROMPTS[name]
    if click_target == "coordinate":
        return text
    for coordinate_form, element_form in _ELEMENT_TARGETS:
        text = text.replace(coordinate_form, element_form)
    first_line, rest = text.split("\n", 1)
    return f"{first_line} {ELEMENT_TARGET_NOTE}\n{rest}"


USER_INSTRUCTION = "Look at the current screenshot and respond in the required layout."


@dataclass
class StepRecord:
    """One finished round of an episode, as later prompts summarise it.

    Args:
        step_index: Index of the round in the episode (0-based).
        intention: The model's Intention text.
        action_text: The action: the Action text in words, or a short description of the executed action.
        action_result: What the environment reported (``StepResult.info``).
        screenshot: The screenshot the action was taken on: encoded bytes, a store key, or a decoded image;
            ``None`` when there was none. Returned as-is in the image list.
        invalid_reason: Why the action was invalid, ``None`` when it was executed.
    """

    step_index: int
    intention: str = ""
    action_text: str = ""
    action_result: str = ""
    screenshot: Any = None
    invalid_reason: str | None = None


def _cut(text: Any, limit: int = MAX_LINE_FIELD_CHARS) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def format_step_line(record: StepRecord) -> str:
    """One-line text summary of a round: step, intention, action, result (or why the action was invalid)."""
    parts = [f"Step {record.step_index}:"]
    if record.intention:
        parts.append(f"intention: {_cut(record.intention)};")
    parts.append(f"action: {_cut(record.action_text) or '(none)'};")
    if record.invalid_reason:
        parts.append(f"result: invalid action ({_cut(record.invalid_reason)})")
    else:
        parts.append(f"result: {_cut(record.action_result) or '(no result)'}")
    return " ".join(parts)


def _element_lines(elements: str) -> list[str]:
    return [line for line in elements.splitlines() if line.strip()]


def element_targets(elements: str | None, max_lines: int) -> dict[int, tuple[int, int]] | None:
    """Index -> normalised centre of each element the prompt lists (what ``{"element": i}`` clicks); ``None``
    when the prompt lists none."""
    from verl_asyncweb.env.oracle import parse_element_lines

    if elements is None:
        return None
    return {el["index"]: (el["x"], el["y"]) for el in parse_element_lines(_element_lines(elements)[:max_lines])}


def format_elements(elements: str, max_lines: int) -> str:
    """The element list as prompt text: at most ``max_lines`` lines, with a note on how many were left out."""
    lines = _element_lines(elements)
    shown = lines[:max_lines]
    text = "\n".join(["Elements on the page (kind, text, centre [x, y]):", *shown] if shown else ["Elements: none"])
    if len(lines) > len(shown):
        text += f"\n({len(lines) - len(shown)} more not shown)"
    return text


def _json_text(value: dict | None) -> str:
    try:
        return json.dumps(value if isinstance(value, dict) else {}, ensure_ascii=False)
    except (TypeError, ValueError):
        return "{}"


def build_messages(
    task_instruction: str,
    memory: dict | None,
    progress: dict | None,
    history: list[StepRecord],
    current_screenshot: Any,
    history_images: int = 1,
    max_history_text_rounds: int = 8,
    system_prompt: str = SYSTEM_PROMPT,
    elements: str | None = None,
    max_element_lines: int = 40,
) -> tuple[list[dict], list[Any]]:
    """Chat messages of one step and the images they reference, in order.

    The screenshots of the last ``history_images`` rounds are images: the current one and those of the last
    ``history_images - 1`` entries of ``history`` (each with its text line). Earlier rounds are text lines only,
    at most ``max_history_text_rounds`` of them (the most recent), after a note on how many were left out.

    Args:
        task_instruction: The task as given to the agent.
        memory: Latest Memory JSON object (``None`` before the first response).
        progress: Latest Progress JSON object.
        history: Finished rounds of this episode, oldest first.
        current_screenshot: The page now (bytes, store key or image).
        history_images: ``asyncweb.agent.history_images``, >= 1.
        max_history_text_rounds: ``asyncweb.agent.max_history_text_rounds``, >= 0.
        system_prompt: Text of the system message.
        elements: The page's element list (``Observation.accessibility_text``) to show after the current
            screenshot (``asyncweb.agent.observation: screenshot+elements``); ``None`` shows none.
        max_element_lines: At most this many element lines are shown.

    Returns:
        ``(messages, images)``: ``messages`` is ``[system, user]`` where the user content is a list of
        ``{"type": "text", "text": ...}`` and ``{"type": "image"}`` items; ``images`` holds one entry per image
        item, in the same order.

    Raises:
        ValueError: ``history_images`` < 1 or ``max_history_text_rounds`` < 0.
    """
    if isinstance(history_images, bool) or not isinstance(history_images, int) or history_images < 1:
        raise ValueError(f"asyncweb.agent.history_images must be >= 1, got {history_images!r}")
    if isinstance(max_history_text_rounds, bool) or not isinstance(max_history_text_rounds, int):
        raise ValueError(f"asyncweb.agent.max_history_text_rounds must be an integer, got {max_history_text_rounds!r}")
    if max_history_text_rounds < 0:
        raise ValueError(f"asyncweb.agent.max_history_text_rounds must be >= 0, got {max_history_text_rounds}")

    n_with_images = min(history_images - 1, len(history))
    text_rounds = history[: len(history) - n_with_images]
    image_rounds = history[len(history) - n_with_images :]
    shown_text = text_rounds[len(text_rounds) - max_history_text_rounds :] if max_history_text_rounds else []
    omitted = len(text_rounds) - len(shown_text)

    header = [
        f"Task: {task_instruction}",
        "",
        f"Memory: {_json_text(memory)}",
        f"Progress: {_json_text(progress)}",
    ]
    if text_rounds:
        header += ["", "Earlier steps:"]
        if omitted:
            header.append(f"({omitted} earlier step{'s' if omitted != 1 else ''} not shown)")
        header += [format_step_line(record) for record in shown_text]

    content: list[dict] = [{"type": "text", "text": "\n".join(header)}]
    images: list[Any] = []
    for record in image_rounds:
        if record.screenshot is not None:
            content.append({"type": "text", "text": f"\nScreenshot of step {record.step_index}:"})
            content.append({"type": "image"})
            images.append(record.screenshot)
        content.append({"type": "text", "text": format_step_line(record)})
    if current_screenshot is not None:
        content.append({"type": "text", "text": "\nCurrent screenshot:"})
        content.append({"type": "image"})
        images.append(current_screenshot)
    else:
        content.append({"type": "text", "text": "\nCurrent screenshot: (not available)"})
    if elements is not None:
        content.append({"type": "text", "text": format_elements(elements, max_element_lines)})
    content.append({"type": "text", "text": USER_INSTRUCTION})

    messages = [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": content},
    ]
    return messages, images
