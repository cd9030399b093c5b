"""Profile files: read (YAML or JSON, every key checked and typed), resolve packaged names, write with sources."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from pathlib import Path
from typing import Any

import yaml

from verl_asyncweb.plan.profile import Profile, require

PROFILE_DIR = Path(__file__).parent / "profiles"
"""The packaged profiles; ``--profile NAME`` resolves ``NAME.yaml`` here."""


def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _coerce(key: str, value: Any, expected: Any) -> Any:
    """``value`` as type ``expected`` (a field's annotation); strings from the command line are parsed."""
    optional = typing.get_origin(expected) in (typing.Union, types.UnionType)
    if optional:
        if value is None or (isinstance(value, str) and value.lower() in ("null", "none")):
            return None
        expected = next(t for t in typing.get_args(expected) if t is not type(None))
    if expected is bool:
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        require(isinstance(value, bool), key, value, "true or false")
        return value
    if expected is int:
        if isinstance(value, str):
            value = _parse_number(key, value, "an integer")
        require(isinstance(value, int) and not isinstance(value, bool), key, value, "an integer")
        return value
    if expected is float:
        if isinstance(value, str):
            value = _parse_number(key, value, "a number")
        require(isinstance(value, (int, float)) and not isinstance(value, bool), key, value, "a number")
        require(math.isfinite(value), key, value, "a finite number")
        return float(value)
    require(isinstance(value, str), key, value, "a string")
    return value


def _parse_number(key: str, text: str, allowed: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{key} must be {allowed}, got {text!r}") from None


def _build(cls: type, data: Any, prefix: str) -> Any:
    if not isinstance(data, dict):
        raise ValueError(f"{prefix or 'the profile'} must be a mapping, got {data!r}")
    types = _field_types(cls)
    unknown = sorted(set(data) - set(types))
    if unknown:
        where = f"{prefix}." if prefix else ""
        raise ValueError(f"unknown profile key {where}{unknown[0]}; valid keys here: {sorted(types)}")
    missing = sorted(set(types) - set(data))
    if missing:
        where = f"{prefix}." if prefix else ""
        raise ValueError(f"profile key {where}{missing[0]} is missing (every cost comes from the file)")
    values = {}
    for name, expected in types.items():
        key = f"{prefix}.{name}" if prefix else name
        if dataclasses.is_dataclass(expected):
            values[name] = _build(expected, data[name], key)
        else:
            values[name] = _coerce(key, data[name], expected)
    return cls(**values)


def profile_from_dict(data: dict[str, Any]) -> Profile:
    """Build and validate a :class:`Profile` from nested mappings (a loaded YAML file)."""
    return _build(Profile, data, "")


def resolve_profile_path(name_or_path: str) -> Path:
    """A profile file: an existing path, or the name of a packaged profile (``gpu_paper``)."""
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path
    packaged = PROFILE_DIR / f"{name_or_path}.yaml"
    if packaged.is_file():
        return packaged
    names = sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))
    raise ValueError(f"--profile must be a profile file or one of {names}, got {name_or_path!r}")


def load_profile(name_or_path: str | Path) -> Profile:
    """Read and validate a profile file (YAML or JSON)."""
    path = resolve_profile_path(str(name_or_path))
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ValueError(f"profile {path} is not valid YAML/JSON: {exc}") from None
    return profile_from_dict(data)


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        text = format(value, ".6g")
        mantissa, _, exponent = text.partition("e")
        if exponent and "." not in mantissa:
            text = f"{mantissa}.0e{exponent}"  # PyYAML reads 1e-05 as a string, 1.0e-05 as a float
        return text
    return str(value)


def dump_profile(profile: Profile, sources: dict[str, str], header: list[str]) -> str:
    """YAML text of ``profile``, each value followed by ``# sources: ...`` from ``sources`` (dotted keys)."""
    lines = [f"# {line}" if line else "#" for line in header]

    def emit(obj: Any, prefix: str, indent: str) -> None:
        for f in dataclasses.fields(obj):
            value, key = getattr(obj, f.name), f"{prefix}{f.name}"
            if dataclasses.is_dataclass(value):
                lines.append(f"{indent}{f.name}:")
                emit(value, f"{key}.", indent + "  ")
                continue
            note = f"  # sources: {sources[key]}" if key in sources else ""
            lines.append(f"{indent}{f.name}: {_scalar(value)}{note}")

    emit(profile, "", "")
    return "\n".join(lines) + "\n"
