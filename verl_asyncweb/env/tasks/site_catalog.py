"""Definitions of the bundled site tasks: instruction, verifier checks and scripted oracle plan of each.

Difficulty follows the oracle's step count on WebGym's scale (Easy <= 3, Medium 4-6, Hard >= 7). Tasks marked
``memory`` need a fact read on an earlier page (or another site) later in the episode.
"""

from __future__ import annotations

from dataclasses import dataclass

from verl_asyncweb.env.tasks.site_checks import (
    Check,
    answer_contains,
    bookmarks_are,
    cart_is,
    order_placed,
    plan_steps,
    ticket_has,
    user_has,
    users_unchanged_except,
)

LOGIN = "Sign in to Helpdesk Admin (username admin, password hunter7), then "
_LOGIN_PLAN = (("type", "username", "admin"), ("type", "password", "hunter7"), ("click", "Sign in", "button"))


@dataclass(frozen=True)
class SiteTask:
    """Definition of one bundled task: what to ask, how to verify it, how a scripted oracle solves it."""

    task_id: str
    start: str
    instruction: str
    checks: tuple[Check, ...]
    plan: tuple
    memory: bool = False

    @property
    def steps(self) -> int:
        """Steps the oracle needs."""
        return plan_steps(self.plan)

    @property
    def difficulty(self) -> int:
        """1-9 from the oracle's step count: <= 4 steps Easy (1-3), 5-8 Medium (4-6), >= 9 Hard (7-9)."""
        if self.steps <= 4:
            return self.steps - 1
        if self.steps <= 8:
            return min(6, self.steps - 1)
        return min(9, 7 + (self.steps - 9) // 2)


def _shop_tasks() -> list[SiteTask]:
    add = [("p1", "Lamps", "Lumen X2"), ("p5", "Kitchen", "Stone Mortar"), ("p7", "Paper", "Field Notebook")]
    tasks = [
        SiteTask(
            f"shop/add-{pid}",
            "/shop/",
            f"Add one {name} to the cart in Korvo Shop.",
            (cart_is({pid: 1}),),
            (("click", cat), ("click", name), ("click", "Add to cart")),
        )
        for pid, cat, name in add
    ]
    tasks += [
        SiteTask(
            f"shop/add-{qty}x-{pid}",
            "/shop/",
            f"Put {qty} units of {name} in the Korvo Shop cart.",
            (cart_is({pid: qty}),),
            (("click", cat), ("click", name), ("replace", "qty", str(qty)), ("click", "Add to cart")),
        )
        for pid, cat, name, qty in [("p4", "Kitchen", "Trail Kettle", 3), ("p8", "Paper", "Ledger Pad", 4)]
    ]
    tasks += [
        SiteTask(
            "shop/sku-p6",
            "/shop/",
            "What is the SKU of the Copper Pan in Korvo Shop? Answer with the SKU.",
            (answer_contains("CPN-640"),),
            (("click", "Kitchen"), ("click", "Copper Pan"), ("answer", "CPN-640")),
        ),
        SiteTask(
            "shop/price-p3",
            "/shop/",
            "How many dollars does the Arc Desk Lamp cost in Korvo Shop?",
            (answer_contains("64"),),
            (("click", "Lamps"), ("click", "Arc Desk Lamp"), ("answer", "$64")),
        ),
        SiteTask(
            "shop/cheapest-lamp",
            "/shop/",
            "Add the cheapest lamp of Korvo Shop to the cart.",
            (cart_is({"p2": 1}),),
            (("click", "Lamps"), ("click", "Lumen Mini"), ("click", "Add to cart")),
        ),
        SiteTask(
            "shop/search-tessin",
            "/shop/",
            "Search Korvo Shop for products made by Tessin Mills and put 2 of the more expensive one in the cart.",
            (cart_is({"p8": 2}),),
            (("search", "q", "Tessin"), ("click", "Ledger Pad"), ("replace", "qty", "2"), ("click", "Add to cart")),
            memory=True,
        ),
        SiteTask(
            "shop/add-remove",
            "/shop/",
            "Add a Trail Kettle and a Stone Mortar to the Korvo Shop cart, then remove the Trail Kettle again.",
            (cart_is({"p5": 1}),),
            (
                ("click", "Kitchen"),
                ("click", "Trail Kettle"),
                ("click", "Add to cart"),
                ("click", "Home"),
                ("click", "Kitchen"),
                ("click", "Stone Mortar"),
                ("click", "Add to cart"),
                ("click", "Remove Trail Kettle"),
            ),
        ),
    ]
    for pid, cat, name, who, where, ship in [
        ("p7", "Paper", "Field Notebook", "Cleo Marsh", "12 Quay Street", "Express"),
        ("p3", "Lamps", "Arc Desk Lamp", "Bram Osei", "4 Mill Lane", "Standard"),
    ]:
        tasks.append(
            SiteTask(
                f"shop/buy-{pid}",
                "/shop/",
                f"Buy one {name} in Korvo Shop with {ship} shipping, for {who}, address {where}.",
                (order_placed({pid: 1}, who, where, ship), cart_is({})),
                (
                    ("click", cat),
                    ("click", name),
                    ("click", "Add to cart"),
                    ("click", "Checkout"),
                    ("type", "name", who),
                    ("type", "address", where),
                    ("click", ship, "label"),
                    ("click", "Place order"),
                ),
            )
        )
    return tasks


def _wiki_tasks() -> list[SiteTask]:
    qa = [
        ("population-veloria", "What is the population of Veloria?", "Veloria", "4,812,000"),
        ("founded-marenport", "In which year was the city of Marenport founded?", "Marenport", "1702"),
        ("currency-veloria", "What is the currency of Veloria?", "Veloria", "Velor crown"),
    ]
    tasks = [
        SiteTask(
            f"wiki/{tid}",
            "/wiki/",
            f"Using Velopedia, answer: {question}",
            (answer_contains(value),),
            (("search", "q", term), ("click", term, "a"), ("answer", value)),
        )
        for tid, question, term, value in qa
    ]
    tasks += [
        SiteTask(
            "wiki/mayor-birthplace",
            "/wiki/",
            "Using Velopedia: where was the mayor of Marenport born?",
            (answer_contains("Tessin Vale"),),
            (("click", "Marenport"), ("click", "Ilsa Brandt"), ("answer", "Tessin Vale")),
            memory=True,
        ),
        SiteTask(
            "wiki/founder-born",
            "/wiki/",
            "Using Velopedia: in which year was the founder of Korvath Instruments born?",
            (answer_contains("1921"),),
            (("click", "Korvath Instruments"), ("click", "Otto Lind"), ("answer", "1921")),
            memory=True,
        ),
        SiteTask(
            "wiki/founder-village-population",
            "/wiki/",
            "Using Velopedia: what is the population of the birthplace of the founder of Korvath Instruments?",
            (answer_contains("930"),),
            (("click", "Korvath Instruments"), ("click", "Otto Lind"), ("click", "Dravik", "a"), ("answer", "930")),
            memory=True,
        ),
        SiteTask(
            "wiki/bookmark-capital",
            "/wiki/",
            "On Velopedia, bookmark the article about the capital of Veloria.",
            (bookmarks_are(["marenport"]),),
            (("click", "Veloria"), ("click", "Marenport", "a"), ("click", "Bookmark this article")),
        ),
        SiteTask(
            "wiki/bookmark-two",
            "/wiki/",
            "On Velopedia, bookmark the articles about Tessin Vale and Dravik.",
            (bookmarks_are(["tessin-vale", "dravik"]),),
            (
                ("search", "q", "Tessin"),
                ("click", "Tessin Vale", "a"),
                ("click", "Bookmark this article"),
                ("click", "Main page"),
                ("search", "q", "Dravik"),
                ("click", "Dravik", "a"),
                ("click", "Bookmark this article"),
            ),
        ),
        SiteTask(
            "wiki/village-company-founder",
            "/wiki/",
            "Using Velopedia: who founded the company headquartered in the village where Otto Lind was born?",
            (answer_contains("Mara Quist"),),
            (
                ("search", "q", "Otto"),
                ("click", "Otto Lind", "a"),
                ("click", "Dravik", "a"),
                ("click", "Brightwell", "a"),
                ("answer", "Mara Quist"),
            ),
            memory=True,
        ),
        SiteTask(
            "wiki/elevation-and-bookmark",
            "/wiki/",
            "On Velopedia, bookmark the article of the village where Otto Lind was born and answer its elevation.",
            (bookmarks_are(["dravik"]), answer_contains("412")),
            (
                ("search", "q", "Otto"),
                ("click", "Otto Lind", "a"),
                ("click", "Dravik", "a"),
                ("click", "Bookmark this article"),
                ("answer", "412 m"),
            ),
            memory=True,
        ),
    ]
    return tasks


def _admin_tasks() -> list[SiteTask]:
    lp = _LOGIN_PLAN
    return [
        SiteTask(
            "admin/email-cleo",
            "/admin/",
            LOGIN + "change the email of Cleo Marsh to cleo.marsh@helpdesk.test.",
            (user_has("u3", email="cleo.marsh@helpdesk.test"), users_unchanged_except("u3")),
            lp
            + (
                ("click", "Users"),
                ("click", "Cleo Marsh"),
                ("replace", "email", "cleo.marsh@helpdesk.test"),
                ("click", "Save"),
            ),
        ),
        SiteTask(
            "admin/role-dov",
            "/admin/",
            LOGIN + "give Dov Kessler the Editor role.",
            (user_has("u4", role="Editor", active=True), users_unchanged_except("u4")),
            lp + (("click", "Users"), ("click", "Dov Kessler"), ("click", "Editor", "label"), ("click", "Save")),
        ),
        SiteTask(
            "admin/deactivate-eun",
            "/admin/",
            LOGIN + "deactivate the account of Eun Park.",
            (user_has("u5", active=False, role="Editor"), users_unchanged_except("u5")),
            lp + (("click", "Users"), ("click", "Eun Park"), ("click", "Active", "label"), ("click", "Save")),
        ),
        SiteTask(
            "admin/create-fay",
            "/admin/",
            LOGIN + "create the user Fay Rowe, email fay@helpdesk.test, role Editor.",
            (user_has("Fay Rowe", email="fay@helpdesk.test", role="Editor", active=True),),
            lp
            + (
                ("click", "Users"),
                ("click", "New user"),
                ("type", "name", "Fay Rowe"),
                ("type", "email", "fay@helpdesk.test"),
                ("click", "Editor", "label"),
                ("click", "Create user"),
            ),
        ),
        SiteTask(
            "admin/close-102",
            "/admin/",
            LOGIN + "close ticket #102.",
            (ticket_has("102", status="Closed"), ticket_has("105", status="Open")),
            lp + (("click", "Tickets"), ("click", "#102"), ("click", "Close ticket")),
        ),
        SiteTask(
            "admin/assign-101",
            "/admin/",
            LOGIN + "assign ticket #101 to Eun Park.",
            (ticket_has("101", assignee="Eun Park", status="Open"),),
            lp + (("click", "Tickets"), ("click", "#101"), ("click", "Eun Park", "label"), ("click", "Assign")),
        ),
        SiteTask(
            "admin/count-open",
            "/admin/",
            LOGIN + "answer how many tickets are open.",
            (answer_contains("4"),),
            lp + (("click", "Tickets"), ("answer", "4")),
        ),
        SiteTask(
            "admin/deactivate-reporter",
            "/admin/",
            LOGIN + "find who reported ticket #105 and deactivate that person's account.",
            (user_has("u4", active=False), users_unchanged_except("u4")),
            lp
            + (
                ("click", "Tickets"),
                ("click", "#105"),
                ("click", "Users"),
                ("click", "Dov Kessler"),
                ("click", "Active", "label"),
                ("click", "Save"),
            ),
            memory=True,
        ),
        SiteTask(
            "admin/assign-cleo-unassigned",
            "/admin/",
            LOGIN + "assign every open, unassigned ticket reported by Cleo Marsh to Bram Osei.",
            (
                ticket_has("101", assignee="Bram Osei"),
                ticket_has("103", assignee="Bram Osei"),
                ticket_has("102", assignee=""),
            ),
            lp + (("click", "Tickets"), ("click", "#101"), ("click", "Bram Osei", "label"), ("click", "Assign")),
        ),
        SiteTask(
            "admin/close-dov-and-email",
            "/admin/",
            LOGIN + "close every open ticket reported by Dov Kessler, then change his email to dov.k@helpdesk.test.",
            (
                ticket_has("102", status="Closed"),
                ticket_has("105", status="Closed"),
                ticket_has("101", status="Open"),
                user_has("u4", email="dov.k@helpdesk.test"),
            ),
            lp
            + (
                ("click", "Tickets"),
                ("click", "#102"),
                ("click", "Close ticket"),
                ("click", "#105"),
                ("click", "Close ticket"),
                ("click", "Users"),
                ("click", "Dov Kessler"),
                ("replace", "email", "dov.k@helpdesk.test"),
                ("click", "Save"),
            ),
            memory=True,
        ),
    ]


def _cross_site_tasks() -> list[SiteTask]:
    return [
        SiteTask(
            "cross/lumen-year-sku",
            "/wiki/",
            "Find the release year of the Lumen X2 on Velopedia (/wiki/) and its SKU in Korvo Shop (/shop/); "
            "answer as 'YEAR SKU'.",
            (answer_contains("2019"), answer_contains("LX2-118")),
            (
                ("search", "q", "Lumen"),
                ("click", "Lumen X2", "a"),
                ("navigate", "/shop/"),
                ("click", "Lamps"),
                ("click", "Lumen X2"),
                ("answer", "2019 LX2-118"),
            ),
            memory=True,
        ),
        SiteTask(
            "cross/capital-company-order",
            "/wiki/",
            "On Velopedia (/wiki/) find the company headquartered in the capital of Veloria. In Korvo Shop "
            "(/shop/) buy one of that company's cheapest lamp, Express shipping, for Ilsa Brandt, 3 Harbour Row.",
            (order_placed({"p2": 1}, "Ilsa Brandt", "3 Harbour Row", "Express"),),
            (
                ("click", "Veloria"),
                ("click", "Marenport", "a"),
                ("click", "Korvath Instruments", "a"),
                ("navigate", "/shop/"),
                ("click", "Lamps"),
                ("click", "Lumen Mini"),
                ("click", "Add to cart"),
                ("click", "Checkout"),
                ("type", "name", "Ilsa Brandt"),
                ("type", "address", "3 Harbour Row"),
                ("click", "Express", "label"),
                ("click", "Place order"),
            ),
            memory=True,
        ),
        SiteTask(
            "cross/mayor-account",
            "/wiki/",
            "Look up the mayor of Marenport on Velopedia (/wiki/), then "
            + LOGIN[0].lower()
            + LOGIN[1:]
            + "at /admin/ create a Viewer account for that person with email ilsa@helpdesk.test.",
            (user_has("Ilsa Brandt", email="ilsa@helpdesk.test", role="Viewer"),),
            (("click", "Marenport"), ("navigate", "/admin/"))
            + _LOGIN_PLAN
            + (
                ("click", "Users"),
                ("click", "New user"),
                ("type", "name", "Ilsa Brandt"),
                ("type", "email", "ilsa@helpdesk.test"),
                ("click", "Create user"),
            ),
            memory=True,
        ),
    ]


def all_site_tasks() -> list[SiteTask]:
    """Every bundled task definition, shop first."""
    return _shop_tasks() + _wiki_tasks() + _admin_tasks() + _cross_site_tasks()
