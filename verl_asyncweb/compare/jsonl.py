"""Tolerant JSONL reading: a run killed mid-write leaves a truncated last line, which must not hide the rest."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_ATTEMPT_RE = re.compile(r"\.attempt-(\d+)\.jsonl$")


@dataclass(frozen=True)
class CorruptLine:
    """A JSONL line that could not be used.

    Attributes:
        path: File the line is in.
        line_no: 1-based line number.
        reason: Why it was skipped, e.g. the JSON decoder's message.
        excerpt: The first characters of the line, for the warning text.
    """

    path: Path
    line_no: int
    reason: str
    excerpt: str

    def describe(self) -> str:
        """One-line human description used in warnings."""
        return f"{self.path.name}:{self.line_no}: {self.reason} ({self.excerpt!r})"


def attempt_ordered(paths: list[Path]) -> list[Path]:
    """Order log files oldest first: ``X.jsonl``, then ``X.attempt-1.jsonl``, ``X.attempt-2.jsonl``, ..., then others.

    Resumed runs write one file per attempt; reading in this order lets later lines override earlier ones.
    """

    def key(path: Path) -> tuple[int, int, str]:
        match = _ATTEMPT_RE.search(path.name)
        if match:
            return (1, int(match.group(1)), path.name)
        if "." not in path.name.removesuffix(".jsonl"):
            return (0, 0, path.name)
        return (2, 0, path.name)

    return sorted(paths, key=key)


def iter_objects(path: Path, corrupt: list[CorruptLine]) -> Iterator[tuple[int, dict]]:
    """Yield each JSON object of one JSONL file, appending unusable lines to ``corrupt`` instead of raising.

    Args:
        path: The JSONL file.
        corrupt: Collects one :class:`CorruptLine` per skipped line (blank lines are not counted).

    Yields:
        ``(line_no, object)`` for each decoded object, in file order (``line_no`` is 1-based).
    """
    try:
        handle = path.open("r", encoding="utf-8", errors="replace")
    except OSError as err:
        corrupt.append(CorruptLine(path, 0, f"cannot open: {err}", ""))
        return
    with handle:
        for line_no, line in enumerate(handle, start=1):
            text = line.strip()
            if not text:
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as err:
                corrupt.append(CorruptLine(path, line_no, f"invalid JSON: {err.msg}", text[:60]))
                continue
            if not isinstance(obj, dict):
                reason = f"expected a JSON object, got {type(obj).__name__}"
                corrupt.append(CorruptLine(path, line_no, reason, text[:60]))
                continue
            yield line_no, obj
