"""The driver's stall watch: a console line once no step has come for a minute while episodes fail, and a stop when
not one group finished without a failure for ``asyncweb.stall_timeout_s``; the window it reads is the rollout-stats
actor's (a real actor in the session's Ray cluster)."""

import logging

import pytest

from verl_asyncweb.stall_watch import StallWatch

REASON = "judge failed: no verdict after 2 attempts; last error: ClientConnectorError"


def _window(since: float, episodes: int, failures: int, clean_groups: int) -> dict:
    return {
        "since": since,
        "episodes": episodes,
        "env_failures": failures,
        "clean_groups": clean_groups,
        "reasons": [(REASON, failures)] if failures else [],
    }


def test_failures_are_reported_after_a_minute_and_the_run_stops_after_the_timeout(caplog):
    watch = StallWatch(stall_timeout_s=300)
    start = watch._started_at
    with caplog.at_level(logging.WARNING, logger="verl_asyncweb.stall_watch"):
        assert not watch.check(_window(start, 8, 8, 0), start + 30)
        assert caplog.text == "", "quiet for less than a minute"
        assert not watch.check(_window(start, 8, 8, 0), start + 61)
        assert f"no training step for 61 s: 8 of the 8 episodes since failed by the environment (8x {REASON})" in (
            caplog.text
        )
        assert not watch.check(_window(start, 9, 9, 0), start + 90)
        assert caplog.text.count("no training step") == 1, "one line a minute"
        assert watch.check(_window(start, 20, 20, 0), start + 301)
    assert watch.cause.startswith("no training step for 301 s: 20 of the 20 episodes") and "stall_timeout_s=300" in (
        watch.cause
    )


@pytest.mark.parametrize(
    ("timeout_s", "window"),
    [
        (300, _window(0, 20, 12, clean_groups=1)),  # a group finished clean: verl can train it
        (300, _window(0, 20, 0, clean_groups=0)),  # slow, not failing
        (0, _window(0, 20, 20, clean_groups=0)),  # never stops
    ],
)
def test_the_run_goes_on_while_a_group_can_train_or_nothing_fails(timeout_s, window):
    watch = StallWatch(stall_timeout_s=timeout_s)
    window["since"] = watch._started_at
    assert not watch.check(window, watch._started_at + 3600) and watch.cause is None


def test_the_rollout_stats_window_counts_training_episodes_since_the_last_drain(ray_cluster):
    import ray

    from verl_asyncweb.agent.rollout_stats import RolloutStats

    stats = RolloutStats.remote()
    reports = [
        {"group": "a", "env_failed": True, "evaluator_reasons": [REASON]},
        {"group": "a", "env_failed": False},
        {"group": "b", "env_failed": False},
        {"group": "c", "env_failed": True, "error": "TargetClosedError"},
        {"group": "v", "env_failed": True, "split": "val", "evaluator_reasons": ["validation is not training"]},
    ]
    for report in reports:
        ray.get(stats.report_episode.remote(report))
    window = ray.get(stats.since_drain.remote())
    assert (window["episodes"], window["env_failures"], window["clean_groups"]) == (4, 2, 1)
    assert sorted(window["reasons"]) == [("TargetClosedError", 1), (REASON, 1)]
    ray.get(stats.drain.remote())
    after = ray.get(stats.since_drain.remote())
    assert (after["episodes"], after["env_failures"], after["reasons"]) == (0, 0, [])
    assert after["since"] >= window["since"]
    ray.kill(stats)
