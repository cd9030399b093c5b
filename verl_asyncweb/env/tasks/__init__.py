"""Task sources: MiniWoB++, WebGym JSONL files and the bundled offline sites."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verl_asyncweb.env.tasks.task import RubricFact, Task, difficulty_slice

__all__ = ["RubricFact", "Task", "difficulty_slice", "load_tasks"]


def load_tasks(source: str | Path, **kwargs: Any) -> list[Task]:
    """Load tasks from a source.

    Args:
        source: ``"miniwob"`` (keyword arguments: ``names``, ``seed``, ``episodes_per_task``, ``max_steps``),
            ``"browsergym:<benchmark>.<task glob>"`` (keyword arguments: ``seed``, ``episodes_per_task``,
            ``max_steps``),
            ``"sites"`` (the bundled offline suite; keyword argument ``difficulty``: a slice name to keep) or the
            path of a WebGym ``.jsonl`` file (keyword arguments: ``split``, ``allowed_origins``).
        **kwargs: Passed to the source's loader.

    Returns:
        The tasks.

    Raises:
        ValueError: On an unknown source, or a bad task file (message with line number and field).
    """
    if source == "miniwob":
        from verl_asyncweb.env.tasks.miniwob import load_miniwob_tasks

        return load_miniwob_tasks(**kwargs)
    if source == "sites":
        from verl_asyncweb.env.tasks.sites import load_site_tasks

        return load_site_tasks(**kwargs)
    if str(source).startswith("browsergym:"):
        from verl_asyncweb.env.tasks.browsergym import load_browsergym_tasks

        return load_browsergym_tasks(str(source).split(":", 1)[1], **kwargs)
    path = Path(source)
    if path.suffix == ".jsonl" and path.is_file():
        from verl_asyncweb.env.tasks.webgym import load_webgym_tasks

        return load_webgym_tasks(path, **kwargs)
    raise ValueError(
        "task source must be 'miniwob', 'sites', 'browsergym:<benchmark>.<task glob>' or an existing WebGym .jsonl "
        f"file, got {str(source)!r}"
    )
