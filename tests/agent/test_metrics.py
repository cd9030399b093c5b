"""aggregate(): behaviour metrics of a small batch, checked against hand-computed numbers."""

from __future__ import annotations

import pytest

from verl_asyncweb.agent.memory import MemoryStats, analyze_memory
from verl_asyncweb.agent.metrics import (
    TrajectorySummary,
    aggregate,
    difficulty_slice,
)
from verl_asyncweb.compare import metric_names as names
from verl_asyncweb.compare.metric_names import CONTEXT_OVERFLOWS, ENV_STEPS, TRAJECTORIES


def _mem(nbytes: int, keys: set[str], generic: set[str]) -> MemoryStats:
    return MemoryStats(nbytes, None, len(keys), len(generic) / len(keys), frozenset(keys), frozenset(generic), True)


INVALID_MEMORY = analyze_memory("{broken")


def _batch() -> list[TrajectorySummary]:
    a = TrajectorySummary(
        "a", "t1", "easy", success=True, reward=1.0, num_steps=4, response_tokens=[10, 20, 30, 40],
        invalid_actions=1, memory_stats=[
            _mem(10, {"a"}, set()), _mem(20, {"a", "info"}, {"info"}), None, _mem(20, {"a", "info"}, {"info"})
        ], policy_versions=[0, 0, 1, 1],
    )  # fmt: skip
    b = TrajectorySummary(
        "b", "t1", "easy", success=False, num_steps=6, response_tokens=[5] * 6, invalid_actions=2, stuck_steps=3,
        memory_stats=[_mem(8, {"x_price"}, set()), _mem(12, {"item_1"}, {"item_1"})] + [None] * 4,
    )  # fmt: skip
    c = TrajectorySummary("c", "t2", "hard", success=True, reward=1.0, num_steps=2, response_tokens=[100, 50])
    d = TrajectorySummary(
        "d", "t3", "medium", env_failed=True, num_steps=3, response_tokens=[999] * 3, invalid_actions=3,
        memory_stats=[_mem(1000, {"info"}, {"info"})] * 3,
    )  # fmt: skip
    e = TrajectorySummary(
        "e", "t4", None, success=False, num_steps=8, response_tokens=[1] * 8, stuck_steps=1, context_overflow=True,
        memory_stats=[INVALID_MEMORY] * 8,
    )  # fmt: skip
    return [a, b, c, d, e]


def test_aggregate_hand_computed_batch():
    metrics = aggregate(_batch())
    expected = {
        TRAJECTORIES: 5.0,
        ENV_STEPS: 4 + 6 + 2 + 3 + 8,  # every executed action, d's (env-failed) included
        names.ENV_FAILURES: 1.0,
        CONTEXT_OVERFLOWS: 1.0,
        names.SUCCESS_RATE: 2 / 4,  # a, c of a, b, c, e (d is env-failed)
        names.SUCCESS_RATE_EASY: 1 / 2,
        names.SUCCESS_RATE_HARD: 1.0,
        names.STEPS_PER_TRAJ_SUCCESS: (4 + 2) / 2,
        names.STEPS_PER_TRAJ_FAILURE: (6 + 8) / 2,
        names.RESPONSE_TOKENS_PER_STEP_SUCCESS: (10 + 20 + 30 + 40 + 100 + 50) / 6,
        names.RESPONSE_TOKENS_PER_STEP_FAILURE: (5 * 6 + 1 * 8) / 14,
        names.INVALID_ACTION_RATE: 3 / 20,
        names.STUCK_RATE: 4 / 20,
        names.MEMORY_JSON_BYTES: (10 + 20 + 20 + 8 + 12) / 5,
        names.MEMORY_KEY_COUNT: (1 + 2 + 2 + 1 + 1) / 5,
        names.MEMORY_GENERIC_KEY_RATIO: 3 / 7,
        names.MEMORY_KEYSET_KEPT_FRAC: 1 / 2,  # a keeps, b drops; c and e have no valid memory
    }
    assert set(metrics) == set(expected)  # medium: only an env-failed trajectory, so absent
    for name, value in expected.items():
        assert metrics[name] == pytest.approx(value, rel=1e-12, abs=0), name


def test_aggregate_metric_names_are_the_shared_constants():
    assert TRAJECTORIES == "asyncweb/trajectories" and CONTEXT_OVERFLOWS == "asyncweb/context_overflows"
    assert names.SUCCESS_RATE_EASY == "asyncweb/success_rate/easy"
    assert names.MEMORY_KEYSET_KEPT_FRAC == "asyncweb/memory/keyset_kept_frac"


def test_aggregate_empty_and_all_env_failed_only_counts():
    assert aggregate([]) == {TRAJECTORIES: 0.0, ENV_STEPS: 0.0, names.ENV_FAILURES: 0.0, CONTEXT_OVERFLOWS: 0.0}
    failed = [TrajectorySummary("x", "t", "easy", env_failed=True, num_steps=2, response_tokens=[3, 3])]
    assert aggregate(failed) == {TRAJECTORIES: 1.0, ENV_STEPS: 2.0, names.ENV_FAILURES: 1.0, CONTEXT_OVERFLOWS: 0.0}


def test_aggregate_only_successes_has_no_failure_metrics():
    batch = [TrajectorySummary("s", "t", "medium", success=True, num_steps=1, response_tokens=[7])]
    metrics = aggregate(batch)
    assert metrics[names.SUCCESS_RATE_MEDIUM] == 1.0
    assert names.STEPS_PER_TRAJ_FAILURE not in metrics and names.RESPONSE_TOKENS_PER_STEP_FAILURE not in metrics
    assert names.SUCCESS_RATE_EASY not in metrics and names.MEMORY_JSON_BYTES not in metrics


@pytest.mark.parametrize(("difficulty", "expected"), [(1, "easy"), (3, "easy"), (4, "medium"), (6, "medium"),
                                                      (7, "hard"), (10, "hard"), (None, None)])  # fmt: skip
def test_difficulty_slice_webgym_bounds(difficulty, expected):
    assert difficulty_slice(difficulty) == expected


def test_trajectory_summary_rejects_bad_values():
    with pytest.raises(ValueError, match="difficulty_slice must be one of"):
        TrajectorySummary("x", "t", "Easy")
    with pytest.raises(ValueError, match=r"invalid_actions must lie in \[0, num_steps=2\], got 3"):
        TrajectorySummary("x", "t", num_steps=2, invalid_actions=3)
