"""Reading and re-applying the client-side state of a page for snapshots.

What a server-rendered page holds beyond its URL and the server's state: form values, focus with its text
selection, a selected range of page text, scroll positions (window and scrolled elements), web storage, the page
time and a fingerprint of all of it with the page text. Elements are addressed by their index in document order,
so a state applies to the same document re-rendered from the same server state, which the fingerprint checks.
Only the main frame is read; iframes, shadow roots and ``contenteditable`` carets are not.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

# Shared helpers: node paths (child indices from the document), the page's field list and a 64-bit string hash.
_HELPERS = """
  const all = document.getElementsByTagName('*');
  const fields = document.querySelectorAll('input, textarea, select');
  const pathOf = (node) => {
    const path = [];
    while (node && node !== document) {
      const parent = node.parentNode;
      if (!parent) return null;
      path.unshift(Array.prototype.indexOf.call(parent.childNodes, node));
      node = parent;
    }
    return path;
  };
  const nodeAt = (path) => {
    let node = document;
    for (const i of path) node = node && node.childNodes[i];
    return node || null;
  };
  const cyrb53 = (str) => {
    let h1 = 0xdeadbeef, h2 = 0x41c6ce57;
    for (let i = 0; i < str.length; i++) {
      const ch = str.charCodeAt(i);
      h1 = Math.imul(h1 ^ ch, 2654435761);
      h2 = Math.imul(h2 ^ ch, 1597334677);
    }
    h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
    h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
    return (h2 >>> 0).toString(16).padStart(8, '0') + (h1 >>> 0).toString(16).padStart(8, '0');
  };
  // Fields whose value, checked state or selection differ from the page's defaults. ``saved``: only those
  // Chromium keeps in a history entry (it leaves out passwords and autocomplete=off fields).
  const readForm = (saved) => {
    const form = [];
    fields.forEach((el, i) => {
      const tag = el.tagName.toLowerCase(), type = (el.type || '').toLowerCase();
      if (saved && (type === 'password' || el.autocomplete === 'off')) return;
      const base = {i: i, tag: tag, type: type, name: el.getAttribute('name') || ''};
      if (tag === 'select') {
        const now = [], initial = [];
        Array.from(el.options).forEach((o, j) => {
          if (o.selected) now.push(j);
          if (o.defaultSelected) initial.push(j);
        });
        if (now.join() !== initial.join()) form.push(Object.assign(base, {selected: now}));
      } else if (type === 'checkbox' || type === 'radio') {
        if (el.checked !== el.defaultChecked) form.push(Object.assign(base, {checked: el.checked}));
      } else if (type !== 'file' && el.value !== el.defaultValue) {
        form.push(Object.assign(base, {value: el.value}));
      }
    });
    return form;
  };
  const readScroll = () => {
    const scroll = {x: window.scrollX, y: window.scrollY, elements: []};
    const root = document.scrollingElement;
    for (let i = 0; i < all.length; i++) {
      const el = all[i];
      if (el !== root && (el.scrollTop || el.scrollLeft)) scroll.elements.push([i, el.scrollLeft, el.scrollTop]);
    }
    return scroll;
  };
  const read = () => {
    const form = readForm(false);
    const active = document.activeElement;
    let focus = null;
    if (active && active !== document.body && active !== document.documentElement) {
      focus = {i: Array.prototype.indexOf.call(all, active), visible: active.matches(':focus-visible')};
      try {
        if (typeof active.selectionStart === 'number') {
          focus.start = active.selectionStart; focus.end = active.selectionEnd; focus.dir = active.selectionDirection;
        }
      } catch (e) {}
    }
    let selection = null;
    const sel = window.getSelection();
    if (sel && sel.type === 'Range' && !(focus && 'start' in focus)) {
      const anchor = pathOf(sel.anchorNode), head = pathOf(sel.focusNode);
      if (anchor && head) selection = {anchor: anchor, anchor_offset: sel.anchorOffset, focus: head,
                                       focus_offset: sel.focusOffset};
    }
    const scroll = readScroll();
    const text = document.body ? document.body.innerText : '';
    const where = location.pathname + location.search + location.hash;
    const fingerprint = cyrb53(JSON.stringify([where, document.title, text, form, focus, selection, scroll]));
    return {form: form, focus: focus, selection: selection, scroll: scroll, fingerprint: fingerprint};
  };
