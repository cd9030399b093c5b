"""The web action space (WebGym / Qwen computer-use style) and ``parse_action``, which never raises.

Model output carries one ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` block, either naming the
action directly (``{"name": "left_click", "arguments": {"coordinate": [x, y]}}``) or in Qwen's computer-use form
(``{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [x, y]}}``). Coordinates are
normalised to 0-1000 on both axes (WebGym, the default) or given in viewport pixels. Where the prompt lists the
page's elements, ``{"element": i}`` may replace a coordinate (set-of-marks targets, as BrowserGym's element ids):
the point is the centre of element ``[i]``. Parsed actions always hold viewport pixels. Anything else becomes an
invalid :class:`ParsedAction` with a reason that is shown to the model.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_RESPONSE_CHARS = 200_000
MAX_TEXT_CHARS = 2_000
MAX_URL_CHARS = 2_048
DEFAULT_SCROLL_PX = 500
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_KEY_ALIASES = {
    "ctrl": "Control",
    "control": "Control",
    "cmd": "Meta",
    "meta": "Meta",
    "super": "Meta",
    "alt": "Alt",
    "shift": "Shift",
    "enter": "Enter",
    "return": "Enter",
    "esc": "Escape",
    "escape": "Escape",
    "tab": "Tab",
    "space": "Space",
    "backspace": "Backspace",
    "delete": "Delete",
    "del": "Delete",
    "up": "ArrowUp",
    "down": "ArrowDown",
    "left": "ArrowLeft",
    "right": "ArrowRight",
    "arrowup": "ArrowUp",
    "arrowdown": "ArrowDown",
    "arrowleft": "ArrowLeft",
    "arrowright": "ArrowRight",
    "pageup": "PageUp",
    "pagedown": "PageDown",
    "home": "Home",
    "end": "End",
}
_KEY_NAME = re.compile(r"^(F([1-9]|1[0-2])|[A-Za-z][a-z]*|.)$")


@dataclass(frozen=True)
class LeftClick:
    """Click at viewport pixel ``(x, y)``."""

    x: float
    y: float


@dataclass(frozen=True)
class TypeText:
    """Type ``text`` (after clicking ``at`` when given), then press Enter when ``press_enter``."""

    text: str
    press_enter: bool = False
    at: tuple[float, float] | None = None


@dataclass(frozen=True)
class KeyPress:
    """Press one key chord, e.g. ``("Control", "a")``; keys use Playwright names."""

    keys: tuple[str, ...]


@dataclass(frozen=True)
class Scroll:
    """Scroll by ``(dx, dy)`` pixels with the mouse at ``at`` (viewport centre when ``None``)."""

    dx: int
    dy: int
    at: tuple[float, float] | None = None


@dataclass(frozen=True)
class Wait:
    """Let the page run for ``seconds`` (capped by ``asyncweb.env.max_wait_s``)."""

    seconds: float


@dataclass(frozen=True)
class GoBack:
    """Go back one entry in the page history."""


@dataclass(frozen=True)
class Navigate:
    """Open ``url`` (subject to the task's network policy)."""

    url: str


@dataclass(frozen=True)
class Answer:
    """End the episode with a final answer ``text``."""

    text: str


Action = LeftClick | TypeText | KeyPress | Scroll | Wait | GoBack | Navigate | Answer
ACTION_NAMES = ("left_click", "type", "key", "scroll", "wait", "go_back", "navigate", "answer")


@dataclass(frozen=True)
class ParsedAction:
    """Result of :func:`parse_action`: an action, or ``None`` with the reason it was rejected."""

    action: Action | None
    error: str | None = None
    name: str | None = None

    @property
    def valid(self) -> bool:
        """Whether an action was parsed."""
        return self.action is not None


class _Invalid(Exception):
    """Internal: carries the reason an action is invalid up to :func:`parse_action`."""


def parse_action(
    text: Any,
    *,
    coordinate_mode: str = "normalized",
    viewport: tuple[int, int] = (1280, 720),
    element_targets: Mapping[int, tuple[int, int]] | None = None,
) -> ParsedAction:
    """Parse one model response into an action; never raises.

    Args:
        text: The model's response, containing exactly one ``<tool_call>...</tool_call>`` block.
        coordinate_mode: ``"normalized"`` (0-1000) or ``"pixel"`` coordinates in the response.
        viewport: ``(width, height)`` in pixels, used to convert and range-check coordinates.
        element_targets: Element index -> normalised (0-1000) centre of the elements the prompt listed;
            ``{"element": i}`` clicks element ``[i]``. ``None``: the prompt listed none, and ``element`` is invalid.

    Returns:
        A :class:`ParsedAction`; ``valid`` is False and ``error`` says why when the response is unusable.
    """
    name = None
    try:
        payload = _extract_tool_call(text)
        name, args = _name_and_arguments(payload)
        point = _Point(coordinate_mode, viewport, element_targets)
        return ParsedAction(_build(name, args, point), None, name)
    except _Invalid as exc:
        return ParsedAction(None, str(exc), name)
    except Exception as exc:  # model output must never crash the agent loop
        return ParsedAction(None, f"unparsable action ({type(exc).__name__})", name)


def _extract_tool_call(text: Any) -> dict:
    if not isinstance(text, str):
        raise _Invalid(f"response must be a string, got {type(text).__name__}")
    if len(text) > MAX_RESPONSE_CHARS:
        raise _Invalid(f"response too long ({len(text)} chars > {MAX_RESPONSE_CHARS})")
    blocks = _TOOL_CALL.findall(text)
    if not blocks:
        if "<tool_call>" in text:
            raise _Invalid("unterminated <tool_call> block (missing </tool_call>)")
        raise _Invalid("no <tool_call>...</tool_call> block found")
    if len(blocks) > 1:
        raise _Invalid(f"several tool calls ({len(blocks)}); send exactly one <tool_call> per step")
    try:
        payload = json.loads(blocks[0].strip())
    except (ValueError, RecursionError) as exc:
        raise _Invalid(f"malformed JSON in <tool_call>: {str(exc)[:120]}") from None
    if not isinstance(payload, dict):
        raise _Invalid(f"<tool_call> must hold a JSON object, got {type(payload).__name__}")
    return payload


def _name_and_arguments(payload: dict) -> tuple[str, dict]:
    name = payload.get("name")
    args = payload.get("arguments", {})
    if isinstance(args, str):  # some chat templates double-encode the arguments
        try:
            args = json.loads(args)
        except ValueError:
            raise _Invalid("malformed JSON in 'arguments'") from None
    if not isinstance(args, dict):
        raise _Invalid(f"'arguments' must be an object, got {type(args).__name__}")
    if name == "computer_use":
        name = args.get("action")
        if name is None:
            raise _Invalid("computer_use call is missing field 'action'")
    if not isinstance(name, str):
        raise _Invalid("tool call is missing field 'name'")
    if name not in ACTION_NAMES:
        raise _Invalid(f"unknown action {name[:40]!r}; valid actions are {', '.join(ACTION_NAMES)}")
    return name, args


@dataclass(frozen=True)
class _Point:
    """How a response names a point: coordinates in ``mode`` on ``viewport``, or an element of the listed ones."""

    mode: str
    viewport: tuple[int, int]
    element_targets: Mapping[int, tuple[int, int]] | None


def _build(name: str, args: dict, point: _Point) -> Action:
    if name == "left_click":
        return LeftClick(*_coordinate(args, point, required=True))
    if name == "type":
        text = _string(args, ("text", "content"), MAX_TEXT_CHARS)
        press_enter = args.get("press_enter", args.get("enter", False))
        if not isinstance(press_enter, bool):
            raise _Invalid(f"'press_enter' must be true or false, got {press_enter!r:.40}")
        return TypeText(text, press_enter, _coordinate(args, point, required=False))
    if name == "key":
        return KeyPress(_keys(args))
    if name == "scroll":
        return _scroll(args, point)
    if name == "wait":
        seconds = args.get("time", args.get("seconds", 1.0))
        if not _is_number(seconds) or seconds < 0:
            raise _Invalid(f"'time' must be a number of seconds >= 0, got {seconds!r:.40}")
        return Wait(float(seconds))
    if name == "go_back":
        return GoBack()
    if name == "navigate":
        url = _string(args, ("url",), MAX_URL_CHARS).strip()
        if not url:
            raise _Invalid("'url' must not be empty")
        return Navigate(url)
    return Answer(_string(args, ("text", "answer", "content"), MAX_TEXT_CHARS, allow_empty=True))


def _string(args: dict, keys: tuple[str, ...], limit: int, allow_empty: bool = False) -> str:
    for key in keys:
        if key in args:
            value = args[key]
            if not isinstance(value, str):
                raise _Invalid(f"'{key}' must be a string, got {type(value).__name__}")
            if len(value) > limit:
                raise _Invalid(f"'{key}' too long ({len(value)} chars > {limit})")
            if not value and not allow_empty:
                raise _Invalid(f"'{key}' must not be empty")
            return value
    raise _Invalid(f"missing field '{keys[0]}'")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _coordinate(args: dict, point: _Point, required: bool) -> tuple[float, float] | None:
    if "element" in args:
        return _element_centre(args["element"], point)
    mode, viewport = point.mode, point.viewport
    raw = args.get("coordinate")
    if raw is None and "x" in args and "y" in args:
        raw = [args["x"], args["y"]]
    if raw is None:
        if required:
            raise _Invalid("missing field 'coordinate' ([x, y])")
        return None
    if not isinstance(raw, list | tuple) or len(raw) != 2 or not all(_is_number(v) for v in raw):
        raise _Invalid(f"'coordinate' must be two finite numbers [x, y], got {str(raw)[:60]}")
    x, y = float(raw[0]), float(raw[1])
    width, height = viewport
    if mode == "normalized":
        if not (0 <= x <= 1000 and 0 <= y <= 1000):
            raise _Invalid(f"coordinate ({x:g}, {y:g}) out of range; normalised coordinates lie in [0, 1000]")
        return _normalised_to_pixels(x, y, viewport)
    if not (0 <= x < width and 0 <= y < height):
        raise _Invalid(f"coordinate ({x:g}, {y:g}) out of range; pixels lie in [0, {width}) x [0, {height})")
    return x, y


def _element_centre(index: Any, point: _Point) -> tuple[float, float]:
    if point.element_targets is None:
        raise _Invalid("'element' needs the page's element list in the prompt; give a 'coordinate' [x, y]")
    if not isinstance(index, int) or isinstance(index, bool):
        raise _Invalid(f"'element' must be the index i of a listed element [i], got {str(index)[:40]}")
    if index not in point.element_targets:
        raise _Invalid(f"no element [{index}] in the list")
    return _normalised_to_pixels(*point.element_targets[index], point.viewport)


def _normalised_to_pixels(x: float, y: float, viewport: tuple[int, int]) -> tuple[float, float]:
    """A 0-1000 point in viewport pixels, on pixel centres so that 1000 stays inside the viewport."""
    width, height = viewport
    return min(x / 1000 * width, width - 1), min(y / 1000 * height, height - 1)


def _keys(args: dict) -> tuple[str, ...]:
    raw = args.get("keys", args.get("key"))
    if raw is None:
        raise _Invalid("missing field 'keys'")
    if isinstance(raw, str):
        raw = raw.split("+") if len(raw) > 1 else [raw]
    if not isinstance(raw, list | tuple) or not raw or len(raw) > 5:
        raise _Invalid("'keys' must be a key name or a list of 1-5 key names")
    keys = []
    for key in raw:
        if not isinstance(key, str) or not key.strip() or len(key) > 20:
            raise _Invalid(f"invalid key {str(key)[:20]!r}")
        key = key.strip()
        mapped = _KEY_ALIASES.get(key.lower(), key if len(key) == 1 else key[:1].upper() + key[1:])
        if not _KEY_NAME.match(mapped):
            raise _Invalid(f"invalid key {key!r}")
        keys.append(mapped)
    return tuple(keys)


def _scroll(args: dict, point: _Point) -> Scroll:
    at = _coordinate(args, point, required=False)
    if "pixels" in args and "direction" not in args:
        pixels = args["pixels"]  # Qwen computer-use: positive scrolls up
        if not _is_number(pixels):
            raise _Invalid(f"'pixels' must be a number, got {pixels!r:.40}")
        return Scroll(0, int(-pixels), at)
    direction = args.get("direction", "down")
    amount = args.get("amount", DEFAULT_SCROLL_PX)
    if direction not in ("up", "down", "left", "right"):
        raise _Invalid(f"'direction' must be one of up, down, left, right, got {direction!r:.40}")
    if not _is_number(amount) or amount <= 0 or amount > 10_000:
        raise _Invalid(f"'amount' must be a number of pixels in (0, 10000], got {amount!r:.40}")
    step = int(amount)
    dx = {"left": -step, "right": step}.get(direction, 0)
    dy = {"up": -step, "down": step}.get(direction, 0)
    return Scroll(dx, dy, at)


def describe(action: Action) -> str:
    """Short human-readable form of an action, used in step info and logs."""
    if isinstance(action, LeftClick):
        return f"left_click ({action.x:.0f},{action.y:.0f})"
    if isinstance(action, TypeText):
        return f"type {action.text[:40]!r}" + (" + Enter" if action.press_enter else "")
    if isinstance(action, KeyPress):
        return "key " + "+".join(action.keys)
    if isinstance(action, Scroll):
        return f"scroll ({action.dx},{action.dy})"
    if isinstance(action, Wait):
        return f"wait {action.seconds:g}s"
    if isinstance(action, Navigate):
        return f"navigate {action.url[:80]}"
    if isinstance(action, Answer):
        return f"answer {action.text[:40]!r}"
    return "go_back"
