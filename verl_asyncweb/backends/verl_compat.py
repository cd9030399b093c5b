"""Run-time workarounds of verl internals (and of vLLM's CPU backend): the only place the plugin touches them.

Each workaround names the verl line it works around and checks that the line is still there (so a verl upgrade
that fixes or moves it fails loudly in ``tests/backends/test_verl_compat.py`` instead of silently misbehaving).
CPU-only workarounds are applied only when the ``cpu`` platform is selected; the others fix verl bugs that hit
every platform and are applied wherever the plugin is loaded.

CPU only:

- ``gloo_process_group``: ``TrainingWorker.__init__`` calls ``initialize_global_process_group_ray()``, whose
  default backend string ``cpu:gloo,cpu:gloo`` torch rejects.
- ``cpu_resource_check``: ``ResourcePoolManager._check_resource_available`` counts only GPU/NPU and raises on a
  CPU cluster.
- ``empty_server_manager_balancer``: with ``hybrid_engine`` false the trainer builds an empty
  ``LLMServerManager`` (``create_empty``) whose request load balancer routes nothing (rollout goes through the
  standalone manager's own balancer) yet is a process that imports torch and verl: ~0.6 GiB of a laptop's memory
  and a start-up import. The empty manager gets no balancer (``global_load_balancer`` is ``None``).
- ``cpu_model_copy``: ``fsdp2_sharded_save_to_cpu`` keeps the cycle-start weights of a ``parameter_sync_step`` > 1
  cycle (pi_prox of its later local updates) as ``shard.detach().cpu()``, which on CPU is the parameter's own
  storage: the next update changes the "saved" weights too, and pi_prox comes from the updated ones. The saved
  shards are copies.
- ``cpu_replica_device_ids`` (where vLLM is installed): ``vLLMReplica.launch_servers`` asks each rollout worker for
  ``get_accelerator_ids()[get_resource_name()][0]``, and Ray lists accelerators only, never ``CPU``: a KeyError
  before any vLLM server starts. On the cpu platform Ray's answer gains ``CPU: ["0"]``; verl only uses the id as
  the server's visible-devices variable (``VERL_ASYNCWEB_VISIBLE_CPUS``), which nothing reads.
- ``vllm_cpu_live_weights`` (in vLLM's processes): vLLM's CPU backend packs every linear layer's weight into a
  oneDNN handle once the model is loaded and replaces the weight with an empty tensor
  (``dispatch_cpu_unquantized_gemm``), so the weights verl syncs after each update have nowhere to go ("Attempted to
  load weight (torch.Size([96, 32])) into parameter (torch.Size([0]))"), and the LM head's handle would keep the
  first weights. Linear layers keep their weights and multiply by them as they are (``torch.nn.functional.linear``,
  vLLM's own fallback), so each sync lands in place. Slower GEMMs, which the tiny CPU models do not notice.

Every platform:

- ``separate_async_logger``: ``PPOTrainerSeparateAsync._setup`` calls ``logger.info(..., flush=True)``, a
  TypeError whenever INFO logging is on and ``hybrid_engine`` is false (every separate-async recipe).
- ``equal_length_3d_position_ids``: transfer_queue packs a field with ``torch.nested.as_nested_tensor``, which
  makes a batch whose rows all have the same length ragged on dim 1 (the rope dim of Qwen-VL's ``(4, L)``
  position ids, offsets 0, 4, 8, ...); ``maybe_fix_3d_position_ids`` then forces ``_ragged_idx = 2`` on it and
  the next ``unbind`` fails with "split_with_sizes expects split_sizes to sum exactly to L". Such a batch is
  common in GRPO (n samples of one prompt that all stop at the response limit).
- ``qwen2_vl_text_only_embeds``: for a micro-batch without images, Qwen2/2.5-VL's ``_get_input_embeds`` runs a
  dummy image through the vision tower (so every FSDP rank runs the same graph) and calls ``.mean()`` on its
  output, which transformers 5 returns as a ``ModelOutput``: "'BaseModelOutputWithPooling' object has no attribute
  'mean'". With two or more trainer ranks a rank whose micro-batch holds only verl's text-only padding rows takes
  that branch (Qwen3-VL's version unpacks the output and is fine).
- ``sampler_mask_in_trainer``: verl's vLLM server samples from, and reports log-probs of, a distribution with the
  vision placeholders and the ids beyond the tokenizer masked (``monkey_patch_compute_logits``), while
  ``FSDPEngine._build_module`` builds a trainer model over the whole vocabulary: pi_prox and pi_theta are not the
  sampled policy. In runs started by ``verl_asyncweb.main`` the built model masks the same ids
  (``verl_asyncweb.algo.sampler_mask``).
"""

