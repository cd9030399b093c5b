"""Shared page chrome of the bundled sites: fixed fonts and sizes so screenshots and element centres are stable."""

from __future__ import annotations

from html import escape
from typing import Any

from aiohttp import web

from verl_asyncweb.env.server import EPISODE_KEY

CSS = """
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.4 'DejaVu Sans', 'Liberation Sans', sans-serif; color: #222; background: #fafafa; }
header { background: #2d4a6b; color: #fff; padding: 10px 24px; display: flex; gap: 24px; align-items: center; }
header a { color: #fff; text-decoration: none; font-weight: bold; }
main { padding: 16px 24px; max-width: 1100px; }
h1 { font-size: 24px; margin: 4px 0 12px; }
table { border-collapse: collapse; margin: 8px 0; }
td, th { border: 1px solid #ccc; padding: 5px 12px; text-align: left; }
form.stack label.field { display: block; margin-top: 8px; }
input[type=text], input[type=password], input[type=email], input[type=number] {
  font: inherit; padding: 4px 6px; width: 260px; }
button { font: inherit; padding: 5px 16px; margin: 8px 8px 0 0; cursor: pointer; }
dl { display: grid; grid-template-columns: 140px 400px; row-gap: 4px; }
dt { font-weight: bold; }
ul.links li { margin: 4px 0; }
.note { color: #666; }
"""


def page(site: str, title: str, body: str, nav: list[tuple[str, str]]) -> web.Response:
    """A full HTML page with the site's navigation bar."""
    links = "".join(f'<a href="{href}">{escape(label)}</a>' for label, href in nav)
    html = (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)} - {escape(site)}</title>"
        f"<style>{CSS}</style></head><body><header><span>{escape(site)}</span>{links}</header>"
        f"<main>{body}</main></body></html>"
    )
    return web.Response(text=html, content_type="text/html")


def state(request: web.Request) -> dict[str, Any]:
    """This episode's site state (see :class:`verl_asyncweb.env.server.EpisodeStore`)."""
    return request[EPISODE_KEY]


def redirect(location: str) -> web.HTTPSeeOther:
    """303 after a POST, so reloads do not repeat it."""
    return web.HTTPSeeOther(location)


def radios(name: str, options: list[str], checked: str | None = None) -> str:
    """Radio buttons, each wrapped in a label with the option text."""
    out = []
    for option in options:
        mark = " checked" if option == checked else ""
        out.append(f'<label><input type="radio" name="{name}" value="{escape(option)}"{mark}>{escape(option)}</label> ')
    return "".join(out)


def e(text: object) -> str:
    """HTML-escape any value."""
    return escape(str(text))
