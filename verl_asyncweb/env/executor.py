"""Carrying out one parsed action on a page and waiting until the page has settled."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from verl_asyncweb.env.actions import (
    Action,
    Answer,
    GoBack,
    KeyPress,
    LeftClick,
    Navigate,
    Scroll,
    TypeText,
    Wait,
    describe,
)
from verl_asyncweb.env.clock import advance_page_clock
from verl_asyncweb.env.config import BrowserPoolConfig
from verl_asyncweb.env.observe import read_state
from verl_asyncweb.env.page_state import apply_page_state
from verl_asyncweb.env.session import Session, navigation_history
from verl_asyncweb.env.stats import PoolStats

logger = logging.getLogger(__name__)
_INSERT_TEXT_FROM_CHARS = 200  # longer text is inserted at once: one key event per character would be slow
_NAVIGATION_ERRORS = ("Execution context was destroyed", "navigation", "Cannot find context")


async def perform(session: Session, action: Action, config: BrowserPoolConfig, stats: PoolStats) -> str:
    """Run ``action`` on the session's page; every browser await is bounded by ``action_timeout_s``.

    Returns:
        The action's result text for the model.
    """
    page, t = session.page, config.action_timeout_s
    if isinstance(action, LeftClick):
        await asyncio.wait_for(page.mouse.click(action.x, action.y), t)
        return f"clicked ({action.x:.0f},{action.y:.0f})"
    if isinstance(action, TypeText):
        if action.at is not None:
            await asyncio.wait_for(page.mouse.click(*action.at), t)
        if len(action.text) >= _INSERT_TEXT_FROM_CHARS:
            await asyncio.wait_for(page.keyboard.insert_text(action.text), t)
        else:
            await asyncio.wait_for(page.keyboard.type(action.text), t)
        if action.press_enter:
            await asyncio.wait_for(page.keyboard.press("Enter"), t)
        return describe(action).replace("type", "typed", 1)
    if isinstance(action, KeyPress):
        await asyncio.wait_for(page.keyboard.press("+".join(action.keys)), t)
        return "pressed " + "+".join(action.keys)
    if isinstance(action, Scroll):
        x, y = action.at or (config.viewport_width / 2, config.viewport_height / 2)
        await asyncio.wait_for(page.mouse.move(x, y), t)
        await asyncio.wait_for(page.mouse.wheel(action.dx, action.dy), t)
        return f"scrolled ({action.dx},{action.dy})"
    if isinstance(action, Wait):
        seconds = min(action.seconds, config.max_wait_s)
        # The model asked the page to run for a while; this is the action itself, not a wait for state.
        if config.deterministic_clock:
            await advance_page_clock(page, seconds * 1000, t)
        else:
            await asyncio.sleep(seconds)
        return f"waited {seconds:g}s"
    if isinstance(action, GoBack):
        return await _go_back(session, config)
    if isinstance(action, Navigate):
        refusal = session.policy.navigation_refusal(action.url)
        if refusal is not None:
            stats.add("blocked_navigations")
            return f"blocked navigation to {action.url[:120]}: {refusal}"
        await _goto(page, action.url, config)
        return f"navigated to {action.url[:120]}"
    assert isinstance(action, Answer), action
    session.answer = action.text
    return f"answered {action.text[:80]!r}"


async def _go_back(session: Session, config: BrowserPoolConfig) -> str:
    """Go back within the episode: never to a page of an earlier episode of this pool page; past the page a
    snapshot was restored on, to the snapshot's earlier URLs."""
    page, t = session.page, config.action_timeout_s
    if session.history_base >= 0:
        index, _ = await navigation_history(session, t)
        if index <= session.history_base:
            if not session.virtual_history:
                return "no page to go back to"
            entry = session.virtual_history.pop()
            await _goto(page, entry["url"], config)
            # The page's CDP session answers again once the new document is in place (right after commit it
            # reports "Not attached to an active page").
            await asyncio.wait_for(
                page.wait_for_load_state("domcontentloaded", timeout=config.navigation_timeout_s * 1000),
                config.navigation_timeout_s + 1,
            )
            session.history_base, _ = await navigation_history(session, t)
            if entry.get("form") or entry.get("scroll"):  # what the browser restores on going back
                await apply_page_state(page, {"form": entry.get("form"), "scroll": entry.get("scroll")}, t)
            return "went back"
    response = await asyncio.wait_for(
        page.go_back(wait_until="commit", timeout=config.navigation_timeout_s * 1000),
        config.navigation_timeout_s + 1,
    )
    return "went back" if response is not None or session.navigated.is_set() else "no page to go back to"


async def _goto(page: Any, url: str, config: BrowserPoolConfig) -> None:
    from playwright.async_api import Error as PlaywrightError

    try:
        await asyncio.wait_for(
            page.goto(url, wait_until="commit", timeout=config.navigation_timeout_s * 1000),
            config.navigation_timeout_s + 1,
        )
    except PlaywrightError as exc:
        # net::ERR_ABORTED is how the route policy refuses a navigation; the page stays where it was.
        if "ERR_ABORTED" not in str(exc) and "ERR_BLOCKED" not in str(exc):
            raise


async def settle(session: Session, config: BrowserPoolConfig) -> dict:
    """Wait until a navigation started by the action (if any) has reached DOMContentLoaded.

    A navigation is detected without sleeping: the guard script's ``beforeunload`` flag, a destroyed execution
    context, or a committed main-frame navigation. Navigations that never commit (refused, a download) end the
    wait through ``session.navigated`` too.

    Returns:
        The page state of :data:`verl_asyncweb.env.observe.STATE_JS`.
    """
    from playwright.async_api import Error as PlaywrightError

    page, nav_timeout = session.page, config.navigation_timeout_s
    state: dict | None = None
    for _ in range(4):
        try:
            state = await read_state(page, config.action_timeout_s)
        except PlaywrightError as exc:
            if not any(marker in str(exc) for marker in _NAVIGATION_ERRORS):
                raise
            state = None
        if state is not None and not state["unloading"] and not session.navigated.is_set():
            return state
        if not session.navigated.is_set():
            try:
                await asyncio.wait_for(session.navigated.wait(), nav_timeout)
            except TimeoutError:
                logger.debug("session %d: navigation did not commit within %.1fs", session.session_id, nav_timeout)
        session.navigated.clear()
        try:
            await page.wait_for_load_state("domcontentloaded", timeout=nav_timeout * 1000)
        except PlaywrightError:
            logger.debug("session %d: page still loading after %.1fs", session.session_id, nav_timeout)
    return state or {"title": "", "unloading": False, "wob": None}
