"""Typed configs of the environment layer (``asyncweb.env.*``), validated on construction."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from verl.base_config import BaseConfig

# The flags live in a verl-free module (the browser server imports them); importable from here as before.
from verl_asyncweb.env.chromium import (  # noqa: F401
    DEFAULT_CHROMIUM_ARGS,
    DETERMINISTIC_CHROMIUM_ARGS,
    LOOPBACK_ONLY_ARGS,
    find_chromium,
)


def _positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")


@dataclass
class LatencyConfig(BaseConfig):
    """Simulated web latency added to every step (benchmarks only; off by default).

    Each step sleeps ``min(X, max_delay_s)`` with ``X ~ LogNormal(ln(median_s), sigma)``. With the defaults
    (median 1.5 s, sigma 1.15) about 5% of steps take 10 s or more, like live websites.

    Args:
        enable: Add the delay at all.
        median_s: Median delay in seconds.
        sigma: Log-space standard deviation (tail weight).
        max_delay_s: Hard cap of one delay in seconds.
        seed: Seed of the pool's delay generator.
    """

    enable: bool = False
    median_s: float = 1.5
    sigma: float = 1.15
    max_delay_s: float = 60.0
    seed: int = 0

    def __post_init__(self):
        _positive("asyncweb.env.latency.median_s", self.median_s)
        if not self.sigma >= 0:
            raise ValueError(f"asyncweb.env.latency.sigma must be >= 0, got {self.sigma!r}")
        _positive("asyncweb.env.latency.max_delay_s", self.max_delay_s)

    @property
    def mu(self) -> float:
        """Log-space mean of the delay distribution."""
        return math.log(self.median_s)


@dataclass
class BrowserPoolConfig(BaseConfig):
    """Configuration of :class:`verl_asyncweb.env.BrowserPool` (``asyncweb.env``).

    Args:
        num_browsers: Chromium processes kept alive for the whole run.
        pages_per_browser: Concurrent sessions (context + page) per browser.
        executable_path: Chromium binary; ``None`` looks up ``chromium`` on ``PATH``. Not used with
            ``remote_endpoints`` (the browser server chose its binary).
        chromium_args: Command-line flags of every browser launched here (a browser server uses its own).
        viewport_width: Viewport width in CSS pixels.
        viewport_height: Viewport height in CSS pixels.
        screenshot_format: ``"jpeg"`` or ``"png"``.
        screenshot_quality: JPEG quality 1-100 (ignored for PNG).
        accessibility_text: Add a text list of visible elements with their centres to each observation.
        coordinate_mode: ``"normalized"`` (0-1000 on both axes, WebGym) or ``"pixel"``.
        step_timeout_s: Bound of one whole step (action, settling, observation).
        action_timeout_s: Bound of every single browser call.
        navigation_timeout_s: Bound of waiting for a page to commit and reach DOMContentLoaded.
        reset_timeout_s: Bound of one reset (navigation to the start page and first observation).
        launch_timeout_s: Bound of launching one browser.
        close_timeout_s: Bound of closing a context or a browser before it is abandoned.
        max_wait_s: Longest ``wait`` action a model may ask for.
        locale: Browser locale of every context.
        timezone_id: Time zone of every context.
        site_host: Interface the bundled site server listens on (port chosen by the OS); ``0.0.0.0`` or ``::``
            to serve remote browsers.
        site_public_host: Host name browsers are sent to for the site server (the origin of MiniWoB++ and the
            offline sites). ``None``: ``site_host``, or, when ``site_host`` is a wildcard address, this machine's
            host name (``socket.gethostname()``, looked up where the pool starts, i.e. on the rollout worker).
            Remote browsers must be able to resolve and reach it.
        start_site_server: Start the bundled site server (MiniWoB++ and the offline sites) with the pool.
        remote_endpoints: Websocket endpoints (``ws://`` or ``wss://``) of browser servers started with
            ``python -m verl_asyncweb.browser_server`` on other (CPU) hosts. Empty: launch Chromium here. Otherwise
            every browser connects instead of launching, slot ``i`` to endpoint ``i % len(remote_endpoints)``; an
            endpoint that cannot be reached leaves the rotation (``remote_endpoints_lost`` in the pool's stats) and
            its slots move to the next one. ``executable_path``, ``chromium_args`` and the Chromium flags of
            ``deterministic_clock`` are then the server's (start it with ``--deterministic-clock`` to match).
            Each endpoint ends in a capability token: treat it as a secret.
        remote_retry_s: Time after which an endpoint out of rotation is tried again (when a browser needs one).
        deterministic_clock: Take page time off the wall clock so episodes replay and snapshots restore
            identically: a paused fake clock in every context, ``clock_step_ms`` of page time per step,
            ``wait`` advances page time instead of sleeping, no caret blink. Off by default: pages then run in
            real time, as a live agent sees them.
        clock_step_ms: Page time one step lets pass when ``deterministic_clock`` is on (timers and animations due
            in it run before the observation).
        miniwob_score_panel: Show MiniWoB++'s score panel (last reward, 10-episode average, time left, episodes
            done) beside the task. Off by default: MiniWoB++'s own environment crops it out, it shows the outcome
            of the page's previous episode, and it makes observations (and demonstrations recorded again) depend
            on which page played which episode. Runs and demonstrations recorded before this key existed had it
            shown.
        latency: Simulated web latency (benchmarks).
    """

    num_browsers: int = 1
    pages_per_browser: int = 4
    executable_path: str | None = None
    chromium_args: tuple[str, ...] = DEFAULT_CHROMIUM_ARGS
    viewport_width: int = 1280
    viewport_height: int = 720
    screenshot_format: str = "jpeg"
    screenshot_quality: int = 80
    accessibility_text: bool = False
    coordinate_mode: str = "normalized"
    step_timeout_s: float = 15.0
    action_timeout_s: float = 5.0
    navigation_timeout_s: float = 8.0
    reset_timeout_s: float = 20.0
    launch_timeout_s: float = 30.0
    close_timeout_s: float = 3.0
    max_wait_s: float = 5.0
    locale: str = "en-US"
    timezone_id: str = "UTC"
    site_host: str = "127.0.0.1"
    site_public_host: str | None = None
    start_site_server: bool = True
    remote_endpoints: tuple[str, ...] = ()
    remote_retry_s: float = 60.0
    deterministic_clock: bool = False
    clock_step_ms: int = 1000
    miniwob_score_panel: bool = False
    latency: LatencyConfig = field(default_factory=LatencyConfig)

    def __post_init__(self):
        for name in ("num_browsers", "pages_per_browser", "viewport_width", "viewport_height"):
            _positive(f"asyncweb.env.{name}", getattr(self, name))
        for name in (
            "step_timeout_s",
            "action_timeout_s",
            "navigation_timeout_s",
            "reset_timeout_s",
            "launch_timeout_s",
            "close_timeout_s",
            "max_wait_s",
            "remote_retry_s",
        ):
            _positive(f"asyncweb.env.{name}", getattr(self, name))
        if not self.clock_step_ms >= 0:
            raise ValueError(f"asyncweb.env.clock_step_ms must be >= 0, got {self.clock_step_ms!r}")
        if self.screenshot_format not in ("jpeg", "png"):
            raise ValueError(f"asyncweb.env.screenshot_format must be 'jpeg' or 'png', got {self.screenshot_format!r}")
        if not 1 <= self.screenshot_quality <= 100:
            raise ValueError(f"asyncweb.env.screenshot_quality must be in [1, 100], got {self.screenshot_quality!r}")
        if self.coordinate_mode not in ("normalized", "pixel"):
            raise ValueError(
                f"asyncweb.env.coordinate_mode must be 'normalized' or 'pixel', got {self.coordinate_mode!r}"
            )
        if isinstance(self.latency, dict):
            object.__setattr__(self, "latency", LatencyConfig(**self.latency))
        object.__setattr__(self, "chromium_args", tuple(self.chromium_args))
        self._check_remote()

    def _check_remote(self) -> None:
        if isinstance(self.remote_endpoints, str):
            raise ValueError(
                f"asyncweb.env.remote_endpoints must be a list of ws:// or wss:// URLs, got the string "
                f"{self.remote_endpoints!r}; write [{self.remote_endpoints!r}]"
            )
        object.__setattr__(self, "remote_endpoints", tuple(self.remote_endpoints))
        for endpoint in self.remote_endpoints:
            if not isinstance(endpoint, str) or not endpoint.startswith(("ws://", "wss://")):
                raise ValueError(
                    f"asyncweb.env.remote_endpoints entries must start with ws:// or wss://, got {endpoint!r}; "
                    "use the line python -m verl_asyncweb.browser_server prints"
                )
        public = self.site_public_host
        if public is not None and (not public or "/" in public or public.count(":") == 1 or " " in public):
            raise ValueError(
                f"asyncweb.env.site_public_host must be a bare host name or IP address (no scheme, port or path), "
                f"got {public!r}"
            )

    @property
    def size(self) -> int:
        """Number of sessions the pool holds."""
        return self.num_browsers * self.pages_per_browser

    def resolve_executable(self) -> str:
        """Return the Chromium binary to launch.

        Raises:
            ValueError: If ``executable_path`` is unset and no ``chromium`` is on ``PATH``.
        """
        return find_chromium(self.executable_path)


@dataclass
class JudgeConfig(BaseConfig):
    """The WebGym rubric judge: any OpenAI-compatible chat-completions endpoint.

    The API key is read from the environment variable named by ``api_key_env`` at request time; it is
    never stored in this config, logged or written to disk.

    Args:
        base_url: Endpoint root, e.g. ``http://127.0.0.1:8000/v1`` (``/chat/completions`` is appended).
        model: Model name sent in each request.
        api_key_env: Name of the environment variable holding the key (may be unset for local servers).
        timeout_s: Bound of one HTTP request.
        max_retries: Retries after a failed request (timeouts, connection errors, 429, 5xx, unparsable replies).
        retry_backoff_s: First back-off between retries; doubles each retry.
        max_screenshots: Screenshots sent per judge call (evenly spaced, always including the last).
        max_concurrency: Judge calls in flight at once per evaluator.
        temperature: Sampling temperature of the judge.
    """

    base_url: str = ""
    model: str = "judge"
    api_key_env: str = "ASYNCWEB_JUDGE_API_KEY"
    timeout_s: float = 60.0
    max_retries: int = 3
    retry_backoff_s: float = 1.0
    max_screenshots: int = 4
    max_concurrency: int = 16
    temperature: float = 0.0

    def __post_init__(self):
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"asyncweb.judge.base_url must start with http:// or https://, got {self.base_url!r}")
        _positive("asyncweb.judge.timeout_s", self.timeout_s)
        if self.max_retries < 0:
            raise ValueError(f"asyncweb.judge.max_retries must be >= 0, got {self.max_retries!r}")
        if self.retry_backoff_s < 0:
            raise ValueError(f"asyncweb.judge.retry_backoff_s must be >= 0, got {self.retry_backoff_s!r}")
        _positive("asyncweb.judge.max_screenshots", self.max_screenshots)
        _positive("asyncweb.judge.max_concurrency", self.max_concurrency)
