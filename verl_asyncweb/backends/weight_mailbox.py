"""The mailbox actor of the ``ray_object_store`` checkpoint engine (:mod:`verl_asyncweb.backends.weight_sync`).

A module of its own, importing only Ray: the actor's process imports the module that defines its class, and
that of the engine imports torch and verl (~0.5 GiB per process).
"""

from __future__ import annotations

import asyncio

import ray


@ray.remote(num_cpus=0)
class WeightMailbox:
    """Holds the object reference of the newest published state dict and wakes up waiting receivers."""

    def __init__(self) -> None:
        self._version: int | None = None
        self._refs: list[ray.ObjectRef] = []
        self._published = asyncio.Condition()

    async def publish(self, version: int | None, refs: list[ray.ObjectRef]) -> None:
        async with self._published:
            self._version, self._refs = version, refs
            self._published.notify_all()

    async def fetch(self, min_version: int | None) -> tuple[int | None, list[ray.ObjectRef]]:
        """Return the newest state dict whose version is at least ``min_version``, waiting for it if needed."""
        async with self._published:
            await self._published.wait_for(lambda: self._refs and _at_least(self._version, min_version))
            return self._version, self._refs


def _at_least(version: int | None, min_version: int | None) -> bool:
    return min_version is None or (version is not None and version >= min_version)
