"""The next local update's pixels, built while the current one trains.

The pixel rebuild (:mod:`verl_asyncweb.trainer.pixels`) sits on the critical path of every local update, before
pi_prox: 8.9 s per 640 step-samples of 1280x720 on a 16-core node. Right after a local update's batch is sampled,
:func:`rows_sampled_next` reads verl's replay buffer the way its next ``sample`` will choose (the oldest finished
groups that are neither stale nor filtered) and :class:`PixelRebuild` hands those rows to the builder pool without
waiting; the next local update then waits only for what is still building and builds only what was not foreseen
(a group that finished meanwhile, verl's padding rows). In sync mode the trainer hands each group of the cycle
over as it finishes, while the slower episodes still play (``AsyncWebTrainer.prepare_step``), so only the last
groups to finish are built after the rollout; in async mode every local update can find its groups built.

A row is built once: its ``multi_modal_inputs`` in TransferQueue then hold pixels, which a second build would
count as the rollout's payload. Builds ahead finish before the replay buffer samples again (``settle``), so none
writes into a row that the buffer evicts and clears meanwhile. Before a checkpoint (verl saves TransferQueue's
rows with it) the rows built ahead and not yet sampled are unbuilt, so checkpoints never hold pixels.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

import ray
import torch
from transfer_queue import KVBatchMeta

from verl_asyncweb.config.build import plain_dict
from verl_asyncweb.trainer.checkpoint_rows import drop_pixels
from verl_asyncweb.trainer.config import PixelRebuildConfig
from verl_asyncweb.trainer.pixels import PixelStats, batch_stats, build_pixel_chunk, start_pixel_builders

logger = logging.getLogger(__name__)

AHEAD_STEPS_KEPT = 8
"""Rows built ahead and not sampled within this many training steps are forgotten (their group was evicted; the
staleness bound evicts a group a few steps after it finished)."""


@dataclass
class _Ahead:
    """Rows handed to the builders ahead of their sample: key -> (the chunk's result, the row's index in it, the
    training step it was handed over at)."""

    rows: dict[str, tuple[ray.ObjectRef, int, int]] = field(default_factory=dict)
    partition_id: str = "train"


class PixelRebuild:
    """The trainer's pixel rebuild (``asyncweb.pixels``) with the next local update's rows built ahead.

    Args:
        config: ``asyncweb.pixels``; building ahead needs a builder pool (``workers`` > 0).
        processor: the model's processor.
        client: the screenshot store's client.
        mm_kwargs: ``data.mm_processor_kwargs``, the image-processor arguments the rollout used.
        dtype: the pixels' dtype (:func:`~verl_asyncweb.trainer.pixels.pixel_dtype`).
    """

    def __init__(
        self, config: PixelRebuildConfig, processor, client, mm_kwargs: dict | None, dtype: torch.dtype = torch.float32
    ) -> None:
        self.config = config
        self.processor = processor
        self.client = client
        self.mm_kwargs = plain_dict(mm_kwargs or {})
        self.dtype = dtype
        self.builders = start_pixel_builders(config, processor, client, self.mm_kwargs, dtype)
        self._ahead = _Ahead()

    def attach(self, batch: KVBatchMeta) -> PixelStats:
        """Pixels for every row of ``batch`` in TransferQueue (those built ahead counted as such); returns the
        batch's counts."""
        keys, tags = list(batch.keys), list(batch.tags or []) or [{}] * len(batch.keys)
        ahead = {key: self._ahead.rows.pop(key) for key in keys if key in self._ahead.rows}
        missing = [(key, tag) for key, tag in zip(keys, tags, strict=True) if key not in ahead]
        chunks = self._chunks(missing)
        if self.builders:
            pending = [self._submit(index, chunk, batch.partition_id) for index, chunk in enumerate(chunks)]
            counts = ray.get(pending)
        else:
            counts = [self._build_here(chunk, batch.partition_id) for chunk in chunks]
        rows = {}
        for chunk, part in zip(chunks, counts, strict=True):
            rows.update(zip((key for key, _ in chunk), part, strict=True))
        refs = list({ref for ref, _, _ in ahead.values()})
        results = dict(zip(refs, ray.get(refs), strict=True))
        rows.update({key: replace(results[ref][index], built_ahead=1) for key, (ref, index, _) in ahead.items()})
        return batch_stats([rows[key] for key in keys], keys, tags)

    def build_ahead(self, rows: KVBatchMeta | None, step: int) -> int:
        """Hand ``rows`` (at training step ``step``) to the builder pool and return at once; rows handed over
        before are not handed again. Returns how many rows were handed over."""
        self._ahead.rows = {
            key: entry for key, entry in self._ahead.rows.items() if step - entry[2] <= AHEAD_STEPS_KEPT
        }
        if not self.builders or rows is None:
            return 0
        self._ahead.partition_id = rows.partition_id
        fresh = [(key, tag) for key, tag in zip(rows.keys, rows.tags, strict=True) if key not in self._ahead.rows]
        for index, chunk in enumerate(self._chunks(fresh)):
            ref = self._submit(index, chunk, rows.partition_id)
            for position, (key, _) in enumerate(chunk):
                self._ahead.rows[key] = (ref, position, step)
        return len(fresh)

    def settle(self) -> None:
        """Wait for every build ahead to finish (before the replay buffer may evict and clear rows)."""
        refs = list({ref for ref, _, _ in self._ahead.rows.values()})
        if refs:
            ray.wait(refs, num_returns=len(refs))

    def unbuild_ahead(self, live_rows: set[str]) -> int:
        """Take the pixels of rows built ahead and not yet sampled out of TransferQueue again (before a checkpoint,
        which would otherwise save them); ``live_rows`` are the rows the replay buffer still holds (an evicted row
        is gone, and a write would create it again). Returns how many rows were unbuilt."""
        self.settle()
        keys = [key for key in self._ahead.rows if key in live_rows]
        self._ahead.rows.clear()
        drop_pixels(keys, self._ahead.partition_id)
        return len(keys)

    def _chunks(self, rows: list[tuple[str, dict]]) -> list[list[tuple[str, dict]]]:
        size = self.config.chunk_samples
        return [rows[start : start + size] for start in range(0, len(rows), size)]

    def _submit(self, index: int, chunk: list[tuple[str, dict]], partition_id: str) -> ray.ObjectRef:
        builder = self.builders[index % len(self.builders)]
        return builder.build.remote([key for key, _ in chunk], partition_id, [tag for _, tag in chunk])

    def _build_here(self, chunk: list[tuple[str, dict]], partition_id: str) -> list[PixelStats]:
        keys, tags = [key for key, _ in chunk], [tag for _, tag in chunk]
        return build_pixel_chunk(keys, partition_id, tags, self.processor, self.client, self.mm_kwargs, self.dtype)


def rows_sampled_next(
    replay_buffer, partition_id: str, global_steps: int, groups: int, taken: KVBatchMeta
) -> KVBatchMeta | None:
    """The rows verl's replay buffer would hand the next local update if it sampled now: the ``groups`` oldest
    sampleable groups at ``global_steps`` other than those of ``taken`` (``ReplayBuffer.sample`` without its
    wait, evictions and clears). ``None`` when no group is sampleable."""
    replay_buffer._sync_metadata_from_transfer_queue()
    reasons = replay_buffer._terminal_eviction_reasons(global_steps, partition_id)
    taken_groups = {key.split("_")[0] for key in taken.keys}
    sampleable = replay_buffer._sampleable_terminal_keys(partition_id, reasons) - taken_groups
    if not sampleable:
        return None
    chosen, rows, _ = replay_buffer._select_prompt_uids(partition_id, sampleable, groups)
    chosen = set(chosen)
    selected = [(key, tag) for key, tag in rows.items() if key.split("_")[0] in chosen]
    if not selected:
        return None
    return KVBatchMeta(partition_id=partition_id, keys=[key for key, _ in selected], tags=[tag for _, tag in selected])
