"""Remote browser servers of a pool (``asyncweb.env.remote_endpoints``).

Each :class:`BrowserSlot` of a pool with remote endpoints connects to a server started by
``python -m verl_asyncweb.browser_server`` instead of launching Chromium; slot ``i`` starts on endpoint
``i % len(endpoints)``. An endpoint that cannot be reached (connect fails or times out) is taken out of rotation
and counted (``remote_endpoints_lost``); the slot moves on to the next endpoint in rotation. A lost endpoint is
tried again once ``remote_retry_s`` have passed (lazily, when a slot needs a browser; counted as
``remote_endpoints_restored`` when it answers). Browsers are not moved back: a slot stays where it connected.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from verl_asyncweb.env.stats import PoolStats

logger = logging.getLogger(__name__)
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class RemoteBrowsersUnavailable(RuntimeError):
    """No endpoint of ``asyncweb.env.remote_endpoints`` is in rotation."""


def redacted(endpoint: str) -> str:
    """``endpoint`` without its capability token (``ws://host:port/***``), for logs and error messages."""
    scheme, sep, rest = endpoint.partition("://")
    host, slash, _ = rest.partition("/")
    return f"{scheme}{sep}{host}{slash}***" if slash else endpoint


def describe_connect_error(endpoint: str, exc: BaseException) -> str:
    """First line of a failed connect, the token taken out (Playwright's messages repeat the whole URL)."""
    if isinstance(exc, TimeoutError):
        return "connect timed out"
    text = (str(exc).splitlines() or [""])[0].replace(endpoint, redacted(endpoint))
    text = text.removeprefix("BrowserType.connect: ")[:160]
    return text if type(exc).__name__ == "Error" else f"{type(exc).__name__}: {text}"  # Playwright's plain Error


class RemoteEndpoints:
    """Which endpoints are in rotation; shared by the slots of one pool (one event loop, no locking needed).

    Args:
        endpoints: The ``ws://`` / ``wss://`` endpoints, in round-robin order.
        stats: Where losses, failed connects and restorations are counted.
        retry_s: Time after which a lost endpoint is tried again.
        clock: Monotonic clock in seconds (tests pass a fake one).
    """

    def __init__(
        self,
        endpoints: tuple[str, ...],
        stats: PoolStats,
        retry_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        assert endpoints, "RemoteEndpoints needs at least one endpoint"
        self.endpoints = tuple(endpoints)
        self._stats = stats
        self._retry_s = retry_s
        self._clock = clock
        self._lost: dict[str, tuple[float, str]] = {}  # endpoint -> (when it was lost, why)

    def assign(self, index: int) -> str:
        """Round-robin endpoint of slot ``index``."""
        return self.endpoints[index % len(self.endpoints)]

    def in_rotation(self, endpoint: str) -> bool:
        """Whether ``endpoint`` is not currently lost."""
        return endpoint not in self._lost

    def candidates(self, current: str) -> list[str]:
        """Endpoints to try, in order: ``current``, then the ones after it; lost ones only once their retry is due."""
        start = self.endpoints.index(current)
        ordered = self.endpoints[start:] + self.endpoints[:start]
        now = self._clock()
        due = [e for e in dict.fromkeys(ordered) if e not in self._lost or now - self._lost[e][0] >= self._retry_s]
        return due

    def reached(self, endpoint: str) -> None:
        """A connect to ``endpoint`` succeeded: it is (back) in rotation."""
        if self._lost.pop(endpoint, None) is not None:
            self._stats.add("remote_endpoints_restored")
            logger.info("remote browser endpoint %s is back in rotation", redacted(endpoint))

    def failed(self, endpoint: str, exc: BaseException) -> None:
        """A connect to ``endpoint`` failed: take it out of rotation (counted once per loss) until its retry."""
        why = describe_connect_error(endpoint, exc)
        self._stats.add("remote_connect_failures")
        if endpoint not in self._lost:
            self._stats.add("remote_endpoints_lost")
            logger.warning("remote browser endpoint %s is out of rotation: %s", redacted(endpoint), why)
        self._lost[endpoint] = (self._clock(), why)

    def unavailable(self) -> RemoteBrowsersUnavailable:
        """The error of a slot that found no endpoint in rotation: every endpoint and why it was lost."""
        reasons = "; ".join(f"{redacted(e)}: {why}" for e, (_, why) in self._lost.items())
        return RemoteBrowsersUnavailable(
            f"no endpoint of asyncweb.env.remote_endpoints is in rotation ({reasons}); "
            f"lost endpoints are retried every {self._retry_s:g}s (asyncweb.env.remote_retry_s)"
        )

    def warn_if_unreachable(self, site_origin: str) -> None:
        """Warn when browsers on other hosts are sent to a loopback site origin they cannot reach."""
        site_host = urlsplit(site_origin).hostname or ""
        remote = [e for e in self.endpoints if urlsplit(e).hostname not in _LOOPBACK_HOSTS]
        if site_host in _LOOPBACK_HOSTS and remote:
            logger.warning(
                "remote browsers (%s) are sent to the site server at %s, a loopback address they cannot reach; "
                "set asyncweb.env.site_host=0.0.0.0 (and asyncweb.env.site_public_host)",
                ", ".join(redacted(e) for e in remote),
                site_origin,
            )
