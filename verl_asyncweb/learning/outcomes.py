"""Per-instance outcomes of a held-out evaluation: what arms evaluated on the same instances are paired by.

An evaluation's ``outcomes`` list one record per counted episode, sorted by (task, page seed)::

    {"task": "click-checkboxes", "seed": 184467, "raw_score": 0.6, "success": 0, "steps": 2}

``raw_score`` is the evaluator's own score (MiniWoB++'s raw in-page reward, partial credit included; None where
none was read), ``success`` the task done as its instruction says. Evaluations written before held
``[task, success, steps]`` in completion order: read as outcomes without seed or raw score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Outcome:
    """One counted held-out episode."""

    task: str
    seed: int | None
    raw_score: float | None
    success: int
    steps: int

    @property
    def instance(self) -> tuple[str, int | None]:
        """The held-out instance: (task, page seed)."""
        return self.task, self.seed


def sort_outcomes(outcomes: list[Outcome]) -> list[Outcome]:
    """In the stable order of the record: by task, then page seed (instances without one first)."""
    return sorted(outcomes, key=lambda o: (o.task, o.seed is not None, o.seed or 0, o.steps))


def outcomes_to_json(outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
    return [asdict(outcome) for outcome in sort_outcomes(list(outcomes))]


def read_outcomes(records: Sequence[Any]) -> list[Outcome]:
    """An evaluation's ``outcomes``, in either format (see the module docstring).

    Raises:
        ValueError: If a record is neither a mapping nor a ``[task, success, steps]`` list.
    """
    found = []
    for record in records:
        if isinstance(record, Mapping):
            raw = record.get("raw_score")
            found.append(
                Outcome(
                    str(record["task"]),
                    record.get("seed"),
                    None if raw is None else float(raw),
                    int(bool(record["success"])),
                    int(record["steps"]),
                )
            )
        elif isinstance(record, Sequence) and not isinstance(record, str) and len(record) == 3:
            task, success, steps = record
            found.append(Outcome(str(task), None, None, int(bool(success)), int(steps)))
        else:
            raise ValueError(f"an outcome is a mapping or [task, success, steps], not {record!r}")
    return found


def by_instance(outcomes: Sequence[Outcome], score: str = "success") -> dict[tuple[str, int], float]:
    """Instance -> ``score`` (``success`` or ``raw_score``) of the outcomes that name their page seed (the
    instances a comparison can pair); an instance evaluated twice keeps its mean."""
    values: dict[tuple[str, int], list[float]] = {}
    for outcome in outcomes:
        value = getattr(outcome, score)
        if outcome.seed is not None and value is not None:
            values.setdefault((outcome.task, outcome.seed), []).append(float(value))
    return {key: sum(found) / len(found) for key, found in values.items()}
