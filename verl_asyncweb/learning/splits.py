"""Training and held-out task instances: which seeds demonstrations, RL and evaluation may use.

MiniWoB++ instances are seeded in the page (:func:`verl_asyncweb.env.tasks.miniwob.load_miniwob_tasks` derives
one page seed per (base seed, task, index)). Demonstrations and RL draw from the training base seed
(``asyncweb.tasks.seed``, 0 by default); evaluation draws from :data:`HELD_OUT_SEED`. Bundled-site tasks have
no seeds: they are one fixed instance each, so they can be trained on but never held out.
"""

from __future__ import annotations

from collections.abc import Iterable

from verl_asyncweb.env import Task

HELD_OUT_SEED = 1_000_003
"""Base seed of the held-out MiniWoB++ instances (``python -m verl_asyncweb.evaluate --seeds held-out``)."""


def instance_keys(tasks: Iterable[Task]) -> set[tuple[str, int]]:
    """``(MiniWoB task name, page seed)`` of every seeded instance: what must never be shared across splits."""
    return {(task.metadata.get("name", task.task_id), task.seed) for task in tasks if task.seed is not None}


def check_disjoint(held_out: Iterable[Task], trained: set[tuple[str, int]]) -> None:
    """Raise ``ValueError`` naming the shared instances if a held-out instance is among ``trained`` keys."""
    shared = sorted(instance_keys(held_out) & trained)
    if shared:
        raise ValueError(f"{len(shared)} held-out instances were also used for training, e.g. {shared[:3]}")
