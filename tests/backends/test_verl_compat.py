"""The verl workarounds: still needed on the pinned verl; CPU ones only on the cpu platform, the rest everywhere."""

import pickle
import subprocess
import sys

import pytest
import torch
import verl
from tensordict import TensorDict
from verl.utils import tensordict_utils as tu

from verl_asyncweb.backends.verl_compat import VERL_VERSION_WRITTEN_FOR, WORKAROUNDS, _originals, apply_workarounds


def _probe(code: str) -> str:
    """The last line a fresh Python process running ``code`` prints (it must exit cleanly)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


def test_pinned_verl_is_the_version_the_workarounds_were_written_for():
    assert verl.__version__ == VERL_VERSION_WRITTEN_FOR


@pytest.mark.parametrize("workaround", [w for w in WORKAROUNDS if not w.needs], ids=lambda w: w.name)
def test_each_workaround_targets_code_that_still_has_the_problem(workaround):
    # Fails when verl changes under us: then the workaround must be revisited (or deleted).
    assert workaround.still_needed(), f"{workaround.module}.{workaround.attribute} no longer contains the line"


def test_workarounds_are_not_applied_without_the_cpu_platform():
    probe = (
        "import os; os.environ.pop('VERL_PLATFORM', None); import verl;"
        "from verl.single_controller.ray.base import ResourcePoolManager as R;"
        "print(R._check_resource_available.__module__)"
    )
    assert _probe(probe) == "verl.single_controller.ray.base"


def test_workarounds_are_applied_on_the_cpu_platform():
    probe = (
        "import os; os.environ['VERL_PLATFORM'] = 'cpu'; import verl;"
        "from verl.single_controller.ray.base import ResourcePoolManager as R;"
        "import verl.workers.engine_workers as w;"
        "print(R._check_resource_available.__module__, w.initialize_global_process_group_ray.__module__)"
    )
    assert _probe(probe).split() == ["verl_asyncweb.backends.verl_compat"] * 2


def test_platform_wide_workarounds_are_applied_without_the_cpu_platform():
    # A GPU deployment loads the plugin without VERL_PLATFORM=cpu: verl's flush=True logger call must still not raise.
    probe = (
        "import os, logging; os.environ.pop('VERL_PLATFORM', None); import verl;"
        "import verl.trainer.ppo.v1.trainer_separate_async as s; import verl.workers.engine.base as b;"
        "logging.basicConfig(level=logging.INFO); s.logger.info('set-up', flush=True);"
        "print(type(s.logger).__name__, b.maybe_fix_3d_position_ids.__module__)"
    )
    assert _probe(probe).split() == ["_FlushTolerantLogger", "verl_asyncweb.backends.verl_compat"]


def _position_ids_through_transfer_queue(lengths):
    """Qwen-VL (4, L) position ids packed as transfer_queue packs a field, then pickled to a worker."""
    rows = [torch.arange(4 * length).reshape(4, length) + 1000 * i for i, length in enumerate(lengths)]
    packed = torch.nested.as_nested_tensor(rows, layout=torch.jagged)
    batch = TensorDict({"position_ids": packed, "row": torch.arange(len(rows))}, batch_size=[len(rows)])
    return pickle.loads(pickle.dumps(batch.consolidate())), rows


@pytest.mark.parametrize("lengths", [[7, 7, 7], [5, 9, 7]], ids=["equal_lengths", "ragged"])
def test_3d_position_ids_survive_the_worker_fix_and_micro_batch_selection(lengths):
    import verl.workers.engine.base as engine_base

    assert "equal_length_3d_position_ids" in apply_workarounds()
    batch, rows = _position_ids_through_transfer_queue(lengths)
    engine_base.maybe_fix_3d_position_ids(batch)
    selected = tu.index_select_tensor_dict(batch, [2, 0])
    assert [r.tolist() for r in selected["position_ids"].unbind()] == [rows[2].tolist(), rows[0].tolist()]
    assert selected["position_ids"].values().shape[0] == 4


def test_verls_own_fix_breaks_an_equal_length_batch():
    # The bug itself (fails once verl fixes it; then delete the workaround): verl forces ragged dim 2 on a tensor
    # transfer_queue made ragged on dim 1, and selecting micro-batches from it raises.
    batch, _ = _position_ids_through_transfer_queue([7, 7, 7])
    verl_fix = next(w for w in WORKAROUNDS if w.name == "equal_length_3d_position_ids")
    apply_workarounds()
    _originals[verl_fix.name](batch)
    with pytest.raises(RuntimeError):
        tu.index_select_tensor_dict(batch, [2, 0])


def test_the_cpu_platform_is_never_auto_detected():
    # Registered, but selected only by VERL_PLATFORM=cpu: a GPU host (or this CPU one) keeps verl's own detection.
    probe = (
        "import os; os.environ.pop('VERL_PLATFORM', None); import verl;"
        "from verl.plugin.platform.platform_manager import PlatformRegistry, get_platform;"
        "print(PlatformRegistry.get('cpu') is not None, type(get_platform()).__name__)"
    )
    registered, selected = _probe(probe).split()
    assert registered == "True" and selected != "PlatformCPU"


def test_a_micro_batch_without_images_runs_through_qwen2_vl(tiny_model_path):
    # A rank whose micro-batch holds only verl's text-only padding rows: verl's dummy-image branch must run (and
    # keep the vision tower in the graph) instead of failing on transformers 5's ModelOutput.
    import verl.models.transformers.qwen2_vl as qwen2_vl
    from transformers import AutoModelForImageTextToText

    apply_workarounds()
    model = AutoModelForImageTextToText.from_pretrained(tiny_model_path, dtype=torch.float32)
    input_ids = torch.tensor([[5, 6, 7, 8]])
    with pytest.raises(AttributeError, match="has no attribute 'mean'"):
        _originals["qwen2_vl_text_only_embeds"](model.model, input_ids)
    embeds, _ = qwen2_vl._get_input_embeds(model.model, input_ids, None, None, None, None, None)
    assert embeds.shape == (1, 4, model.config.text_config.hidden_size)
    embeds.sum().backward()
    assert any(p.grad is not None for p in model.model.visual.parameters()), "the vision tower stays in the graph"


def test_the_empty_server_manager_starts_no_load_balancer():
    # Without the workaround create_empty starts a GlobalRequestLoadBalancer actor (needs Ray); with it, none.
    probe = (
        "import os; os.environ['VERL_PLATFORM'] = 'cpu'; import verl;"
        "from omegaconf import OmegaConf;"
        "from verl.workers.rollout.llm_server import LLMServerManager as M;"
        "rollout = {'name': 'hf', 'nnodes': 1, 'disaggregation': {'enabled': False}};"
        "m = M.create_empty(config=OmegaConf.create({'actor_rollout_ref': {'model': {}, 'rollout': rollout}}));"
        "print(m.global_load_balancer, m.get_replicas(), m.server_addresses)"
    )
    assert _probe(probe) == "None [] []"


# An FSDP2 model on one gloo rank; its "saved" cycle-start weights must not follow an in-place update.
_SAVE_PROBE = """
import os, sys
os.environ['VERL_PLATFORM'] = sys.argv[1]
import torch, torch.distributed as dist, verl
from torch.distributed.fsdp import fully_shard
import verl.utils.fsdp_utils as fsdp_utils
dist.init_process_group('gloo', store=dist.HashStore(), rank=0, world_size=1)
model = fully_shard(torch.nn.Linear(4, 4))
saved, _ = fsdp_utils.fsdp2_sharded_save_to_cpu(model)
with torch.no_grad():
    model.weight.add_(1.0)
