"""``bench episodes``: episodes, groups ended alike and success by policy version, from hand-made run folders."""

import json

import pytest

from verl_asyncweb.bench.episodes import last_attempt, main, played, read_run
from verl_asyncweb.compare.metric_names import POLICY_LAG_MEAN


def _episode(traj_id, success, versions, seconds=10.0, group=None, env_failed=False):
    record = {
        "traj_id": traj_id, "success": success, "env_failed": env_failed, "started_at": 100.0,
        "finished_at": 100.0 + seconds, "steps": [{"policy_version": v} for v in versions],
    }  # fmt: skip
    if group is not None:
        record["group"] = group
    return record


def test_groups_ended_alike_and_success_by_the_version_of_the_last_step():
    episodes = [
        _episode("g1-a", True, [0, 0], seconds=4.0, group="g1"),
        _episode("g1-b", True, [0, 1], seconds=6.0, group="g1"),  # g1: both succeeded, ended alike
        _episode("g2-a", True, [1, 2], seconds=9.0, group="g2"),
        _episode("g2-b", False, [4, 5, 6], seconds=30.0, group="g2"),  # g2: mixed
        _episode("g3-a", False, [0], seconds=2.0),  # records from before the group field: groups from the ids
        _episode("g4-a", False, [0], seconds=2.0),  # g4: one of its two members recorded (in flight at the end)
        _episode("g3-c", True, [7], group="g3", env_failed=True),  # left out of every rate
    ]
    episodes.insert(4, _episode("g3-b", False, [0], seconds=2.0))
    episodes.append({**_episode("v-a", True, [1], group="v"), "split": "val"})  # verl's validation: not counted
    counted = played(episodes, {1: {POLICY_LAG_MEAN: 0.5}, 2: {POLICY_LAG_MEAN: 1.5}, 3: {}}, group_size=2)
    assert (counted.episodes, counted.successes, counted.env_failed) == (7, 3, 1)
    # g3 had an environment failure (verl drops it), g4 is unfinished: neither is a group ended alike.
    assert (counted.groups, counted.groups_alike, counted.groups_unfinished) == (2, 1, 1)
    assert counted.by_version == {0: [1, 4], 1: [1, 1], 2: [1, 1], 3: [0, 1]}  # v6 counts as v3+
    assert counted.seconds_per_step == 2.0  # median of 2, 2, 2, 2, 3, 4.5, 10 seconds per step
    assert counted.policy_lag == 1.0
    row = counted.row("run").split(" | ")
    assert row[1:7] == ["7", "0.429", "1", "2", "1", "1"] and row[7] == "1/4 = 0.25"


def test_a_run_folder_is_read_with_a_cut_line_counted_and_printed_as_one_row(tmp_path, capsys):
    run = tmp_path / "rl_seed1"
    (run / "episodes").mkdir(parents=True)
    lines = [json.dumps(_episode("g-a", True, [0], group="g")), json.dumps(_episode("g-b", False, [1], group="g"))]
    (run / "episodes" / "episodes.jsonl").write_text("\n".join(lines) + '\n{"traj_id": "g-c", "ste')
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "data": {POLICY_LAG_MEAN: 0.25}}) + "\n")
    with pytest.raises(SystemExit, match="config.yaml does not exist"):
        read_run(run)
    (run / "config.yaml").write_text("actor_rollout_ref:\n  rollout:\n    n: 2\n")
    counted = read_run(run)
    assert (counted.episodes, counted.groups, counted.groups_alike, counted.groups_unfinished) == (2, 1, 0, 0)
    assert (counted.cut_lines, counted.policy_lag) == (1, 0.25)
    assert main([str(run)]) == 0
    out, err = capsys.readouterr()
    assert "1 unreadable episode line(s) skipped" in err  # the table on stdout stays a table
    assert [line for line in out.splitlines() if line.startswith("| rl_seed1 |")] == [counted.row("rl_seed1")]


def test_the_episodes_an_interrupted_attempt_played_past_its_checkpoint_are_left_out():
    def at(step, traj_id, success):
        return {**_episode(traj_id, success, [step - 1], group=traj_id[0]), "global_step": step}

    # The first attempt played steps 1-4 and was killed; the second resumed from the step-2 checkpoint.
    episodes = [at(1, "a1", True), at(2, "b1", False), at(3, "c1", True), at(3, "c2", True), at(4, "d1", False)]
    episodes += [at(3, "e1", False), at(4, "f1", True)]
    assert [e["traj_id"] for e in last_attempt(episodes)] == ["a1", "b1", "e1", "f1"]
    counted = played(episodes, {}, group_size=1)
    assert (counted.episodes, counted.successes, counted.groups) == (4, 2, 4)


def test_an_attempt_is_cut_at_the_checkpoint_the_next_attempt_names():
    def at(step, traj_id, attempt=None, resumed_from=None):
        record = {**_episode(traj_id, True, [step - 1], group=traj_id), "global_step": step}
        return record if attempt is None else {**record, "attempt": attempt, "attempt_from_step": resumed_from}

    # Attempt x saved step 2 and died during step 3, after writing step-3 records; y resumed from step 2 and drained
    # nothing at step 3 (it trained on groups the checkpoint held). Neither the step going down nor y's first
    # record says where y started: its attempt_from_step does.
    x = [at(1, "a1", "x", 0), at(2, "b1", "x", 0), at(3, "c1", "x", 0), at(4, "d1", "x", 0)]
    y = [at(4, "e1", "y", 2), at(5, "f1", "y", 2)]
    assert [e["traj_id"] for e in last_attempt(x + y)] == ["a1", "b1", "e1", "f1"]
    # A group in flight at the checkpoint is played again whole by the resumed attempt (verl re-issues it): the
    # members the killed attempt finished before its checkpoint were never trained and are left out.
    g_before = [at(2, "g-a", "x", 0), at(2, "g-b", "x", 0)]
    g_again = [at(3, f"g-{member}", "y", 2) for member in "abcd"]
    for record in g_before + g_again:
        record["group"] = "g"
    kept = last_attempt(x[:2] + g_before + x[2:] + y[:1] + g_again + y[1:])
    assert [(e["traj_id"], e["attempt"]) for e in kept] == [
        ("a1", "x"), ("b1", "x"), ("e1", "y"), ("g-a", "y"), ("g-b", "y"), ("g-c", "y"), ("g-d", "y"), ("f1", "y")
    ]  # fmt: skip
    counted = played(x[:2] + g_before + x[2:] + y[:1] + g_again + y[1:], {}, group_size=4)
    assert (counted.episodes, counted.groups, counted.groups_unfinished) == (8, 1, 4)
    # Records that name no attempt (written before they did), followed by one that does: a resume too.
    older = [at(1, "a1"), at(2, "b1"), at(3, "c1"), at(4, "d1")]
    assert [e["traj_id"] for e in last_attempt(older + y)] == ["a1", "b1", "e1", "f1"]
