"""Trainer-side rollout bookkeeping: generation busy time, episode records and their metrics."""

import json
from types import SimpleNamespace

import pytest
import ray
from omegaconf import OmegaConf

from verl_asyncweb.trainer.episode_metrics import ATTEMPT, busy_fraction, write_episodes


@pytest.mark.parametrize(
    ("intervals", "expected"),
    [
        ([], 0.0),
        ([(0.0, 10.0)], 1.0),
        ([(2.0, 4.0), (3.0, 6.0)], 0.4),  # overlapping intervals count once
        ([(-5.0, 1.0), (9.0, 20.0)], 0.2),  # clipped to the window
        ([(11.0, 12.0)], 0.0),
    ],
)
def test_busy_fraction_is_the_covered_share_of_the_window(intervals, expected):
    assert busy_fraction(intervals, 0.0, 10.0) == pytest.approx(expected)


def test_pool_counters_are_the_latest_of_each_worker_summed_and_kept_out_of_episode_records():
    from verl_asyncweb.agent.rollout_stats import POOL_STATS_FIELD, RolloutStats

    stats = RolloutStats.__ray_actor_class__()  # the actor's class, called in process
    reports = [
        ("host-a:11", {"relaunches": 1, "remote_endpoints_lost": 0}),
        ("host-b:12", {"relaunches": 2, "remote_endpoints_lost": 1}),
        ("host-a:11", {"relaunches": 3, "remote_endpoints_lost": 1}),  # pool counters only grow: the latest wins
    ]
    for pool, counters in reports:
        stats.report_episode(
            {"traj_id": pool, "env_failed": False, POOL_STATS_FIELD: {"pool": pool, "counters": counters}}
        )
    stats.report_episode({"traj_id": "no pool", "env_failed": True})  # an episode whose loop raised
    drained = stats.drain()
    assert drained["pools"] == {"relaunches": 5, "remote_endpoints_lost": 2}
    assert [e["traj_id"] for e in drained["episodes"]] == ["host-a:11", "host-b:12", "host-a:11", "no pool"]
    assert not any(POOL_STATS_FIELD in episode for episode in drained["episodes"])
    assert stats.drain()["pools"] == drained["pools"], "totals since the start, not per step"


def test_episode_records_name_their_step_and_the_attempt_that_wrote_them(tmp_path):
    episodes = [{"traj_id": f"g-{i}", "steps": [{"action_text": "x"}], "summary": {"reward": 1.0}} for i in range(2)]
    write_episodes(str(tmp_path), episodes[:1], 3, screenshots=None, attempt_from_step=2)
    write_episodes(str(tmp_path), episodes[1:], 4, screenshots=None, attempt_from_step=2)
    records = [json.loads(line) for line in (tmp_path / "episodes" / "episodes.jsonl").read_text().splitlines()]
    named = [(r["traj_id"], r["global_step"], r["attempt"], r["attempt_from_step"]) for r in records]
    assert named == [("g-0", 3, ATTEMPT, 2), ("g-1", 4, ATTEMPT, 2)]
    assert "summary" not in records[0]
    assert len(ATTEMPT) == 12


def test_validation_episodes_are_recorded_but_kept_out_of_the_rollout_metrics(ray_cluster, tmp_path, monkeypatch):
    """verl's validation (trainer.test_freq) plays through the same agent loop and reports to the same actor."""
    from verl_asyncweb.agent.metrics import TrajectorySummary
    from verl_asyncweb.agent.rollout_stats import stats_actor
    from verl_asyncweb.compare import metric_names as names
    from verl_asyncweb.run_folder import RUN_DIR_ENV
    from verl_asyncweb.trainer.episode_metrics import drain_episode_metrics

    def report(traj_id, split, num_steps, success):
        summary = TrajectorySummary(
            traj_id=traj_id, task_id="miniwob/click-test", difficulty_slice=None, success=success,
            reward=float(success), env_failed=False, num_steps=num_steps, response_tokens=[5] * num_steps,
            invalid_actions=0, stuck_steps=0, memory_stats=[None] * num_steps, policy_versions=[0] * num_steps,
        )  # fmt: skip
        record = {"summary": summary, "traj_id": traj_id, "split": split, "env_failed": False, "steps": []}
        ray.get(stats_actor().report_episode.remote(record))

    ray.get(stats_actor().drain.remote())  # whatever an earlier test left
    report("train-a", "train", 3, False)
    report("val-a", "val", 1, True)
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path))
    config = OmegaConf.create(
        {"trainer": {"v1": {"sampler": {"max_off_policy_threshold": 2}}}, "asyncweb": {"env": {}, "agent": {}}}
    )
    trainer = SimpleNamespace(
        config=config, screenshots=None, _last_drain_at=0.0, _update_intervals=[], _attempt_from_step=0,
    )  # fmt: skip
    metrics = drain_episode_metrics(trainer, global_step=1)
    assert metrics[names.TRAJECTORIES] == 1 and metrics[names.ENV_STEPS] == 3
    assert metrics[names.SUCCESS_RATE] == 0.0
    records = [json.loads(line) for line in (tmp_path / "episodes" / "episodes.jsonl").read_text().splitlines()]
    assert [(r["traj_id"], r["split"]) for r in records] == [("train-a", "train"), ("val-a", "val")]
