"""evaluate.summarize on hand-made episode reports: what the held-out figures count and how."""

import pytest

from verl_asyncweb.agent.metrics import TrajectorySummary
from verl_asyncweb.learning.evaluate import summarize


def _report(
    task_id: str,
    success: bool,
    steps: int,
    slice_: str | None = None,
    env_failed: bool = False,
    seed: int | None = None,
    raw_score: float | None = None,
) -> dict:
    summary = TrajectorySummary(
        traj_id=f"{task_id}-{steps}",
        task_id=task_id,
        difficulty_slice=slice_,
        success=success,
        env_failed=env_failed,
        num_steps=steps,
        response_tokens=[10] * steps,
    )
    return {
        "summary": summary,
        "task_id": task_id,
        "difficulty_slice": slice_,
        "success": success,
        "env_failed": env_failed,
        "steps": [{}] * steps,
        "seed": seed,
        "raw_score": raw_score,
    }


REPORTS = [
    _report("miniwob/login-user/0", True, 3, "easy", seed=70, raw_score=1.0),
    _report("miniwob/login-user/1", False, 6, "easy", seed=12, raw_score=-1.0),
    _report("browsergym/miniwob.login-user/0", True, 5, "easy", seed=70),
    _report("miniwob/enter-text/0", False, 4, "medium", seed=31, raw_score=0.5),
    _report("miniwob/enter-text/1", True, 2, "medium", seed=9, raw_score=1.0),
    # A browser that failed: counted apart, in no rate and no outcome (it would otherwise count as a failure).
    _report("miniwob/enter-text/2", False, 1, "medium", env_failed=True),
    _report("site/shop-cart", True, 7, None),
]


def test_rates_exclude_environment_failures_and_split_by_task_and_difficulty():
    result = summarize(REPORTS, tasks=list(range(7)), temperature=0.7, seconds=12.34)
    assert (result["episodes"], result["env_failures"], result["instances"]) == (7, 1, 7)
    assert result["success"] == pytest.approx(4 / 6, abs=1e-4)
    assert result["success_by_task"] == {
        "enter-text": 0.5,
        "login-user": 0.5,
        "miniwob.login-user": 1.0,  # BrowserGym's task of the same name: its own row
        "site/shop-cart": 1.0,
    }
    # The site task has no difficulty: counted overall only, not under a slice.
    assert result["success_by_difficulty"] == {"easy": 0.6667, "medium": 0.5}
    assert result["temperature"] == 0.7 and result["eval_s"] == 12.3


def test_steps_by_outcome_and_the_outcomes_confidence_intervals_resample():
    result = summarize(REPORTS, tasks=[], temperature=1.0, seconds=0.0)
    assert result["steps_to_success_by_task"] == {
        "enter-text": 2.0,
        "login-user": 3.0,
        "miniwob.login-user": 5.0,
        "site/shop-cart": 7.0,
    }
    assert result["metrics"]["asyncweb/steps_per_traj/success"] == pytest.approx((3 + 5 + 2 + 7) / 4)
    assert result["metrics"]["asyncweb/steps_per_traj/failure"] == pytest.approx((6 + 4) / 2)
    # One record per instance, by task then page seed whatever order the episodes finished in: arms evaluated on
    # the same instances pair line by line. Partial credit (0.5) is kept as the raw score of a failure.
    assert result["outcomes"] == [
        {"task": "enter-text", "seed": 9, "raw_score": 1.0, "success": 1, "steps": 2},
        {"task": "enter-text", "seed": 31, "raw_score": 0.5, "success": 0, "steps": 4},
        {"task": "login-user", "seed": 12, "raw_score": -1.0, "success": 0, "steps": 6},
        {"task": "login-user", "seed": 70, "raw_score": 1.0, "success": 1, "steps": 3},
        {"task": "miniwob.login-user", "seed": 70, "raw_score": None, "success": 1, "steps": 5},
        {"task": "site/shop-cart", "seed": None, "raw_score": None, "success": 1, "steps": 7},
    ]
    assert summarize(REPORTS[::-1], [], 1.0, 0.0)["outcomes"] == result["outcomes"]


def test_only_failed_environments_give_no_rate_rather_than_zero():
    result = summarize([_report("miniwob/click-test", False, 1, "easy", env_failed=True)], [], 1.0, 0.0)
    assert result["success"] is None and result["success_by_task"] == {} and result["outcomes"] == []
