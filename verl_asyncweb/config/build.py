"""Build a typed config dataclass from a Hydra node, naming unknown keys (shared by every ``asyncweb.*`` section)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any, TypeVar

from omegaconf import DictConfig, OmegaConf

T = TypeVar("T")


def plain_dict(node: DictConfig | Mapping[str, Any]) -> dict[str, Any]:
    """A Hydra node (resolved) or a mapping as a plain ``dict``."""
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node)


def build_config(cls: type[T], prefix: str, node: T | DictConfig | Mapping[str, Any] | None) -> T:
    """``cls`` from ``node`` (None → defaults, an instance → itself); ``_target_`` is ignored.

    Raises:
        ValueError: ``node`` has keys ``cls`` does not, e.g. ``asyncweb.tasks has unknown keys ['x']; valid keys
            are [...]``; invalid values raise from ``cls.__post_init__``.
    """
    if node is None:
        return cls()
    if isinstance(node, cls):
        return node
    data = plain_dict(node)
    data.pop("_target_", None)
    valid = sorted(f.name for f in fields(cls) if not f.name.startswith("_"))
    unknown = sorted(set(data) - set(valid))
    if unknown:
        raise ValueError(f"{prefix} has unknown keys {unknown}; valid keys are {valid}")
    return cls(**data)


def check_int(key: str, value: Any, minimum: int) -> None:
    """Raise ``ValueError`` naming the dotted ``key`` unless ``value`` is an integer (not a bool) >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{key} must be >= {minimum}, got {value}")
