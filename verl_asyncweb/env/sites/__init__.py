"""The bundled offline sites (shop, wiki, admin), served by :mod:`verl_asyncweb.env.server`."""

from __future__ import annotations

from aiohttp import web


def register_sites(app: web.Application) -> None:
    """Add the routes of every bundled site to ``app``."""
    from verl_asyncweb.env.sites import admin, shop, wiki

    for site in (shop, wiki, admin):
        site.register(app)
