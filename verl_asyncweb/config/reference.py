"""``python -m verl_asyncweb.config.reference [--out FILE]``: the configuration reference of every ``asyncweb.*``
key (type, default, meaning), generated from the typed config's dataclasses and their docstrings.

``docs/configuration.md`` is this command's output; ``tests/unit/test_config_reference.py`` checks that it is
current and that every key has a meaning.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
import sys
import typing
from pathlib import Path
from typing import Any

HEADER = """# Configuration reference: `asyncweb.*`

Every key of the `asyncweb:` node that recipes carry next to verl's own config, with its type, default and meaning.
Generated from the typed config (`verl_asyncweb/config/schema.py` and the dataclasses it names) by
`python -m verl_asyncweb.config.reference --out docs/configuration.md`; a test keeps it current. verl's own keys are
documented by verl; which of them a recipe must set for the `asyncweb` trainer is in
[algorithms.md](algorithms.md), and task sources and the WebGym task file in [recipes.md](recipes.md).
"""


def field_meanings(cls: type) -> dict[str, str]:
    """The ``Args:`` section of a dataclass's docstring: field name -> its description on one line."""
    doc = inspect.getdoc(cls) or ""
    meanings: dict[str, str] = {}
    in_args, current = False, None
    for line in doc.splitlines():
        if line.strip() == "Args:":
            in_args = True
            continue
        if not in_args:
            continue
        if line and not line.startswith(" "):
            break
        match = re.match(r"^ {4}(\w+)(?: \([^)]*\))?: ?(.*)$", line)
        if match:
            current = match.group(1)
            meanings[current] = match.group(2).strip()
        elif current and line.strip():
            meanings[current] += " " + line.strip()
    return meanings


def _markdown(text: str) -> str:
    """Docstring text as markdown: Sphinx roles become code (``:data:`~a.b.C``` -> ```C```), pipes are escaped."""
    text = re.sub(r":\w+:`~[\w.]*?(\w+)`", r"`\1`", text)
    text = re.sub(r":\w+:`([^`]+)`", r"`\1`", text)
    return text.replace("|", "\\|")


def _type_name(annotation: Any) -> str:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    return text.replace("typing.", "").replace("|", "\\|")


def _default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return "required"


def _format_default(value: Any) -> str:
    if isinstance(value, str):
        return f"`{value!r}`" if value else "`''`"
    return f"`{value!r}`".replace("|", "\\|")


def _nested(cls: type, name: str) -> type | None:
    """The dataclass a field holds (also when it may be ``None``), else ``None``."""
    hint = typing.get_type_hints(cls).get(name)
    candidates = [arg for arg in typing.get_args(hint) if arg is not type(None)] or [hint]
    return candidates[0] if len(candidates) == 1 and dataclasses.is_dataclass(candidates[0]) else None


def sections(cls: type, prefix: str) -> list[tuple[str, type]]:
    """``(dotted prefix, dataclass)`` of ``cls`` and of every dataclass field below it, depth first."""
    found = [(prefix, cls)]
    for field in dataclasses.fields(cls):
        nested = _nested(cls, field.name)
        if nested is not None:
            found.extend(sections(nested, f"{prefix}.{field.name}"))
    return found


def reference() -> str:
    """The markdown of ``docs/configuration.md``."""
    from verl_asyncweb.config.schema import AsyncWebConfig

    parts = [HEADER]
    for prefix, cls in sections(AsyncWebConfig, "asyncweb"):
        meanings = field_meanings(cls)
        summary = _markdown((inspect.getdoc(cls) or "").split("\n\n")[0].replace("\n", " "))
        rows = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
        for field in dataclasses.fields(cls):
            if field.name.startswith("_"):
                continue
            nested = _nested(cls, field.name)
            anchor = f"{prefix}.{field.name}".replace(".", "")
            default = f"see [`{prefix}.{field.name}`](#{anchor})" if nested else None
            default = default or _format_default(_default(field))
            meaning = _markdown(meanings.get(field.name, ""))
            rows.append(f"| `{prefix}.{field.name}` | `{_type_name(field.type)}` | {default} | {meaning} |")
        parts.append(f"## `{prefix}`\n\n{summary} ({cls.__name__})\n\n" + "\n".join(rows) + "\n")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m verl_asyncweb.config.reference", description=__doc__.split("\n\n")[0].replace("\n", " ")
    )
    parser.add_argument("--out", type=Path, default=None, help="write here (default: print)")
    args = parser.parse_args(argv)
    text = reference()
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
