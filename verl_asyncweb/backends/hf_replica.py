"""The ``hf`` rollout replica: verl's replica contract around :class:`~.hf_server.HFRolloutServer`.

verl creates replicas by name from ``actor_rollout_ref.rollout.name``. A vLLM replica is verl's checkpoint-engine
worker next to a separate server process; an ``hf`` replica is one process, :class:`HFRolloutWorker`, that is both:
verl's checkpoint-engine worker (it receives the synced weights) and the server (generation requests are its
actor methods). The weights go from the checkpoint engine into the model in place, without a second trip through
Ray's object store, and the replica costs one process that imports torch and verl instead of two.

The server computes on CPU, so its process asks Ray for a CPU and never for an accelerator: verl's standalone
replicas reserve one GPU per rank, which on a GPU cluster would hold a GPU the server never uses (and on one GPU
leave none for the trainer). ``rollout.nnodes x rollout.n_gpus_per_node`` counts hf server processes.
"""

import logging
from collections.abc import AsyncIterator, Generator
from typing import Any

import ray
import torch
from verl.checkpoint_engine.base import CheckpointEngineWorker
from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup
from verl.utils.device import get_device_name
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutMode, RolloutReplica, RolloutReplicaRegistry
from verl.workers.rollout.utils import ensure_async_iterator

from .hf_server import HFRolloutServer

logger = logging.getLogger(__name__)

REPLICA_NAME = "hf"


class HFServerAdapter(BaseRollout):
    """verl's server adapter of the checkpoint-engine worker: copies each received state dict into the server of
    the same process (:meth:`attach`)."""

    def __init__(self, config, model_config, replica_rank: int, **kwargs: Any) -> None:
        super().__init__(config=config, model_config=model_config, device_mesh=None)
        self.replica_rank = replica_rank
        self.is_leader_rank = True
        self._server: HFRolloutServer | None = None

    def attach(self, server: HFRolloutServer) -> None:
        self._server = server

    async def update_weights(
        self,
        weights: Generator[tuple[str, torch.Tensor], None, None] | AsyncIterator,
        wire_format: str = "named_tensors",
        global_steps: int | None = None,
        **kwargs: Any,
    ) -> None:
        if wire_format != "named_tensors":
            raise ValueError(f"the hf rollout server accepts wire_format 'named_tensors' only, got {wire_format!r}")
        if self._server is None:
            raise RuntimeError("the hf server adapter received weights before a server was attached to it")
        state_dict = {name: tensor async for name, tensor in ensure_async_iterator(weights)}
        await self._server.load_weights(state_dict, global_steps)

    async def resume(self, tags: list[str]) -> None:
        return None

    async def release(self) -> None:
        return None


class HFRolloutWorker(CheckpointEngineWorker, HFRolloutServer):
    """verl's checkpoint-engine worker that is also the replica's ``hf`` server (see the module docstring)."""

    def __init__(self, rollout_config, model_config, server_adapter: HFServerAdapter, server_kwargs: dict) -> None:
        HFRolloutServer.__init__(self, **server_kwargs)
        CheckpointEngineWorker.__init__(self, rollout_config, model_config, server_adapter=server_adapter)
        server_adapter.attach(self)


class HFReplica(RolloutReplica):
    """One ``hf`` server per replica (``tensor_model_parallel_size`` must be 1), in a CPU-only process."""

    async def init_standalone(self) -> None:
        """verl's standalone start-up with a pool of CPU bundles: the server never takes an accelerator (nor sees
        one: Ray leaves ``CUDA_VISIBLE_DEVICES`` as it is for actors without GPUs)."""
        self._check_world_size()
        self.rollout_mode = RolloutMode.STANDALONE
        role = "reward_" if self.is_reward_model else "teacher_" if self.is_teacher_model else ""
        suffix = f"{self.replica_rank}{self.name_suffix}"
        self.resource_pool = RayResourcePool(
            process_on_nodes=[self.gpus_per_replica_node] * self.nnodes,
            use_gpu=False,
            max_colocate_count=1,
            name_prefix=f"rollout_pool_{role}{suffix}",
        )
        worker_group = RayWorkerGroup(
            resource_pool=self.resource_pool,
            ray_cls_with_init=self.get_ray_class_with_init_args(),
            bin_pack=False,
            name_prefix=f"rollout_{role}standalone_{suffix}",
            use_gpu=False,
            device_name=get_device_name(),
            worker_env={"CUDA_VISIBLE_DEVICES": ""},
        )
        self.workers = worker_group.workers
        await self.launch_servers()

    def get_ray_class_with_init_args(self) -> RayClassWithInitArgs:
        # verl builds the worker's server adapter from a private name table unless one is passed in; passing
        # ours keeps the plugin on public API.
        adapter = HFServerAdapter(config=self.config, model_config=self.model_config, replica_rank=self.replica_rank)
        max_model_len = self.config.max_model_len or (self.config.prompt_length + self.config.response_length)
        return RayClassWithInitArgs(
            cls=ray.remote(HFRolloutWorker),
            rollout_config=self.config,
            model_config=self.model_config,
            server_adapter=adapter,
            server_kwargs={
                "model_path": _local_model_path(self.model_config),
                "response_length": self.config.response_length,
                "max_model_len": max_model_len,
                # verl's vLLM and SGLang servers seed their sampling the same way.
                "seed": self.config.seed + self.replica_rank,
            },
        )

    def _check_world_size(self) -> None:
        if self.world_size != 1:
            raise ValueError(
                "actor_rollout_ref.rollout.tensor_model_parallel_size * data_parallel_size * "
                f"pipeline_model_parallel_size must be 1 for the hf rollout server, got {self.world_size}"
            )

    async def launch_servers(self) -> None:
        self._check_world_size()
        self.servers = list(self.workers)
        self._server_handle = self.workers[0]
        self._server_address = f"hf://replica_{self.replica_rank}{self.name_suffix}"
        logger.info("hf rollout replica %d serving %s", self.replica_rank, _local_model_path(self.model_config))


def _local_model_path(model_config) -> str:
    # verl hands replicas the model section as a DictConfig (no resolved ``local_path``) or as HFModelConfig.
    return getattr(model_config, "local_path", None) or model_config.path


def load_hf_replica() -> type[HFReplica]:
    return HFReplica


RolloutReplicaRegistry.register(REPLICA_NAME, load_hf_replica)
