"""MiniWoB++ tasks from the PyPI package ``miniwob`` (offline HTML, MIT), served by the pool's site server."""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
from pathlib import Path

from verl_asyncweb.env.tasks.task import Task

MINIWOB_URL_PREFIX = "/miniwob/"
# Large enough that MiniWoB's wall-clock timer never ends an episode and its time decay never applies; we use
# the raw reward anyway (DESIGN.md section 4).
EPISODE_MAX_TIME_MS = 10**9

# In-page reset of a MiniWoB++ task. Returns the counters and reward history the page keeps (they persist across
# the in-page episodes, and its score panel shows them unless ``args.scorePanel`` is false); a snapshot restore
# passes them back in ``args.counters``. Focus left by the previous episode (static elements survive the
# regeneration) is dropped.
START_EPISODE_JS = """
(args) => {
  const display = ['reward-last', 'reward-avg', 'episode-id'];
  const c = args.counters;
  if (c) {
    WOB_EPISODE_ID = c.episode_id; core.wob_latest = c.latest; core.wob_scores = c.scores.slice();
    for (const id of display) {
      const el = document.getElementById(id), [html, style] = c.display[id] || ['', null];
      if (!el) continue;
      el.innerHTML = html;
      if (style === null) el.removeAttribute('style'); else el.setAttribute('style', style);
    }
  }
  const counters = {episode_id: WOB_EPISODE_ID, latest: core.wob_latest === undefined ? '-' : core.wob_latest,
                    scores: (core.wob_scores || []).slice(), display: {}};
  for (const id of display) {
    const el = document.getElementById(id);
    if (el) counters.display[id] = [el.innerHTML, el.getAttribute('style')];
  }
  const panel = document.getElementById('reward-display');
  if (panel && !args.scorePanel) panel.style.display = 'none';
  if (document.activeElement && document.activeElement !== document.body) document.activeElement.blur();
  if (args.timeMs !== null && globalThis.__pwClock) globalThis.__pwClock.controller.setSystemTime(args.timeMs);
  core.EPISODE_MAX_TIME = args.maxTime;
  Math.seedrandom(args.seed);
  core.startEpisodeReal();
  return counters;
}
"""


def miniwob_html_root() -> Path:
    """Directory holding MiniWoB++'s ``core/``, ``common/`` and ``miniwob/`` HTML.

    Raises:
        ValueError: If the ``miniwob`` package is not installed.
    """
    spec = importlib.util.find_spec("miniwob")
    if spec is None or spec.origin is None:
        raise ValueError("MiniWoB++ tasks need the 'miniwob' package: pip install miniwob==1.1.0")
    return Path(spec.origin).parent / "html"


def registered_miniwob_tasks() -> list[str]:
    """Names of every MiniWoB++ task registered with gymnasium that has an HTML page."""
    import gymnasium
    import miniwob  # noqa: F401  (registers the environments)

    html = miniwob_html_root() / "miniwob"
    names = sorted(k.split("/", 1)[1].rsplit("-v", 1)[0] for k in gymnasium.registry if k.startswith("miniwob/"))
    return [n for n in names if (html / f"{n}.html").is_file()]


def _episode_seed(seed: int, name: str, index: int) -> int:
    digest = hashlib.sha256(f"{seed}:{name}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def load_miniwob_tasks(
    names: list[str] | None = None, seed: int = 0, episodes_per_task: int = 1, max_steps: int = 10
) -> list[Task]:
    """Build MiniWoB++ tasks.

    Args:
        names: Task names (e.g. ``["click-test"]``); ``None`` means every registered task.
        seed: Base seed; each (task, episode) gets a derived in-page seed.
        episodes_per_task: Distinct seeded instances per task name.
        max_steps: Step budget of each episode.

    Returns:
        One :class:`Task` per (name, episode), instruction empty (generated in the page at reset).

    Raises:
        ValueError: On an unknown task name (the message lists the valid names).
    """
    known = registered_miniwob_tasks()
    if names is None:
        names = known
    unknown = sorted(set(names) - set(known))
    if unknown:
        close = {name: difflib.get_close_matches(name, known, n=3) for name in unknown}
        hints = "; ".join(f"{name}: did you mean {', '.join(match)}?" for name, match in close.items() if match)
        raise ValueError(
            f"unknown MiniWoB++ task(s) {unknown}{'; ' + hints if hints else ''} ({len(known)} tasks: "
            "python -c 'from verl_asyncweb.env.tasks.miniwob import registered_miniwob_tasks as t; print(t())')"
        )
    if episodes_per_task <= 0:
        raise ValueError(f"episodes_per_task must be > 0, got {episodes_per_task}")
    tasks = []
    for name in names:
        for index in range(episodes_per_task):
            tasks.append(
                Task(
                    task_id=f"miniwob/{name}/{index}",
                    instruction="",
                    source="miniwob",
                    difficulty=1,
                    max_steps=max_steps,
                    start_url=f"{MINIWOB_URL_PREFIX}miniwob/{name}.html",
                    evaluator="miniwob",
                    seed=_episode_seed(seed, name, index),
                    metadata={"name": name},
                )
            )
    return tasks
