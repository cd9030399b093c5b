"""verl's V1 agent-loop worker and manager, keeping screenshots out of the rollout → trainer path.

verl's worker turns each sample's images into ``pixel_values`` before putting the sample into TransferQueue, so
image tensors would travel from every rollout worker to the trainer. For ``web_agent`` samples the images stay
in the :class:`~verl_asyncweb.agent.screenshots.ScreenshotStore`: the sample carries their keys and the image
grid (enough for the M-RoPE position ids), and the trainer builds ``pixel_values`` from the keys
(:mod:`verl_asyncweb.trainer.pixels`). Select it with
``actor_rollout_ref.rollout.agent.agent_loop_manager_class=verl_asyncweb.agent.worker.WebAgentLoopManager``.
"""

from __future__ import annotations

import ray
import torch
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ, AgentLoopWorkerTQ

from verl_asyncweb.agent.fields import IMAGE_GRID_FIELD, SCREENSHOT_KEYS_FIELD


class _WebAgentLoopWorker(AgentLoopWorkerTQ.__ray_actor_class__):
    def __init__(self, *args, **kwargs):
        # Ray ships actor classes by value: in the worker, verl's AgentLoopWorkerTQ.__init__ (zero-argument super())
        # no longer matches this subclass, so its statements are repeated here, with imports resolved at call time.
        import transfer_queue as tq
        from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

        AgentLoopWorker.__init__(self, *args, **kwargs)
        tq.init()
        self.background_tasks = set()

    def _compute_multi_modal_inputs(self, output, input_ids) -> dict[str, torch.Tensor]:
        grid = output.extra_fields.get(IMAGE_GRID_FIELD)
        if output.extra_fields.get(SCREENSHOT_KEYS_FIELD) is None or grid is None:
            from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

            return AgentLoopWorker._compute_multi_modal_inputs(self, output, input_ids)
        # The grid alone determines the position ids; "mm_token_type_ids" asks verl to derive the token types
        # from the ids (it pops the marker before the sample is stored).
        return {IMAGE_GRID_FIELD: torch.tensor(grid, dtype=torch.long), "mm_token_type_ids": torch.zeros(1)}


WebAgentLoopWorker = ray.remote(_WebAgentLoopWorker)


class WebAgentLoopManager(AgentLoopManagerTQ):
    """verl's V1 agent-loop manager with :data:`WebAgentLoopWorker` as its worker class."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.agent_loop_workers_class = WebAgentLoopWorker
