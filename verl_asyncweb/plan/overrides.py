"""``key=value`` overrides of a profile's fields (dotted keys, as in the YAML), checked like the file itself."""

from __future__ import annotations

import dataclasses
from typing import Any

from verl_asyncweb.plan.profile import Profile
from verl_asyncweb.plan.profile_file import profile_from_dict

GPU_SPLIT_KEY = "gpu_split"
"""``gpu_split=R:T`` sets ``rollout.gpus=R`` and ``trainer.gpus=T`` in one knob (a split of a fixed cluster)."""


def parse_assignment(text: str) -> tuple[str, str]:
    """``"key=value"`` -> ``(key, value)``."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"overrides must be KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def valid_keys(profile: Profile) -> list[str]:
    """Every key an override may set."""

    def leaves(obj: Any, prefix: str) -> list[str]:
        keys = []
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            key = f"{prefix}{f.name}"
            keys.extend(leaves(value, f"{key}.") if dataclasses.is_dataclass(value) else [key])
        return keys

    return [*leaves(profile, ""), GPU_SPLIT_KEY]


def _expand(key: str, value: str) -> list[tuple[str, str]]:
    if key != GPU_SPLIT_KEY:
        return [(key, value)]
    rollout, sep, trainer = value.partition(":")
    if not sep:
        raise ValueError(f"{GPU_SPLIT_KEY} must be ROLLOUT_GPUS:TRAINER_GPUS, e.g. 48:16, got {value!r}")
    return [("rollout.gpus", rollout), ("trainer.gpus", trainer)]


def apply_overrides(profile: Profile, assignments: list[tuple[str, str]]) -> Profile:
    """``profile`` with each ``(dotted key, text value)`` set; the result is validated like a loaded file.

    Raises:
        ValueError: an unknown key (the message lists the valid ones) or a bad value (the message names the key).
    """
    data = dataclasses.asdict(profile)
    for key, value in assignments:
        for leaf_key, leaf_value in _expand(key, value):
            *path, name = leaf_key.split(".")
            node = data
            for part in path:
                node = node.get(part) if isinstance(node, dict) else None
            if not isinstance(node, dict) or name not in node or isinstance(node[name], dict):
                raise ValueError(f"unknown profile key {key!r}; valid keys: {', '.join(valid_keys(profile))}")
            node[name] = leaf_value
    return profile_from_dict(data)
