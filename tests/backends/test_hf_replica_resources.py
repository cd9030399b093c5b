"""On a GPU cluster the hf rollout server takes a CPU, never a GPU, and the GPU check counts only what is reserved.

Runs in its own process: a Ray cluster that declares one GPU (Ray accepts the count without CUDA), on verl's default
platform (as on a GPU node), whose only GPU a trainer placement group holds.
"""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.ray

SCRIPT = r"""
import asyncio, os, sys, threading

import ray
from omegaconf import OmegaConf
from ray.util.placement_group import placement_group
from verl.workers.config import RolloutConfig

from verl_asyncweb.backends.hf_replica import HFReplica
from verl_asyncweb.main import SetupError, check_gpus, load_config

ray.init(address="local", num_cpus=4, num_gpus=1, include_dashboard=False, log_to_driver=False)
for recipe in ("gpu_check_1gpu", "gpu_check"):
    try:
        check_gpus(load_config([f"recipe={recipe}"])[0])
        print(recipe, "fits")
    except SetupError as error:
        print(recipe, "refused:", error)

trainer = placement_group([{"CPU": 1, "GPU": 1}])
ray.get(trainer.ready(), timeout=60)
model = OmegaConf.create({"_target_": "verl.workers.config.HFModelConfig", "path": sys.argv[1]})
config = RolloutConfig(name="hf", prompt_length=64, response_length=8, tensor_model_parallel_size=1)
replica = HFReplica(0, config, model, gpus_per_node=1)
# verl waits for the pool's placement group without a timeout: a replica that asks for the held GPU never returns.
starting = threading.Thread(target=asyncio.run, args=(replica.init_standalone(),), daemon=True)
starting.start()
starting.join(timeout=120)
if starting.is_alive():
    print("replica not started after 120 s", flush=True)
    os._exit(3)
print("bundles", replica.resource_pool.get_placement_groups()[0].bundle_specs)
print("free GPUs", ray.available_resources().get("GPU", 0))
output = ray.get(replica.workers[0].generate.remote([1, 2, 3], {"max_tokens": 4, "temperature": 1.0}, "r"), timeout=120)
print("generated", len(output.token_ids), output.stop_reason)
visible = replica.workers[0].__ray_call__.remote(lambda self: repr(os.environ.get("CUDA_VISIBLE_DEVICES")))
print("sees", ray.get(visible))
"""


def test_hf_replica_starts_beside_a_trainer_that_holds_the_only_gpu(tiny_model_path):
    env = {key: value for key, value in os.environ.items() if key not in ("VERL_PLATFORM", "RAY_ADDRESS")}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tiny_model_path)], capture_output=True, text=True, env=env, timeout=240
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr[-4000:]
    assert "gpu_check_1gpu fits" in out
    assert (
        "gpu_check refused: recipe 'gpu_check' needs 2 GPUs (trainer 1x1 + rollout 1x1) but the Ray cluster has 1"
        in out
    )
    assert "bundles [{'CPU': 1.0}]" in out
    assert "free GPUs 0" in out  # the trainer's, still held; the replica took none
    assert "generated 4 completed" in out
    assert "sees ''" in out  # CUDA_VISIBLE_DEVICES empty: the server cannot touch the trainer's GPU
