"""``gpu_check_vllm_1gpu``'s weight sync: our ``ray_object_store`` engine feeding verl's own vLLM server adapter.

The rollout side is what verl's ``CheckpointEngineWorker.update_weights`` runs, in a Ray actor: the engine's
``receive_weights`` handed to verl's real ``vllm_rollout.ServerAdapter.update_weights``, which asks the vLLM server
to run ``update_weights_from_ipc`` and streams the tensors to it in buckets over ZMQ (verl's
``BucketedWeightSender``; shared memory here, CUDA IPC on a GPU). Only vLLM is a stand-in, in a second actor named
as the adapter looks the server up: its ``collective_rpc`` receives with verl's own ``BucketedWeightReceiver`` and
loads each bucket through ``model.load_weights`` (vLLM's model contract, as verl's worker extension calls it), then
``clear_kv_cache`` and ``set_global_steps``. vLLM cannot be installed here; two ``sys.modules`` entries stand in
for its import checks.
"""

import asyncio
import os
import sys
import types

import pytest
import ray
import ray.cloudpickle
import torch
from omegaconf import OmegaConf

from verl_asyncweb.backends.weight_sync import RayObjectStoreCheckpointEngine

pytestmark = pytest.mark.ray
# The actors below travel to their workers by value: Ray's workers cannot import a test module.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _without_vllm_import_checks() -> None:
    """Let verl's vLLM adapter module import without vLLM: its package ``__init__`` and ``verl.third_party.vllm``
    only check vLLM's version (the adapter and the bucket transfer themselves import no vLLM)."""
    import verl.workers.rollout as rollout_package

    package = types.ModuleType("verl.workers.rollout.vllm_rollout")
    package.__path__ = [os.path.join(os.path.dirname(rollout_package.__file__), "vllm_rollout")]
    third_party = types.ModuleType("verl.third_party.vllm")
    third_party.VLLM_SLEEP_LEVEL = 2
    sys.modules.setdefault(package.__name__, package)
    sys.modules.setdefault(third_party.__name__, third_party)
    # The package __init__'s first line, before its version check.
    from verl.workers.rollout.vllm_rollout.vllm_rollout import ServerAdapter

    package.ServerAdapter = ServerAdapter


class StandInVllmModel:
    """vLLM's model contract as verl's worker extension uses it: ``load_weights`` copies each ``(name, tensor)``
    into the parameter of that (checkpoint) name and returns the names loaded. The tensors are views into the
    transfer bucket, which the next bucket overwrites, so they are copied, as vLLM's weight loaders do."""

    def __init__(self, path: str) -> None:
        from transformers import AutoModelForImageTextToText

        self.model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32).eval()
        self.tensors = self.model.state_dict(keep_vars=True)

    def load_weights(self, weights) -> set[str]:
        loaded = set()
        with torch.no_grad():
            for name, tensor in weights:
                target = self.tensors[name]
                assert target.shape == tensor.shape, f"{name}: {tuple(target.shape)} != {tuple(tensor.shape)}"
                target.copy_(tensor)
                loaded.add(name)
        return loaded


@ray.remote(num_cpus=0)
class StandInVllmServer:
    """verl's ``vLLMHttpServer`` methods the adapter calls, over a :class:`StandInVllmModel`."""

    def __init__(self, path: str, replica_rank: int) -> None:
        _without_vllm_import_checks()
        self.model = StandInVllmModel(path)
        self.replica_rank = replica_rank
        self.calls: list[str] = []
        self.buckets = 0
        self.loaded: set[str] = set()
        self.global_steps = None

    async def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
        self.calls.append(f"collective_rpc:{method}")
        assert method == "update_weights_from_ipc", method
        await asyncio.to_thread(self._update_weights_from_ipc, **(kwargs or {}))

    def _update_weights_from_ipc(self, use_shm: bool = False, **kwargs) -> None:
        """verl's ``vLLMColocateWorkerExtension.update_weights_from_ipc`` for full weights: its receiver, its ZMQ
        address (``_get_zmq_handle``: job, replica, local rank 0), one ``load_weights`` per bucket."""
        from verl.workers.rollout.vllm_rollout.bucketed_weight_transfer import BucketedWeightReceiver

        job_id = ray.get_runtime_context().get_job_id()
        handle = f"ipc:///tmp/rl-colocate-zmq-{job_id}-replica-{self.replica_rank}-rank-0.sock"
        receiver = BucketedWeightReceiver(zmq_handle=handle, device=torch.device("cpu"), use_shm=use_shm)

        def on_bucket(weights, is_last: bool) -> None:
            self.buckets += 1
            self.loaded |= self.model.load_weights(weights)
            self.calls.append("load_weights")

        receiver.receive_weights(on_bucket_received=on_bucket)

    async def clear_kv_cache(self) -> None:
        self.calls.append("clear_kv_cache")

    async def set_global_steps(self, global_steps: int) -> None:
        self.calls.append(f"set_global_steps:{global_steps}")
        self.global_steps = global_steps

    def report(self) -> dict:
        report = {"calls": self.calls, "buckets": self.buckets, "loaded": sorted(self.loaded)}
        self.calls, self.buckets, self.loaded = [], 0, set()
        return report

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {name: tensor.detach().clone() for name, tensor in self.model.model.state_dict().items()}


