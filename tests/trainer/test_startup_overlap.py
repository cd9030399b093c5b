"""The trainer's start-up overlap: verl's first weight sync runs while the agent-loop workers are created, and
``fit`` starts nothing before it has finished (or raises its error)."""

import threading

import pytest
from verl.trainer.ppo.v1.trainer_separate_async import PPOTrainerSeparateAsync

from verl_asyncweb.trainer.asyncweb_trainer import AsyncWebTrainer

SYNC_TIMEOUT_S = 60.0


class _Screenshots:
    def __init__(self) -> None:
        self.connected = False

    def connect(self) -> str:
        self.connected = True
        return "incarnation"


class _CheckpointManager:
    """verl's standalone checkpoint manager as ``on_init_end`` uses it: ``update_weights`` blocks until the test
    lets it finish (the rollout servers loading), with no clock involved."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.release = threading.Event()
        self.synced = threading.Event()
        if error is not None:
            self.release.set()

    def update_weights(self, global_steps: int) -> None:
        assert self.release.wait(SYNC_TIMEOUT_S), "the test never let the weight sync finish"
        if self.error is not None:
            raise self.error
        self.synced.set()


def _trainer(checkpoint_manager: _CheckpointManager) -> AsyncWebTrainer:
    # Only the attributes verl's on_init_end and our start-up hooks read; __init__ needs a cluster.
    trainer = AsyncWebTrainer.__new__(AsyncWebTrainer)
    trainer.screenshots = _Screenshots()
    trainer.standalone_checkpoint_manager = checkpoint_manager
    trainer._enable_hybrid_replicas = False
    trainer.global_steps = 0
    trainer._initial_sync = None
    return trainer


@pytest.fixture
def parent_fit(monkeypatch):
    """verl's ``fit`` records, for each call, whether the first weight sync had finished by then."""
    calls: list[bool] = []

    def fit(trainer, manager) -> None:
        calls.append(trainer.standalone_checkpoint_manager.synced.is_set())

    monkeypatch.setattr(PPOTrainerSeparateAsync, "fit", fit)
    return calls


def test_on_init_end_returns_before_the_first_weight_sync_and_fit_waits_for_it(parent_fit):
    manager = _CheckpointManager()
    trainer = _trainer(manager)
    trainer.on_init_end()  # returns while the sync is blocked: the task runner goes on to create the workers
    assert trainer.screenshots.connected
    assert not manager.synced.is_set()
    fit = threading.Thread(target=trainer.fit, kwargs={"agent_loop_manager": None})
    fit.start()
    fit.join(timeout=0.5)
    assert fit.is_alive() and parent_fit == []  # fit waits for the sync...
    manager.release.set()
    fit.join(timeout=SYNC_TIMEOUT_S)
    assert not fit.is_alive()
    assert parent_fit == [True]  # ...and rolls nothing out before the servers have the weights


def test_fit_raises_the_weight_sync_error_and_starts_nothing(parent_fit):
    trainer = _trainer(_CheckpointManager(error=RuntimeError("replica 0 failed to load")))
    trainer.on_init_end()
    with pytest.raises(RuntimeError, match="replica 0 failed to load"):
        trainer.fit(agent_loop_manager=None)
    assert parent_fit == []


def test_the_weight_sync_thread_does_not_hold_the_process_at_exit(parent_fit):
    trainer = _trainer(_CheckpointManager())
    trainer.on_init_end()
    sync_threads = [thread for thread in threading.enumerate() if thread.name == "initial-weight-sync"]
    assert sync_threads and all(thread.daemon for thread in sync_threads)
    trainer.standalone_checkpoint_manager.release.set()
    trainer.fit(agent_loop_manager=None)
