"""Per-task network policy: origin allowlist, refused schemes, popups and downloads (DESIGN.md section 4).

Requests are filtered by ``context.route`` (every http(s) request of the context passes through
:meth:`NetworkPolicy.allows_url`). Navigations to ``file:``, ``javascript:`` and ``data:`` never reach the network
stack, so an init script stops such link clicks and ``window.open`` in the page and reports them through an
exposed binding; the ``navigate`` action is checked in Python before ``page.goto``.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from urllib.parse import urlsplit

ALLOWED_SCHEMES = ("http", "https")
REFUSED_SCHEMES = ("file", "javascript", "data", "blob", "chrome", "view-source", "ftp")
BINDING = "__asyncwebBlocked"

# Runs before any page script in every frame. Link clicks (and form submits) to refused schemes and
# window.open are stopped in the capture phase, so the page never gets to act on them.
GUARD_SCRIPT = """
(() => {
  const cfg = %(config)s;
  const report = (kind, url) => { try { window.%(binding)s(kind, String(url).slice(0, 300)); } catch (e) {} };
  const refused = (url) => {
    try {
      const scheme = new URL(url, location.href).protocol.replace(':', '');
      return !cfg.schemes.includes(scheme);
    } catch (e) { return false; }
  };
  const guard = (event) => {
    const link = event.target && event.target.closest ? event.target.closest('a[href], area[href]') : null;
    if (link && refused(link.getAttribute('href'))) {
      event.preventDefault(); event.stopImmediatePropagation();
      report('navigation', link.href || link.getAttribute('href'));
    }
  };
  window.addEventListener('click', guard, true);
  window.addEventListener('auxclick', guard, true);
  document.addEventListener('submit', (event) => {
    const action = event.target && event.target.getAttribute ? event.target.getAttribute('action') : null;
    if (action && refused(action)) { event.preventDefault(); report('navigation', action); }
  }, true);
  if (!cfg.popups) {
    const blockedOpen = function (url) { report('popup', url || 'about:blank'); return null; };
    Object.defineProperty(window, 'open', { value: blockedOpen, writable: false, configurable: false });
  }
  // Navigation-started flag read right after each action. Form submissions and link clicks schedule their
  // navigation asynchronously, so they are flagged here (bubble phase, unless the page cancelled them).
  const pending = () => { window.__asyncwebUnloading = true; };
  window.addEventListener('beforeunload', pending, true);
  window.addEventListener('click', (event) => {
    if (event.defaultPrevented || !event.target || !event.target.closest) return;
    const link = event.target.closest('a[href]');
    if (!link || (link.target && link.target !== '_self') || link.hasAttribute('download')) return;
    const url = new URL(link.href, location.href);
    if (url.protocol === 'javascript:') return;
    if (url.href.split('#')[0] === location.href.split('#')[0] && link.getAttribute('href').includes('#')) return;
    pending();
  }, false);
  window.addEventListener('submit', (event) => {
    const form = event.target;
    if (!event.defaultPrevented && (!form.target || form.target === '_self')) pending();
  }, false);
})();
"""


@dataclass(frozen=True)
class NetworkPolicy:
    """Which origins and schemes a task may use.

    Args:
        origins: Allowed origins (``scheme://host[:port]``), patterns with ``*`` (``https://*.example.com``) or
            ``"*"`` for any http(s) origin.
        allow_popups: New windows may open.
        allow_downloads: Downloads are accepted.
    """

    origins: tuple[str, ...] = ()
    allow_popups: bool = False
    allow_downloads: bool = False

    def allows_url(self, url: str) -> bool:
        """Whether a request or navigation to ``url`` may proceed."""
        parts = urlsplit(url)
        if parts.scheme == "about" or url.startswith("chrome-error://"):
            return True
        if parts.scheme not in ALLOWED_SCHEMES or not parts.hostname:
            return False
        origin = _origin(parts.scheme, parts.hostname, parts.port)
        for pattern in self.origins:
            if pattern == "*" or pattern == origin or ("*" in pattern and fnmatch.fnmatchcase(origin, pattern)):
                return True
        return False

    def navigation_refusal(self, url: str) -> str | None:
        """Reason the ``navigate`` action to ``url`` is refused, or ``None`` if allowed."""
        scheme = urlsplit(url).scheme.lower()
        if scheme in REFUSED_SCHEMES or (scheme and scheme not in ALLOWED_SCHEMES and scheme != "about"):
            return f"scheme '{scheme}:' is not allowed"
        if not scheme:
            return "URL must start with http:// or https://"
        if not self.allows_url(url):
            return "origin is not on this task's allowlist"
        return None


def _origin(scheme: str, host: str, port: int | None) -> str:
    default = {"http": 80, "https": 443}[scheme]
    return f"{scheme}://{host}" if port in (None, default) else f"{scheme}://{host}:{port}"


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of an http(s) URL."""
    parts = urlsplit(url)
    return _origin(parts.scheme, parts.hostname or "", parts.port)


def guard_script(allow_popups: bool) -> str:
    """The init script for a context; popups are a context-wide switch chosen at context creation."""
    import json

    config = {"schemes": list(ALLOWED_SCHEMES) + ["about"], "popups": allow_popups}
    return GUARD_SCRIPT % {"config": json.dumps(config), "binding": BINDING}
