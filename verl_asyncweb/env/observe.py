"""Building an :class:`Observation` from a page: screenshot over CDP, title, optional element list."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from verl_asyncweb.env.config import BrowserPoolConfig
from verl_asyncweb.env.results import Observation

# Visible elements with their centres in normalised 0-1000 coordinates (set-of-marks style text). Lets scripted
# oracles and text-side agents find targets from the observation alone.
ELEMENTS_JS = """
(limit) => {
  const sel = 'a,button,input,textarea,select,label,h1,h2,h3,th,td,li,p,dt,dd,[role=button],[role=link],[data-info],'
    + '[onclick],span,div';
  const W = window.innerWidth, H = window.innerHeight, out = [];
  const listed = 'a,button,input,textarea,select,label,h1,h2,h3,th,td,li,p,dt,dd,[role=button],[role=link],[data-info]';
  for (const el of document.querySelectorAll(sel)) {
    if (out.length >= limit) break;
    const r = el.getBoundingClientRect();
    if (r.width < 1 || r.height < 1 || r.bottom < 0 || r.right < 0 || r.top > H || r.left > W) continue;
    const st = getComputedStyle(el);
    if (st.visibility === 'hidden' || st.display === 'none') continue;
    // Generic containers count only when a user can click them: a handler or a pointer cursor of their own
    // (MiniWoB's click-link targets are <span class="alink">), not one inherited from a clickable parent.
    if (!el.matches(listed)) {
      const parent = el.parentElement;
      const own = st.cursor === 'pointer' && !(parent && getComputedStyle(parent).cursor === 'pointer');
      if (!el.hasAttribute('onclick') && !own) continue;
    }
    const box = el.type === 'checkbox' || el.type === 'radio';
    let text = box ? Array.from(el.labels || []).map((l) => l.innerText).join(' ')
      : (el.innerText || el.value || el.getAttribute('aria-label') || el.getAttribute('placeholder') || '');
    text = text.replace(/\\s+/g, ' ').trim().slice(0, 80);
    const tag = el.tagName.toLowerCase();
    const kind = tag === 'input' ? 'input[' + (el.type || 'text') + ']' + (el.checked ? '*' : '') : tag;
    const name = el.getAttribute('name') ? ' name=' + el.getAttribute('name') : '';
    const cx = Math.round((r.left + r.width / 2) / W * 1000), cy = Math.round((r.top + r.height / 2) / H * 1000);
    out.push('[' + out.length + '] ' + kind + name + ' "' + text.replace(/"/g, "'") + '" @(' + cx + ',' + cy + ')');
  }
  return out.join('\\n');
}
"""

# Page state read once per step: title, whether a navigation started since the last read (beforeunload seen;
# the flag is reset so a refused navigation is not waited for twice), MiniWoB++ status. Read synchronously right
# after the action: input events are acknowledged after their handlers ran, and a link's beforeunload fires inside
# the click task, so no animation-frame wait is needed (it cost ~30 ms of latency per step in the benchmark).
STATE_JS = """
() => {
  const unloading = !!window.__asyncwebUnloading;
  window.__asyncwebUnloading = false;
  return {
    title: document.title,
    unloading: unloading,
    wob: (typeof WOB_DONE_GLOBAL === 'undefined') ? null
         : {done: WOB_DONE_GLOBAL, raw: WOB_RAW_REWARD_GLOBAL, reason: WOB_REWARD_REASON},
  };
}
"""


async def capture_screenshot(cdp: Any, config: BrowserPoolConfig) -> bytes:
    """Screenshot of the viewport through CDP ``Page.captureScreenshot``.

    CDP is used instead of ``page.screenshot`` because the latter waits for web fonts, so a page with a
    never-loading font would stall every step.
    """
    params: dict[str, Any] = {"format": config.screenshot_format, "optimizeForSpeed": True}
    if config.screenshot_format == "jpeg":
        params["quality"] = config.screenshot_quality
    reply = await asyncio.wait_for(cdp.send("Page.captureScreenshot", params), config.action_timeout_s)
    return base64.b64decode(reply["data"])


async def read_state(page: Any, timeout_s: float) -> dict:
    """Title, navigation-started flag and MiniWoB++ status of the current document."""
    return await asyncio.wait_for(page.evaluate(STATE_JS), timeout_s)


async def observe(
    page: Any, cdp: Any, config: BrowserPoolConfig, title: str, instruction: str | None = None
) -> Observation:
    """Build an observation of ``page`` (every browser call bounded by ``action_timeout_s``)."""
    screenshot = await capture_screenshot(cdp, config)
    elements = None
    if config.accessibility_text:
        elements = await asyncio.wait_for(page.evaluate(ELEMENTS_JS, 400), config.action_timeout_s)
    return Observation(
        screenshot=screenshot, url=page.url, title=title, accessibility_text=elements, instruction=instruction
    )
