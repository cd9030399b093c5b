"""Bundled site "Helpdesk Admin": login, user records and support tickets (state: login, users, tickets)."""

from __future__ import annotations

import copy

from aiohttp import web

from verl_asyncweb.env.sites.common import e, page, radios, redirect, state

SITE = "Helpdesk Admin"
USERNAME, PASSWORD = "admin", "hunter7"
ROLES = ["Viewer", "Editor", "Admin"]
USERS = {
    "u1": {"name": "Ada Ferro", "email": "ada@helpdesk.test", "role": "Admin", "active": True},
    "u2": {"name": "Bram Osei", "email": "bram@helpdesk.test", "role": "Editor", "active": True},
    "u3": {"name": "Cleo Marsh", "email": "cleo@helpdesk.test", "role": "Viewer", "active": True},
    "u4": {"name": "Dov Kessler", "email": "dov@helpdesk.test", "role": "Viewer", "active": True},
    "u5": {"name": "Eun Park", "email": "eun@helpdesk.test", "role": "Editor", "active": True},
}
TICKETS = {
    "101": {"subject": "Printer offline", "reporter": "u3", "status": "Open", "assignee": ""},
    "102": {"subject": "Password reset", "reporter": "u4", "status": "Open", "assignee": ""},
    "103": {"subject": "VPN drops hourly", "reporter": "u3", "status": "Open", "assignee": "Bram Osei"},
    "104": {"subject": "New laptop", "reporter": "u5", "status": "Closed", "assignee": "Ada Ferro"},
    "105": {"subject": "Mail quota full", "reporter": "u4", "status": "Open", "assignee": ""},
}
STAFF = ["Ada Ferro", "Bram Osei", "Eun Park"]
NAV = [("Dashboard", "/admin/dashboard"), ("Users", "/admin/users"), ("Tickets", "/admin/tickets")]


def users(request: web.Request) -> dict:
    """This episode's user records (copied from the defaults on first use)."""
    return state(request).setdefault("users", copy.deepcopy(USERS))


def tickets(request: web.Request) -> dict:
    """This episode's tickets (copied from the defaults on first use)."""
    return state(request).setdefault("tickets", copy.deepcopy(TICKETS))


def _require_login(request: web.Request) -> None:
    if not state(request).get("logged_in"):
        raise redirect("/admin/")


async def login_page(request: web.Request) -> web.Response:
    error = "<p class='note'>Wrong username or password.</p>" if request.query.get("failed") else ""
    body = (
        f"<h1>Sign in</h1>{error}<form class='stack' method='post' action='/admin/login'>"
        "<label class='field'>Username <input type='text' name='username'></label>"
        "<label class='field'>Password <input type='password' name='password'></label>"
        "<button>Sign in</button></form>"
    )
    return page(SITE, "Sign in", body, [])


async def login(request: web.Request) -> web.Response:
    form = await request.post()
    if form.get("username") == USERNAME and form.get("password") == PASSWORD:
        state(request)["logged_in"] = True
        raise redirect("/admin/dashboard")
    raise redirect("/admin/?failed=1")


async def dashboard(request: web.Request) -> web.Response:
    _require_login(request)
    body = f"<h1>Dashboard</h1><p>{len(users(request))} users.</p><p>Open tickets are listed on the Tickets page.</p>"
    return page(SITE, "Dashboard", body, NAV)


async def user_list(request: web.Request) -> web.Response:
    _require_login(request)
    rows = "".join(
        f'<tr><td><a href="/admin/users/{uid}">{e(u["name"])}</a></td><td>{e(u["email"])}</td>'
        f"<td>{e(u['role'])}</td><td>{'Active' if u['active'] else 'Inactive'}</td></tr>"
        for uid, u in users(request).items()
    )
    body = (
        "<h1>Users</h1><table><tr><th>Name</th><th>Email</th><th>Role</th><th>Status</th></tr>"
        f"{rows}</table><a href='/admin/users/new'>New user</a>"
    )
    return page(SITE, "Users", body, NAV)


async def user_edit(request: web.Request) -> web.Response:
    _require_login(request)
    uid = request.match_info["uid"]
    u = users(request).get(uid)
    if u is None:
        raise web.HTTPNotFound()
    active = " checked" if u["active"] else ""
    body = (
        f"<h1>{e(u['name'])}</h1><form class='stack' method='post' action='/admin/users/{uid}'>"
        f"<label class='field'>Email <input type='text' name='email' value='{e(u['email'])}'></label>"
        f"<p>Role: {radios('role', ROLES, u['role'])}</p>"
        f"<p><label><input type='checkbox' name='active'{active}>Active</label></p><button>Save</button></form>"
    )
    return page(SITE, u["name"], body, NAV)


