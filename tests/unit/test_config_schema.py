"""The asyncweb defaults file and the typed config stay in step; bad values fail with the dotted key."""

import dataclasses
from importlib import resources

import pytest
from omegaconf import OmegaConf

from verl_asyncweb.config.schema import AsyncWebConfig


def _clean(value):
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if k != "_target_"}
    return list(value) if isinstance(value, tuple) else value


def test_default_yaml_equals_dataclass_defaults():
    path = resources.files("verl_asyncweb").joinpath("config", "asyncweb", "default.yaml")
    from_yaml = OmegaConf.to_container(OmegaConf.load(str(path)))
    assert from_yaml == _clean(dataclasses.asdict(AsyncWebConfig()))


@pytest.mark.parametrize(
    ("node", "message"),
    [
        ({"platform": "tpu"}, "asyncweb.platform must be one of"),
        ({"staleness": "2"}, "asyncweb.staleness must be an integer >= 0, got '2'"),
        ({"algo": {"step_norm": "x"}}, "asyncweb.algo.step_norm must be one of"),
        ({"agent": {"history_images": 0}}, "asyncweb.agent.history_images must be >= 1"),
        ({"env": {"step_timeout_s": -1}}, "asyncweb.env.step_timeout_s must be > 0"),
        ({"tasks": {"train": []}}, "asyncweb.tasks.train must name at least one task source"),
        ({"bogus": 1}, "asyncweb has unknown keys \\['bogus'\\]"),
        ({"tasks": {"bogus": 1}}, "asyncweb.tasks has unknown keys"),
        ({"pixels": {"chunk_samples": 0}}, "asyncweb.pixels.chunk_samples must be >= 1"),
        ({"pixels": {"worker_cpus": -1}}, "asyncweb.pixels.worker_cpus must be >= 0"),
    ],
)
def test_bad_asyncweb_values_name_the_key(node, message):
    with pytest.raises((ValueError, TypeError), match=message):
        AsyncWebConfig.from_config(node)
