"""CPU weight sync: after a training step the rollout server computes exactly the trainer's logits."""

import asyncio

import pytest
import torch
from transformers import AutoModelForImageTextToText, AutoTokenizer

from verl_asyncweb.backends.hf_replica import HFServerAdapter
from verl_asyncweb.backends.hf_server import HFRolloutServer
from verl_asyncweb.backends.weight_sync import RayObjectStoreCheckpointEngine

pytestmark = pytest.mark.ray


def _train_one_step(model, input_ids: torch.Tensor) -> None:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loss = model(input_ids=input_ids, labels=input_ids).loss
    loss.backward()
    optimizer.step()
    model.eval()


def _connect(sender, receiver) -> None:
    metadata = [sender.prepare(), receiver.prepare()]
    actor_kwargs, rollout_kwargs = RayObjectStoreCheckpointEngine.build_topology(1, 1, metadata)
    sender.init_process_group(**{key: values[0] for key, values in actor_kwargs.items()})
    receiver.init_process_group(**{key: values[0] for key, values in rollout_kwargs.items()})


def test_weight_sync_makes_server_logits_equal_trainer_logits(ray_cluster, tiny_model_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    prompt_ids = tokenizer.encode("Click the button labelled Submit and then answer with the page title.")
    trainer_model = AutoModelForImageTextToText.from_pretrained(tiny_model_path, dtype=torch.float32)
    # The adapter and the server share a process, as in the replica's HFRolloutWorker.
    server = HFRolloutServer(str(tiny_model_path), 8, 1024, 0)
    adapter = HFServerAdapter(config=None, model_config=None, replica_rank=0)
    sender, receiver = RayObjectStoreCheckpointEngine(is_master=True), RayObjectStoreCheckpointEngine()
    _connect(sender, receiver)

    async def sync():
        state = trainer_model.state_dict().items()
        await asyncio.gather(
            sender.send_weights(iter(state), global_steps=1),
            adapter.update_weights(receiver.receive_weights(global_steps=1), global_steps=1),
        )

    with pytest.raises(RuntimeError, match="before a server was attached"):
        asyncio.run(adapter.update_weights(iter(trainer_model.state_dict().items()), global_steps=0))
    adapter.attach(server)
    before = asyncio.run(server.next_token_logits(prompt_ids))
    _train_one_step(trainer_model, torch.tensor([prompt_ids]))
    with torch.no_grad():
        trainer_logits = trainer_model(input_ids=torch.tensor([prompt_ids])).logits[0, -1].float()
    assert (trainer_logits - before).abs().max() > 1e-3, "the training step must change the logits"

    asyncio.run(sync())
    after = asyncio.run(server.next_token_logits(prompt_ids))
    torch.testing.assert_close(after, trainer_logits, atol=1e-5, rtol=0)
    assert asyncio.run(server.get_weight_version()) == 1
    assert sender.last_sync_bytes == sum(t.numel() * t.element_size() for t in trainer_model.state_dict().values())


def test_build_topology_requires_exactly_one_publisher():
    with pytest.raises(AssertionError, match="exactly one trainer rank"):
        RayObjectStoreCheckpointEngine.build_topology(1, 1, [{"mailbox": None}, {"mailbox": None}])


@pytest.mark.parametrize("ipc", [True, False])
def test_tensors_over_the_bucket_reach_the_adapter_on_the_device_where_ipc_exists(ray_cluster, monkeypatch, ipc):
    import verl_asyncweb.backends.weight_sync as weight_sync

    # verl's bucketed sender sends a tensor over its bucket by its own IPC handle, which for a CPU tensor the vLLM
    # worker cannot rebuild (tests/vllm_cpu/test_vllm_compat.py shows the IndexError). "meta" stands in for the rollout
    # worker's GPU: a device other than the CPU that this machine has.
    monkeypatch.setattr(weight_sync, "is_support_ipc", lambda: ipc)
    monkeypatch.setattr(weight_sync, "get_device_name", lambda: "meta")
    sender = RayObjectStoreCheckpointEngine(bucket_size=64, is_master=True)
    receiver = RayObjectStoreCheckpointEngine(bucket_size=64)
    _connect(sender, receiver)
    weights = {"small": torch.ones(16), "large": torch.ones(17)}  # 64 and 68 bytes in fp32

    async def sync():
        _, received = await asyncio.gather(
            sender.send_weights(iter(weights.items()), global_steps=1),
            _collect(receiver.receive_weights(global_steps=1)),
        )
        return received

    devices = {name: tensor.device.type for name, tensor in asyncio.run(sync())}
    assert devices == {"small": "cpu", "large": "meta" if ipc else "cpu"}


async def _collect(weights):
    return [item async for item in weights]
