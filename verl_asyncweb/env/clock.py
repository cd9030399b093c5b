"""Deterministic page time (``asyncweb.env.deterministic_clock``): episodes that can be snapshotted and replayed.

MiniWoB++ pages read the clock (episode start time, countdown, jQuery animations) and the text caret blinks on the
wall clock, so two runs of the same episode differ unless time is taken away from the wall clock. With
the option on, every context gets Playwright's fake clock installed once and paused at :data:`EPOCH_S`; each new
document starts there. A step lets ``clock_step_ms`` of page time pass (timers and animations run synchronously),
a ``wait`` action lets its seconds pass, and a MiniWoB++ reset sets the page time back to the epoch, so the page
time of an episode is a function of its actions only.

Per-step advances go to the injected clock controller of the current document (``globalThis.__pwClock``) instead
of ``context.clock.run_for``: the public call adds one init script to the context per call, which a pool that
keeps its contexts for a whole run would accumulate without bound (every new document replays them all).
"""

from __future__ import annotations

import asyncio
from typing import Any

EPOCH_S = 1_704_067_200  # 2024-01-01T00:00:00Z: page time at the start of every document and MiniWoB++ episode
EPOCH_MS = EPOCH_S * 1000

# `caret-animation: manual` stops the caret blink (a wall-clock timer in the renderer, not a page timer) and
# leaves the caret drawn, so a focused text field looks the same in every screenshot.
CARET_SCRIPT = """
(() => {
  try {
    const sheet = new CSSStyleSheet();
    sheet.replaceSync('* { caret-animation: manual !important; }');
    document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
  } catch (e) {}
})();
"""

_ADVANCE_JS = """
async (ms) => {
  const clock = globalThis.__pwClock;
  if (!clock) return null;
  await clock.controller.runFor(ms);
  return Date.now();
}
"""
_NAVIGATION_ERRORS = ("Execution context was destroyed", "navigation", "Cannot find context", "Target closed")


async def install_clock(context: Any, timeout_s: float) -> None:
    """Install the paused fake clock and the caret style on a new context (once per context)."""
    await asyncio.wait_for(context.clock.install(time=EPOCH_S), timeout_s)
    await asyncio.wait_for(context.clock.pause_at(EPOCH_S), timeout_s)
    await asyncio.wait_for(context.add_init_script(CARET_SCRIPT), timeout_s)


async def advance_page_clock(page: Any, ms: float, timeout_s: float) -> int | None:
    """Let ``ms`` of page time pass in the current document, running its due timers and animation frames.

    Returns:
        The page time afterwards (ms since the Unix epoch), or ``None`` when the document has no fake clock or was
        replaced while advancing (a new document starts at :data:`EPOCH_MS`).
    """
    from playwright.async_api import Error as PlaywrightError

    try:
        return await asyncio.wait_for(page.evaluate(_ADVANCE_JS, int(ms)), timeout_s)
    except PlaywrightError as exc:
        if any(marker in str(exc) for marker in _NAVIGATION_ERRORS):
            return None
        raise
