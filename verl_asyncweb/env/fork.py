"""Snapshot, restore and fork of episodes: the :class:`SnapshotMixin` half of :class:`BrowserPool`.

What a snapshot holds for each kind of page, and how it is put back, is described in
:mod:`verl_asyncweb.env.snapshot`. Restores never raise for infrastructure trouble: like ``reset`` they retry once
on a rebuilt context (a dead browser is relaunched first) and otherwise report ``env_failed``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

from verl_asyncweb.env.clock import advance_page_clock
from verl_asyncweb.env.executor import settle
from verl_asyncweb.env.network import origin_of
from verl_asyncweb.env.observe import observe
from verl_asyncweb.env.page_state import apply_page_state, capture_page_state, storage_script
from verl_asyncweb.env.results import Observation, describe_error
from verl_asyncweb.env.server import EPISODE_COOKIE
from verl_asyncweb.env.session import Session, navigation_history
from verl_asyncweb.env.snapshot import (
    EnvSnapshot,
    absolute_url,
    decode_action,
    mouse_position,
    relative_url,
    task_to_dict,
)
from verl_asyncweb.env.stats import PoolStats
from verl_asyncweb.env.tasks.task import Task

if TYPE_CHECKING:
    from verl_asyncweb.env.config import BrowserPoolConfig

logger = logging.getLogger(__name__)
_COOKIE_KEYS = ("name", "value", "domain", "path", "expires", "httpOnly", "secure", "sameSite")


class SnapshotError(RuntimeError):
    """The page of an episode could not be read; the episode is now failed by the environment."""


class _Diverged(RuntimeError):
    """An exact snapshot's restore did not reproduce its fingerprint."""


