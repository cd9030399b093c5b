"""The environment layer: an everlasting Chromium pool, the web action space, tasks and evaluators.

Importing this package is cheap: Playwright is imported only when a :class:`BrowserPool` starts and aiohttp only
when the site server or the judge is used. Public names are resolved lazily.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "BrowserPool": "verl_asyncweb.env.pool",
    "BrowserPoolConfig": "verl_asyncweb.env.config",
    "LatencyConfig": "verl_asyncweb.env.config",
    "JudgeConfig": "verl_asyncweb.env.config",
    "Observation": "verl_asyncweb.env.results",
    "StepResult": "verl_asyncweb.env.results",
    "EvalResult": "verl_asyncweb.env.results",
    "parse_action": "verl_asyncweb.env.actions",
    "ParsedAction": "verl_asyncweb.env.actions",
    "Task": "verl_asyncweb.env.tasks",
    "RubricFact": "verl_asyncweb.env.tasks",
    "load_tasks": "verl_asyncweb.env.tasks",
    "RubricJudge": "verl_asyncweb.env.evaluators.judge",
    "Session": "verl_asyncweb.env.session",
    "EnvSnapshot": "verl_asyncweb.env.snapshot",
    "SnapshotError": "verl_asyncweb.env.fork",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'verl_asyncweb.env' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
