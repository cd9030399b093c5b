"""Parse one model response in the WebGym / AsyncWebRL layout; never raises.

The layout the system prompt asks for (REFERENCE.md "Agent I/O")::

    Memory: {"...": "..."}          <- JSON object, only ever appended to
    Progress: {"...": "..."}        <- JSON object
    Intention: what this step is for
    Action: the action in words
    <tool_call>{"name": "left_click", "arguments": {"coordinate": [500, 300]}}</tool_call>

Headers are matched at line starts, case-insensitively, also in Markdown dress (``**Memory:**``, ``## Action:``).
A ``<think>...</think>`` block (Qwen3-VL-Thinking) is skipped. JSON sections are cut out by a brace scanner that
understands JSON strings, so braces inside strings do not end a section. Whatever is missing or broken is
reported in the result; the agent loop decides (see :func:`merge_memory`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from verl_asyncweb.env import ParsedAction, parse_action

MAX_PARSE_CHARS = 200_000
"""Longer responses are cut to this many characters before parsing (parse_action rejects them anyway)."""
MAX_TEXT_SECTION_CHARS = 2_000
"""Intention and Action text is cut to this length (it is repeated in later prompts)."""

SECTIONS = ("memory", "progress", "intention", "action")
_HEADER = re.compile(r"^[ \t#>*_-]*(memory|progress|intention|action)[ \t*_]*:[ \t*_]*", re.IGNORECASE | re.MULTILINE)
_TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_THINK_END = "</think>"


@dataclass(frozen=True)
class ParsedResponse:
    """The sections of one response.

    Args:
        memory: The Memory JSON object, or ``None`` when missing or invalid.
        memory_raw: The Memory section's text as written ('' when missing).
        memory_error: Why ``memory`` is ``None`` ('missing Memory section', 'invalid JSON ...'), else ``None``.
        progress: The Progress JSON object, or ``None``.
        progress_raw: The Progress section's text.
        progress_error: Why ``progress`` is ``None``, else ``None``.
        intention: The Intention text ('' when missing).
        action_text: The Action text, in words ('' when missing).
        tool_call_text: Inside of the first ``<tool_call>`` block ('' when there is none).
        action: Result of :func:`verl_asyncweb.env.parse_action` on the response.
    """

    memory: dict | None
    memory_raw: str
    memory_error: str | None
    progress: dict | None
    progress_raw: str
    progress_error: str | None
    intention: str
    action_text: str
    tool_call_text: str
    action: ParsedAction

    @property
    def invalid_reason(self) -> str | None:
        """Why no action could be executed (shown to the model and counted), else ``None``."""
        return self.action.error


def parse_response(
    text: Any,
    *,
    coordinate_mode: str = "normalized",
    viewport: tuple[int, int] = (1280, 720),
    element_targets: Mapping[int, tuple[int, int]] | None = None,
) -> ParsedResponse:
    """Split a model response into Memory, Progress, Intention, Action and the parsed tool call; never raises.

    Args:
        text: The decoded model response.
        coordinate_mode: Passed to :func:`~verl_asyncweb.env.parse_action` (``"normalized"`` 0-1000 or ``"pixel"``).
        viewport: ``(width, height)`` passed to :func:`~verl_asyncweb.env.parse_action`.
        element_targets: The listed elements' centres (:func:`~verl_asyncweb.agent.prompts.element_targets`),
            passed to :func:`~verl_asyncweb.env.parse_action`.

    Returns:
        The parsed sections; errors are fields, not exceptions.
    """
    action = parse_action(text, coordinate_mode=coordinate_mode, viewport=viewport, element_targets=element_targets)
    try:
        return _parse(text, action)
    except Exception as exc:  # model output must never crash the agent loop
        reason = f"unparsable response ({type(exc).__name__})"
        return ParsedResponse(None, "", reason, None, "", reason, "", "", "", action)


def _parse(text: Any, action: ParsedAction) -> ParsedResponse:
    if not isinstance(text, str):
        reason = f"response must be a string, got {type(text).__name__}"
        return ParsedResponse(None, "", reason, None, "", reason, "", "", "", action)
    text = text[:MAX_PARSE_CHARS]
    think_end = text.rfind(_THINK_END)
    if think_end >= 0:
        text = text[think_end + len(_THINK_END) :]
    tool_match = _TOOL_CALL_BLOCK.search(text)
    tool_call_text = tool_match.group(1).strip() if tool_match else ""
    body_end = text.find("<tool_call>")
    body = text if body_end < 0 else text[:body_end]

    raw: dict[str, str] = {}
    pos = 0
    for name in SECTIONS:
        found = _find_header(body, name, pos)
        if found is None:
            continue
        start = found
        if name in ("memory", "progress"):
            span = _json_span(body, start)
            if span is not None:
                raw[name] = body[span[0] : span[1]]
                pos = span[1]
                continue
        end = _next_header(body, start)
        raw[name] = body[start:end].strip()
        pos = end

    memory, memory_error = _json_object("Memory", raw.get("memory"))
    progress, progress_error = _json_object("Progress", raw.get("progress"))
    return ParsedResponse(
        memory=memory,
        memory_raw=raw.get("memory", ""),
        memory_error=memory_error,
        progress=progress,
        progress_raw=raw.get("progress", ""),
        progress_error=progress_error,
        intention=raw.get("intention", "")[:MAX_TEXT_SECTION_CHARS],
        action_text=raw.get("action", "")[:MAX_TEXT_SECTION_CHARS],
        tool_call_text=tool_call_text,
        action=action,
    )


def _find_header(body: str, name: str, pos: int) -> int | None:
    """End offset of the first ``name:`` header at or after ``pos`` (else anywhere), or ``None``."""
    for start in (pos, 0):
        for match in _HEADER.finditer(body, start):
            if match.group(1).lower() == name:
                return match.end()
        if start == 0:
            break
    return None


def _next_header(body: str, start: int) -> int:
    match = _HEADER.search(body, start)
    return match.start() if match else len(body)


def _json_span(body: str, start: int) -> tuple[int, int] | None:
    """Span of the balanced ``{...}`` that opens the section at ``start`` (after blanks or a code fence)."""
    i = start
    n = len(body)
    while i < n and body[i] in " \t\r\n":
        i += 1
    if body.startswith("```", i):  # ```json fence
        newline = body.find("\n", i)
        if newline < 0:
            return None
        i = newline + 1
        while i < n and body[i] in " \t\r\n":
            i += 1
    if i >= n or body[i] != "{":
        return None
    depth = 0
    in_string = False
    escaped = False
    for j in range(i, n):
        ch = body[j]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i, j + 1
    return None  # unbalanced: the caller falls back to the text up to the next header


def _json_object(label: str, raw: str | None) -> tuple[dict | None, str | None]:
    if raw is None:
        return None, f"missing {label} section"
    if not raw.strip():
        return None, f"empty {label} section"
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        return None, f"invalid JSON in {label}: {str(exc)[:120]}"
    if not isinstance(value, dict):
        return None, f"{label} must be a JSON object, got {type(value).__name__}"
    return value, None


def merge_memory(previous: dict | None, parsed: ParsedResponse | dict | None) -> dict:
    """The memory the next prompt shows: the new Memory when it parsed, else the previous one.

    A missing or invalid Memory section keeps the previous memory unchanged, so one malformed step does not
    wipe what the agent wrote down (the failure is still counted through ``memory_error``). A valid Memory
    replaces the previous one as written, even when it dropped keys: the append-only rule is asked of the model
    by the prompt and measured (``asyncweb/memory/keyset_kept_frac``), not repaired here, since repairing it would
    hide exactly the behaviour the 1/|tau| vs 1/k comparison measures. The same rule serves Progress.

    Args:
        previous: Memory shown in the last prompt (``None`` before the first step).
        parsed: The step's :class:`ParsedResponse` (its ``memory`` is used), or a parsed dict, or ``None``.

    Returns:
        A new dict (never the caller's object), ``{}`` when there is neither.
    """
    new = parsed.memory if isinstance(parsed, ParsedResponse) else parsed
    if isinstance(new, dict):
        return dict(new)
    return dict(previous) if isinstance(previous, dict) else {}


def format_response(memory: dict, progress: dict, intention: str, action_text: str, tool_call: str) -> str:
    """A response in the layout the system prompt asks for (what :func:`parse_response` reads back)."""
    return (
        f"Memory: {json.dumps(memory, ensure_ascii=False)}\n"
        f"Progress: {json.dumps(progress, ensure_ascii=False)}\n"
        f"Intention: {intention}\n"
        f"Action: {action_text}\n"
        f"{tool_call}"
    )
