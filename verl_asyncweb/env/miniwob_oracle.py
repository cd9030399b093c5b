"""Scripted MiniWoB++ oracles: the actions that solve a task instance, read from its first observation.

Each action is the ``<tool_call>`` text a model would write plus a short intention naming the target, so the
same plan drives the environment tests and the demonstration recorder (:mod:`verl_asyncweb.learning.demos`).
Targets are located in the observation's element list (pool option ``accessibility_text=True``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from verl_asyncweb.env.oracle import click, elements, find, type_text
from verl_asyncweb.env.results import Observation


@dataclass(frozen=True)
class OracleAction:
    """One scripted step: the tool call and what it is for (the demonstration's Intention)."""

    tool_call: str
    intention: str


def _quoted(instruction: str) -> list[str]:
    return re.findall(r'"([^"]*)"', instruction)


def _click_text(obs: Observation, text: str, kind: str | None = None) -> OracleAction:
    return OracleAction(click(find(obs, text, kind=kind)), f'click "{text}"')


def _click_element(element: dict) -> OracleAction:
    return OracleAction(click([element["x"], element["y"]]), f'click "{element["text"]}"')


def miniwob_actions(name: str, obs: Observation, correct: bool = True) -> list[OracleAction]:
    """The actions that solve this instance of MiniWoB++ task ``name`` (``correct=False``: a plausible wrong plan).

    Raises:
        KeyError: If ``name`` has no oracle (see :data:`ORACLE_TASKS`).
        verl_asyncweb.env.oracle.ElementNotFound: If a target is not on the page.
    """
    text = obs.instruction or ""
    if name == "click-test":
        return [_click_text(obs, "Click Me!") if correct else OracleAction(click([900, 900]), "click the corner")]
    if name in ("click-button", "click-link", "click-tab"):
        wanted = re.search(r"Tab #\d+", text).group(0) if name == "click-tab" else _quoted(text)[0]
        kinds = {"click-button": ("button",), "click-tab": ("a",), "click-link": ("span", "a")}[name]
        targets = [e for e in elements(obs) if e["kind"] in kinds]
        return [_click_element(next(t for t in targets if (t["text"] == wanted) == correct))]
    if name == "enter-text":
        word = _quoted(text)[0] if correct else _quoted(text)[0] + "zz"
        field = find(obs, kind="input")
        return [OracleAction(type_text(word, coordinate=field), f'type "{word}"'), _click_text(obs, "Submit")]
    if name == "focus-text":
        target = find(obs, kind="input") if correct else [600, 600]
        return [OracleAction(click(target), "click the text field")]
    if name in ("enter-password", "login-user"):
        values = _quoted(text)
        if not correct:
            values = [value + "x" for value in values]
        if name == "enter-password":
            values = [values[0], values[0]]
        inputs = [[e["x"], e["y"]] for e in elements(obs) if e["kind"].startswith("input")]
        typed = [OracleAction(type_text(v, coordinate=xy), f'type "{v}"') for xy, v in zip(inputs, values, strict=True)]
        return typed + [_click_text(obs, "Login" if name == "login-user" else "Submit")]
    if name in ("click-checkboxes", "click-option"):
        words = re.match(r"Select (.*?) and click Submit", text).group(1).replace(" and ", ", ").split(", ")
        words = [w.strip() for w in words if w.strip() and w != "nothing"]
        labels = [e for e in elements(obs) if e["kind"] == "label"]
        picks = [label for label in labels if (label["text"] in words) == correct][: max(len(words), 1)]
        return [_click_element(label) for label in picks] + [_click_text(obs, "Submit")]
    if name == "click-dialog":
        if correct:
            return [OracleAction(click(find(obs, "Close")), "close the dialog")]
        return [OracleAction(click(find(obs, kind="p")), "click the text")]
    raise KeyError(f"no MiniWoB++ oracle for {name!r}; oracles exist for {list(ORACLE_TASKS)}")


ORACLE_TASKS = (
    "click-test",
    "click-button",
    "click-link",
    "click-tab",
    "enter-text",
    "focus-text",
    "enter-password",
    "login-user",
    "click-checkboxes",
    "click-option",
    "click-dialog",
)
"""MiniWoB++ tasks with a scripted oracle."""
