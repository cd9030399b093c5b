"""Screenshots leave the store once their prompt group leaves TransferQueue: under dynamic sampling with most groups
filtered, and some failed, a store that holds about two batches keeps the steps coming. verl's own async replay
buffer samples, evicts and refills over a real TransferQueue; a rollout thread plays the groups into a real
ScreenshotStore actor; the trainer's sweep runs as in a run."""

from __future__ import annotations

import queue
import threading
import time
import uuid

import pytest
import torch

pytestmark = pytest.mark.ray

PARTITION = "sweep_test"
BATCH = 2  # prompt groups a step samples
EPISODES = 4  # rollout.n
STEPS_PER_EPISODE = 3
SCREENSHOT_BYTES = 2_000
STEPS = 8
BUDGET = 4 * BATCH * EPISODES * STEPS_PER_EPISODE * SCREENSHOT_BYTES  # 4 batches: the live groups and little more
STEP_TIMEOUT_S = 60


def test_live_groups_are_the_uids_of_prompt_keys_and_rows_in_every_partition():
    from verl_asyncweb.trainer.screenshot_sweep import live_groups

    listing = {"train": {"g-1": {}, "g-2_0_0": {}, "g-2_1_0": {}}, "val": {"v-9_0_0": {}}}
    assert live_groups(listing) == {"g-1", "g-2", "v-9"}
    assert live_groups(None) == set()


class _Rollout:
    """Plays prompt groups one after the other: each episode puts its screenshots, then the group's rows go to
    TransferQueue and its prompt is marked finished (or failed, with no rows, as verl marks a failed group)."""

    def __init__(self, screenshots, global_step):
        self.screenshots = screenshots
        self.global_step = global_step
        self.groups: queue.Queue[str | None] = queue.Queue()
        self.played: list[str] = []
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def submit(self, count: int) -> int:
        import transfer_queue as tq

        uids = [str(uuid.uuid4()) for _ in range(count)]
        tags = [{"is_prompt": True, "status": "pending", "global_steps": self.global_step()} for _ in uids]
        tq.kv_batch_put(keys=uids, partition_id=PARTITION, tags=tags)  # registered before dispatch, as verl does
        for uid in uids:
            self.groups.put(uid)
        return count

    def _run(self) -> None:
        while (uid := self.groups.get()) is not None:
            try:
                self._play(uid, index=len(self.played))
            except BaseException as exc:  # noqa: BLE001 - the test reports it
                self.errors.append(exc)
                return
            self.played.append(uid)

    def _play(self, uid: str, index: int) -> None:
        import transfer_queue as tq
        from tensordict import TensorDict

        from verl_asyncweb.agent.fields import trajectory_id

        for episode in range(EPISODES):
            for step in range(STEPS_PER_EPISODE):
                blob = f"{uid}/{episode}/{step}".encode().ljust(SCREENSHOT_BYTES, b".")
                self.screenshots.put(blob, trajectory_id(uid, f"{episode:08x}"))
        if index % 5 == 4:  # an environment failure: the group is failed with no rows
            tq.kv_put(key=uid, partition_id=PARTITION, tag={"status": "failure"})
            return
        informative = index % 5 == 0  # the rest end alike (all failed): dynamic sampling filters them
        rewards = [float(informative and episode % 2) for episode in range(EPISODES)]
        keys = [f"{uid}_{episode}_0" for episode in range(EPISODES)]
        fields = TensorDict({"rm_scores": torch.tensor(rewards).unsqueeze(1)}, batch_size=[EPISODES])
        step = self.global_step()
        tags = [{"status": "success", "global_steps": step, "min_global_steps": step} for _ in keys]
        tq.kv_batch_put(keys=keys, partition_id=PARTITION, fields=fields, tags=tags)
        tq.kv_put(key=uid, partition_id=PARTITION, tag={"status": "finished"})


def _sample_into(out: list, buffer, step: int) -> None:
    out.append(buffer.sample(step, PARTITION, BATCH)[0])


def test_a_store_of_two_batches_keeps_steps_coming_under_dynamic_sampling(ray_cluster):
    import transfer_queue as tq
    from omegaconf import OmegaConf
    from verl.trainer.ppo.v1.replay_buffer import ReplayBufferAsync

    from verl_asyncweb.agent.screenshots import ScreenshotClient
    from verl_asyncweb.trainer.screenshot_sweep import ScreenshotSweeper

    tq.init()
    screenshots = ScreenshotClient(name=f"sweep-{uuid.uuid4().hex[:8]}", budget_bytes=BUDGET, put_timeout_s=10.0)
    screenshots.connect()
    global_step = [1]
    rollout = _Rollout(screenshots, lambda: global_step[0])
    buffer = ReplayBufferAsync(
        trainer_mode="separate_async",
        trainer_config=OmegaConf.create({}),
        max_off_policy_threshold=3,
        max_off_policy_strategy="drop",
        sampler_kwargs=OmegaConf.create({}),
        poll_interval=0.05,
        refill_fn=rollout.submit,
        filter_groups_metric="reward",
    )
    sweeper = ScreenshotSweeper(screenshots, interval_s=0.2).start()
    rollout.thread.start()
    trained = []
    try:
        rollout.submit(2 * BATCH)  # the batches ahead of the trainer (staleness 1)
        for step in range(1, STEPS + 1):
            global_step[0] = step
            sampled: list = []
            sampler = threading.Thread(target=_sample_into, args=(sampled, buffer, step), daemon=True)
            sampler.start()
            sampler.join(STEP_TIMEOUT_S)
            assert sampled, f"step {step} got no batch in {STEP_TIMEOUT_S} s: {screenshots.stats()}, {rollout.errors}"
            batch = sampled[0]
            trained.append(len(batch.keys))
            tq.kv_clear(keys=batch.keys, partition_id=PARTITION)  # verl clears the step's rows after it
            rollout.submit(BATCH)  # the next batch, as verl's prepare_step does
        deadline = time.time() + 10
        while screenshots.stats()["waiting_puts"] and time.time() < deadline:
            time.sleep(0.1)
        stats = screenshots.stats()
    finally:
        rollout.groups.put(None)
        sweeper.stop()
        listing = tq.kv_list(PARTITION) or {}
        tq.kv_clear(keys=list(listing.get(PARTITION, {})), partition_id=PARTITION)
        ray_cluster.kill(screenshots.handle)
    assert rollout.errors == []
    assert trained == [BATCH * EPISODES] * STEPS
    assert len(rollout.played) >= 4 * STEPS * BATCH, "most groups are filtered or failed and refilled"
    assert stats["put_timeouts"] == 0 and stats["peak_bytes_held"] <= BUDGET
    assert stats["puts"] * SCREENSHOT_BYTES >= 4 * BUDGET, "the run played through its budget several times over"
