"""A pool session: one browser context and page, reused across episodes, with the network guards installed."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from verl_asyncweb.env.browser import BrowserSlot
from verl_asyncweb.env.clock import install_clock
from verl_asyncweb.env.config import BrowserPoolConfig
from verl_asyncweb.env.network import BINDING, NetworkPolicy, guard_script
from verl_asyncweb.env.page_state import DEPARTURE_BINDING, DEPARTURE_SCRIPT
from verl_asyncweb.env.results import Observation
from verl_asyncweb.env.stats import PoolStats
from verl_asyncweb.env.tasks.task import Task

logger = logging.getLogger(__name__)
_ids = itertools.count()
_MAX_DEPARTURES = 64  # pages whose departure state an episode remembers (oldest forgotten first)
_MAX_DEPARTURE_CHARS = 64_000


@dataclass(eq=False)
class Session:
    """A page lent to one episode at a time by :meth:`BrowserPool.acquire`.

    Episode fields (``task``, ``steps``, ...) are reset by :meth:`BrowserPool.reset`; the browser objects are
    owned by the pool and rebuilt by its recovery ladder.
    """

    slot: BrowserSlot
    session_id: int = field(default_factory=lambda: next(_ids))
    context: Any = None
    page: Any = None
    cdp: Any = None
    generation: int = -1
    context_popups: bool = False
    context_downloads: bool = False
    policy: NetworkPolicy = field(default_factory=NetworkPolicy)
    # episode state
    task: Task | None = None
    episode_token: str = ""
    steps: int = 0
    done: bool = True
    env_failed: bool = False
    error: str | None = None
    answer: str | None = None
    reward: float | None = None
    events: list[str] = field(default_factory=list)
    navigated: asyncio.Event = field(default_factory=asyncio.Event)
    # Closes of refused popups and cancels of refused downloads still running (awaited before an observation).
    cleanups: set[asyncio.Task] = field(default_factory=set)
    in_use: bool = False
    last_observation: Observation | None = None
    # What snapshots need: the executed action prefix (encoded, None for an invalid action), the index
    # of the episode's first entry in the page's history, the form values and scroll each page had when the
    # episode left it (by URL; what the browser restores on going back), earlier pages of a restored episode
    # ({"url", "form", "scroll"}: go_back targets beyond the restored page) and the MiniWoB++ counters the page
    # showed when the episode started.
    actions: list[dict | None] = field(default_factory=list)
    history_base: int = -1
    departed: dict[str, dict] = field(default_factory=dict)
    virtual_history: list[dict] = field(default_factory=list)
    wob_counters: dict | None = None
    # The running BrowserGym task (verl_asyncweb.env.tasks.browsergym.LiveTask) of a browsergym episode.
    browsergym: Any = None

    @property
    def healthy(self) -> bool:
        """Whether the context and page exist on the slot's current browser."""
        return (
            self.page is not None
            and self.generation == self.slot.generation
            and self.slot.alive
            and not self.page.is_closed()
        )


