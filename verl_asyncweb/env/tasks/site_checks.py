"""Verifier checks and the oracle runner of the bundled site tasks.

A check reads the episode's server-side site state (and the final answer) and returns ``(description, passed)``.
An oracle plan is a list of semantic steps resolved against each observation's element list and sent through
:meth:`BrowserPool.step` as ordinary ``<tool_call>`` text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from verl_asyncweb.env import oracle

Check = Callable[[dict, str | None], tuple[str, bool]]
MAX_ANSWER_CHARS = 200  # an answer listing everything on the site is not an answer


def _norm(text: str) -> str:
    return re.sub(r"[^0-9a-z]+", "", text.lower())


def answer_contains(expected: str) -> Check:
    """The final answer mentions ``expected`` (case, spaces and punctuation ignored)."""

    def check(state: dict, answer: str | None) -> tuple[str, bool]:
        ok = answer is not None and len(answer) <= MAX_ANSWER_CHARS and _norm(expected) in _norm(answer)
        return f"answer mentions {expected!r} (got {answer!r:.80})", ok

    return check


def cart_is(items: dict[str, int]) -> Check:
    """The shop cart holds exactly ``items`` (product id -> quantity)."""

    def check(state: dict, answer: str | None) -> tuple[str, bool]:
        cart = state.get("cart", {})
        return f"cart is {items} (got {cart})", cart == items

    return check


def order_placed(items: dict[str, int], name: str, address: str, shipping: str) -> Check:
    """One order with exactly these items, recipient and shipping method."""

    def check(state: dict, answer: str | None) -> tuple[str, bool]:
        want = {"items": items, "name": name, "address": address, "shipping": shipping}
        orders = state.get("orders", [])
        return f"order placed {want} (got {orders})", orders == [want]

    return check


def bookmarks_are(slugs: list[str]) -> Check:
    """The wiki bookmarks are exactly ``slugs`` (any order)."""

    def check(state: dict, answer: str | None) -> tuple[str, bool]:
        marks = state.get("bookmarks", [])
        return f"bookmarks are {sorted(slugs)} (got {sorted(marks)})", sorted(marks) == sorted(slugs)

    return check


def user_has(uid_or_name: str, **fields: Any) -> Check:
    """An admin user record (by id or by name) has the given field values."""

    def check(state: dict, answer: str | None) -> tuple[str, bool]:
        users = state.get("users", {})
        record = users.get(uid_or_name) or next((u for u in users.values() if u["name"] == uid_or_name), None)
        ok = record is not None and all(record.get(k) == v for k, v in fields.items())
        return f"user {uid_or_name} has {fields} (got {record})", ok

    return check


def users_unchanged_except(*changed: str) -> Check:
    """No user record other than ``changed`` (ids) differs from the defaults."""

    def check(state: dict, answer: str | None) -> tuple[str, bool]:
        from verl_asyncweb.env.sites.admin import USERS

        users = state.get("users", USERS)
        extra = [uid for uid, u in USERS.items() if uid not in changed and users.get(uid) != u]
        return f"no other user changed (changed: {extra})", not extra

    return check


def ticket_has(tid: str, **fields: Any) -> Check:
    """An admin ticket has the given field values."""

    def check(state: dict, answer: str | None) -> tuple[str, bool]:
        from verl_asyncweb.env.sites.admin import TICKETS

        record = state.get("tickets", TICKETS).get(tid)
        ok = record is not None and all(record.get(k) == v for k, v in fields.items())
        return f"ticket #{tid} has {fields} (got {record})", ok

    return check


def plan_step_actions(op: str, args: list, obs: Any) -> list[str]:
    """The ``<tool_call>`` texts of one oracle plan step, with targets resolved in ``obs``'s element list.

    Plan steps: ``("click", text[, kind])``, ``("type", field_name, text)`` (click the field, type),
    ``("replace", field_name, text)`` (click, select all, type), ``("search", field_name, text)`` (type + Enter),
    ``("navigate", path)`` (on the current origin) and ``("answer", text)``.
    """
    if op == "click":
        return [oracle.click(oracle.find(obs, args[0], kind=args[1] if len(args) > 1 else None))]
    if op in ("type", "search"):
        at = oracle.find(obs, kind="input", name=args[0])
        return [oracle.type_text(args[1], press_enter=op == "search", coordinate=at)]
    if op == "replace":
        at = oracle.find(obs, kind="input", name=args[0])
        return [oracle.click(at), oracle.tool_call("key", keys=["ctrl", "a"]), oracle.type_text(args[1])]
    if op == "navigate":
        origin = re.match(r"https?://[^/]+", obs.url).group(0)
        return [oracle.tool_call("navigate", url=origin + args[0])]
    if op == "answer":
        return [oracle.answer(args[0])]
    raise ValueError(f"unknown oracle step {op!r}")


async def run_oracle(pool: Any, session: Any, obs: Any, plan: tuple) -> Any:
    """Execute an oracle plan (see :func:`plan_step_actions`) through ``pool.step`` only; returns the last result.

    Raises:
        AssertionError: If a step fails in the environment (the oracle is a test of the site, not of the pool).
    """
    result = None
    for op, *args in plan:
        for text in plan_step_actions(op, args, obs):
            result = await pool.step(session, text)
            assert not result.env_failed and not result.invalid_action, (op, args, result.info, result.error)
            obs = result.observation
    return result


def plan_steps(plan: tuple) -> int:
    """Number of ``step`` calls an oracle plan takes."""
    return sum(3 if op == "replace" else 1 for op, *_ in plan)
