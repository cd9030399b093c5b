"""One long-lived Chromium process of the pool, relaunched when it dies (the top rung of the recovery ladder)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from verl_asyncweb.env.config import DETERMINISTIC_CHROMIUM_ARGS, BrowserPoolConfig

logger = logging.getLogger(__name__)


class BrowserSlot:
    """Holds one Chromium browser; ``generation`` increases on every (re)launch.

    Sessions remember the generation their context was built on; a session whose generation is older than the
    slot's rebuilds its context on the new browser.
    """

    def __init__(self, index: int, playwright: Any, config: BrowserPoolConfig) -> None:
        self.index = index
        self.generation = 0
        self.browser: Any = None
        self._playwright = playwright
        self._config = config
        self._lock = asyncio.Lock()

    @property
    def alive(self) -> bool:
        """Whether the browser is launched and still connected."""
        return self.browser is not None and self.browser.is_connected()

    async def ensure(self) -> bool:
        """Launch the browser if it is missing or disconnected.

        Returns:
            True if this call (re)launched it.
        """
        async with self._lock:
            if self.alive:
                return False
            await self._discard()
            args = list(self._config.chromium_args)
            if self._config.deterministic_clock:
                args += [a for a in DETERMINISTIC_CHROMIUM_ARGS if a not in args]
            self.browser = await asyncio.wait_for(
                self._playwright.chromium.launch(
                    executable_path=self._config.resolve_executable(),
                    args=args,
                    headless=True,
                    timeout=self._config.launch_timeout_s * 1000,
                ),
                self._config.launch_timeout_s + 5,
            )
            self.generation += 1
            logger.info("browser %d launched (generation %d)", self.index, self.generation)
            return True

    async def restart(self, generation: int) -> bool:
        """Close and relaunch the browser unless someone already did since ``generation``.

        Returns:
            True if this call relaunched it.
        """
        async with self._lock:
            if self.generation != generation:
                return False
            await self._discard()
        return await self.ensure()

    async def _discard(self) -> None:
        browser, self.browser = self.browser, None
        if browser is None:
            return
        try:
            await asyncio.wait_for(browser.close(), self._config.close_timeout_s)
        except Exception as exc:  # a dead browser may fail to close; its process is reaped by Playwright
            logger.warning("browser %d did not close cleanly: %s", self.index, type(exc).__name__)

    async def close(self) -> None:
        """Close the browser (bounded by ``close_timeout_s``)."""
        async with self._lock:
            await self._discard()
