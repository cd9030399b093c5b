"""One long-lived Chromium browser of the pool, relaunched when it dies (the top rung of the recovery ladder).

With ``asyncweb.env.remote_endpoints`` the slot connects to a remote browser server instead of launching, and
"relaunch" means reconnecting, on the next endpoint in rotation if its own cannot be reached (:mod:`.remote`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from verl_asyncweb.env.config import DETERMINISTIC_CHROMIUM_ARGS, BrowserPoolConfig
from verl_asyncweb.env.remote import RemoteEndpoints, redacted

logger = logging.getLogger(__name__)


class BrowserSlot:
    """Holds one Chromium browser; ``generation`` increases on every (re)launch.

    Sessions remember the generation their context was built on; a session whose generation is older than the
    slot's rebuilds its context on the new browser.

    Args:
        index: Slot number in the pool.
        playwright: The pool's started Playwright.
        config: Pool configuration.
        remotes: The pool's remote endpoints; ``None`` launches a local Chromium.
    """

    def __init__(
        self, index: int, playwright: Any, config: BrowserPoolConfig, remotes: RemoteEndpoints | None = None
    ) -> None:
        self.index = index
        self.generation = 0
        self.browser: Any = None
        self.endpoint = remotes.assign(index) if remotes else None  # the remote server this slot uses
        self._playwright = playwright
        self._config = config
        self._remotes = remotes
        self._lock = asyncio.Lock()

    @property
    def alive(self) -> bool:
        """Whether the browser is launched and still connected."""
        return self.browser is not None and self.browser.is_connected()

    async def ensure(self) -> bool:
        """Launch (or connect) the browser if it is missing or disconnected.

        Returns:
            True if this call (re)launched or (re)connected it.

        Raises:
            RemoteBrowsersUnavailable: With remote endpoints, if none in rotation could be reached.
        """
        async with self._lock:
            if self.alive:
                return False
            await self._discard()
            self.browser = await (self._connect() if self._remotes else self._launch())
            self.generation += 1
            where = f"connected to {redacted(self.endpoint)}" if self.endpoint else "launched"
            logger.info("browser %d %s (generation %d)", self.index, where, self.generation)
            return True

    async def _launch(self) -> Any:
        args = list(self._config.chromium_args)
        if self._config.deterministic_clock:
            args += [a for a in DETERMINISTIC_CHROMIUM_ARGS if a not in args]
        return await asyncio.wait_for(
            self._playwright.chromium.launch(
                executable_path=self._config.resolve_executable(),
                args=args,
                headless=True,
                timeout=self._config.launch_timeout_s * 1000,
            ),
            self._config.launch_timeout_s + 5,
        )

    async def _connect(self) -> Any:
        """Connect to this slot's endpoint, or the next one in rotation; the server chose executable and flags."""
        assert self._remotes is not None and self.endpoint is not None
        timeout_s = self._config.launch_timeout_s
        for endpoint in self._remotes.candidates(self.endpoint):
            try:
                browser = await asyncio.wait_for(
                    self._playwright.chromium.connect(endpoint, timeout=timeout_s * 1000), timeout_s + 5
                )
            except Exception as exc:  # refused, timed out, bad token: the endpoint is out until its retry
                self._remotes.failed(endpoint, exc)
                continue
            self._remotes.reached(endpoint)
            self.endpoint = endpoint
            return browser
        raise self._remotes.unavailable()

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