import inspect
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch

logger = logging.getLogger(__name__)

VERL_VERSION_WRITTEN_FOR = "0.9.1"
_applied: set[str] = set()
_originals: dict[str, object] = {}


@dataclass(frozen=True)
class Workaround:
    """A verl internal replaced at run time, with the source line that makes it necessary."""

    name: str
    module: str
    attribute: str
    expected_source: str
    apply: Callable[[], None]
    cpu_only: bool = True
    needs: str = ""
    """A package the target's module imports: the workaround applies (and is checked) only where it is installed."""
    loaded_only: bool = False
    """Apply only in processes that have already imported ``needs`` (vLLM's own processes, not the trainer's)."""
    replaces_target: bool = True
    """False when ``apply`` replaces something else than the target (whose module is then never imported to
    apply it: importing verl's vLLM server module imports vLLM, seconds and memory in every process)."""

    def available(self) -> bool:
        import importlib.util
        import sys

        if self.loaded_only:
            return self.needs in sys.modules
        return not self.needs or importlib.util.find_spec(self.needs) is not None

    def target(self):
        import importlib

        module = importlib.import_module(self.module)
        owner, _, member = self.attribute.rpartition(".")
        return getattr(getattr(module, owner), member) if owner else getattr(module, member)

    def target_source(self) -> str:
        """Source of verl's own target (as it was before this workaround replaced it, if it did)."""
        return inspect.getsource(_originals.get(self.name) or self.target())

    def still_needed(self) -> bool:
        return self.expected_source in self.target_source()


def _patch_gloo_process_group() -> None:
    import verl.workers.engine_workers as engine_workers
    from verl.utils.distributed import initialize_global_process_group_ray

    def initialize_gloo_process_group(timeout_second=None, backend=None):
        return initialize_global_process_group_ray(timeout_second=timeout_second, backend=backend or "gloo")

    engine_workers.initialize_global_process_group_ray = initialize_gloo_process_group


def _patch_cpu_resource_check() -> None:
    import ray
    from verl.single_controller.ray.base import ResourcePoolManager

    def check_cpu_resources(self) -> None:
        available = sum(node.get("CPU", 0) for node in ray._private.state.available_resources_per_node().values())
        required = sum(n for process_on_nodes in self.resource_pool_spec.values() for n in process_on_nodes)
        if available < required:
            raise ValueError(
                f"the Ray cluster has {available} free CPUs but the resource pools need {required}; raise "
                "ray_kwargs.ray_init.num_cpus (logical CPUs may exceed cores) or shrink the pools"
            )

    ResourcePoolManager._check_resource_available = check_cpu_resources


def _patch_empty_server_manager_balancer() -> None:
    from verl.utils.ray_utils import auto_await
    from verl.workers.rollout.llm_server import LLMServerManager

    @classmethod
    @auto_await
    async def create_empty(cls, *args, **kwargs):
        instance = cls(*args, **kwargs)
        instance.rollout_replicas, instance.server_handles, instance.server_addresses = [], [], []
        instance.global_load_balancer = None
        return instance

    LLMServerManager.create_empty = create_empty


def _patch_cpu_model_copy() -> None:
    import verl.utils.fsdp_utils as fsdp_utils

    save_to_cpu = fsdp_utils.fsdp2_sharded_save_to_cpu

    def save_copies_to_cpu(model):
        state, global_spec = save_to_cpu(model)
        return {name: (shard.clone(), spec) for name, (shard, spec) in state.items()}, global_spec

    fsdp_utils.fsdp2_sharded_save_to_cpu = save_copies_to_cpu


