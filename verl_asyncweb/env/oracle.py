"""Helpers for scripted oracles: find elements in an observation's element list and write tool calls.

Oracles act only through :meth:`BrowserPool.step` with the same ``<tool_call>`` text a model would emit; they
locate targets from ``Observation.accessibility_text`` (pool option ``accessibility_text=True``).
"""

from __future__ import annotations

import json
import re

from verl_asyncweb.env.results import Observation

_LINE = re.compile(r'^\[(\d+)\] (\S+)(?: name=(\S+))? "(.*)" @\((\d+),(\d+)\)$')


class ElementNotFound(LookupError):
    """The oracle's target is not on screen."""


def parse_element_lines(lines: list[str]) -> list[dict]:
    """Element-list lines as dicts with ``index``, ``kind``, ``name``, ``text``, ``x``, ``y`` (normalised 0-1000)."""
    out = []
    for line in lines:
        match = _LINE.match(line)
        if match:
            index, kind, name, text, x, y = match.groups()
            out.append({"index": int(index), "kind": kind, "name": name, "text": text, "x": int(x), "y": int(y)})
    return out


def elements(obs: Observation) -> list[dict]:
    """Parse the observation's element list (see :func:`parse_element_lines`)."""
    return parse_element_lines((obs.accessibility_text or "").splitlines())


def find(obs: Observation, text: str | None = None, kind: str | None = None, name: str | None = None) -> list[int]:
    """Centre ``[x, y]`` of the first element matching every filter (exact text, kind prefix, name).

    Interactive elements (links, buttons, inputs, labels) are preferred over text containers.

    Raises:
        ElementNotFound: If nothing matches.
    """
    interactive = ("a", "button", "input", "label", "textarea", "select")
    ranked = sorted(elements(obs), key=lambda el: not el["kind"].startswith(interactive))
    for el in ranked:
        if text is not None and el["text"] != text:
            continue
        if kind is not None and not el["kind"].startswith(kind):
            continue
        if name is not None and el["name"] != name:
            continue
        return [el["x"], el["y"]]
    raise ElementNotFound(f"no element text={text!r} kind={kind!r} name={name!r} in:\n{obs.accessibility_text}")


def tool_call(name: str, **arguments: object) -> str:
    """A ``<tool_call>`` block as a model would write it."""
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def click(coordinate: list[int]) -> str:
    """``left_click`` at a normalised coordinate."""
    return tool_call("left_click", coordinate=coordinate)


def type_text(text: str, press_enter: bool = False, coordinate: list[int] | None = None) -> str:
    """``type`` (clicking ``coordinate`` first when given)."""
    if coordinate is None:
        return tool_call("type", text=text, press_enter=press_enter)
    return tool_call("type", text=text, press_enter=press_enter, coordinate=coordinate)


def answer(text: str) -> str:
    """``answer`` with the final answer."""
    return tool_call("answer", text=text)
