"""Run by ``test_placement.py`` in its own process: a three-node Ray cluster on this machine (a head without
``browser_host``, two nodes with it), verl's agent-loop worker creation with our placement, our dispatch, and
episodes on real Chromium in every worker. Prints one JSON line with what ran where.

The workers are a small stand-in for ``WebAgentLoopWorker`` (no model or rollout server; a scripted MiniWoB++
oracle plays each episode), created by verl's own ``AgentLoopManager._init_agent_loop_workers`` through
``WebAgentLoopManager``'s actor class, and fed by ``WebAgentLoopManager.generate_sequences``.
"""

import asyncio
import json
import os
import sys
import uuid

import psutil
import ray
from omegaconf import OmegaConf
from ray.cluster_utils import Cluster

WORKERS = 2
GROUPS_PER_DISPATCH = 1
DISPATCHES = 2
N = 2


@ray.remote
class EpisodeWorker:
    """Runs each prompt group's ``N`` MiniWoB++ episodes on its own browser pool, as verl's worker does."""

    def __init__(self, *_verl_arguments):
        self.incarnation = uuid.uuid4().hex
        self.pool = None  # the worker's shared pool, as the web_agent loop gets it
        self.rewards: list[float] = []
        self.errors: list[str] = []
        self.tasks: set = set()

    def get_incarnation(self) -> str:
        return self.incarnation

    async def generate_sequences(self, batch) -> str:
        for uid in list(batch["uid"]):
            task = asyncio.create_task(self._run_group(uid))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        return self.incarnation

    async def _run_group(self, uid: str) -> None:
        import transfer_queue as tq

        await tq.async_kv_put(key=uid, partition_id="train", tag={"status": "running"})
        results = await asyncio.gather(*(self._episode(seed) for seed in range(N)), return_exceptions=True)
        self.errors += [repr(result) for result in results if isinstance(result, BaseException)]
        await tq.async_kv_put(key=uid, partition_id="train", tag={"status": "finished"})

    async def _episode(self, seed: int) -> None:
        from verl_asyncweb.agent.loop import _SharedPool
        from verl_asyncweb.env import BrowserPoolConfig, load_tasks
        from verl_asyncweb.env.config import DEFAULT_CHROMIUM_ARGS, LOOPBACK_ONLY_ARGS
        from verl_asyncweb.env.miniwob_oracle import miniwob_actions

        args = DEFAULT_CHROMIUM_ARGS + LOOPBACK_ONLY_ARGS
        config = BrowserPoolConfig(num_browsers=1, pages_per_browser=N, accessibility_text=True, chromium_args=args)
        self.pool = await _SharedPool.get(config)
        task = load_tasks("miniwob", names=["click-button"], seed=seed)[0]
        async with self.pool.session() as session:
            obs = await self.pool.reset(session, task)
            for action in miniwob_actions("click-button", obs):
                await self.pool.step(session, action.tool_call)
            self.rewards.append((await self.pool.evaluate(session, task)).reward)

    async def report(self) -> dict:
        """Once every episode is done: where this worker runs, its rewards and errors, its Chromium processes."""
        await asyncio.gather(*self.tasks)
        return {
            "node": ray.get_runtime_context().get_node_id(),
            "pid": os.getpid(),
            "rewards": self.rewards,
            "errors": self.errors,
            "chromium": _chromium_under(psutil.Process()),
        }

    async def close(self) -> None:
        await self.pool.close()


def _chromium_under(process: psutil.Process) -> list[int]:
    return sorted(_chromium_owners(process, owner_pids=set()))


def _chromium_owners(root: psutil.Process, owner_pids: set[int]) -> dict[int, int | None]:
    """Each Chromium process under ``root`` with its nearest ancestor among ``owner_pids`` (None: no such ancestor).

    Chromium starts and ends helper processes while it runs, so one snapshot is read, and a process that exits
    while it is being looked at is left out."""
    owners = {}
    for process in root.children(recursive=True):
        try:
            if "chrom" in process.name().lower():
                owners[process.pid] = next((p.pid for p in process.parents() if p.pid in owner_pids), None)
        except psutil.NoSuchProcess:
            pass
    return owners


def main() -> None:
    import transfer_queue as tq
    from tensordict import NonTensorData, NonTensorStack, TensorDict

    from verl_asyncweb.agent.worker import WebAgentLoopManager, placed_worker_class

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 8, "include_dashboard": False})
    browser_nodes = [cluster.add_node(num_cpus=4, resources={"browser_host": 2}) for _ in range(2)]
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    try:
        tq.init()
        config = OmegaConf.create(
            {
                "asyncweb": {"agent": {"worker_resources": {"browser_host": 1}}},
                "actor_rollout_ref": {"rollout": {"n": N, "val_kwargs": {"n": 1}, "agent": {"num_workers": WORKERS}}},
            }
        )
        # verl's __init__ would start rollout servers; the two methods under test need only these attributes.
        manager = object.__new__(WebAgentLoopManager)
        manager.config, manager.rollout_config = config, config.actor_rollout_ref.rollout
        manager.llm_client = manager.teacher_client = manager.reward_loop_worker_handles = None
        manager.agent_loop_workers_class = placed_worker_class(EpisodeWorker, config)
        asyncio.run(manager._init_agent_loop_workers())

        dispatched = []
        for step in range(DISPATCHES):
            uids = [f"s{step}-g{i}" for i in range(GROUPS_PER_DISPATCH)]
            tq.kv_batch_put(
                keys=uids, partition_id="train", tags=[{"status": "pending", "global_steps": step}] * len(uids)
            )
            batch = TensorDict(
                {"uid": NonTensorStack(*uids), "global_steps": NonTensorData(step)}, batch_size=len(uids)
            )
            manager.generate_sequences(batch)
            dispatched.append(manager.dispatch.load())
        reports = ray.get([worker.report.remote() for worker in manager.agent_loop_workers], timeout=300)
        # The nodes' raylets are this process's children: every Chromium process of the cluster, with its worker.
        owners = _chromium_owners(psutil.Process(), owner_pids={report["pid"] for report in reports})
        ray.get([worker.close.remote() for worker in manager.agent_loop_workers], timeout=60)
        manager.watchdog.stop()
        print(
            json.dumps(
                {
                    "head": cluster.head_node.node_id,
                    "browser_nodes": [node.node_id for node in browser_nodes],
                    "loads_after_each_dispatch": dispatched,
                    "workers": reports,
                    "chromium_owners": owners,
                }
            )
        )
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    sys.exit(main())
