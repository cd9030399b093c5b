"""The look-ahead of the pixel rebuild picks the rows verl's replay buffer hands the next local update."""

import pytest
from trainer_helpers import replay_buffer_for
from transfer_queue import KVBatchMeta
from verl.trainer.ppo.v1 import replay_buffer as verl_replay_buffer

from verl_asyncweb.trainer.pixels_ahead import rows_sampled_next

PARTITION = "train"
ETA = 2


@pytest.fixture
def buffer(monkeypatch):
    """verl's async replay buffer holding six finished groups of two rows (two steps of one episode each) submitted
    at steps 1 to 6, as its TransferQueue snapshot would leave it; TransferQueue itself is not needed."""
    replay = replay_buffer_for([f"asyncweb.staleness={ETA}", "asyncweb.algo.dynamic_sampling=false"])
    for group, submitted in zip("abcdef", [4, 6, 5, 2, 3, 1], strict=True):
        replay.prompt_global_steps[PARTITION][group] = submitted
        replay.finished_keys[PARTITION].add(group)
        for step in range(2):
            replay.partitions[PARTITION][f"{group}_0_{step}"] = {"status": "finished", "global_steps": submitted}
    monkeypatch.setattr(replay, "_sync_metadata_from_transfer_queue", lambda: None)
    monkeypatch.setattr(verl_replay_buffer.tq, "kv_clear", lambda **_: None)
    return replay


def _groups(batch: KVBatchMeta) -> list[str]:
    return sorted({key.split("_")[0] for key in batch.keys})


def test_the_look_ahead_is_what_the_next_sample_takes(buffer):
    # At step 6 with eta 2 (verl's span threshold 3) groups submitted before step 4 are stale: d, e, f.
    steps, groups = 6, 2
    taken = KVBatchMeta(partition_id=PARTITION, keys=["c_0_0", "c_0_1"], tags=[{}, {}])
    buffer.finished_keys[PARTITION].discard("c")  # verl clears a sampled group's prompt row
    ahead = rows_sampled_next(buffer, PARTITION, steps, groups, taken)
    assert _groups(ahead) == ["a", "b"] and len(ahead.keys) == 4
    assert all(tag["status"] == "finished" for tag in ahead.tags)
    sampled, _ = buffer.sample(steps, PARTITION, groups)
    assert sorted(sampled.keys) == sorted(ahead.keys)


def test_the_oldest_groups_come_first_and_a_taken_group_is_never_built_twice(buffer):
    buffer.max_off_policy_threshold = None  # nothing stale: the oldest submitted groups are sampled first
    taken = KVBatchMeta(partition_id=PARTITION, keys=["f_0_0"], tags=[{}])
    ahead = rows_sampled_next(buffer, PARTITION, 6, 3, taken)
    assert _groups(ahead) == ["a", "d", "e"]
    assert not set(ahead.keys) & set(taken.keys)


def test_nothing_to_build_ahead_when_no_group_is_sampleable(buffer):
    for group in "abcdef":
        buffer.finished_keys[PARTITION].discard(group)
        buffer.running_keys[PARTITION].add(group)
    assert rows_sampled_next(buffer, PARTITION, 6, 2, KVBatchMeta(partition_id=PARTITION, keys=[], tags=[])) is None
