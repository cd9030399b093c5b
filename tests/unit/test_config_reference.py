"""docs/configuration.md is the output of ``python -m verl_asyncweb.config.reference`` and documents every key."""

import dataclasses
from pathlib import Path

from omegaconf import OmegaConf

from verl_asyncweb.config.reference import field_meanings, reference, sections
from verl_asyncweb.config.schema import AsyncWebConfig

ROOT = Path(__file__).parents[2]


def test_the_reference_page_is_current():
    assert (ROOT / "docs" / "configuration.md").read_text() == reference(), (
        "regenerate: python -m verl_asyncweb.config.reference --out docs/configuration.md"
    )


def test_every_key_has_a_meaning():
    undocumented = [
        f"{prefix}.{field.name}"
        for prefix, cls in sections(AsyncWebConfig, "asyncweb")
        for field in dataclasses.fields(cls)
        if not field.name.startswith("_") and not field_meanings(cls).get(field.name)
    ]
    assert undocumented == []


def test_every_key_of_the_default_node_is_in_the_reference():
    defaults = OmegaConf.load(ROOT / "verl_asyncweb" / "config" / "asyncweb" / "default.yaml")
    page = reference()

    def keys(node, prefix):
        for name, value in node.items():
            yield f"{prefix}.{name}"
            if OmegaConf.is_dict(value):
                yield from keys(value, f"{prefix}.{name}")

    missing = [key for key in keys(defaults, "asyncweb") if f"| `{key}` |" not in page]
    assert missing == []
