"""Find recipes and compose them into verl's trainer config with Hydra (``recipe=NAME key=value …``)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

DEFAULT_RECIPE = "cpu_smoke"
# verl's packaged trainer config and our `asyncweb` defaults, so that recipes (and their shared bases) can
# name `ppo_trainer` and `asyncweb: default` in their defaults lists.
SEARCH_PATH_OVERRIDE = "hydra.searchpath=[pkg://verl.trainer.config,pkg://verl_asyncweb.config]"


class RecipeError(ValueError):
    """A recipe name, override or recipe file that cannot be composed; the message says how to fix it."""


def recipes_dir() -> Path:
    """The recipes shipped with the package (a plain folder in a source checkout, package data once installed)."""
    return Path(str(resources.files("verl_asyncweb").joinpath("recipes")))


def available_recipes() -> list[str]:
    """Recipe names: every ``recipes/*.yaml`` except shared bases, whose names start with ``_``."""
    return sorted(path.stem for path in recipes_dir().glob("*.yaml") if not path.stem.startswith("_"))


def compose_recipe(name: str, overrides: list[str] | tuple[str, ...] = ()) -> DictConfig:
    """Compose recipe ``name`` with Hydra-style ``overrides`` into one config (verl's keys plus ``asyncweb``).

    Raises:
        RecipeError: unknown recipe, unknown config key, or a malformed override.
    """
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    names = available_recipes()
    if name not in names:
        raise RecipeError(f"recipe must be one of {names}, got {name!r}; add recipes/{name}.yaml to create it")
    try:
        with initialize_config_dir(config_dir=str(recipes_dir()), version_base=None):
            cfg = compose(config_name=name, overrides=[SEARCH_PATH_OVERRIDE, *overrides])
    except (HydraException, OmegaConfBaseException) as exc:
        raise RecipeError(
            f"recipe {name!r} with overrides {list(overrides)} does not compose: {_first_lines(exc)}"
        ) from exc
    OmegaConf.set_struct(cfg, False)
    cfg.asyncweb.recipe = name
    OmegaConf.set_struct(cfg, True)
    return cfg


def _first_lines(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return " ".join(lines[:3])
