"""The ``hf`` rollout replica: verl's replica contract around :class:`~.hf_server.HFRolloutServer`.

verl creates replicas by name from ``actor_rollout_ref.rollout.name``; this one launches one HF server actor per
replica next to verl's checkpoint-engine worker, whose server adapter feeds synced weights into the server.
"""

import logging
from collections.abc import AsyncIterator, Generator
from typing import Any

import ray
import torch
from verl.single_controller.ray import RayClassWithInitArgs
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, RolloutReplicaRegistry
from verl.workers.rollout.utils import ensure_async_iterator

from .hf_server import HFRolloutServer

logger = logging.getLogger(__name__)

REPLICA_NAME = "hf"


def server_actor_name(replica_rank: int, name_suffix: str = "") -> str:
    return f"asyncweb_hf_server_{replica_rank}{name_suffix}"


class HFServerAdapter(BaseRollout):
    """Lives in verl's checkpoint-engine worker; forwards each received state dict to the replica's server."""

    def __init__(self, config, model_config, replica_rank: int, server_name: str, **kwargs: Any) -> None:
        super().__init__(config=config, model_config=model_config, device_mesh=None)
        self.replica_rank = replica_rank
        self.is_leader_rank = True
        self.server_name = server_name
        self._server = None

    def _server_handle(self):
        if self._server is None:
            self._server = ray.get_actor(self.server_name)
        return self._server

    async def update_weights(
        self,
        weights: Generator[tuple[str, torch.Tensor], None, None] | AsyncIterator,
        wire_format: str = "named_tensors",
        global_steps: int | None = None,
        **kwargs: Any,
    ) -> None:
        if wire_format != "named_tensors":
            raise ValueError(f"the hf rollout server accepts wire_format 'named_tensors' only, got {wire_format!r}")
        state_dict = {name: tensor async for name, tensor in ensure_async_iterator(weights)}
        await self._server_handle().load_weights.remote(state_dict, global_steps)

    async def resume(self, tags: list[str]) -> None:
        return None

    async def release(self) -> None:
        return None


class HFReplica(RolloutReplica):
    """One ``hf`` server per replica (``tensor_model_parallel_size`` must be 1 on CPU)."""

    def get_ray_class_with_init_args(self) -> RayClassWithInitArgs:
        from verl.checkpoint_engine.base import CheckpointEngineWorker

        # verl builds the worker's server adapter from a private name table unless one is passed in; passing
        # ours keeps the plugin on public API.
        adapter = HFServerAdapter(
            config=self.config,
            model_config=self.model_config,
            replica_rank=self.replica_rank,
            server_name=server_actor_name(self.replica_rank, self.name_suffix),
        )
        return RayClassWithInitArgs(
            cls=ray.remote(CheckpointEngineWorker),
            rollout_config=self.config,
            model_config=self.model_config,
            server_adapter=adapter,
        )

    async def launch_servers(self) -> None:
        if self.world_size != 1:
            raise ValueError(
                "actor_rollout_ref.rollout.tensor_model_parallel_size * data_parallel_size * "
                f"pipeline_model_parallel_size must be 1 for the hf rollout server, got {self.world_size}"
            )
        name = server_actor_name(self.replica_rank, self.name_suffix)
        node_id = await self.workers[0].__ray_call__.remote(lambda worker: ray.get_runtime_context().get_node_id())
        prompt_length = self.config.prompt_length
        max_model_len = self.config.max_model_len or (prompt_length + self.config.response_length)
        server = (
            ray.remote(HFRolloutServer)
            .options(
                name=name,
                num_cpus=0,
                max_concurrency=self.max_concurrency,
                scheduling_strategy=ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                    node_id=node_id, soft=False
                ),
            )
            .remote(
                model_path=_local_model_path(self.model_config),
                response_length=self.config.response_length,
                max_model_len=max_model_len,
                seed=self.replica_rank,
            )
        )
        await server.get_weight_version.remote()
        self.servers = [server]
        self._server_handle = server
        self._server_address = f"hf://{name}"
        logger.info("hf rollout replica %d serving %s", self.replica_rank, _local_model_path(self.model_config))


def _local_model_path(model_config) -> str:
    # verl hands replicas the model section as a DictConfig (no resolved ``local_path``) or as HFModelConfig.
    return getattr(model_config, "local_path", None) or model_config.path


def load_hf_replica() -> type[HFReplica]:
    return HFReplica


RolloutReplicaRegistry.register(REPLICA_NAME, load_hf_replica)
