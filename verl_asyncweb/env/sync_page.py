"""Playwright's sync API over the pool's async objects, for third-party task code written against it (BrowserGym).

BrowserGym's tasks take a ``playwright.sync_api.Page`` (``setup(page)``, ``validate(page, chat)``). The pool drives
Chromium through the async API on its event loop, and one process cannot hold both APIs' drivers on one loop. So
the task code runs in a worker thread (:mod:`verl_asyncweb.env.task_threads`) and gets a :class:`SyncFacade` of
the pool's own page: every attribute is the async object's; a call that returns an awaitable is run on the pool's loop
(``run_coroutine_threadsafe``) and waited for, bounded by ``timeout_s``; Playwright objects it returns (locators,
frames, element handles, the context) come back wrapped the same way. No second browser client, no CDP port:
the task acts on the very page the agent sees, with the pool's network policy and recovery ladder. The cost is a
thread hop per call (tens of microseconds next to the call's own round trip to Chromium).
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

_ASYNC_API = "playwright.async_api"


def _is_playwright(value: Any) -> bool:
    return type(value).__module__.startswith(_ASYNC_API)


class SyncFacade:
    """A blocking view of an async Playwright object; call it only from a thread other than ``loop``'s.

    Args:
        target: The async Playwright object (a ``Page``, ``Locator``, ``Frame``, ...).
        loop: The event loop that owns it.
        timeout_s: Bound of one call (Playwright's own timeouts apply inside it).
    """

    def __init__(self, target: Any, loop: asyncio.AbstractEventLoop, timeout_s: float) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_loop", loop)
        object.__setattr__(self, "_timeout_s", timeout_s)
        # Attributes task code sets on the page (BrowserGym's ``page._bgym_scale_factor``) stay on the facade.
        object.__setattr__(self, "_local", {})

    def __getattr__(self, name: str) -> Any:
        local = object.__getattribute__(self, "_local")
        if name in local:
            return local[name]
        value = getattr(self._target, name)
        if callable(value) and not _is_playwright(value):
            return lambda *args, **kwargs: self._resolve(value(*_unwrap(args), **_unwrap(kwargs)))
        return self._wrap(value)

    def __setattr__(self, name: str, value: Any) -> None:
        self._local[name] = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SyncFacade) and other._target is self._target

    def __hash__(self) -> int:
        return hash(id(self._target))

    def __repr__(self) -> str:
        return f"SyncFacade({self._target!r})"

    def _resolve(self, result: Any) -> Any:
        if inspect.isawaitable(result):
            future = asyncio.run_coroutine_threadsafe(_awaited(result), self._loop)
            try:
                result = future.result(timeout=self._timeout_s)
            except TimeoutError:
                future.cancel()
                raise
        return self._wrap(result)

    def _wrap(self, value: Any) -> Any:
        if _is_playwright(value):
            return SyncFacade(value, self._loop, self._timeout_s)
        if isinstance(value, list):
            return [self._wrap(item) for item in value]
        return value


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _unwrap(values: Any) -> Any:
    """Arguments with facades replaced by their async objects (``page.evaluate(js, handle)``)."""
    if isinstance(values, tuple):
        return tuple(_unwrap(v) for v in values)
    if isinstance(values, dict):
        return {k: _unwrap(v) for k, v in values.items()}
    if isinstance(values, list):
        return [_unwrap(v) for v in values]
    return values._target if isinstance(values, SyncFacade) else values