class SnapshotMixin:
    """``snapshot`` / ``restore`` / ``fork`` of :class:`BrowserPool` (which provides the attributes below)."""

    config: BrowserPoolConfig
    site_origin: str
    _server: Any
    _stats: PoolStats

    async def snapshot(self, session: Session) -> EnvSnapshot:
        """Capture the episode running on ``session``; the page is only read, the episode goes on.

        Raises:
            ValueError: If the session holds no episode, or its episode failed in the environment.
            SnapshotError: If the page could not be read (the episode is then failed by the environment).
        """
        task = session.task
        if not session.in_use or task is None:
            raise ValueError("pool.snapshot(session) needs an acquired session with an episode; call reset() first")
        if session.env_failed:
            raise ValueError(f"pool.snapshot(session): the episode failed in the environment ({session.error})")
        try:
            snap = await asyncio.wait_for(self._capture(session, task), self.config.reset_timeout_s)
        except Exception as exc:
            error = describe_error(exc, "snapshot", self.config.reset_timeout_s)
            logger.warning("session %d snapshot failed: %s", session.session_id, error)
            await self._recover(session, exc)
            session.done, session.env_failed, session.error = True, True, error
            self._stats.add("env_failures")
            raise SnapshotError(error) from exc
        self._stats.add("snapshots")
        return snap

    async def restore(self, session: Session, snapshot: EnvSnapshot) -> Observation:
        """Put ``snapshot``'s episode on ``session`` (acquired; the episode it held is dropped).

        Returns:
            The observation of the restored page, as :meth:`reset` returns one (``env_failed`` when the browser
            failed twice, or when an exact snapshot was not reproduced).

        Raises:
            ValueError: If the session is not acquired, the snapshot was taken at another viewport size, or it needs
                the site server and the pool has none.
        """
        if not session.in_use:
            raise ValueError("pool.restore(session, snapshot) needs a session from pool.acquire()")
        viewport = (self.config.viewport_width, self.config.viewport_height)
        if tuple(snapshot.viewport) != viewport:
            raise ValueError(
                f"snapshot was taken at viewport {snapshot.viewport[0]}x{snapshot.viewport[1]}, this pool renders "
                f"{viewport[0]}x{viewport[1]}; restore it in a pool with that asyncweb.env.viewport_width/height"
            )
        if snapshot.kind != "web" and not self.site_origin:
            raise ValueError(
                f"a {snapshot.kind!r} snapshot is restored on the pool's site server, which this pool did not start; "
                "set asyncweb.env.start_site_server to true"
            )
        self._stats.add("snapshots_restored")
        if snapshot.kind in ("web", "browsergym"):
            self._stats.add("snapshots_replayed")
        task = session.task = snapshot.task_obj
        session.steps, session.answer, session.reward = snapshot.steps, snapshot.answer, snapshot.reward
        session.done, session.env_failed, session.error = snapshot.done, False, None
        timeout_s = self.config.reset_timeout_s
        if snapshot.kind != "site":  # the recorded actions are executed again
            timeout_s += self.config.step_timeout_s * len(snapshot.actions)
        error = "unknown"
        for attempt in range(2):
            session.events.clear()
            session.actions, session.virtual_history, session.wob_counters = list(snapshot.actions), [], None
            session.departed.clear()
            try:
                obs = await asyncio.wait_for(self._restore_once(session, snapshot, task), timeout_s)
                session.last_observation = obs
                return obs
            except _Diverged as exc:  # deterministic: another attempt would diverge the same way
                error = str(exc)
                break
            except Exception as exc:
                error = describe_error(exc, "restore", timeout_s)
                logger.warning("session %d restore attempt %d failed: %s", session.session_id, attempt + 1, error)
                await self._recover(session, exc)
        session.done, session.env_failed, session.error = True, True, error
        self._stats.add("env_failures")
        session.last_observation = Observation(env_failed=True, error=error)
        return session.last_observation

    async def fork(self, snapshot: EnvSnapshot) -> Session:
        """Acquire a free page and restore ``snapshot`` on it (waits while every page is lent out).

        Returns:
            The session (release it as any other); the restored observation is ``session.last_observation``, and
            ``session.env_failed`` tells whether the restore failed.
        """
        session = await self.acquire()
        try:
            await self.restore(session, snapshot)
        except BaseException:
            await self.release(session)
            raise
        return session

    # ---- capture --------------------------------------------------------------------------------------------

    async def _capture(self, session: Session, task: Task) -> EnvSnapshot:
        t, origin = self.config.action_timeout_s, self.site_origin
        page = await capture_page_state(session.page, t)
        cookies = await asyncio.wait_for(session.context.cookies(), t)
        index, urls = await navigation_history(session, t)
        own = urls[session.history_base : index] if 0 <= session.history_base <= index else []
        kind, exact, reason = self._classify(session, task, page["url"])
        site_state = None
        if kind == "site":  # JSON round trip: a copy that is known to serialise
            site_state = json.loads(json.dumps(self._server.store.get(session.episode_token)))
        return EnvSnapshot(
            task=task_to_dict(task),
            kind=kind,
            exact=exact,
            reason=reason,
            url=relative_url(page["url"], origin),
            viewport=(self.config.viewport_width, self.config.viewport_height),
            steps=session.steps,
            done=session.done,
            answer=session.answer,
            reward=session.reward,
            actions=tuple(session.actions),
            history=tuple(
                {**entry, "url": relative_url(entry["url"], origin)}
                for entry in [*session.virtual_history, *(self._departure(session, url) for url in own)]
            ),
            site_state=site_state,
            cookies=tuple({k: c[k] for k in _COOKIE_KEYS if k in c} for c in cookies if c["name"] != EPISODE_COOKIE),
            local_storage=page["local_storage"],
            session_storage=page["session_storage"],
            form=tuple(page["form"]),
            focus=page["focus"],
            selection=page["selection"],
            scroll=page["scroll"],
            clock_ms=page["clock_ms"],
            miniwob=session.wob_counters if kind == "miniwob" else None,
            fingerprint=page["fingerprint"],
        )

    @staticmethod
    def _departure(session: Session, url: str) -> dict:
        """A history entry: its URL and the form values and scroll the episode left it with."""
        state = session.departed.get(url, {})
        return {"url": url, "form": state.get("form", []), "scroll": state.get("scroll")}

    def _classify(self, session: Session, task: Task, url: str) -> tuple[str, bool, str]:
        """``(kind, exact, reason)`` of a snapshot of ``task`` with the page at ``url``."""
        n, clock = len(session.actions), self.config.deterministic_clock
        if task.evaluator == "browsergym":
            return "browsergym", False, f"BrowserGym task set up again from its seed, {n} actions re-executed"
        if task.evaluator == "miniwob":
            if clock:
                return "miniwob", True, f"seeded MiniWoB++ page regenerated, {n} actions re-executed in page time"
            reason = (
                "MiniWoB++ page time follows the wall clock (asyncweb.env.deterministic_clock is off): "
                f"re-executing its {n} actions may not reproduce it"
            )
            return "miniwob", False, reason
        served = self.site_origin and origin_of(self.resolve_url(task.start_url)) == self.site_origin
        if served and url.startswith(self.site_origin + "/"):
            reason = "bundled site: server state, cookies, storage, URL, history, form values, focus and scroll"
            if not clock:
                reason += " (asyncweb.env.deterministic_clock is off: the caret's blink may differ in screenshots)"
            return "site", True, reason
        where = origin_of(url) if url.startswith("http") else url
        reason = (
            f"{where} is not served by this pool, so its server-side state cannot be captured: restore replays the "
            f"{n} recorded actions from the start URL"
        )
        return "web", False, reason

    # ---- restore --------------------------------------------------------------------------------------------

    async def _restore_once(self, session: Session, snap: EnvSnapshot, task: Task) -> Observation:
        await self._end_browsergym(session)  # first: a benchmark's teardown may renew the context prepared below
        url = await self._prepare_episode(session, task, snap.site_state if snap.kind == "site" else None)
        if snap.kind == "site":
            return await self._restore_site(session, snap)
        if snap.kind == "miniwob":
            await self._start_miniwob(session, task, url, counters=snap.miniwob)
            await self._replay(session, snap)
            await self._check(session, snap, None)
            return await self._observe_miniwob(session)
        if snap.kind == "browsergym":
            await self._reset_browsergym(session, task)
            await self._replay(session, snap)
            await session.browsergym.validate(snap.answer)  # the verdict the episode had at the snapshot
            await self._check(session, snap, None)
            return await self._observe_browsergym(session)
        await self._goto(session, url)  # "web": the episode again from its start URL, as reset() began it
        await settle(session, self.config)
        await self._start_history(session, (0.0, 0.0))
        await self._replay(session, snap)
        await self._check(session, snap, None)
        state = await settle(session, self.config)
        return await observe(session.page, session.cdp, self.config, state["title"])

    async def _restore_site(self, session: Session, snap: EnvSnapshot) -> Observation:
        t, page = self.config.action_timeout_s, session.page
        if snap.cookies:
            await asyncio.wait_for(session.context.add_cookies(list(snap.cookies)), t)
        url = absolute_url(snap.url, self.site_origin)
        script = storage_script(origin_of(url), snap.local_storage or {}, snap.session_storage or {})
        init = await asyncio.wait_for(page.add_init_script(script), t)
        try:
            await self._goto(session, url)
        finally:
            await asyncio.wait_for(init.close(), t)
        state = await settle(session, self.config)
        await self._start_history(session, mouse_position(snap.actions, snap.viewport))
        session.virtual_history = [{**e, "url": absolute_url(e["url"], self.site_origin)} for e in snap.history]
        if snap.clock_ms is not None and self.config.deterministic_clock:
            now = await advance_page_clock(page, 0, t)  # a new document starts at the clock's epoch
            if now is not None and snap.clock_ms > now:
                await advance_page_clock(page, snap.clock_ms - now, t)
        scroll = snap.scroll or {"x": 0, "y": 0, "elements": []}
        await self._check(
            session, snap, {"form": snap.form, "focus": snap.focus, "selection": snap.selection, "scroll": scroll}
        )
        return await observe(page, session.cdp, self.config, state["title"])

    async def _replay(self, session: Session, snap: EnvSnapshot) -> None:
        """Execute the recorded actions again, without observations (invalid ones were steps without effect)."""
        scratch = PoolStats()  # replayed actions are neither new steps nor new blocked attempts
        for data in snap.actions:
            if data is not None:
                await self._act(session, decode_action(data, self.site_origin), scratch)
        session.events.clear()
        session.answer = snap.answer

    async def _check(self, session: Session, snap: EnvSnapshot, state: dict | None) -> None:
        """Apply ``state`` (form, focus, selection, scroll) and compare the page's fingerprint with the snapshot's."""
        problems, fingerprint = await apply_page_state(session.page, state, self.config.action_timeout_s)
        if not problems and fingerprint == snap.fingerprint:
            return
        self._stats.add("snapshots_diverged")
        detail = "; ".join(problems) or "page text, form values, focus or scroll differ from the snapshot's"
        if snap.exact:
            raise _Diverged(f"restore did not reproduce the snapshot: {detail}")
        logger.warning("session %d: inexact restore of %s diverged: %s", session.session_id, snap.url, detail)
