"""The ``asyncweb`` trainer: verl's separate-async V1 trainer with multi-step web-agent advantages and metrics.

Rollout (agent-loop workers, ``hf``/vLLM servers, the browser pool) runs continuously next to training; verl's
replay buffer applies the staleness bound eta (``asyncweb.staleness``, as verl's span threshold eta + 1). A
training step is one cycle of ``parameter_sync_step`` local updates, each on ``ppo_mini_batch_size`` prompt
groups with pi_prox recomputed from the cycle-start weights, then one weight sync. This subclass changes these
hooks:

- ``_compute_old_log_prob`` / ``on_sample_begin``: the batch's pixels are rebuilt from its screenshot keys
  (:mod:`~verl_asyncweb.trainer.pixels`), the next local update's rows handed to the builders ahead
  (:mod:`~verl_asyncweb.trainer.pixels_ahead`), which finish before the replay buffer samples again;
- ``_compute_advantage``: one advantage per trajectory (group = task, steps deduplicated by trajectory id)
  with the 1/|tau| or 1/k step normalizer, broadcast to every token of every step-sample;
- ``_update_actor``: each local update is one optimizer step per PPO epoch on all its step-samples (verl would
  split them into mini-batches of ``ppo_mini_batch_size x rollout.n`` rows, as many as the episodes had steps);
- ``on_train_begin`` / ``prepare_step`` / ``on_sample_end``: with ``asyncweb.rollout_mode=sync`` no batch is
  prefetched, every group of the cycle finishes before its first local update, and generation pauses then
  (WebGym's way), resuming with the weight sync of ``on_step_end``;
- ``_save_checkpoint`` / ``_load_checkpoint``: checkpoints hold no pixels, and a resumed run clears the rows the
  checkpoint's step trained on (:mod:`~verl_asyncweb.trainer.checkpoint_rows`);
- ``_compute_metrics``: adds the behaviour metrics of the episodes that finished since the last step and the
  screenshot store's occupancy; ``perf/throughput`` counts no GPU for an ``hf`` rollout server (it runs on CPU);
- ``on_init_end`` / ``fit``: verl's first weight sync, which waits for the rollout servers to load, runs in the
  background while the task runner creates the agent-loop workers; ``fit`` waits for it before any rollout. The
  screenshot sweep (:mod:`~verl_asyncweb.trainer.screenshot_sweep`) runs from then until ``fit`` returns.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

import numpy as np
import ray
import transfer_queue as tq
from tensordict import TensorDict
from transfer_queue import KVBatchMeta
from verl.protocol import DataProto
from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_add_to_batch
from verl.trainer.ppo.v1.replay_buffer import _accumulate_eviction_metrics
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_separate_async import PPOTrainerSeparateAsync
from verl.workers.utils.padding import response_to_nested

from verl_asyncweb.algo.trajectories import (
    compute_multistep_advantages_for_batch,
    count_real_trajectories,
    traj_ids_from_batch_keys,
)
from verl_asyncweb.compare import metric_names as names
from verl_asyncweb.trainer.checkpoint_rows import clear_trained_rows, drop_pixels, write_trained_rows
from verl_asyncweb.trainer.pixels import PixelStats, as_list, pixel_dtype
from verl_asyncweb.trainer.pixels_ahead import PixelRebuild, rows_sampled_next
from verl_asyncweb.trainer.screenshot_sweep import ScreenshotSweeper

logger = logging.getLogger(__name__)

TRAINER_NAME = "asyncweb"
SAMPLE_POLL_S = 0.25
"""How often the replay buffer looks for finished groups (verl's default of 2 s adds up to 2 s to every wait)."""


@register_trainer(TRAINER_NAME)
class AsyncWebTrainer(PPOTrainerSeparateAsync):
    """See the module docstring."""

    def __init__(self, config):
        from verl_asyncweb.config.schema import AsyncWebConfig

        self.asyncweb = AsyncWebConfig.from_config(config.asyncweb)
        super().__init__(config)
        self._started_at = time.time()
        self._resumed_wall_s: float | None = None
        self._attempt_from_step: int | None = None  # the checkpoint this attempt resumed from (0: none)
        self._last_drain_at = self._started_at
        self._update_intervals: list[tuple[float, float]] = []  # the cycle's local updates
        self._pixel_stats = PixelStats()  # summed over the cycle's local updates
        self._pixel_seconds = 0.0
        self._optimizer_steps = 0
        self._pixels: PixelRebuild | None = None
        self._trained: KVBatchMeta | None = None  # the rows of the latest step, until verl clears them
        from verl_asyncweb.agent.screenshots import ScreenshotClient

        # Created here, in the long-lived trainer process, so that the store lives as long as the job; it starts
        # while verl sets up its workers, and on_init_end waits for it.
        self.screenshots = ScreenshotClient.from_config(self.asyncweb.agent)
        self.screenshots.start()
        self._sweeper: ScreenshotSweeper | None = None
        self._initial_sync: Future | None = None

    # ------------------------------------------------------------------ start-up

    def on_init_end(self):
        """verl's first weight sync (after the checkpoint, if any, is loaded) waits for the rollout servers to load;
        it runs in the background, so that the agent-loop workers the task runner creates next start meanwhile."""
        self.screenshots.connect()
        self._sweeper = ScreenshotSweeper(self.screenshots).start()
        self._initial_sync = _start_in_background(super().on_init_end, name="initial-weight-sync")

    def fit(self, agent_loop_manager):
        if self._initial_sync is not None:
            self._initial_sync.result()  # re-raises the sync's error
        try:
            super().fit(agent_loop_manager)
        finally:
            # verl's task runner closes TransferQueue next, which the watchdog's and the sweeper's polls read.
            watchdog = getattr(agent_loop_manager, "watchdog", None)
            if watchdog is not None:
                watchdog.stop()
            if self._sweeper is not None:
                self._sweeper.stop()

    def _build_replay_buffer(self):
        replay_buffer = super()._build_replay_buffer()
        replay_buffer.poll_interval = SAMPLE_POLL_S
        return replay_buffer

    # ------------------------------------------------------------------ screenshots by reference

    def on_sample_begin(self):
        if self._pixels is not None:
            # Builds ahead write into rows the replay buffer may now evict and clear: they finish first.
            started = time.time()
            self._pixels.settle()
            self._pixel_seconds += time.time() - started
        super().on_sample_begin()

    def _pixel_rebuild(self) -> PixelRebuild:
        if self._pixels is None:
            mm_kwargs = self.config.data.get("mm_processor_kwargs")
            dtype = pixel_dtype(self.config.actor_rollout_ref.actor)
            self._pixels = PixelRebuild(self.asyncweb.pixels, self.processor, self.screenshots, mm_kwargs, dtype)
        return self._pixels

    def _compute_old_log_prob(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        started = time.time()
        self._pixel_stats.add(self._pixel_rebuild().attach(batch))
        cycle_ends = self.local_trigger_step + 1 >= self.parameter_sync_step
        if self.asyncweb.pixels.build_ahead and not (cycle_ends and self._saves_checkpoint_after_this_step()):
            # The next sample comes after this cycle's weight sync when this is its last local update (and its rows
            # would only be unbuilt again before a checkpoint).
            groups = self.config.data.train_batch_size // self.parameter_sync_step
            upcoming = rows_sampled_next(
                self.replay_buffer, batch.partition_id, self.global_steps + int(cycle_ends), groups, batch
            )
            self._pixels.build_ahead(upcoming, self.global_steps)
        self._pixel_seconds += time.time() - started
        return super()._compute_old_log_prob(batch, metrics)

    def _saves_checkpoint_after_this_step(self) -> bool:
        """verl's condition in ``fit`` for saving a checkpoint at the end of the current step."""
        save_freq = self.config.trainer.save_freq
        last = self.global_steps >= self.total_training_steps
        return save_freq > 0 and (last or self.global_steps % save_freq == 0)

    def step(self, metrics: dict, timing_raw: dict) -> KVBatchMeta:
        self._trained = super().step(metrics, timing_raw)
        return self._trained

    def _save_checkpoint(self):
        """No pixels in a checkpoint: neither of rows built ahead nor of the rows this step trained on, which verl
        clears only after the save (:mod:`~verl_asyncweb.trainer.checkpoint_rows`)."""
        if self._pixels is not None:
            live_rows = set(self.replay_buffer.partitions["train"])
            unbuilt = self._pixels.unbuild_ahead(live_rows)
            if unbuilt:
                logger.info("checkpoint: %d rows built ahead are saved without their pixels", unbuilt)
        if self._trained is not None:
            drop_pixels(self._trained.keys, self._trained.partition_id)
        super()._save_checkpoint()
        if self._trained is not None:
            write_trained_rows(self._checkpoint_dir(self.global_steps), self._trained)

    def _load_checkpoint(self):
        super()._load_checkpoint()
        if self.global_steps > 0:
            # Sample rows only ({uid}_{session}_{index}): verl's count of restored prompt groups stays as it is.
            folder = self.config.trainer.resume_from_path if self.config.trainer.resume_mode == "resume_path" else None
            clear_trained_rows(folder or self._checkpoint_dir(self.global_steps))

    def _checkpoint_dir(self, global_steps: int) -> str:
        """verl's folder of the checkpoint of ``global_steps``."""
        return os.path.join(os.path.abspath(self.config.trainer.default_local_dir), f"global_step_{global_steps}")

    # ------------------------------------------------------------------ advantages

    def _compute_advantage(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        fields = ["uid", "response_mask", "rm_scores", "rollout_log_probs", "old_log_probs", "extra_fields"]
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
        extras = data.pop("extra_fields")
        shared_state = [extra.get("branch_point") for extra in as_list(extras)]
        response_mask = data["response_mask"]
        data = DataProto(batch=data.to_padded_tensor())
        uid = data.batch.pop("uid").tolist()

        correction = self.config.algorithm.get("rollout_correction", None)
        use_correction = correction is not None and not correction.get("bypass_mode", False)
        if use_correction and "rollout_log_probs" in data.batch:
            data, is_metrics = compute_rollout_correction_and_add_to_batch(data, correction)
            metrics.update(is_metrics)

        _, traj_ids, _ = traj_ids_from_batch_keys(batch.keys)
        result = compute_multistep_advantages_for_batch(
            token_level_rewards=data.batch["rm_scores"],
            response_mask=data.batch["response_mask"],
            uid=uid,
            traj_id=traj_ids,
            config=self.asyncweb.algo,
            shared_state=shared_state,
        )
        metrics.update(result.metrics)
        output = {"advantages": result.advantages, "returns": result.returns}
        if use_correction:
            output["response_mask"] = data.batch["response_mask"]
            if "rollout_is_weights" in data.batch:
                output["rollout_is_weights"] = data.batch["rollout_is_weights"]
        nested = {name: response_to_nested(value, response_mask) for name, value in output.items()}
        return tq.kv_batch_put(
            keys=batch.keys, partition_id=batch.partition_id, fields=TensorDict(nested, batch_size=len(batch))
        )

    # ------------------------------------------------------------------ sync baseline

    def on_train_begin(self):
        if self.asyncweb.rollout_mode == "sync":
            # No prefetch: each step's batch is submitted by prepare_step and rolled out completely before the
            # update, so nothing generates while the trainer works (WebGym's synchronous loop).
            logger.info("rollout_mode=sync: no warm-up batches; one batch is rolled out per training step")
            return
        super().on_train_begin()

    def prepare_step(self) -> dict:
        metrics = super().prepare_step()
        if self.asyncweb.rollout_mode == "sync":
            # Every group of the cycle (all of its local updates) finishes before the first update: generation then
            # pauses once, and the cycle's later samples find their groups finished.
            metrics.update(self._wait_for_the_cycles_groups(self.config.data.train_batch_size))
        return metrics

    def _wait_for_the_cycles_groups(self, groups: int) -> dict:
        """Wait until ``groups`` groups are sampleable; returns verl's eviction metrics. With pixels built ahead,
        each group's rows go to the builders as it finishes, while the slower episodes still play."""
        if not (self.asyncweb.pixels.build_ahead and self.asyncweb.pixels.workers):
            return self.replay_buffer.wait_for_sampleable(self.global_steps, "train", groups)[1]
        evictions: dict = {}
        nothing_taken = KVBatchMeta(partition_id="train", keys=[], tags=[])
        for target in range(1, groups + 1):
            _, waited = self.replay_buffer.wait_for_sampleable(self.global_steps, "train", target)
            stale = next((value for key, value in waited.items() if key.endswith("/off_policy/evicted_samples")), 0)
            _accumulate_eviction_metrics(evictions, waited, stale)
            upcoming = rows_sampled_next(self.replay_buffer, "train", self.global_steps, groups, nothing_taken)
            self._pixel_rebuild().build_ahead(upcoming, self.global_steps)
        return evictions

    def on_sample_end(self):
        super().on_sample_end()
        if self.asyncweb.rollout_mode == "sync" and self.local_trigger_step == 0:
            # Hold every generation request until on_step_end's weight sync resumes the servers.
            self.standalone_checkpoint_manager.abort_replicas()

    # ------------------------------------------------------------------ the update

    def _update_actor(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        """One optimizer step per PPO epoch on the whole sampled batch, timed for the overlap metric."""
        start = time.time()
        workers = self.actor_rollout_wg
        update_actor = workers.update_actor
        rows = len(batch)

        def update_on_one_mini_batch(data: KVBatchMeta):
            # verl sets the mini-batch to ppo_mini_batch_size x rollout.n rows, one row per episode step.
            data.extra_info.update({"mini_batch_size": rows, "global_batch_size": rows})
            output = update_actor(data)
            self._optimizer_steps += optimizer_steps(output)
            return output

        workers.update_actor = update_on_one_mini_batch
        try:
            batch = super()._update_actor(batch, metrics)
        finally:
            workers.update_actor = update_actor
        self._update_intervals.append((start, time.time()))
        return batch

    # ------------------------------------------------------------------ metrics

    def _compute_metrics(self, batch: KVBatchMeta, metrics, timing_raw, global_steps, epoch):
        super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)
        from verl_asyncweb.trainer.episode_metrics import drain_episode_metrics

        tags = [tag for tag in batch.tags if not tag.get("is_padding", False)]
        # Trajectories this update trained on (the useful throughput; finished ones are asyncweb/trajectories).
        metrics[names.TRAINED_TRAJECTORIES] = float(count_real_trajectories(batch.keys, batch.tags))
        lags = np.array([global_steps - 1 - int(tag.get("min_global_steps") or 0) for tag in tags], dtype=float)
        if len(lags):
            metrics[names.POLICY_LAG_MEAN] = float(lags.mean())
            metrics[names.POLICY_LAG_MAX] = float(lags.max())
        metrics.update({**self._pixel_stats.metrics(), "timing_s/asyncweb/pixels": self._pixel_seconds})
        self._pixel_stats, self._pixel_seconds = PixelStats(), 0.0
        metrics[names.OPTIMIZER_STEPS] = float(self._optimizer_steps)
        self._optimizer_steps = 0
        watchdog = getattr(self.agent_loop_manager, "watchdog", None)
        if watchdog is not None:
            metrics.update(watchdog.stats())
        if self._attempt_from_step is None:  # an attempt's first logged step is the one after its checkpoint
            self._attempt_from_step = global_steps - 1
        metrics.update(drain_episode_metrics(self, global_steps))
        metrics.update(self._store_metrics())
        step_s, wait_s = timing_raw.get("step", 0.0), timing_raw.get("gen", 0.0)
        if step_s > 0:
            metrics[names.TRAINER_IDLE_FRAC] = wait_s / step_s
        metrics[names.WALL_S] = self._wall_s(global_steps)

    def _store_metrics(self) -> dict[str, float]:
        """The screenshot store's occupancy, and the trajectories the sweep released since the previous step."""
        try:
            stats = self.screenshots.stats()
        except (ray.exceptions.RayError, TimeoutError) as exc:
            logger.warning("could not read the screenshot store's stats: %s", exc)
            return {}
        return {
            names.SCREENSHOTS_STORE_BYTES_HELD: float(stats["bytes_held"]),
            names.SCREENSHOTS_STORE_PEAK_BYTES: float(stats["peak_bytes_held"]),
            names.SCREENSHOTS_STORE_BUDGET_BYTES: float(stats["budget_bytes"]),
            names.SCREENSHOTS_STORE_PUT_TIMEOUTS_TOTAL: float(stats["put_timeouts"]),
            names.SCREENSHOTS_RELEASED_TRAJECTORIES: float(self._sweeper.take_released() if self._sweeper else 0),
        }

    def _get_n_gpus_for_throughput(self) -> int:
        """verl divides ``perf/throughput`` by the trainer's and the standalone rollout's GPUs; the ``hf`` rollout
        server runs on CPU and holds none (:mod:`verl_asyncweb.backends.hf_replica`)."""
        from verl_asyncweb.backends.hf_replica import REPLICA_NAME as HF_REPLICA_NAME

        if self.config.actor_rollout_ref.rollout.name == HF_REPLICA_NAME:
            return self.resource_pool_manager.get_n_gpus()
        return super()._get_n_gpus_for_throughput()

    def _wall_s(self, global_steps: int) -> float:
        """Training wall time, carried over a resume: a resumed attempt goes on from the wall time the earlier
        attempts logged at the step it resumed from (the time between the attempts is not counted)."""
        if self._resumed_wall_s is None:
            from pathlib import Path

            from verl_asyncweb.run_folder import RunFolder

            earlier = RunFolder(Path(self.config.trainer.default_local_dir)).read_metrics()
            self._resumed_wall_s = float(earlier.get(global_steps - 1, {}).get(names.WALL_S, 0.0))
        return self._resumed_wall_s + time.time() - self._started_at


def optimizer_steps(update_output) -> int:
    """Optimizer steps in the output of verl's ``update_actor``: its metrics list one gradient norm per step."""
    grad_norms = update_output["metrics"]["grad_norm"]
    return len(grad_norms) if isinstance(grad_norms, list) else 1


def _start_in_background(call: Callable[[], object], name: str) -> Future:
    """Run ``call`` in a daemon thread (a hung call cannot hold the process at exit); its future has the result."""
    future: Future = Future()

    def run() -> None:
        try:
            future.set_result(call())
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits for the future
            future.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future
