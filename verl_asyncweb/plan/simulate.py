"""Discrete-event simulation of the pipeline as ``verl_asyncweb`` runs it (heapq, one thread, seeded).

Episodes run on browser pages (``pipeline.max_concurrent_episodes``); a step is its browser time (fixed cost plus
web latency) then one generation request on the least-loaded rollout replica. A group's n episodes start
together and end in the replay buffer when the last one finishes, unless dynamic sampling discards it (all rewards
equal) or it is staler than eta. Admission follows AReaL's staleness controller, which the async recipes mirror
with ``num_warmup_batches = eta``: a new group may start while

    running groups + accepted groups (buffered or trained) < (version + eta + 1) * groups_per_batch,

so at most eta batches are rolled out ahead of the trainer; discarded and dropped groups free their places. The
trainer takes the oldest ``groups_per_batch`` groups, computes, then syncs weights while the replicas pause; the
version then increments. ``sync`` is eta = 0: a batch is rolled out, then trained on, with no overlap and lag 0.
A trainer that shares its compute with rollout (``trainer.rollout_contention`` > 0: the CPU backend) and the
replicas slow each other down while both work.
"""

from __future__ import annotations

import heapq
import logging
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from verl_asyncweb.plan.prediction import Prediction
from verl_asyncweb.plan.profile import Profile
from verl_asyncweb.plan.replica import Replica
from verl_asyncweb.plan.workload import EpisodeDraw, WorkloadSampler, expected_discard_prob

logger = logging.getLogger(__name__)

MAX_DISCARD_PROB = 0.99
"""Dynamic sampling that discards more groups than this would need > 100 groups per kept one: refused."""


@dataclass
class _Group:
    start_version: int
    episodes_left: int
    successes: list[bool] = field(default_factory=list)
    samples: list[tuple[int, float]] = field(default_factory=list)  # (request's policy version, tokens)


@dataclass
class _Episode:
    group: _Group
    draw: EpisodeDraw
    started_at: float
    steps_done: int = 0


@dataclass
class _Window:
    """Counters of the measured steps."""

    start_s: float = 0.0
    busy_at_start_s: float = 0.0
    finished_trajs: int = 0
    episode_s_sum: float = 0.0
    finished_groups: int = 0
    discarded_groups: int = 0
    dropped_groups: int = 0
    trained_steps: int = 0
    trainer_idle_s: float = 0.0
    train_s_sum: float = 0.0
    busy_during_update_s: float = 0.0
    lags: Counter[int] = field(default_factory=Counter)  # policy lag -> trained step-samples