@ray.remote(num_cpus=0)
class RolloutSide:
    """The process of verl's ``CheckpointEngineWorker`` for one vLLM replica: the engine from verl's registry and
    verl's vLLM server adapter (``RANK``/``RAY_LOCAL_WORLD_SIZE`` are what verl's worker group sets)."""

    def __init__(self, rollout_config: dict) -> None:
        os.environ.update(RANK="0", RAY_LOCAL_WORLD_SIZE="1")
        _without_vllm_import_checks()
        from verl.checkpoint_engine.base import CheckpointEngineRegistry
        from verl.utils.config import omega_conf_to_dataclass
        from verl.workers.rollout.base import get_rollout_class

        config = omega_conf_to_dataclass(OmegaConf.create(rollout_config))
        # As CheckpointEngineWorker.__init__ builds them.
        self.engine = CheckpointEngineRegistry.new(
            config.checkpoint_engine.backend, bucket_size=config.checkpoint_engine.update_weights_bucket_megabytes << 20
        )
        adapter_class = get_rollout_class(config.name, config.mode)
        self.adapter = adapter_class(config=config, model_config=None, device_mesh=None, replica_rank=0)
        self.adapter_class = f"{adapter_class.__module__}.{adapter_class.__name__}"

    def execute_checkpoint_engine(self, method: str, **kwargs):
        return getattr(self.engine, method)(**kwargs)

    async def update_weights(self, global_steps: int) -> None:
        # CheckpointEngineWorker.update_weights, line for line.
        weights = self.engine.receive_weights(global_steps=global_steps)
        await self.adapter.update_weights(
            weights, global_steps=global_steps, wire_format=getattr(self.engine, "wire_format", "named_tensors")
        )

    def describe(self) -> tuple[str, bool]:
        return self.adapter_class, self.adapter.use_shm


def _train_one_step(model, input_ids: torch.Tensor) -> None:
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model(input_ids=input_ids, labels=input_ids).loss.backward()
    optimizer.step()
    model.eval()


def test_every_sync_lands_the_trainers_weights_in_the_vllm_server(ray_cluster):
    from transformers import AutoModelForImageTextToText

    from verl_asyncweb.backends.tiny_model import build_tiny_model
    from verl_asyncweb.main import load_config

    path = str(build_tiny_model(size="qwen3-tiny"))
    # The recipe's rollout section as verl hands it to the rollout worker; a 1 MiB bucket makes the ~1 MB model
    # travel in several buckets (the recipe's 64 MiB would take one).
    cfg, _ = load_config(
        ["recipe=gpu_check_vllm_1gpu", "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes=1"]
    )
    rollout_config = OmegaConf.to_container(cfg.actor_rollout_ref.rollout, resolve=True)
    server = StandInVllmServer.options(name="vllm_server_0_0").remote(path, 0)
    rollout = RolloutSide.remote(rollout_config)
    adapter_class, use_shm = ray.get(rollout.describe.remote())
    assert adapter_class == "verl.workers.rollout.vllm_rollout.vllm_rollout.ServerAdapter"
    assert use_shm  # no CUDA IPC on CPU: verl's shared-memory path of the same sender and receiver

    sender = RayObjectStoreCheckpointEngine(is_master=True)
    metadata = [sender.prepare(), ray.get(rollout.execute_checkpoint_engine.remote("prepare"))]
    actor_kwargs, rollout_kwargs = RayObjectStoreCheckpointEngine.build_topology(1, 1, metadata)
    sender.init_process_group(**{key: values[0] for key, values in actor_kwargs.items()})
    ray.get(
        rollout.execute_checkpoint_engine.remote(
            "init_process_group", **{key: values[0] for key, values in rollout_kwargs.items()}
        )
    )

    trainer = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32)
    prompt = torch.tensor([[5, 17, 42, 99, 7, 300, 12, 64]])

    async def sync(step: int) -> None:
        both = asyncio.gather(
            sender.send_weights(iter(trainer.state_dict().items()), global_steps=step),
            rollout.update_weights.remote(step),
        )
        await asyncio.wait_for(both, timeout=120)

    for step in (1, 2):
        _train_one_step(trainer, prompt)
        before = ray.get(server.state_dict.remote())
        moved = max((before[name] - tensor).abs().max().item() for name, tensor in trainer.state_dict().items())
        assert moved > 1e-3, "the training step must move the weights the server holds"
        asyncio.run(sync(step))
        served = ray.get(server.state_dict.remote())
        for name, tensor in trainer.state_dict().items():
            assert torch.equal(served[name], tensor), f"step {step}: {name} differs after the sync"
        report = ray.get(server.report.remote())
        assert report["loaded"] == sorted(trainer.state_dict())  # every tensor arrived, under its own name
        assert report["buckets"] >= 2
        # verl's adapter: the server receives, then its caches are reset and the weights' version set.
        assert report["calls"] == [
            "collective_rpc:update_weights_from_ipc",
            *["load_weights"] * report["buckets"],
            "clear_kv_cache",
            f"set_global_steps:{step}",
        ]
    assert sender.last_sync_bytes == sum(t.numel() * t.element_size() for t in trainer.state_dict().values())