def _patch_cpu_replica_device_ids() -> None:
    from ray.runtime_context import RuntimeContext

    ray_accelerator_ids = RuntimeContext.get_accelerator_ids

    def accelerator_ids_with_cpu(self) -> dict[str, list[str]]:
        return {**ray_accelerator_ids(self), "CPU": ["0"]}

    RuntimeContext.get_accelerator_ids = accelerator_ids_with_cpu


def _patch_vllm_cpu_live_weights() -> None:
    import torch.nn.functional as F
    import vllm.model_executor.layers.utils as vllm_layer_utils

    vllm_dispatch = vllm_layer_utils.dispatch_cpu_unquantized_gemm

    def dispatch_live_weight_gemm(layer: torch.nn.Module, remove_weight: bool) -> None:
        if layer.weight.is_meta or layer.weight.ndim != 2:
            return vllm_dispatch(layer, remove_weight)
        layer.cpu_linear = F.linear

    vllm_layer_utils.dispatch_cpu_unquantized_gemm = dispatch_live_weight_gemm


class _FlushTolerantLogger(logging.LoggerAdapter):
    """Drops the print-style ``flush=`` keyword that verl passes to ``logger.info``."""

    def process(self, msg, kwargs):
        kwargs.pop("flush", None)
        return msg, kwargs


def _patch_separate_async_logger() -> None:
    import verl.trainer.ppo.v1.trainer_separate_async as separate_async

    if not isinstance(separate_async.logger, _FlushTolerantLogger):
        separate_async.logger = _FlushTolerantLogger(separate_async.logger, {})


def _rebuild_ragged_on_sequence(position_ids):
    """A ``(B, 4, L)`` jagged tensor that transfer_queue made ragged on dim 1, rebuilt ragged on the sequence."""
    from verl.utils.tensordict_utils import nested_tensor_from_tensor_list

    rows = position_ids.values().unflatten(0, (position_ids.offsets().numel() - 1, -1))
    return nested_tensor_from_tensor_list(list(rows.unbind(0)), ragged_idx=2)


def _patch_equal_length_3d_position_ids() -> None:
    import verl.utils.tensordict_utils as tensordict_utils
    import verl.workers.engine.base as engine_base
    import verl.workers.engine_workers as engine_workers

    verl_fix = tensordict_utils.maybe_fix_3d_position_ids

    def fix_3d_position_ids(data) -> None:
        position_ids = data.get("position_ids", None)
        if (
            isinstance(position_ids, torch.Tensor)
            and position_ids.is_nested
            and position_ids.dim() == 3
            and position_ids.values().shape[0] == int(position_ids.offsets()[-1])
        ):
            data["position_ids"] = _rebuild_ragged_on_sequence(position_ids)
            return
        verl_fix(data)

    for module in (tensordict_utils, engine_base, engine_workers):
        module.maybe_fix_3d_position_ids = fix_3d_position_ids


class _TensorVisualModel:
    """The model as verl's text-only branch expects it: ``visual(...)`` returns the image embeddings tensor."""

    def __init__(self, model) -> None:
        self._model = model

    def __getattr__(self, name: str):
        return getattr(self._model, name)

    def visual(self, *args, **kwargs):
        from verl.utils.transformers_compat import unpack_visual_output

        return unpack_visual_output(self._model.visual(*args, **kwargs))[0]


def _patch_qwen2_vl_text_only_embeds() -> None:
    import verl.models.transformers.qwen2_vl as qwen2_vl

    verl_get_input_embeds = qwen2_vl._get_input_embeds

    def get_input_embeds(model, input_ids, attention_mask=None, pixel_values=None, pixel_values_videos=None, *grids):
        if pixel_values is None and pixel_values_videos is None:
            model = _TensorVisualModel(model)
        return verl_get_input_embeds(model, input_ids, attention_mask, pixel_values, pixel_values_videos, *grids)

    qwen2_vl._get_input_embeds = get_input_embeds


def _patch_sampler_mask_in_trainer() -> None:
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngine

    from verl_asyncweb.algo import sampler_mask

    build_module = FSDPEngine._build_module

    def build_module_with_sampler_mask(self):
        module = build_module(self)
        sampler_mask.mask_built_model(module, self.model_config)
        return module

    FSDPEngine._build_module = build_module_with_sampler_mask