class _Simulation:
    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.shape, self.rollout, self.trainer = profile.pipeline, profile.rollout, profile.trainer
        self.eta = self.shape.effective_staleness
        self.sampler = WorkloadSampler(profile.workload, profile.env, profile.sim.seed)
        self.replicas = [Replica(self.rollout) for _ in range(self.rollout.replicas)]
        self.replica_loads = [0] * len(self.replicas)  # requests running or waiting on each replica
        self.events: list[tuple[float, int, Callable, tuple]] = []
        self.sequence = 0
        self.now = 0.0
        self.version = 0
        self.free_pages = self.shape.max_concurrent_episodes
        self.running_groups = 0
        self.accepted_groups = 0  # buffered or trained; dropped ones leave this count
        self.buffer: deque[_Group] = deque()
        self.trainer_idle_since: float | None = 0.0
        self.contention = self.trainer.rollout_contention
        self.compute_left_s: float | None = None  # full-speed seconds of the running trainer compute
        self.compute_rate = 1.0
        self.compute_since = 0.0
        self.compute_started_s = 0.0
        self.compute_epoch = 0
        self.steps_done = 0
        self.window: _Window | None = None
        self.update_busy_start_s = 0.0
        self.first_batch_s: float | None = None  # when the trainer first took a batch: the first step's rollout

    # ------------------------------------------------------------------ event plumbing

    def _at(self, time_s: float, handler: Callable, *args) -> None:
        self.sequence += 1
        heapq.heappush(self.events, (time_s, self.sequence, handler, args))

    def run(self) -> _Window:
        if self.profile.sim.warmup_steps == 0:
            self._open_window()
        self._admit()
        while self.steps_done < self.profile.sim.train_steps:
            assert self.events, "the simulated pipeline stalled with no pending event"
            self.now, _, handler, args = heapq.heappop(self.events)
            handler(*args)
        return self.window

    def total_busy_s(self) -> float:
        for replica in self.replicas:
            replica.advance(self.now)
        return sum(replica.busy_s for replica in self.replicas)

    def _open_window(self) -> None:
        self.window = _Window(start_s=self.now, busy_at_start_s=self.total_busy_s())

    # ------------------------------------------------------------------ rollout

    def _admit(self) -> None:
        size, per_batch = self.shape.group_size, self.shape.groups_per_batch
        while (
            self.free_pages >= size
            and self.running_groups + self.accepted_groups < (self.version + self.eta + 1) * per_batch
        ):
            group = _Group(start_version=self.version, episodes_left=size)
            self.running_groups += 1
            self.free_pages -= size
            for draw in self.sampler.group(size):
                self._env_step(_Episode(group=group, draw=draw, started_at=self.now))

    def _env_step(self, episode: _Episode) -> None:
        self._at(self.now + self.sampler.step_env_s(), self._generate, episode)

    def _generate(self, episode: _Episode) -> None:
        index = self.replica_loads.index(min(self.replica_loads))  # least loaded, lowest index on ties
        self.replica_loads[index] += 1
        replica = self.replicas[index]
        tokens = episode.draw.response_tokens_per_step
        decode_s = self.rollout.decode_s_per_token * tokens
        replica.submit(self.now, self.rollout.prefill_s, decode_s, (episode, self.version))
        self._schedule_replica(index)

    def _schedule_replica(self, index: int) -> None:
        """After any change on replica ``index``: its next completion, and the trainer's speed if they share."""
        replica = self.replicas[index]
        finish_s = replica.next_finish_s(self.now)
        if finish_s is not None:
            self._at(finish_s, self._replica_event, index, replica.epoch)
        self._contention_changed()

    def _replica_event(self, index: int, epoch: int) -> None:
        replica = self.replicas[index]
        if epoch != replica.epoch:
            return  # superseded by a later change on this replica
        for episode, version in replica.pop_finished(self.now):
            self.replica_loads[index] -= 1
            self._step_done(episode, version)
        self._schedule_replica(index)

    def _step_done(self, episode: _Episode, version: int) -> None:
        prompt_tokens = self.profile.workload.prompt_tokens_per_step
        episode.group.samples.append((version, prompt_tokens + episode.draw.response_tokens_per_step))
        episode.steps_done += 1
        if episode.steps_done < episode.draw.num_steps:
            self._env_step(episode)
        else:
            self._at(self.now + self.profile.env.episode_end_s, self._episode_end, episode)

    def _episode_end(self, episode: _Episode) -> None:
        self.free_pages += 1
        group = episode.group
        group.successes.append(episode.draw.success)
        group.episodes_left -= 1
        if self.window is not None:
            self.window.finished_trajs += 1
            self.window.episode_s_sum += self.now - episode.started_at
        if group.episodes_left == 0:
            self._group_done(group)
        self._admit()

    def _group_done(self, group: _Group) -> None:
        self.running_groups -= 1
        if self.window is not None:
            self.window.finished_groups += 1
        if self.shape.dynamic_sampling and len(set(group.successes)) == 1:
            if self.window is not None:
                self.window.discarded_groups += 1
            return
        self.accepted_groups += 1
        self.buffer.append(group)
        self._try_train()

    # ------------------------------------------------------------------ trainer

    def _try_train(self) -> None:
        if self.trainer_idle_since is None:
            return
        fresh = [group for group in self.buffer if group.start_version >= self.version - self.eta]
        if len(fresh) < len(self.buffer):
            if self.window is not None:
                self.window.dropped_groups += len(self.buffer) - len(fresh)
            self.accepted_groups -= len(self.buffer) - len(fresh)
            self.buffer = deque(fresh)
        if len(self.buffer) < self.shape.groups_per_batch:
            return
        batch = [self.buffer.popleft() for _ in range(self.shape.groups_per_batch)]
        if self.first_batch_s is None:
            self.first_batch_s = self.now
        tokens = sum(t for group in batch for _, t in group.samples)
        per_token_s = self.trainer.recompute_gpu_s_per_token + self.trainer.update_gpu_s_per_token
        train_s = self.trainer.overhead_s + per_token_s * tokens / self.trainer.gpus
        if self.window is not None:
            self.window.trainer_idle_s += self.now - max(self.trainer_idle_since, self.window.start_s)
            self.window.lags.update(self.version - version for group in batch for version, _ in group.samples)
        self.trainer_idle_since = None
        self.update_busy_start_s = self.total_busy_s()
        self.compute_left_s, self.compute_since, self.compute_started_s = train_s, self.now, self.now
        self.compute_rate = self._compute_rate()
        self._share_replicas(1.0 / (1.0 + self.contention))
        self._schedule_compute()

    # ------------------------------------------------------------------ trainer and rollout on shared compute

    def _compute_rate(self) -> float:
        if self.contention and any(replica.active for replica in self.replicas):
            return 1.0 / (1.0 + self.contention)
        return 1.0

    def _schedule_compute(self) -> None:
        self.compute_epoch += 1
        self._at(self.now + self.compute_left_s / self.compute_rate, self._compute_done, self.compute_epoch)

    def _share_replicas(self, share: float) -> None:
        if not self.contention:
            return
        for index, replica in enumerate(self.replicas):
            replica.set_share(self.now, share)
            self._schedule_replica(index)

    def _contention_changed(self) -> None:
        """A replica started or stopped generating: the running trainer compute changes speed."""
        if not self.contention or self.compute_left_s is None:
            return
        rate = self._compute_rate()
        if rate != self.compute_rate:
            self.compute_left_s -= (self.now - self.compute_since) * self.compute_rate
            self.compute_since, self.compute_rate = self.now, rate
            self._schedule_compute()

    def _compute_done(self, epoch: int) -> None:
        if epoch != self.compute_epoch:
            return  # rescheduled at another speed
        self.compute_left_s = None
        if self.window is not None and self.compute_started_s >= self.window.start_s:
            self.window.train_s_sum += self.now - self.compute_started_s
        self._share_replicas(1.0)
        self._train_done()

    def _train_done(self) -> None:
        if self.window is not None:
            self.window.busy_during_update_s += self.total_busy_s() - self.update_busy_start_s
        for replica in self.replicas:
            replica.set_paused(self.now, True)  # its scheduled completions are now stale (epoch bumped)
        self._at(self.now + self.trainer.weight_sync_s, self._sync_done)

    def _sync_done(self) -> None:
        self.version += 1
        self.steps_done += 1
        if self.window is not None:
            self.window.trained_steps += 1
        elif self.steps_done == self.profile.sim.warmup_steps:
            self._open_window()
        if self.steps_done == self.profile.sim.train_steps:
            return  # the measured window ends with this weight sync: start nothing that would count in it
        for index, replica in enumerate(self.replicas):
            replica.set_paused(self.now, False)
            self._schedule_replica(index)
        self.trainer_idle_since = self.now
        self._admit()
        self._try_train()


