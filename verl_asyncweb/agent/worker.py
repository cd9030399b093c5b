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

SCREENSHOT_KEYS_FIELD = "screenshot_keys"
IMAGE_GRID_FIELD = "image_grid_thw"


class _WebAgentLoopWorker(AgentLoopWorkerTQ.__ray_actor_class__):
    def _compute_multi_modal_inputs(self, output, input_ids) -> dict[str, torch.Tensor]:
        grid = output.extra_fields.get(IMAGE_GRID_FIELD)
        if output.extra_fields.get(SCREENSHOT_KEYS_FIELD) is None or grid is None:
            return super()._compute_multi_modal_inputs(output, input_ids)
        # The grid alone determines the position ids; "mm_token_type_ids" asks verl to derive the token types
        # from the ids (it pops the marker before the sample is stored).
        return {IMAGE_GRID_FIELD: torch.tensor(grid, dtype=torch.long), "mm_token_type_ids": torch.zeros(1)}


WebAgentLoopWorker = ray.remote(_WebAgentLoopWorker)


class WebAgentLoopManager(AgentLoopManagerTQ):
    """verl's V1 agent-loop manager with :data:`WebAgentLoopWorker` as its worker class."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.agent_loop_workers_class = WebAgentLoopWorker
