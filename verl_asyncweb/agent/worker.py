"""verl's V1 agent-loop worker and manager, keeping screenshots out of the rollout → trainer path.

verl's worker turns each sample's images into ``pixel_values`` before putting the sample into TransferQueue, so
image tensors would travel from every rollout worker to the trainer. For ``web_agent`` samples the images stay
in the :class:`~verl_asyncweb.agent.screenshots.ScreenshotStore`: the sample carries their keys and the image
grid (enough for the M-RoPE position ids), and the trainer builds ``pixel_values`` from the keys
(:mod:`verl_asyncweb.trainer.pixels`). Select it with
``actor_rollout_ref.rollout.agent.agent_loop_manager_class=verl_asyncweb.agent.worker.WebAgentLoopManager``.

Workers are restartable (``MAX_WORKER_RESTARTS``): a killed worker process comes back, its lost prompt groups
are failed by the :class:`~verl_asyncweb.agent.watchdog.WorkerWatchdog` (dropped, counted, refilled) and the run
goes on.
"""

from __future__ import annotations

import uuid

import ray
import torch
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ, AgentLoopWorkerTQ

from verl_asyncweb.agent.config import AgentConfig
from verl_asyncweb.agent.fields import IMAGE_GRID_FIELD, SCREENSHOT_KEYS_FIELD
from verl_asyncweb.agent.placement import EpisodeDispatch, WorkerPlacement
from verl_asyncweb.agent.watchdog import WorkerWatchdog

MAX_WORKER_RESTARTS = 3
"""Restarts of one agent-loop worker process before the run fails (a crash loop must not run forever)."""


class _WebAgentLoopWorker(AgentLoopWorkerTQ.__ray_actor_class__):
    def __init__(self, *args, **kwargs):
        # Ray ships actor classes by value: in the worker, verl's AgentLoopWorkerTQ.__init__ (zero-argument super())
        # no longer matches this subclass, so its statements are repeated here, with imports resolved at call time.
        import transfer_queue as tq
        from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

        AgentLoopWorker.__init__(self, *args, **kwargs)
        tq.init()
        self.background_tasks = set()
        self.incarnation = uuid.uuid4().hex

    def get_incarnation(self) -> str:
        """A random id drawn when this process started: it changes when Ray restarts the worker."""
        return self.incarnation

    async def generate_sequences(self, batch) -> str:
        """verl's fire-and-forget dispatch; returns the incarnation that accepted the prompts."""
        await AgentLoopWorkerTQ.__ray_actor_class__.generate_sequences(self, batch)
        return self.incarnation

    def _compute_multi_modal_inputs(self, output, input_ids) -> dict[str, torch.Tensor]:
        grid = output.extra_fields.get(IMAGE_GRID_FIELD)
        if output.extra_fields.get(SCREENSHOT_KEYS_FIELD) is None or grid is None:
            from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

            return AgentLoopWorker._compute_multi_modal_inputs(self, output, input_ids)
        # The grid alone determines the position ids; "mm_token_type_ids" asks verl to derive the token types
        # from the ids (it pops the marker before the sample is stored).
        return {IMAGE_GRID_FIELD: torch.tensor(grid, dtype=torch.long), "mm_token_type_ids": torch.zeros(1)}


# A call in flight when the worker dies is retried on the restarted process (dispatch only spawns tasks).
WebAgentLoopWorker = ray.remote(max_restarts=MAX_WORKER_RESTARTS, max_task_retries=-1)(_WebAgentLoopWorker)


class RestartableActorClass:
    """``actor_class`` whose constructor arguments stay in the object store for as long as this object lives.

    Ray re-runs the constructor of a restarted actor with its original arguments. In a real run (verl's task
    runner creating the workers, Ray 2.60) the restarted worker found them already freed and died in its
    constructor (``ReferenceCountingAssertionError``); putting every argument explicitly and holding the
    references for the manager's lifetime fixes it (``tests/e2e``). ``options(...)`` and ``remote(...)`` behave
    as on a Ray actor class; a ``placement`` adjusts the options of each actor it creates.
    """

    def __init__(
        self,
        actor_class,
        options: dict | None = None,
        argument_refs: list | None = None,
        placement: WorkerPlacement | None = None,
    ) -> None:
        self.actor_class = actor_class
        self._options = options or {}
        self.argument_refs = argument_refs if argument_refs is not None else []
        self.placement = placement or WorkerPlacement()

    def options(self, **options) -> RestartableActorClass:
        return RestartableActorClass(self.actor_class, {**self._options, **options}, self.argument_refs, self.placement)

    def remote(self, *args):
        refs = [ray.put(arg) for arg in args]
        self.argument_refs.extend(refs)
        return self.actor_class.options(**self.placement.options(self._options)).remote(*refs)


def placed_worker_class(actor_class, config) -> RestartableActorClass:
    """``actor_class`` as the manager creates its workers: restartable, placed by ``asyncweb.agent.worker_resources``
    of the run's ``config``."""
    agent_config = AgentConfig.from_dict((config.get("asyncweb") or {}).get("agent"))
    return RestartableActorClass(actor_class, placement=WorkerPlacement(agent_config.worker_resources))


class WebAgentLoopManager(AgentLoopManagerTQ):
    """verl's V1 agent-loop manager with :data:`WebAgentLoopWorker` as its worker class, placed on the nodes that
    offer ``asyncweb.agent.worker_resources`` and fed by episodes in flight (:mod:`~verl_asyncweb.agent.placement`).
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.agent_loop_workers_class = placed_worker_class(WebAgentLoopWorker, self.config)
        self.watchdog: WorkerWatchdog | None = None
        self.dispatch: EpisodeDispatch | None = None

    async def _init_agent_loop_workers(self):
        await super()._init_agent_loop_workers()
        self.dispatch = EpisodeDispatch(len(self.agent_loop_workers))
        self.watchdog = WorkerWatchdog(self.agent_loop_workers)
        self.watchdog.start()

    def generate_sequences(self, prompts) -> None:
        """Give each prompt group to the worker with the fewest episodes in flight; record which worker
        incarnation holds which groups (the watchdog fails them if that process dies)."""
        import transfer_queue as tq
        from verl.utils.tensordict_utils import index_select_tensor_dict

        validate = bool(prompts["validate"]) if "validate" in prompts else False
        partition_id = "val" if validate else "train"
        rollout = self.config.actor_rollout_ref.rollout
        uids = list(prompts["uid"])
        self.dispatch.settle(tq.kv_list() or {})
        rows = self.dispatch.assign(partition_id, uids, rollout.val_kwargs.n if validate else rollout.n)
        sent = [(index, worker_rows) for index, worker_rows in enumerate(rows) if worker_rows]
        incarnations = ray.get(
            [
                self.agent_loop_workers[index].generate_sequences.remote(index_select_tensor_dict(prompts, worker_rows))
                for index, worker_rows in sent
            ]
        )
        for (index, worker_rows), incarnation in zip(sent, incarnations, strict=True):
            self.watchdog.assign(index, incarnation, partition_id, [uids[row] for row in worker_rows])