async def user_save(request: web.Request) -> web.Response:
    _require_login(request)
    form = await request.post()
    u = users(request).get(request.match_info["uid"])
    if u is None:
        raise web.HTTPNotFound()
    u["email"] = str(form.get("email", u["email"])).strip()
    u["role"] = str(form.get("role", u["role"]))
    u["active"] = form.get("active") is not None
    raise redirect("/admin/users")


async def user_new(request: web.Request) -> web.Response:
    _require_login(request)
    body = (
        "<h1>New user</h1><form class='stack' method='post' action='/admin/users/new'>"
        "<label class='field'>Name <input type='text' name='name'></label>"
        "<label class='field'>Email <input type='text' name='email'></label>"
        f"<p>Role: {radios('role', ROLES, 'Viewer')}</p><button>Create user</button></form>"
    )
    return page(SITE, "New user", body, NAV)


async def user_create(request: web.Request) -> web.Response:
    _require_login(request)
    form = await request.post()
    records = users(request)
    uid = f"u{len(records) + 1}"
    records[uid] = {
        "name": str(form.get("name", "")).strip(),
        "email": str(form.get("email", "")).strip(),
        "role": str(form.get("role", "Viewer")),
        "active": True,
    }
    raise redirect("/admin/users")


async def ticket_list(request: web.Request) -> web.Response:
    _require_login(request)
    people = users(request)
    rows = "".join(
        f'<tr><td><a href="/admin/tickets/{tid}">#{tid}</a></td><td>{e(t["subject"])}</td>'
        f"<td>{e(people[t['reporter']]['name'])}</td><td>{e(t['status'])}</td><td>{e(t['assignee'] or '-')}</td></tr>"
        for tid, t in tickets(request).items()
    )
    head = "<tr><th>Ticket</th><th>Subject</th><th>Reporter</th><th>Status</th><th>Assignee</th></tr>"
    return page(SITE, "Tickets", f"<h1>Tickets</h1><table>{head}{rows}</table>", NAV)


async def ticket_view(request: web.Request) -> web.Response:
    _require_login(request)
    tid = request.match_info["tid"]
    t = tickets(request).get(tid)
    if t is None:
        raise web.HTTPNotFound()
    reporter = users(request)[t["reporter"]]
    body = (
        f"<h1>Ticket #{tid}: {e(t['subject'])}</h1><dl><dt>Reporter</dt><dd>{e(reporter['name'])}</dd>"
        f"<dt>Reporter email</dt><dd>{e(reporter['email'])}</dd><dt>Status</dt><dd>{e(t['status'])}</dd>"
        f"<dt>Assignee</dt><dd>{e(t['assignee'] or '-')}</dd></dl>"
        f"<form method='post' action='/admin/tickets/{tid}'>"
        f"<p>Assign to: {radios('assignee', STAFF, t['assignee'])}</p>"
        "<button name='op' value='assign'>Assign</button><button name='op' value='close'>Close ticket</button></form>"
    )
    return page(SITE, f"Ticket #{tid}", body, NAV)


async def ticket_update(request: web.Request) -> web.Response:
    _require_login(request)
    form = await request.post()
    t = tickets(request).get(request.match_info["tid"])
    if t is None:
        raise web.HTTPNotFound()
    if form.get("op") == "close":
        t["status"] = "Closed"
    elif form.get("assignee") in STAFF:
        t["assignee"] = str(form["assignee"])
    raise redirect("/admin/tickets")


def register(app: web.Application) -> None:
    """Add the admin site's routes."""
    app.router.add_get("/admin/", login_page)
    app.router.add_post("/admin/login", login)
    app.router.add_get("/admin/dashboard", dashboard)
    app.router.add_get("/admin/users", user_list)
    app.router.add_get("/admin/users/new", user_new)
    app.router.add_post("/admin/users/new", user_create)
    app.router.add_get("/admin/users/{uid}", user_edit)
    app.router.add_post("/admin/users/{uid}", user_save)
    app.router.add_get("/admin/tickets", ticket_list)
    app.router.add_get("/admin/tickets/{tid}", ticket_view)
    app.router.add_post("/admin/tickets/{tid}", ticket_update)
