"""Bundled site "Velopedia": fictional encyclopedia with search, linked articles and bookmarks (state: bookmarks)."""

from __future__ import annotations

from aiohttp import web

from verl_asyncweb.env.sites.common import e, page, redirect, state

SITE = "Velopedia"
# Facts are invented so that a model cannot answer from memory; several tasks chain two or three articles.
ARTICLES = {
    "veloria": {
        "title": "Veloria",
        "facts": {"Type": "Country", "Capital": "Marenport", "Population": "4,812,000", "Currency": "Velor crown"},
        "links": ["marenport", "tessin-vale"],
    },
    "marenport": {
        "title": "Marenport",
        "facts": {"Type": "City", "Country": "Veloria", "Founded": "1702", "Mayor": "Ilsa Brandt"},
        "links": ["veloria", "ilsa-brandt", "korvath-instruments"],
    },
    "tessin-vale": {
        "title": "Tessin Vale",
        "facts": {"Type": "Town", "Country": "Veloria", "Founded": "1388", "Known for": "Paper mills"},
        "links": ["veloria"],
    },
    "ilsa-brandt": {
        "title": "Ilsa Brandt",
        "facts": {"Type": "Person", "Born": "1961", "Birthplace": "Tessin Vale", "Office": "Mayor of Marenport"},
        "links": ["marenport", "tessin-vale"],
    },
    "korvath-instruments": {
        "title": "Korvath Instruments",
        "facts": {"Type": "Company", "Founded": "1954", "Founder": "Otto Lind", "Headquarters": "Marenport"},
        "links": ["otto-lind", "marenport", "lumen-x2"],
    },
    "otto-lind": {
        "title": "Otto Lind",
        "facts": {
            "Type": "Person",
            "Born": "1921",
            "Birthplace": "Dravik",
            "Known for": "Founding Korvath Instruments",
        },
        "links": ["korvath-instruments", "dravik"],
    },
    "dravik": {
        "title": "Dravik",
        "facts": {"Type": "Village", "Country": "Veloria", "Population": "930", "Elevation": "412 m"},
        "links": ["veloria", "brightwell"],
    },
    "lumen-x2": {
        "title": "Lumen X2",
        "facts": {"Type": "Lamp", "Maker": "Korvath Instruments", "Released": "2019", "Successor": "Lumen X3"},
        "links": ["korvath-instruments"],
    },
    "brightwell": {
        "title": "Brightwell",
        "facts": {"Type": "Company", "Founded": "1988", "Founder": "Mara Quist", "Headquarters": "Dravik"},
        "links": ["dravik"],
    },
}
FEATURED = ["veloria", "marenport", "korvath-instruments"]
NAV = [("Main page", "/wiki/"), ("Bookmarks", "/wiki/bookmarks")]


def _search_form() -> str:
    return (
        "<form action='/wiki/search' method='get'><input type='text' name='q' placeholder='Search Velopedia'>"
        "<button>Search</button></form>"
    )


def _links(slugs: list[str]) -> str:
    items = "".join(f'<li><a href="/wiki/a/{s}">{e(ARTICLES[s]["title"])}</a></li>' for s in slugs)
    return f"<ul class='links'>{items}</ul>"


async def home(request: web.Request) -> web.Response:
    body = f"<h1>Velopedia, the free Velorian encyclopedia</h1>{_search_form()}<h2>Featured</h2>{_links(FEATURED)}"
    return page(SITE, "Main page", body, NAV)


async def search(request: web.Request) -> web.Response:
    query = request.query.get("q", "").strip().lower()
    hits = [s for s, a in ARTICLES.items() if query and query in a["title"].lower()]
    results = _links(hits) if hits else "<p class='note'>No articles found.</p>"
    return page(SITE, "Search", f"<h1>Search results</h1>{_search_form()}{results}", NAV)


async def article(request: web.Request) -> web.Response:
    slug = request.match_info["slug"]
    if slug not in ARTICLES:
        raise web.HTTPNotFound()
    a = ARTICLES[slug]
    facts = "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in a["facts"].items())
    body = (
        f"<h1>{e(a['title'])}</h1><dl>{facts}</dl><h2>See also</h2>{_links(a['links'])}"
        f"<form method='post' action='/wiki/bookmark'><input type='hidden' name='slug' value='{slug}'>"
        "<button>Bookmark this article</button></form>"
    )
    return page(SITE, a["title"], body, NAV)


async def bookmark(request: web.Request) -> web.Response:
    form = await request.post()
    slug = str(form.get("slug", ""))
    marks = state(request).setdefault("bookmarks", [])
    if slug in ARTICLES and slug not in marks:
        marks.append(slug)
    raise redirect("/wiki/bookmarks")


async def bookmarks(request: web.Request) -> web.Response:
    marks = state(request).get("bookmarks", [])
    listing = _links(marks) if marks else "<p class='note'>No bookmarks yet.</p>"
    return page(SITE, "Bookmarks", f"<h1>Your bookmarks</h1>{listing}", NAV)


def register(app: web.Application) -> None:
    """Add the wiki's routes."""
    app.router.add_get("/wiki/", home)
    app.router.add_get("/wiki/search", search)
    app.router.add_get("/wiki/a/{slug}", article)
    app.router.add_post("/wiki/bookmark", bookmark)
    app.router.add_get("/wiki/bookmarks", bookmarks)
