"""What changed in the agent's Memory since the previous step, as rows the page can highlight.

Memory is a JSON object when the model wrote valid JSON and a raw string otherwise. Objects are compared by
top-level key; raw strings (and a switch between the two kinds) line by line.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Status = Literal["initial", "same", "added", "changed"]
Kind = Literal["object", "text", "none"]


@dataclass(frozen=True)
class MemoryRow:
    """One displayed memory entry.

    Attributes:
        key: Top-level key, or ``None`` for a line of raw text.
        value: The value as display text.
        status: ``initial`` on the first step, else ``same``, ``added`` or ``changed`` relative to the previous step.
    """

    key: str | None
    value: str
    status: Status


@dataclass(frozen=True)
class MemoryView:
    """A step's Memory ready for display.

    Attributes:
        kind: ``object``, ``text`` or ``none`` (the step carried no memory).
        rows: Entries in the model's order.
        removed: Keys (or raw lines) present at the previous step and gone now.
    """

    kind: Kind
    rows: list[MemoryRow] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Plain dict for embedding in the page."""
        return asdict(self)


def value_text(value: Any) -> str:
    """Strings as they are, everything else as compact JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _entries(memory: Any) -> tuple[Kind, list[tuple[str | None, str]]]:
    if memory is None:
        return "none", []
    if isinstance(memory, dict):
        return "object", [(str(k), value_text(v)) for k, v in memory.items()]
    return "text", [(None, line) for line in value_text(memory).splitlines() or [""]]


def diff_memory(previous: Any, current: Any, first: bool) -> MemoryView:
    """Compare one step's memory to the previous step's.

    Args:
        previous: The previous step's memory (object, string or ``None``).
        current: This step's memory.
        first: Whether this is the episode's first step (nothing is highlighted).

    Returns:
        The rows with their status and the removed entries.
    """
    kind, rows = _entries(current)
    prev_kind, prev_rows = _entries(previous)
    if first:
        return MemoryView(kind, [MemoryRow(k, v, "initial") for k, v in rows])
    if kind == "object" and prev_kind == "object":
        before = dict(prev_rows)
        out = [
            MemoryRow(k, v, "added" if k not in before else "same" if before[k] == v else "changed") for k, v in rows
        ]
        now = {k for k, _ in rows}
        return MemoryView(kind, out, [k for k, _ in prev_rows if k not in now])
    # Line-level comparison (multiset, so a repeated line counts once per occurrence).
    before_lines = Counter(_as_lines(prev_kind, prev_rows))
    out = []
    for key, value in rows:
        line = value if key is None else f"{key}: {value}"
        if before_lines[line] > 0:
            before_lines[line] -= 1
            out.append(MemoryRow(key, value, "same"))
        else:
            out.append(MemoryRow(key, value, "added"))
    removed = [line for line, count in before_lines.items() for _ in range(count)]
    return MemoryView(kind, out, removed)


def _as_lines(kind: str, rows: list[tuple[str | None, str]]) -> list[str]:
    return [value if key is None else f"{key}: {value}" for key, value in rows]