WORKAROUNDS = (
    Workaround(
        name="gloo_process_group",
        module="verl.workers.engine_workers",
        attribute="TrainingWorker.__init__",
        expected_source="initialize_global_process_group_ray(timeout_second=None)",
        apply=_patch_gloo_process_group,
    ),
    Workaround(
        name="cpu_resource_check",
        module="verl.single_controller.ray.base",
        attribute="ResourcePoolManager._check_resource_available",
        expected_source='node_info.get("GPU", 0) if "GPU" in node_info else node_info.get("NPU", 0)',
        apply=_patch_cpu_resource_check,
    ),
    Workaround(
        name="empty_server_manager_balancer",
        module="verl.workers.rollout.llm_server",
        attribute="LLMServerManager.create_empty",
        expected_source="await instance._init_global_load_balancer()",
        apply=_patch_empty_server_manager_balancer,
    ),
    Workaround(
        name="cpu_model_copy",
        module="verl.utils.fsdp_utils",
        attribute="fsdp2_sharded_save_to_cpu",
        expected_source="local_cpu_tensor = local_gpu_tensor.detach().cpu()",
        apply=_patch_cpu_model_copy,
    ),
    Workaround(
        name="cpu_replica_device_ids",
        module="verl.workers.rollout.vllm_rollout.vllm_async_server",
        attribute="vLLMReplica.launch_servers",
        expected_source="ray.get_runtime_context().get_accelerator_ids()[get_resource_name()][0]",
        apply=_patch_cpu_replica_device_ids,
        needs="vllm",
        replaces_target=False,
    ),
    Workaround(
        name="vllm_cpu_live_weights",
        module="vllm.model_executor.layers.utils",
        attribute="dispatch_cpu_unquantized_gemm",
        expected_source="layer.weight = torch.nn.Parameter(torch.empty(0), requires_grad=False)",
        apply=_patch_vllm_cpu_live_weights,
        needs="vllm",
        loaded_only=True,
    ),
    Workaround(
        name="separate_async_logger",
        module="verl.trainer.ppo.v1.trainer_separate_async",
        attribute="PPOTrainerSeparateAsync._setup",
        expected_source="flush=True",
        apply=_patch_separate_async_logger,
        cpu_only=False,
    ),
    Workaround(
        name="equal_length_3d_position_ids",
        module="verl.utils.tensordict_utils",
        attribute="maybe_fix_3d_position_ids",
        expected_source='data["position_ids"]._ragged_idx = 2',
        apply=_patch_equal_length_3d_position_ids,
        cpu_only=False,
    ),
    Workaround(
        name="qwen2_vl_text_only_embeds",
        module="verl.models.transformers.qwen2_vl",
        attribute="_get_input_embeds",
        expected_source="image_embeds = model.visual(pixel_values, grid_thw=image_grid_thw)\n",
        apply=_patch_qwen2_vl_text_only_embeds,
        cpu_only=False,
    ),
    Workaround(
        name="sampler_mask_in_trainer",
        module="verl.workers.engine.fsdp.transformer_impl",
        attribute="FSDPEngine._build_module",
        expected_source="module = auto_class.from_pretrained(",
        apply=_patch_sampler_mask_in_trainer,
        cpu_only=False,
    ),
)


def cpu_platform_selected() -> bool:
    return os.environ.get("VERL_PLATFORM", "").strip().lower() == "cpu"


def apply_workarounds() -> list[str]:
    """Apply, once per process, the workarounds for this platform (CPU-only ones on ``cpu``); returns their names."""
    import verl

    if verl.__version__ != VERL_VERSION_WRITTEN_FOR:
        logger.warning(
            "verl_asyncweb's verl workarounds were written for verl %s, found %s; run "
            "`python -m verl_asyncweb.doctor` to check them",
            VERL_VERSION_WRITTEN_FOR,
            verl.__version__,
        )
    on_cpu = cpu_platform_selected()
    for workaround in WORKAROUNDS:
        if workaround.name not in _applied and (on_cpu or not workaround.cpu_only) and workaround.available():
            if workaround.replaces_target:
                _originals[workaround.name] = workaround.target()
            workaround.apply()
            _applied.add(workaround.name)
    return sorted(_applied)
