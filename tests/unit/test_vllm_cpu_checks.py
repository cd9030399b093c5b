"""``main recipe=cpu_vllm`` refuses, before Ray starts, what vLLM's CPU build cannot serve: one line, exit code 2."""

import subprocess
import sys

import pytest

from verl_asyncweb.backends import vllm_cpu
from verl_asyncweb.backends.tiny_model import build_tiny_model


def _main(tmp_path, *overrides: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "verl_asyncweb.main", "recipe=cpu_vllm", f"trainer.default_local_dir={tmp_path}"]
    return subprocess.run([*command, *overrides], capture_output=True, text=True, timeout=300)


def _refused_with(done: subprocess.CompletedProcess, *fragments: str) -> None:
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("verl_asyncweb: ")]
    assert len(lines) == 1 and all(fragment in lines[0] for fragment in fragments), lines
    assert "Traceback" not in done.stderr and "Started a local Ray instance" not in done.stdout + done.stderr


def test_a_model_with_heads_vllms_cpu_attention_refuses_is_refused_naming_both(tmp_path):
    # The default tiny model's heads are 16 wide: vLLM would fail at its first generate, inside its engine.
    _refused_with(
        _main(tmp_path, "asyncweb.tiny_model_size=tiny"),
        "its heads are 16 wide",
        f"vLLM takes {list(vllm_cpu.CPU_ATTENTION_HEAD_SIZES)}",
        "asyncweb.tiny_model_size=tiny-vllm",
    )


def test_a_bucket_smaller_than_the_largest_tensor_is_refused_naming_the_size_it_needs(tmp_path):
    _refused_with(
        _main(tmp_path, f"{vllm_cpu.BUCKET_KEY}=0"),
        f"{vllm_cpu.BUCKET_KEY} must be >= 1",
        "model.embed_tokens.weight",
    )


@pytest.mark.skipif(vllm_cpu.importlib.util.find_spec("vllm") is not None, reason="this environment has vLLM")
def test_without_vllm_the_refusal_names_the_environment_that_has_it(tmp_path):
    _refused_with(_main(tmp_path), "needs vLLM's CPU build", "scripts/install_vllm_cpu.py", str(vllm_cpu.VLLM_PYTHON))


def test_head_size_and_largest_tensor_are_read_from_the_model_folder():
    tiny, served = build_tiny_model(size="tiny"), build_tiny_model(size="tiny-vllm")
    assert (vllm_cpu.head_dim(tiny), vllm_cpu.head_dim(served)) == (16, 32)
    # Same weight shapes, split into other heads: the embedding (vocabulary x hidden 64) is the largest either way.
    assert vllm_cpu.largest_tensor(tiny) == vllm_cpu.largest_tensor(served)
    name, elements = vllm_cpu.largest_tensor(served)
    assert name == "model.embed_tokens.weight" and elements % 64 == 0