async def build_context(session: Session, config: BrowserPoolConfig, stats: PoolStats, task: Task | None) -> None:
    """Create a fresh context and page for ``session`` on its slot's browser, guards installed.

    Args:
        session: The session to equip; its old context must already be closed.
        config: Pool configuration (viewport, timeouts).
        stats: Where blocked attempts are counted.
        task: The task about to run (decides whether popups and downloads are allowed), or ``None``.
    """
    popups = bool(task and task.allow_popups)
    downloads = bool(task and task.allow_downloads)
    timeout_s = config.action_timeout_s
    browser = session.slot.browser
    context = await asyncio.wait_for(
        browser.new_context(
            viewport={"width": config.viewport_width, "height": config.viewport_height},
            locale=config.locale,
            timezone_id=config.timezone_id,
            accept_downloads=downloads,
            service_workers="block",  # service workers would bypass context.route
        ),
        timeout_s,
    )
    session.context = context
    if config.deterministic_clock:
        await install_clock(context, timeout_s)
    context.set_default_timeout(config.action_timeout_s * 1000)
    context.set_default_navigation_timeout(config.navigation_timeout_s * 1000)

    def on_blocked(source: Any, kind: str, url: str) -> None:
        name = "blocked_popups" if kind == "popup" else "blocked_navigations"
        stats.add(name)
        session.events.append(f"blocked {kind} to {url[:120]}")

    async def on_route(route: Any) -> None:
        request = route.request
        if session.policy.allows_url(request.url):
            await route.fallback()
            return
        stats.add("blocked_requests")
        if request.is_navigation_request():
            stats.add("blocked_navigations")
            session.events.append(f"blocked navigation to {request.url[:120]}")
        # "aborted" keeps the current document for a blocked navigation instead of committing an error page.
        await route.abort("aborted" if request.is_navigation_request() else "blockedbyclient")

    def on_departure(source: Any, url: str, state: str) -> None:
        if session.page is None or source.get("page") is not session.page or len(state) > _MAX_DEPARTURE_CHARS:
            return
        try:
            saved = json.loads(state)
        except ValueError:  # the binding is visible to page scripts; a page may call it with anything
            return
        session.departed.pop(url, None)
        session.departed[url] = saved
        while len(session.departed) > _MAX_DEPARTURES:
            session.departed.pop(next(iter(session.departed)))

    await asyncio.wait_for(context.expose_binding(BINDING, on_blocked), timeout_s)
    await asyncio.wait_for(context.expose_binding(DEPARTURE_BINDING, on_departure), timeout_s)
    await asyncio.wait_for(context.add_init_script(guard_script(popups)), timeout_s)
    await asyncio.wait_for(context.add_init_script(DEPARTURE_SCRIPT), timeout_s)
    await asyncio.wait_for(context.route("**/*", on_route), timeout_s)
    page = await asyncio.wait_for(context.new_page(), timeout_s)

    def on_popup(popup: Any) -> None:
        if session.policy.allow_popups:
            return
        stats.add("blocked_popups")
        session.events.append(f"blocked popup {popup.url[:120]}")
        _track(session, _close_quietly(popup, config.close_timeout_s))

    def on_download(download: Any) -> None:
        if session.policy.allow_downloads:
            return
        stats.add("blocked_downloads")
        session.events.append(f"blocked download {download.suggested_filename[:80]!r}")
        _track(session, _cancel_quietly(download, config.close_timeout_s))

    def on_frame_navigated(frame: Any) -> None:
        if frame == page.main_frame:
            session.navigated.set()

    context.on("page", on_popup)
    page.on("download", on_download)
    page.on("framenavigated", on_frame_navigated)
    session.page = page
    session.cdp = await asyncio.wait_for(context.new_cdp_session(page), timeout_s)
    session.generation = session.slot.generation
    session.context_popups = popups
    session.context_downloads = downloads


async def navigation_history(session: Session, timeout_s: float) -> tuple[int, list[str]]:
    """``(current index, entry URLs)`` of the session page's history."""
    reply = await asyncio.wait_for(session.cdp.send("Page.getNavigationHistory"), timeout_s)
    return reply["currentIndex"], [entry["url"] for entry in reply["entries"]]


def _track(session: Session, cleanup) -> None:
    task = asyncio.get_running_loop().create_task(cleanup)
    session.cleanups.add(task)
    task.add_done_callback(session.cleanups.discard)


async def finish_cleanups(session: Session, timeout_s: float) -> None:
    """Wait (bounded) until refused popups are closed and refused downloads cancelled.

    Pages of the context other than the session's own are closed here too when popups are refused: a popup whose
    ``page`` event has not been handled yet would otherwise outlive the step.
    """
    if not session.policy.allow_popups and session.context is not None:
        for extra in [p for p in session.context.pages if p is not session.page and not p.is_closed()]:
            _track(session, _close_quietly(extra, timeout_s))
    if session.cleanups:
        await asyncio.wait(set(session.cleanups), timeout=timeout_s)


async def close_context(session: Session, timeout_s: float) -> bool:
    """Close the session's context (bounded); the session is left without page.

    Returns:
        True if the context closed within ``timeout_s``.
    """
    context = session.context
    session.context = session.page = session.cdp = None
    session.generation = -1
    if context is None:
        return True
    try:
        await asyncio.wait_for(context.close(), timeout_s)
        return True
    except Exception as exc:
        logger.warning("context of session %d did not close: %s", session.session_id, type(exc).__name__)
        return False


async def _close_quietly(page: Any, timeout_s: float) -> None:
    try:
        await asyncio.wait_for(page.close(), timeout_s)
    except Exception:  # the popup may already be gone with its context
        pass


async def _cancel_quietly(download: Any, timeout_s: float) -> None:
    try:
        await asyncio.wait_for(download.cancel(), timeout_s)
    except Exception:  # already cancelled because downloads are not accepted
        pass