"""

_CAPTURE_JS = (
    "() => {"
    + _HELPERS
    + """
  const dump = (name) => {
    const out = {};
    try { const s = window[name]; for (let i = 0; i < s.length; i++) { const k = s.key(i); out[k] = s.getItem(k); } }
    catch (e) {}
    return out;
  };
  const state = read();
  state.url = location.href;
  state.local_storage = dump('localStorage');
  state.session_storage = dump('sessionStorage');
  state.clock_ms = globalThis.__pwClock ? Date.now() : null;
  return state;
}"""
)

_APPLY_JS = (
    "(state) => {"
    + _HELPERS
    + """
  const problems = [];
  if (state) {
    for (const f of state.form || []) {
      const el = fields[f.i];
      if (!el || el.tagName.toLowerCase() !== f.tag || (el.getAttribute('name') || '') !== f.name) {
        problems.push('form field #' + f.i + ' (' + f.tag + ' ' + f.name + ') is not on the page'); continue;
      }
      if ('value' in f) el.value = f.value;
      else if ('checked' in f) el.checked = f.checked;
      else Array.from(el.options).forEach((o, j) => { o.selected = f.selected.includes(j); });
    }
    const focus = state.focus;  // undefined: leave focus alone (a history entry's state has none)
    if (focus) {
      const el = all[focus.i];
      if (!el) problems.push('focused element #' + focus.i + ' is not on the page');
      else {
        el.focus({preventScroll: true, focusVisible: focus.visible});
        if ('start' in focus) {
          try { el.setSelectionRange(focus.start, focus.end, focus.dir); } catch (e) {}
        }
      }
    } else if (focus === null && document.activeElement && document.activeElement !== document.body) {
      document.activeElement.blur();
    }
    if (state.selection) {
      const s = state.selection, anchor = nodeAt(s.anchor), head = nodeAt(s.focus);
      if (anchor && head) window.getSelection().setBaseAndExtent(anchor, s.anchor_offset, head, s.focus_offset);
      else problems.push('selected text is not on the page');
    }
    if (state.scroll) {
      for (const [i, left, top] of state.scroll.elements) {
        if (all[i]) all[i].scrollTo({left: left, top: top, behavior: 'instant'});
      }
      window.scrollTo({left: state.scroll.x, top: state.scroll.y, behavior: 'instant'});
    }
  }
  return {problems: problems, fingerprint: read().fingerprint};
}"""
)

# Reports the state Chromium saves in a history entry when the main frame's document is left (form values and
# scroll, restored by the browser when the agent goes back to it): a restored episode's earlier pages need it.
# Sent at beforeunload: a message sent at pagehide is lost with the document's execution context.
DEPARTURE_BINDING = "__asyncwebLeave"
DEPARTURE_SCRIPT = (
    "(() => { if (window !== window.top) return; window.addEventListener('beforeunload', () => { try {"
    + _HELPERS
    + """
  const form = readForm(true), scroll = readScroll();
  if (form.length || scroll.x || scroll.y || scroll.elements.length) {
    window.DEPARTURE_BINDING(location.href, JSON.stringify({form: form, scroll: scroll}));
  }
} catch (e) {} }, true); })();""".replace("DEPARTURE_BINDING", DEPARTURE_BINDING)
)

# Runs before any page script of the restored document (installed for one navigation): the origin's web storage
# becomes the snapshot's (contexts outlive episodes, so it may hold another episode's items).
_STORAGE_SCRIPT = """
(() => {
  const want = %(storage)s;
  if (location.origin !== want.origin) return;
  const put = (store, items) => { store.clear(); for (const [k, v] of Object.entries(items)) store.setItem(k, v); };
  try { put(localStorage, want.local); put(sessionStorage, want.session); } catch (e) {}
})();
"""


async def capture_page_state(page: Any, timeout_s: float) -> dict:
    """Client-side state of the page's main frame.

    Returns:
        ``url``, ``form`` (changed fields only), ``focus``, ``selection``, ``scroll``, ``local_storage``,
        ``session_storage``, ``clock_ms`` (page time, ``None`` without a fake clock) and ``fingerprint``.
    """
    return await asyncio.wait_for(page.evaluate(_CAPTURE_JS), timeout_s)


async def apply_page_state(page: Any, state: dict | None, timeout_s: float) -> tuple[list[str], str]:
    """Re-apply form values, focus, selection and scroll (``None``: apply nothing; a missing key: leave that part
    as it is) and fingerprint the result.

    Returns:
        ``(problems, fingerprint)``: what could not be applied, and the fingerprint of the page afterwards.
    """
    keys = ("form", "focus", "selection", "scroll")
    reply = await asyncio.wait_for(
        page.evaluate(_APPLY_JS, None if state is None else {k: state[k] for k in keys if k in state}), timeout_s
    )
    return reply["problems"], reply["fingerprint"]


def storage_script(origin: str, local: dict[str, str], session: dict[str, str]) -> str:
    """Init script that replaces ``origin``'s local and session storage before the page's own scripts run."""
    return _STORAGE_SCRIPT % {"storage": json.dumps({"origin": origin, "local": local, "session": session})}