print(float((model.weight.to_local() - saved['weight'][0]).abs().max()))
"""


@pytest.mark.parametrize("platform, moved", [("cpu", 1.0), ("", 0.0)])
def test_the_saved_cycle_start_weights_are_a_copy_on_cpu(platform, moved):
    """pi_prox of a cycle's later local updates comes from these weights; verl's save aliases them on CPU."""
    out = subprocess.run([sys.executable, "-c", _SAVE_PROBE, platform], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert float(out.stdout.strip().splitlines()[-1]) == moved


def test_the_trainer_masks_the_ids_verls_vllm_server_bans():
    """The mask of ``sampler_mask_in_trainer`` mirrors verl's vLLM server: the vision placeholders of
    ``get_vision_placeholder_token_ids`` and every id from ``len(tokenizer)`` on, set to -inf before sampling (read
    from verl's source: vLLM is not installed here)."""
    from pathlib import Path

    def source(module: str) -> str:
        return Path(verl.__file__).parent.joinpath(*module.split(".")[1:]).with_suffix(".py").read_text()

    server = source("verl.workers.rollout.vllm_rollout.vllm_async_server")
    assert '"vocab_size": len(self.model_config.tokenizer)' in server
    assert '"banned_token_ids": get_vision_placeholder_token_ids(self.model_config.processor)' in server
    patch = source("verl.workers.rollout.vllm_rollout.utils")
    assert 'logits[..., vocab_size:] = float("-inf")' in patch
    assert 'logits.index_fill_(-1, banned_index, float("-inf"))' in patch


def test_the_trainer_mask_is_installed_on_every_platform_for_runs_that_ask_for_it(tiny_model_path, monkeypatch):
    """verl's engine build is wrapped without the cpu platform too; the wrapper masks the built model's logits only
    in the workers of a run started by ``verl_asyncweb.main`` (which sets the mask's variable)."""
    from transformers import AutoModelForImageTextToText
    from verl.workers.config import HFModelConfig

    from verl_asyncweb.algo.sampler_mask import SAMPLER_MASK_ENV, TRAINER_MASKED_LOGIT, mask_built_model

    probe = (
        "import os; os.environ.pop('VERL_PLATFORM', None); import verl;"
        "from verl.workers.engine.fsdp.transformer_impl import FSDPEngine;"
        "print(FSDPEngine._build_module.__module__)"
    )
    assert _probe(probe) == "verl_asyncweb.backends.verl_compat"
    config = HFModelConfig(path=str(tiny_model_path))
    model = AutoModelForImageTextToText.from_pretrained(tiny_model_path, dtype=torch.float32)
    image_pad = model.config.image_token_id
    input_ids = torch.tensor([[1, 2, 3]])
    monkeypatch.delenv(SAMPLER_MASK_ENV, raising=False)
    assert not mask_built_model(model, config)
    assert model(input_ids=input_ids).logits[..., image_pad].ne(TRAINER_MASKED_LOGIT).all()
    monkeypatch.setenv(SAMPLER_MASK_ENV, "1")
    assert mask_built_model(model, config)
    assert model(input_ids=input_ids).logits[..., image_pad].eq(TRAINER_MASKED_LOGIT).all()
