"""The job's named helper actors (rollout stats, branch board): created by the first process that asks."""

from __future__ import annotations

from typing import Any

_handles: dict[str, Any] = {}


def named_actor(actor_class: Any, name: str) -> Any:
    """Get or create the job's ``actor_class`` actor called ``name``; the handle is cached per process."""
    if name not in _handles:
        _handles[name] = actor_class.options(name=name, get_if_exists=True).remote()
    return _handles[name]
