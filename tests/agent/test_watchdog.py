"""A restarted agent-loop worker: the watchdog fails the prompt groups its old process held (real Ray, real TQ)."""

import logging
import time
import uuid

import pytest
import ray

from verl_asyncweb.agent.watchdog import WorkerWatchdog
from verl_asyncweb.agent.worker import RestartableActorClass

pytestmark = [pytest.mark.ray]


@ray.remote(max_restarts=1, max_task_retries=-1)
class IncarnationActor:
    def __init__(self):
        self.incarnation = uuid.uuid4().hex

    def get_incarnation(self) -> str:
        return self.incarnation


@ray.remote(max_restarts=1)
class ActorWithLargeArgument:
    def __init__(self, blob: bytes):
        self.size, self.incarnation = len(blob), uuid.uuid4().hex

    def describe(self) -> tuple[int, str]:
        return self.size, self.incarnation


def _wait_for_restart(call, old, timeout_s: float = 60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            value = ray.get(call(), timeout=10)
            if value != old:
                return value
        except ray.exceptions.RayActorError:
            pass
        time.sleep(0.5)
    raise AssertionError("the actor did not come back")


def test_restarted_actor_gets_its_large_constructor_argument_again(ray_cluster):
    blob = b"x" * 300_000  # above Ray's inline limit: the argument travels through the object store
    actor = RestartableActorClass(ActorWithLargeArgument).options(name=f"big-{uuid.uuid4().hex[:6]}").remote(blob)
    first = ray.get(actor.describe.remote())
    ray.kill(actor, no_restart=False)
    size, incarnation = _wait_for_restart(actor.describe.remote, first)
    assert size == len(blob) and incarnation != first[1]
    ray.kill(actor)


def _status(uid: str) -> str | None:
    import transfer_queue as tq

    return ((tq.kv_list() or {}).get("train", {}).get(uid) or {}).get("status")


def test_groups_of_a_dead_incarnation_are_failed_and_counted(ray_cluster):
    import transfer_queue as tq

    tq.init()
    prefix = uuid.uuid4().hex[:6]
    running, finished, later = f"{prefix}-running", f"{prefix}-finished", f"{prefix}-later"
    for uid, status in [(running, "running"), (finished, "finished"), (later, "running")]:
        tq.kv_put(key=uid, partition_id="train", tag={"is_prompt": True, "global_steps": 1, "status": status})

    worker = IncarnationActor.remote()
    watchdog = WorkerWatchdog([worker], timeout_s=30)
    first = ray.get(worker.get_incarnation.remote())
    watchdog.assign(0, first, "train", [running, finished])
    watchdog.check_once()
    assert _status(running) == "running" and watchdog.stats()["asyncweb/rollout/lost_groups"] == 0

    ray.kill(worker, no_restart=False)
    second = _wait_for_restart(worker.get_incarnation.remote, first)
    watchdog.assign(0, second, "train", [later])
    watchdog.check_once()

    assert _status(running) == "failure", "the group the dead process held is failed"
    assert _status(finished) == "finished", "a settled group is left alone"
    assert _status(later) == "running", "groups of the live process are left alone"
    assert watchdog.stats() == {"asyncweb/rollout/worker_restarts": 1.0, "asyncweb/rollout/lost_groups": 1.0}
    watchdog.check_once()
    assert watchdog.stats()["asyncweb/rollout/lost_groups"] == 1.0, "a group is counted once"
    tq.kv_clear(keys=[running, finished, later], partition_id="train")


def test_groups_of_a_worker_dead_for_good_are_failed(ray_cluster):
    import transfer_queue as tq

    tq.init()
    uid = f"{uuid.uuid4().hex[:6]}-orphan"
    tq.kv_put(key=uid, partition_id="train", tag={"is_prompt": True, "global_steps": 1, "status": "running"})
    worker = IncarnationActor.remote()
    watchdog = WorkerWatchdog([worker], timeout_s=30)
    watchdog.assign(0, ray.get(worker.get_incarnation.remote()), "train", [uid])
    ray.kill(worker)  # no restart
    deadline = time.monotonic() + 60
    while _status(uid) != "failure":
        assert time.monotonic() < deadline, "the dead worker's group was never failed"
        watchdog.check_once()
        time.sleep(0.5)
    assert watchdog.stats() == {"asyncweb/rollout/worker_restarts": 0.0, "asyncweb/rollout/lost_groups": 1.0}
    tq.kv_clear(keys=[uid], partition_id="train")


def test_stopped_watchdog_ends_its_thread(ray_cluster):
    watchdog = WorkerWatchdog([], interval_s=0.05)
    watchdog.start()
    watchdog.stop()
    watchdog.thread.join(timeout=5)
    assert not watchdog.thread.is_alive()


def test_a_poll_failing_while_running_is_logged_and_one_cut_by_the_end_of_the_run_is_not(ray_cluster, caplog):
    """After training verl closes TransferQueue, which a poll in flight then fails to read: not an error to report."""
    watchdog = WorkerWatchdog([], interval_s=0.01)
    polls = []

    def check_once():
        polls.append(len(polls))
        if len(polls) == 2:
            watchdog.stop()  # the run ends during the second poll
        raise AssertionError("TransferQueueController has not been initialized yet. Please call init() first.")

    watchdog.check_once = check_once
    with caplog.at_level(logging.ERROR, logger="verl_asyncweb.agent.watchdog"):
        watchdog.start()
        watchdog.thread.join(timeout=5)
    assert not watchdog.thread.is_alive() and polls == [0, 1]
    assert [record.getMessage() for record in caplog.records] == ["agent-loop worker watchdog poll failed"]
