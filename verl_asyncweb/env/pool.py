"""``BrowserPool``: long-lived Chromium browsers and pages lent to episodes, with a recovery ladder.

One pool per worker process, kept for the whole run (DESIGN.md sections 2 and 4). Browsers, contexts and pages
are created once and reused across episodes; an episode gets a fresh cookie jar and site state, not a new page.
Infrastructure trouble never escapes as an exception: the step or reset reports ``env_failed=True`` and the pool
repairs itself (step timeout -> close context -> new context + page; browser gone -> relaunch).

With ``asyncweb.env.remote_endpoints`` the browsers are remote (``python -m verl_asyncweb.browser_server`` on
CPU hosts): "relaunch" becomes "reconnect", on another endpoint when one cannot be reached (:mod:`.remote`).
The network guards are client-side (``context.route``, init scripts, bindings), so they hold over ``connect``.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urljoin, urlsplit

from verl_asyncweb.env.actions import Action, Answer, ParsedAction, describe, parse_action
from verl_asyncweb.env.browser import BrowserSlot
from verl_asyncweb.env.clock import EPOCH_MS, advance_page_clock
from verl_asyncweb.env.config import BrowserPoolConfig
from verl_asyncweb.env.evaluators.programmatic import evaluate_programmatic, full_score
from verl_asyncweb.env.executor import perform, settle
from verl_asyncweb.env.fork import SnapshotMixin
from verl_asyncweb.env.latency import LatencyModel
from verl_asyncweb.env.network import NetworkPolicy, origin_of
from verl_asyncweb.env.observe import observe
from verl_asyncweb.env.remote import RemoteEndpoints
from verl_asyncweb.env.results import EvalResult, Observation, StepResult, describe_error
from verl_asyncweb.env.server import EPISODE_COOKIE, SiteServer
from verl_asyncweb.env.session import Session, build_context, close_context, finish_cleanups, navigation_history
from verl_asyncweb.env.snapshot import encode_action
from verl_asyncweb.env.stats import PoolStats
from verl_asyncweb.env.tasks.miniwob import EPISODE_MAX_TIME_MS, START_EPISODE_JS
from verl_asyncweb.env.tasks.task import Task

logger = logging.getLogger(__name__)
PAGES_OPENED_AT_ONCE = 4


class BrowserPool(SnapshotMixin):
    """Everlasting pool of Chromium pages for web-agent episodes.

    Usage::

        async with BrowserPool(BrowserPoolConfig()) as pool:
            session = await pool.acquire()
            obs = await pool.reset(session, task)
            result = await pool.step(session, model_text)       # or a parsed Action
            ev = await pool.evaluate(session, task, answer)     # before release
            await pool.release(session)

    Episodes can be snapshotted and restored or forked onto another page (:class:`SnapshotMixin`).

    Args:
        config: Pool configuration.
        judge: Evaluator for ``evaluator="judge"`` tasks (e.g. :class:`RubricJudge`); optional.
    """

    def __init__(self, config: BrowserPoolConfig | None = None, judge: Any = None) -> None:
        self.config = config or BrowserPoolConfig()
        self.judge = judge
        self._stats = PoolStats()
        self._latency = LatencyModel(self.config.latency)
        self._server = (
            SiteServer(self.config.site_host, self.config.site_public_host) if self.config.start_site_server else None
        )
        self._remotes = (
            RemoteEndpoints(self.config.remote_endpoints, self._stats, self.config.remote_retry_s)
            if self.config.remote_endpoints
            else None
        )
        self._playwright: Any = None
        self._slots: list[BrowserSlot] = []
        self._sessions: list[Session] = []
        self._free: asyncio.Queue[Session] | None = None
        self._started = False

    async def __aenter__(self) -> BrowserPool:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def site_origin(self) -> str:
        """Origin of the local site server (``""`` when it is not started)."""
        return self._server.origin if self._server else ""

    async def start(self) -> None:
        """Start the site server, launch (or connect) the browsers and open every page.

        Raises:
            RemoteBrowsersUnavailable: With remote endpoints, if none of them could be reached.
        """
        if self._started:
            return
        from playwright.async_api import async_playwright  # heavy; imported only where browsers start

        try:
            if self._server is not None:
                await self._server.start()
                if self._remotes is not None:
                    self._remotes.warn_if_unreachable(self._server.origin)
            self._playwright = await async_playwright().start()
            self._slots = [
                BrowserSlot(i, self._playwright, self.config, self._remotes) for i in range(self.config.num_browsers)
            ]
            await asyncio.gather(*(slot.ensure() for slot in self._slots))
            self._free = asyncio.Queue()
            for slot in self._slots:
                for _ in range(self.config.pages_per_browser):
                    self._sessions.append(Session(slot=slot))
            # A few pages at a time: dozens opened at once on a loaded machine timed out (24 pages on 2 cores).
            opening = asyncio.Semaphore(PAGES_OPENED_AT_ONCE)

            async def open_page(session: Session) -> None:
                async with opening:
                    await build_context(session, self.config, self._stats, None)

            await asyncio.gather(*(open_page(s) for s in self._sessions))
        except BaseException:
            # A start that failed half-way (a launch timeout under load) must not leave its Playwright driver and
            # browsers behind: the next episode starts a new pool, and leaked ones would pile up.
            await self._teardown()
            raise
        for session in self._sessions:
            self._free.put_nowait(session)
        self._started = True
        logger.info("browser pool started: %d browsers x %d pages", len(self._slots), self.config.pages_per_browser)

    async def close(self) -> None:
        """Close every context and browser, stop Playwright and the site server (idempotent)."""
        if not self._started:
            return
        self._started = False
        await self._teardown()

    async def _teardown(self) -> None:
        """Close whatever was started: contexts, browsers, Playwright, the site server."""
        await asyncio.gather(*(close_context(s, self.config.close_timeout_s) for s in self._sessions))
        await asyncio.gather(*(slot.close() for slot in self._slots))
        self._sessions, self._slots = [], []
        if self._playwright is not None:
            try:
                await asyncio.wait_for(self._playwright.stop(), self.config.launch_timeout_s)
            except Exception as exc:
                logger.warning("playwright did not stop cleanly: %s", type(exc).__name__)
            self._playwright = None
        if self._server is not None:
            await self._server.close()

    def stats(self) -> dict[str, int]:
        """Counters: episodes, steps, timeouts, recoveries by rung, relaunches (reconnects for remote browsers),
        blocked attempts, failures, snapshots taken / restored / restored by inexact action replay / whose restore
        did not reproduce them, remote endpoints: failed connects, endpoints lost and restored, and contexts renewed
        after a BrowserGym episode (``Benchmark.fresh_context``)."""
        return self._stats.snapshot()

    async def acquire(self) -> Session:
        """Borrow a session; waits while every page is lent out."""
        assert self._free is not None, "BrowserPool.start() must be awaited before acquire()"
        session = await self._free.get()
        session.in_use = True
        return session

    async def release(self, session: Session) -> None:
        """Return a session to the pool; its episode state (and site state) is dropped."""
        if not session.in_use:
            return
        await self._end_browsergym(session)
        if self._server is not None and session.episode_token:
            self._server.store.drop(session.episode_token)
        session.in_use, session.task, session.done, session.episode_token = False, None, True, ""
        assert self._free is not None
        self._free.put_nowait(session)

    @asynccontextmanager
    async def session(self):
        """``async with pool.session() as s:`` acquires and always releases."""
        session = await self.acquire()
        try:
            yield session
        finally:
            await self.release(session)

    def resolve_url(self, url: str) -> str:
        """Absolute URL for a task URL (``/path`` URLs live on the local site server)."""
        if url.startswith("/"):
            if not self.site_origin:
                raise ValueError(f"task URL {url!r} needs the local site server; set asyncweb.env.start_site_server")
            return urljoin(self.site_origin, url)
        return url

    # ---- episodes -------------------------------------------------------------------------------------------

    async def reset(self, session: Session, task: Task) -> Observation:
        """Start ``task`` on ``session``: fresh cookies and site state, start page loaded, first observation."""
        self._stats.add("episodes")
        session.task, session.steps, session.answer, session.reward = task, 0, None, None
        session.done, session.env_failed, session.error = False, False, None
        session.events.clear()
        session.actions, session.virtual_history, session.wob_counters = [], [], None
        session.departed.clear()
        await self._end_browsergym(session)
        last_error = "unknown"
        for attempt in range(2):  # second attempt runs on a rebuilt context (and relaunched browser if needed)
            try:
                obs = await asyncio.wait_for(self._reset_once(session, task), self.config.reset_timeout_s)
                session.last_observation = obs
                return obs
            except Exception as exc:
                last_error = describe_error(exc, "reset", self.config.reset_timeout_s)
                logger.warning("session %d reset attempt %d failed: %s", session.session_id, attempt + 1, last_error)
                await self._recover(session, exc)
        session.done, session.env_failed, session.error = True, True, last_error
        self._stats.add("env_failures")
        return Observation(env_failed=True, error=last_error)

    async def _reset_once(self, session: Session, task: Task) -> Observation:
        url = await self._prepare_episode(session, task)
        if task.evaluator == "miniwob":
            return await self._reset_miniwob(session, task, url)
        if task.evaluator == "browsergym":
            return await self._reset_browsergym(session, task)
        await self._goto(session, url)
        state = await settle(session, self.config)
        await self._start_history(session, (0.0, 0.0))
        return await observe(session.page, session.cdp, self.config, state["title"])

    async def _prepare_episode(self, session: Session, task: Task, site_state: dict | None = None) -> str:
        """Healthy context, the task's network policy, fresh cookies and site state (a copy of ``site_state``)."""
        await self._ensure_healthy(session, task)
        url = self.resolve_url(task.start_url)
        origins = tuple(task.allowed_origins) or (origin_of(url),)
        if self.site_origin:
            origins += (self.site_origin,)
        session.policy = NetworkPolicy(origins, task.allow_popups, task.allow_downloads)
        t = self.config.action_timeout_s
        await asyncio.wait_for(session.context.clear_cookies(), t)
        if self._server is not None:
            if session.episode_token:
                self._server.store.drop(session.episode_token)
            session.episode_token = self._server.store.new_token(site_state)
            cookie = {"name": EPISODE_COOKIE, "value": session.episode_token, "url": self.site_origin}
            await asyncio.wait_for(session.context.add_cookies([cookie]), t)
        return url

    async def _goto(self, session: Session, url: str, wait_until: str = "domcontentloaded") -> None:
        session.navigated.clear()
        await asyncio.wait_for(
            session.page.goto(url, wait_until=wait_until, timeout=self.config.navigation_timeout_s * 1000),
            self.config.navigation_timeout_s + 1,
        )

    async def _start_history(self, session: Session, mouse: tuple[float, float]) -> None:
        """Mark the page's current history entry as the episode's first and put the mouse where the episode has it
        (hover styles would otherwise depend on where the page's previous episode left it)."""
        session.history_base, _ = await navigation_history(session, self.config.action_timeout_s)
        await asyncio.wait_for(session.page.mouse.move(*mouse), self.config.action_timeout_s)

    async def _reset_miniwob(self, session: Session, task: Task, url: str) -> Observation:
        await self._start_miniwob(session, task, url, counters=None)
        return await self._observe_miniwob(session)

    async def _start_miniwob(self, session: Session, task: Task, url: str, counters: dict | None) -> None:
        """Seeded in-page start of a MiniWoB++ episode (loading the task page first if needed)."""
        page, t = session.page, self.config.action_timeout_s
        if urlsplit(page.url).path != urlsplit(url).path:
            await self._goto(session, url, wait_until="load")
        # The mouse moves before the new instance exists, so no hover event of the old position reaches it.
        await self._start_history(session, (0.0, 0.0))
        # In-page reset (~8 ms) instead of a reload; seeded; wall-clock decay and timeout pushed out of reach.
        args = {
            "maxTime": EPISODE_MAX_TIME_MS,
            "seed": task.seed if task.seed is not None else 0,
            "counters": counters,
            "timeMs": EPOCH_MS if self.config.deterministic_clock else None,
            "scorePanel": self.config.miniwob_score_panel,
        }
        session.wob_counters = await asyncio.wait_for(page.evaluate(START_EPISODE_JS, args), t)
        await asyncio.wait_for(page.wait_for_function("() => WOB_TASK_READY", timeout=t * 1000), t + 1)

    async def _reset_browsergym(self, session: Session, task: Task) -> Observation:
        """The BrowserGym task's own setup on the session's page (it navigates); its goal is the instruction."""
        from verl_asyncweb.env.tasks.browsergym import LiveTask

        await self._start_history(session, (0.0, 0.0))
        session.browsergym = await LiveTask.start(
            task, session.page, self.site_origin, self.config.navigation_timeout_s
        )
        return await self._observe_browsergym(session)

    async def _observe_browsergym(self, session: Session) -> Observation:
        state = await settle(session, self.config)
        return await observe(
            session.page, session.cdp, self.config, state["title"], instruction=session.browsergym.goal
        )

    async def _end_browsergym(self, session: Session) -> None:
        """Tear down the session's BrowserGym task, if any (its failure is logged: the next reset goes on), and
        renew the context of a benchmark whose setup changed it (``Benchmark.fresh_context``)."""
        live, session.browsergym = session.browsergym, None
        if live is None:
            return
        try:
            await asyncio.wait_for(live.teardown(), self.config.close_timeout_s)
        except Exception as exc:
            logger.warning("session %d: BrowserGym teardown failed: %s", session.session_id, exc)
        if live.benchmark.fresh_context:
            self._stats.add("contexts_renewed")
            await close_context(session, self.config.close_timeout_s)
            try:  # with the popup and download switches of the session's task (the next one's, in a reset)
                await build_context(session, self.config, self._stats, session.task)
            except Exception as exc:  # the next reset's health check builds it (counted as a recovery)
                logger.warning("session %d: new context failed: %s", session.session_id, type(exc).__name__)

    async def _observe_miniwob(self, session: Session) -> Observation:
        page, t = session.page, self.config.action_timeout_s
        utterance = await asyncio.wait_for(page.evaluate("() => core.getUtterance()"), t)
        state = await settle(session, self.config)
        return await observe(page, session.cdp, self.config, state["title"], instruction=utterance)

    async def step(self, session: Session, action: str | Action | ParsedAction) -> StepResult:
        """Apply one action (model text is parsed with the pool's coordinate mode) and observe the page."""
        self._stats.add("steps")
        if session.done or session.task is None:
            return StepResult(
                Observation(env_failed=session.env_failed, error=session.error),
                done=True,
                reward=session.reward,
                info="episode is over; call reset() first",
                env_failed=session.env_failed,
                error=session.error,
            )
        # Simulated latency (benchmarks) is charged on every step, invalid ones included, outside the step
        # timeout: it stands for the time until the next observation, which the agent waits for either way.
        delay_s = self._latency.sample_s()
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        parsed = self._parse(action)
        if not parsed.valid:
            if not session.healthy:  # the page the episode was observing is gone: its next observation cannot exist
                return await self._fail_step(session, "step: the browser page of this episode was lost", None)
            session.actions.append(None)
            return self._invalid_step(session, parsed)
        session.actions.append(encode_action(parsed.action, self.site_origin))
        try:
            return await asyncio.wait_for(self._step_once(session, parsed.action), self.config.step_timeout_s)
        except Exception as exc:
            return await self._fail_step(session, describe_error(exc, "step", self.config.step_timeout_s), exc)

    async def _fail_step(self, session: Session, error: str, exc: BaseException | None) -> StepResult:
        """End the episode as failed by the environment and recover the session for the next one."""
        logger.warning("session %d step failed: %s", session.session_id, error)
        unrecovered = await self._recover(session, exc)
        if unrecovered:  # e.g. no remote browser endpoint left in rotation: say so in the episode's error
            error = f"{error}; {unrecovered}"
        session.done, session.env_failed, session.error = True, True, error
        self._stats.add("env_failures")
        return StepResult(Observation(env_failed=True, error=error), done=True, env_failed=True, error=error)

    def _parse(self, action: str | Action | ParsedAction) -> ParsedAction:
        if isinstance(action, ParsedAction):
            return action
        if isinstance(action, str):
            size = (self.config.viewport_width, self.config.viewport_height)
            return parse_action(action, coordinate_mode=self.config.coordinate_mode, viewport=size)
        return ParsedAction(action, None, type(action).__name__)

    def _invalid_step(self, session: Session, parsed: ParsedAction) -> StepResult:
        self._stats.add("invalid_actions")
        session.steps += 1
        assert session.task is not None
        done = session.steps >= session.task.max_steps
        session.done = done
        obs = getattr(session, "last_observation", None) or Observation()
        return StepResult(obs, done=done, info=f"invalid action: {parsed.error}", invalid_action=True)

    async def _act(self, session: Session, action: Action, stats: PoolStats) -> tuple[str, dict]:
        """Perform ``action``, let the page settle (and, with the deterministic clock, run one step of page time).

        Returns:
            The action's result text and the page state of :func:`settle`.
        """
        session.navigated.clear()
        info = await perform(session, action, self.config, stats)
        state = await settle(session, self.config)
        if self.config.deterministic_clock:
            await advance_page_clock(session.page, self.config.clock_step_ms, self.config.action_timeout_s)
            state = await settle(session, self.config)  # a timer may have navigated or ended the MiniWoB++ episode
        await finish_cleanups(session, self.config.close_timeout_s)
        return info, state

    async def _step_once(self, session: Session, action: Action) -> StepResult:
        task = session.task
        assert task is not None
        info, state = await self._act(session, action, self._stats)
        session.steps += 1
        if session.events:
            info += "; " + "; ".join(session.events)
            session.events.clear()
        wob = state.get("wob")
        done = isinstance(action, Answer) or session.steps >= task.max_steps
        if task.evaluator == "miniwob" and wob is not None and wob["done"]:
            done = True
        if task.evaluator == "browsergym" and session.browsergym is not None:
            answer = session.answer if isinstance(action, Answer) else None
            _, ended = await asyncio.wait_for(session.browsergym.validate(answer), self.config.navigation_timeout_s + 1)
            done = done or ended
        obs = await observe(session.page, session.cdp, self.config, state["title"])
        session.last_observation = obs
        evaluation = None
        if done:
            session.done = True
            if task.evaluator != "judge":
                evaluation = await self.evaluate(session, task, session.answer)
                session.reward = evaluation.reward
        return StepResult(
            obs,
            done=done,
            reward=evaluation.reward if evaluation else None,
            raw_score=evaluation.raw_score if evaluation else None,
            info=info or describe(action),
        )

    async def evaluate(
        self, session: Session, task: Task, answer: str | None = None, screenshots: list[bytes] | None = None
    ) -> EvalResult:
        """Score the episode on ``session`` (call before :meth:`release`); never raises for infrastructure trouble.

        Args:
            session: The session that ran the episode.
            task: The task.
            answer: Final answer text (defaults to the episode's ``answer`` action).
            screenshots: Trajectory screenshots, oldest first (judge tasks only).
        """
        self._stats.add("evaluations")
        if session.env_failed:
            return EvalResult(env_failed=True, reasons=[session.error or "environment failed"])
        answer = session.answer if answer is None else answer
        if task.evaluator == "judge":
            if self.judge is None:
                return EvalResult(evaluator_failed=True, reasons=["no judge configured for this pool"])
            return await self.judge.evaluate(task, answer, screenshots or [])
        if task.evaluator == "browsergym":
            live = session.browsergym
            if live is None:
                return EvalResult(env_failed=True, reasons=["the BrowserGym task was not set up"])
            if not live.message:  # no action reached the page (every one invalid): its verdict on the page as is
                try:
                    await asyncio.wait_for(live.validate(answer), self.config.navigation_timeout_s + 1)
                except Exception as exc:
                    return EvalResult(
                        env_failed=True, reasons=[describe_error(exc, "validate", self.config.navigation_timeout_s)]
                    )
            success = full_score(live.raw_score)  # strict, as our MiniWoB++ loader scores the same pages
            return EvalResult(float(success), success, list(live.message), raw_score=live.raw_score)
        store = self._server.store if self._server else None
        try:
            return await evaluate_programmatic(session, task, answer, store, self.config.action_timeout_s)
        except Exception as exc:
            error = describe_error(exc, "evaluation", self.config.action_timeout_s)
            return EvalResult(env_failed=True, reasons=[error])

    # ---- recovery ladder ------------------------------------------------------------------------------------

    async def _ensure_healthy(self, session: Session, task: Task | None) -> None:
        """Relaunch a dead browser and rebuild a missing, stale or mismatched context."""
        if await session.slot.ensure():
            self._count_relaunch()
        mismatch = task is not None and (
            session.context_popups != task.allow_popups or session.context_downloads != task.allow_downloads
        )
        if session.healthy and not mismatch:
            return
        if session.context is not None:
            await close_context(session, self.config.close_timeout_s)
        if not mismatch:
            self._stats.add("recoveries_context")
        await build_context(session, self.config, self._stats, task)

    async def _recover(self, session: Session, exc: BaseException | None) -> str | None:
        """Rung 1: close the context and open a new one. Rung 2: relaunch the browser (dead, or context stuck).

        Returns:
            ``None`` if the session was repaired, else why not (the next reset climbs the ladder again).
        """
        if isinstance(exc, TimeoutError):
            self._stats.add("timeouts")
        slot, generation = session.slot, session.generation
        try:
            closed = await close_context(session, self.config.close_timeout_s)
            if not closed and slot.alive:
                relaunched = await slot.restart(generation)
            else:
                relaunched = await slot.ensure()
            if relaunched:
                self._count_relaunch()
            else:
                self._stats.add("recoveries_context")
            await build_context(session, self.config, self._stats, session.task)
            return None
        except Exception as again:  # keep going: the next reset climbs the ladder again
            logger.warning("session %d recovery failed: %s", session.session_id, type(again).__name__)
            return describe_error(again, "recovery", self.config.launch_timeout_s)

    def _count_relaunch(self) -> None:
        self._stats.add("relaunches")
        self._stats.add("recoveries_relaunch")
