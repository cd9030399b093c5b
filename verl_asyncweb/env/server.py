"""The HTTP server the pool starts on ``site_host:0`` (``127.0.0.1`` by default): MiniWoB++ and the offline sites.

Browsers are sent to ``http://PUBLIC_HOST:PORT``; with remote browsers it listens on a wildcard
address and ``PUBLIC_HOST`` is a name they can reach (``asyncweb.env.site_public_host``, see :func:`public_host`).

Site state (carts, orders, user records, ...) is kept per episode. The pool gives every episode a fresh token in
the ``asyncweb_episode`` cookie; handlers read and write ``request[EPISODE_KEY]``, and verifiers read the same state
in process or through ``GET /api/state?episode=TOKEN``.
"""

from __future__ import annotations

import copy
import logging
import secrets
import socket
from typing import Any

from aiohttp import web

from verl_asyncweb.env.tasks.miniwob import MINIWOB_URL_PREFIX, miniwob_html_root

logger = logging.getLogger(__name__)
EPISODE_COOKIE = "asyncweb_episode"
_MAX_EPISODES = 10_000  # bound on remembered episode states; the oldest are dropped first
EPISODE_KEY = web.RequestKey("episode", dict)


class EpisodeStore:
    """Per-episode site state, created on first use."""

    def __init__(self) -> None:
        self._states: dict[str, dict[str, Any]] = {}

    def new_token(self, state: dict[str, Any] | None = None) -> str:
        """A fresh episode token with an empty state, or a deep copy of ``state`` (a restored snapshot's)."""
        token = secrets.token_hex(8)
        self._states[token] = copy.deepcopy(state) if state else {}
        while len(self._states) > _MAX_EPISODES:
            self._states.pop(next(iter(self._states)))
        return token

    def get(self, token: str | None) -> dict[str, Any]:
        """State of episode ``token`` (an anonymous throwaway state when the token is unknown)."""
        if token is None or token not in self._states:
            return {}
        return self._states[token]

    def drop(self, token: str) -> None:
        """Forget an episode's state."""
        self._states.pop(token, None)


STORE_KEY = web.AppKey("store", EpisodeStore)


@web.middleware
async def _episode_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    store: EpisodeStore = request.app[STORE_KEY]
    request[EPISODE_KEY] = store.get(request.cookies.get(EPISODE_COOKIE))
    response = await handler(request)
    if response.content_type in ("text/html", "application/javascript", "text/css", "application/json"):
        response.charset = "utf-8"
    return response


async def _state_endpoint(request: web.Request) -> web.Response:
    store: EpisodeStore = request.app[STORE_KEY]
    return web.json_response(store.get(request.query.get("episode")))


def build_app(store: EpisodeStore) -> web.Application:
    """The aiohttp application: MiniWoB++ under ``/miniwob/``, the sites under ``/shop/``, ``/wiki/``, ``/admin/``."""
    from verl_asyncweb.env.sites import register_sites

    app = web.Application(middlewares=[_episode_middleware])
    app[STORE_KEY] = store
    app.router.add_get("/api/state", _state_endpoint)
    app.router.add_static(MINIWOB_URL_PREFIX, miniwob_html_root(), follow_symlinks=False)
    register_sites(app)
    return app


_WILDCARD_HOSTS = ("0.0.0.0", "::", "")


def public_host(bind_host: str, site_public_host: str | None) -> str:
    """Host name browsers use for the site server: ``site_public_host``; else ``bind_host``, unless that is a
    wildcard address (it names no machine), then this machine's host name."""
    if site_public_host:
        return site_public_host
    return socket.gethostname() if bind_host in _WILDCARD_HOSTS else bind_host


class SiteServer:
    """Runs :func:`build_app` on ``host:0`` inside the current event loop.

    Args:
        host: Interface to listen on.
        public_host: Host name in :attr:`origin` (see :func:`public_host`).
    """

    def __init__(self, host: str = "127.0.0.1", public_host: str | None = None) -> None:
        self.host = host
        self.public_host = public_host
        self.store = EpisodeStore()
        self.origin = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> str:
        """Start serving; returns the origin, e.g. ``http://127.0.0.1:41234``."""
        self._runner = web.AppRunner(build_app(self.store), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # aiohttp exposes the bound port only here
        name = public_host(self.host, self.public_host)
        if ":" in name and not name.startswith("["):
            name = f"[{name}]"  # an IPv6 literal in a URL
        self.origin = f"http://{name}:{port}"
        logger.info("site server listening on %s:%d, browsers use %s", self.host, port, self.origin)
        return self.origin

    async def close(self) -> None:
        """Stop serving."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
