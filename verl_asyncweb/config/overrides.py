"""Command-line overrides checked against verl's typed config before anything starts.

verl turns each config node that names a ``_target_`` dataclass into that dataclass inside its Ray workers, so a
value of the wrong type (``actor_rollout_ref.actor.optim.lr=abc``) or an added key the dataclass does not have
(``+actor_rollout_ref.actor.optim.lrr=1e-3``) used to surface tens of seconds later as a worker traceback that
never named the key. Here they are refused at composition, naming the key, the type verl expects and the nearest
valid key; a mistyped key gets "did you mean".

Nodes no dataclass types (``trainer``, ``data``, ...) are plain dicts that verl reads with ``config.get("name")``:
a key added there (``+trainer.val_only=true``) is accepted when verl's or the plugin's source reads that name
optionally, or when it goes into a node the recipe leaves empty (maps forwarded as keyword arguments, such as
``actor_rollout_ref.model.override_config``); any other is refused, as nothing would read it.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import importlib.util
import re
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf


def override_key(override: str) -> tuple[str, str]:
    """``(prefix, key)`` of a Hydra override: ``+a.b=1`` -> ``("+", "a.b")``."""
    key = override.split("=", 1)[0]
    stripped = key.lstrip("+~")
    return key[: len(key) - len(stripped)], stripped


def config_keys(cfg: DictConfig, prefix: str = "") -> list[str]:
    """Every dotted key of ``cfg`` (nodes and leaves)."""
    keys = []
    for name in cfg.keys():
        path = f"{prefix}.{name}" if prefix else str(name)
        keys.append(path)
        node = cfg._get_node(name)
        if isinstance(node, DictConfig) and not node._is_missing() and not node._is_none():
            keys.extend(config_keys(node, path))
    return keys


def did_you_mean(cfg: DictConfig, key: str) -> str:
    """``"; did you mean X?"`` for the valid key nearest to ``key``, or ``""``."""
    parent = key.rpartition(".")[0]
    node = OmegaConf.select(cfg, parent, default=None) if parent else cfg
    siblings = [f"{parent}.{name}" if parent else str(name) for name in node] if isinstance(node, DictConfig) else []
    for candidates in (siblings, config_keys(cfg)):
        close = difflib.get_close_matches(key, candidates, n=1, cutoff=0.75)
        if close:
            return f"; did you mean {close[0]}?"
    return ""


def check_overrides(cfg: DictConfig, overrides: list[str], base: Callable[[], DictConfig]) -> None:
    """Raise ``ValueError`` for the first override whose value the config cannot take or whose added key nothing
    reads (see the module docstring). ``base`` composes the recipe without the overrides (called only when an
    override needs it)."""
    for override in overrides:
        prefix, key = override_key(override)
        if prefix == "~":
            continue
        parent, _, name = key.rpartition(".")
        value = OmegaConf.select(cfg, key, default=None)
        section = key.split(".", 1)[0]
        if prefix == "+" and section not in base():
            raise ValueError(
                f"+{key} adds a section {section!r} that neither verl nor the plugin reads{did_you_mean(base(), key)}"
            )
        owner = _dataclass_of(OmegaConf.select(cfg, parent, default=None) if parent else None)
        if owner is None and prefix == "+":
            _check_added_key(base(), key)
            continue
        if owner is None:
            if isinstance(value, str):
                _check_like_the_recipe(base(), key, value)
            continue
        fields = {field.name for field in dataclasses.fields(owner)}
        if name not in fields:
            close = difflib.get_close_matches(name, sorted(fields), n=1, cutoff=0.6)
            hint = f"; did you mean {parent}.{close[0]}?" if close else ""
            raise ValueError(f"{key} is not a field of verl's {owner.__name__} ({parent}), so nothing reads it{hint}")
        expected = _field_type(owner, name)
        if expected is not None and not _accepts(expected, value):
            raise ValueError(
                f"{key}={value!r} ({type(value).__name__}): verl's {owner.__name__}.{name} is {_type_name(expected)}"
            )


def _check_added_key(base: DictConfig, key: str) -> None:
    """``+key`` under an untyped node: refused unless its first new name is read optionally by verl or the plugin
    or goes into a node the recipe leaves empty."""
    parts = key.split(".")
    for depth in range(1, len(parts)):
        parent, name = ".".join(parts[:depth]), parts[depth]
        node = OmegaConf.select(base, parent, default=None)
        if not isinstance(node, DictConfig):
            return  # under a value the recipe does not hold as a node: Hydra says so itself
        if name in node:
            continue
        if len(node) == 0 or name in optionally_read_names() or _is_free_map(base, parent):
            return
        raise ValueError(
            f"+{key} adds {name!r} under {parent}, which neither verl nor the plugin reads"
            f"{did_you_mean(base, f'{parent}.{name}')}"
        )


def _is_free_map(base: DictConfig, key: str) -> bool:
    """Whether ``key`` is a dataclass field typed as a dict (a map verl forwards, such as ``override_config``)."""
    parent, _, name = key.rpartition(".")
    owner = _dataclass_of(OmegaConf.select(base, parent, default=None) if parent else None)
    if owner is None:
        return False
    expected = _field_type(owner, name)
    arms = typing.get_args(expected) if typing.get_origin(expected) in (typing.Union, types.UnionType) else [expected]
    return any(arm is dict or typing.get_origin(arm) is dict for arm in arms)


_OPTIONAL_READ = re.compile(
    r"""(?:\.get\(\s*|getattr\([^,()]+,\s*)["']([A-Za-z_]\w*)["']|["']([A-Za-z_]\w*)["']\s+(?:not\s+)?in\s"""
)


@functools.cache
def optionally_read_names() -> frozenset[str]:
    """Names verl's and the plugin's source read from a config that may lack them (``.get("name")``,
    ``getattr(x, "name", ...)``, ``"name" in x``): the keys a user may add to an untyped node."""
    names: set[str] = set()
    for package in ("verl", "verl_asyncweb"):
        root = Path(importlib.util.find_spec(package).origin).parent
        for source in root.rglob("*.py"):
            for match in _OPTIONAL_READ.finditer(source.read_text(errors="ignore")):
                names.add(match.group(1) or match.group(2))
    return frozenset(names)


def _check_like_the_recipe(base: DictConfig, key: str, value: str) -> None:
    """A key no dataclass types: text where the recipe holds a number or a flag is a typo."""
    default = OmegaConf.select(base, key, default=None)
    if isinstance(default, bool | int | float):
        raise ValueError(f"{key}={value!r} is text, but the recipe's value is {type(default).__name__} ({default!r})")


def _dataclass_of(node: Any) -> type | None:
    if not isinstance(node, DictConfig) or "_target_" not in node:
        return None
    module, _, name = str(node._target_).rpartition(".")
    try:
        target = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return None
    return target if dataclasses.is_dataclass(target) else None


def _field_type(owner: type, name: str) -> Any:
    try:
        return typing.get_type_hints(owner)[name]
    except Exception:  # an annotation verl cannot resolve here: nothing to check against
        return None


def _accepts(expected: Any, value: Any) -> bool:
    """Whether a composed override ``value`` is one OmegaConf can turn into ``expected`` (unknown types pass)."""
    origin = typing.get_origin(expected)
    if expected is Any or isinstance(expected, typing.TypeVar):
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(arg, value) for arg in typing.get_args(expected))
    if origin is typing.Literal:
        return value in typing.get_args(expected)
    if expected is type(None):
        return value is None
    if expected is bool:
        return isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if expected is str:
        return isinstance(value, str | int | float) and not isinstance(value, bool)
    if origin in (list, tuple) or expected in (list, tuple):
        return isinstance(value, ListConfig | list | tuple)
    if origin is dict or expected is dict:
        return isinstance(value, DictConfig | dict)
    return True


def _type_name(expected: Any) -> str:
    if typing.get_origin(expected) in (typing.Union, types.UnionType):
        return " or ".join(_type_name(arg) for arg in typing.get_args(expected))
    if expected is type(None):
        return "None"
    return getattr(expected, "__name__", str(expected))