def simulate(profile: Profile) -> Prediction:
    """Run the pipeline of ``profile`` for ``sim.train_steps`` training steps; figures over the steps after warm-up.

    Raises:
        ValueError: dynamic sampling would discard nearly every group (the simulation would not finish).
    """
    discard = expected_discard_prob(profile.workload, profile.pipeline.group_size)
    if profile.pipeline.dynamic_sampling and discard > MAX_DISCARD_PROB:
        raise ValueError(
            f"pipeline.dynamic_sampling discards {discard:.4f} of groups at workload.success_prob="
            f"{profile.workload.success_prob} and pipeline.group_size={profile.pipeline.group_size}; must be <= "
            f"{MAX_DISCARD_PROB}: raise the success probability or turn dynamic sampling off"
        )
    simulation = _Simulation(profile)
    window = simulation.run()
    elapsed_s = simulation.now - window.start_s
    hours = elapsed_s / 3600.0
    shape = profile.pipeline
    trained_trajs = window.trained_steps * shape.groups_per_batch * shape.group_size
    busy_s = simulation.total_busy_s() - window.busy_at_start_s
    replicas = len(simulation.replicas)
    update_s = window.train_s_sum
    samples = sum(window.lags.values())
    prediction = Prediction(
        mode=shape.mode,
        trained_trajs_per_hour=trained_trajs / hours,
        finished_trajs_per_hour=window.finished_trajs / hours,
        step_s=elapsed_s / window.trained_steps,
        train_s=update_s / window.trained_steps,
        trainer_idle_frac=window.trainer_idle_s / elapsed_s,
        rollout_idle_frac=1.0 - busy_s / (replicas * elapsed_s),
        rollout_busy_during_update_frac=window.busy_during_update_s / (replicas * update_s) if update_s else 0.0,
        policy_lag_hist={lag: count / samples for lag, count in sorted(window.lags.items())},
        stale_drop_frac=window.dropped_groups * shape.group_size / max(window.finished_trajs, 1),
        group_discard_frac=window.discarded_groups / max(window.finished_groups, 1),
        episode_s=window.episode_s_sum / max(window.finished_trajs, 1),
        first_batch_s=simulation.first_batch_s,
        measured_steps=window.trained_steps,
    )
    logger.debug("simulated %s: %s", profile.name, prediction)
    return prediction
