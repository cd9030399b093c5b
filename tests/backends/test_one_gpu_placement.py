"""``gpu_check_vllm_1gpu`` places verl's trainer pool and its standalone vLLM rollout pool on the same GPU.

Each test runs in its own process: a Ray node started as ``verl_asyncweb.main`` starts it from the recipe (its
``num_gpus`` and runtime environment; Ray accepts GPU slots without CUDA), verl's default platform (as on a GPU
node), the trainer's pool built as verl's ``trainer_base`` builds it and the rollout pool by verl's own
``RolloutReplica.init_standalone``. The stand-in replica's ``launch_servers`` reads each worker's device the way
``vLLMReplica.launch_servers`` does to pin its vLLM server (vLLM cannot be installed here).
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
from verl.single_controller.base import Worker
from verl.single_controller.ray import RayClassWithInitArgs, RayWorkerGroup, ResourcePoolManager
from verl.workers.rollout.replica import RolloutReplica

from verl_asyncweb.main import check_gpus, load_config

cfg, _ = load_config(["recipe=gpu_check_vllm_1gpu"])
ray_init = OmegaConf.to_container(cfg.ray_kwargs.ray_init, resolve=True)
env_vars = dict(ray_init["runtime_env"]["env_vars"])
if sys.argv[1] == "control":
    del env_vars["CUDA_VISIBLE_DEVICES"]  # two Ray GPU slots, each its own device id
# As main.start_ray: every variable the workers get, this process (and so the Ray node it starts) gets too.
os.environ.update(env_vars)
ray.init(address="local", num_cpus=6, num_gpus=ray_init["num_gpus"], include_dashboard=False, log_to_driver=False,
         runtime_env={"env_vars": env_vars})
check_gpus(cfg)
print("main's GPU check passes", flush=True)


class Probe(Worker):
    pass


def devices(self):
    return ray.get_runtime_context().get_accelerator_ids()["GPU"], os.environ.get("CUDA_VISIBLE_DEVICES")


# verl's trainer_base._init_resource_pool_mgr and _setup: one pool of trainer.n_gpus_per_node GPU bundles.
trainer_pools = ResourcePoolManager({"global_pool": [cfg.trainer.n_gpus_per_node] * cfg.trainer.nnodes}, mapping={})
trainer_pools.create_resource_pool()
trainer = RayWorkerGroup(resource_pool=trainer_pools.resource_pool_dict["global_pool"],
                         ray_cls_with_init=RayClassWithInitArgs(cls=ray.remote(Probe)), device_name="cuda")
print("trainer", ray.get(trainer.workers[0].__ray_call__.remote(devices)), flush=True)


class StandInReplica(RolloutReplica):
    def get_ray_class_with_init_args(self):
        return RayClassWithInitArgs(cls=ray.remote(Probe))

    async def launch_servers(self):
        # vLLMReplica.launch_servers: the server's CUDA_VISIBLE_DEVICES is its worker's accelerator id.
        self.server_devices = await asyncio.gather(*[
            w.__ray_call__.remote(lambda self: ray.get_runtime_context().get_accelerator_ids()["GPU"][0])
            for w in self.workers
        ])


rollout = cfg.actor_rollout_ref.rollout
replica = StandInReplica(0, rollout, cfg.actor_rollout_ref.model, gpus_per_node=rollout.n_gpus_per_node)
# verl waits for a pool's placement group without a timeout: a pool that cannot be placed never returns.
starting = threading.Thread(target=asyncio.run, args=(replica.init_standalone(),), daemon=True)
starting.start()
starting.join(timeout=180)
if starting.is_alive():
    print("rollout pool not placed after 180 s", flush=True)
    os._exit(3)
print("rollout worker", ray.get(replica.workers[0].__ray_call__.remote(devices)), flush=True)
print("vLLM server pinned to", replica.server_devices, flush=True)
print("free GPU slots", ray.available_resources().get("GPU", 0), flush=True)
cpu_only = ray.remote(num_cpus=0)(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
print("an actor without a GPU sees", repr(ray.get(cpu_only.remote())), flush=True)
"""


def _place(mode: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("VERL_PLATFORM", "RAY_ADDRESS", "CUDA_VISIBLE_DEVICES")}
    result = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, env=env, timeout=400)
    assert result.returncode == 0, result.stdout + result.stderr[-4000:]
    return result.stdout


def test_the_trainer_and_the_vllm_rollout_pool_share_the_one_device():
    out = _place("shared")
    assert "main's GPU check passes" in out  # 2 Ray GPU slots for trainer 1x1 + rollout 1x1
    assert "trainer (['0'], '0')" in out
    assert "rollout worker (['0'], '0')" in out  # slot 1 of the doubled list: device 0 again
    assert "vLLM server pinned to ['0']" in out
    assert "free GPU slots 0" in out  # each pool holds its own slot
    # Without a GPU an actor keeps the doubled list, which CUDA reads as no device.
    assert "an actor without a GPU sees '0,0'" in out


def test_without_the_doubled_device_list_the_rollout_pool_lands_on_a_device_that_does_not_exist():
    out = _place("control")
    assert "trainer (['0'], '0')" in out
    assert "rollout worker (['1'], '1')" in out
    assert "vLLM server pinned to ['1']" in out


def test_the_trainer_is_set_up_before_the_standalone_vllm_servers_start():
    # gpu_check_vllm_1gpu puts the trainer and vLLM on one GPU: vLLM sizes its pool from the memory free when its
    # engine starts, after the trainer's workers hold theirs. verl 0.9.1 starts the standalone servers once the
    # trainer's set-up has returned, with a TODO to run the two in parallel: this fails when that order changes.
    import inspect

    from verl.trainer.ppo.v1.trainer_separate_async import PPOTrainerSeparateAsync

    source = inspect.getsource(PPOTrainerSeparateAsync._setup)
    trainer_setup, servers = source.find("super()._setup()"), source.find("LLMServerManager.create(")
    assert 0 <= trainer_setup < servers, "verl's separate-async set-up no longer starts the trainer first"
    assert "gather(" not in source and "ThreadPool" not in source, "the trainer and the servers start in parallel"
