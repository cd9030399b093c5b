"""CPU weight sync: a verl checkpoint engine that moves the trainer's full state dict through Ray's object store.

verl's separate-async trainer refuses the colocated ``naive`` engine and its ``nccl`` engine needs CUDA. This
engine needs neither: every trainer rank drains the parameter generator (FSDP gathers full tensors
collectively), rank 0 puts the state dict into the object store and publishes the reference, tagged with the
weight version, in a small mailbox actor; each rollout worker fetches the newest version and hands the tensors to
its server adapter. For the tiny CPU model a sync takes ~0.1 s.

A tensor larger than verl's transfer bucket (``update_weights_bucket_megabytes``) is handed to verl's vLLM
adapter on the rollout worker's device where the platform has CUDA IPC: verl's ``BucketedWeightSender`` sends
such a tensor on its own, by its IPC handle, and the handle of a CPU tensor is a file descriptor that the vLLM
worker's ``rebuild_ipc`` cannot rebuild (it indexes the handle's 7th field: an IndexError in the vLLM worker
while the sender waits for its reply forever). Without IPC (the cpu platform's shared memory) verl refuses such
a tensor; ``verl_asyncweb.main`` checks the bucket before anything starts (``backends.vllm_cpu``).
"""

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator, Generator
from typing import Any

import ray
import torch
from verl.checkpoint_engine.base import CheckpointEngine, CheckpointEngineRegistry
from verl.utils.device import get_device_name, is_support_ipc
from verl.workers.rollout.utils import ensure_async_iterator

from verl_asyncweb.backends.weight_mailbox import WeightMailbox

logger = logging.getLogger(__name__)

BACKEND_NAME = "ray_object_store"
FETCH_TIMEOUT_S = 600.0


@CheckpointEngineRegistry.register(BACKEND_NAME)
class RayObjectStoreCheckpointEngine(CheckpointEngine):
    """Checkpoint engine for CPU clusters; see the module docstring.

    Args:
        bucket_size: verl's transfer bucket in bytes; larger tensors are handed over on the device (module
            docstring).
        is_master: True on trainer rank 0, the only rank that publishes.
    """

    def __init__(self, bucket_size: int = 0, is_master: bool = False, **kwargs: Any) -> None:
        self.bucket_size = bucket_size
        self.is_master = is_master
        self._mailbox_name: str | None = None
        self._mailbox = None
        self.last_sync_bytes = 0

    def prepare(self) -> dict[str, Any]:
        if self.is_master and self._mailbox is None:
            self._mailbox_name = f"asyncweb_weight_mailbox_{uuid.uuid4().hex[:12]}"
            self._mailbox = WeightMailbox.options(name=self._mailbox_name).remote()
        return {"mailbox": self._mailbox_name if self.is_master else None}

    @classmethod
    def build_topology(
        cls, actor_wg_world_size: int, rollout_world_size: int, metadata: list[dict]
    ) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
        names = [meta["mailbox"] for meta in metadata if meta.get("mailbox")]
        assert len(names) == 1, f"exactly one trainer rank must publish weights, got mailboxes {names}"
        return {"mailbox": names * actor_wg_world_size}, {"mailbox": names * rollout_world_size}

    def init_process_group(self, mailbox: str) -> None:
        # Resolve the named actor once and keep the handle (re-resolving named actors repeatedly is fragile).
        if self._mailbox is None or self._mailbox_name != mailbox:
            self._mailbox_name, self._mailbox = mailbox, ray.get_actor(mailbox)

    def finalize(self) -> None:
        return None

    async def send_weights(
        self, weights: Generator[tuple[str, torch.Tensor], None, None], global_steps: int | None = None
    ) -> dict[str, float]:
        state_dict: dict[str, torch.Tensor] = {}
        async for name, tensor in ensure_async_iterator(weights):
            # Every rank drains the generator: FSDP gathers full tensors collectively.
            if self.is_master:
                state_dict[name] = tensor.detach().to("cpu", copy=True).contiguous()
        if not self.is_master:
            return {}
        self.last_sync_bytes = sum(t.numel() * t.element_size() for t in state_dict.values())
        await self._mailbox.publish.remote(global_steps, [ray.put(state_dict)])
        return {"weight_sync/bytes": float(self.last_sync_bytes)}

    async def receive_weights(self, global_steps: int | None = None) -> AsyncGenerator[tuple[str, torch.Tensor], None]:
        _, refs = await asyncio.wait_for(self._mailbox.fetch.remote(global_steps), timeout=FETCH_TIMEOUT_S)
        state_dict = await refs[0]
        on_device = self.bucket_size > 0 and is_support_ipc()
        for name, tensor in state_dict.items():
            if on_device and tensor.nbytes > self.bucket_size:
                tensor = tensor.to(get_device_name())
            yield name, tensor
