"""Find recipes and compose them into verl's trainer config with Hydra (``recipe=NAME key=value …``)."""

from __future__ import annotations

import functools
import importlib.util
import itertools
import os
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from verl_asyncweb.config.overrides import check_overrides, did_you_mean

DEFAULT_RECIPE = "cpu_smoke"
# Our `asyncweb` defaults, after verl's trainer config (verl_config_dir), so that recipes (and their shared bases)
# can name `ppo_trainer` and `asyncweb: default` in their defaults lists; recipe folders are appended.
PLUGIN_CONFIG_PATH = "pkg://verl_asyncweb.config"
RECIPE_PATH_ENV = "VERL_ASYNCWEB_RECIPE_PATH"
# Shipped recipes renamed since a release used the old name: the old name is answered with the new one.
RENAMED_RECIPES = {
    f"miniwob_{arm}": f"demo_{arm}" for arm in ("async_grpo_const", "async_grpo_traj", "raftpp", "sync_reinforce")
}


class RecipeError(ValueError):
    """A recipe name, override or recipe file that cannot be composed; the message says how to fix it."""


def verl_config_dir() -> Path:
    """verl's packaged trainer config folder, found without importing verl (a ``pkg://`` search path would import
    it, ~5 s, before the first recipe error could be shown)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise RecipeError("verl is not installed: pip install verl (see docs/install.md)")
    return Path(spec.submodule_search_locations[0]) / "trainer" / "config"


def recipes_dir() -> Path:
    """The recipes shipped with the package (a plain folder in a source checkout, package data once installed)."""
    return Path(str(resources.files("verl_asyncweb").joinpath("recipes")))


def user_recipe_dirs(extra_dirs: Sequence[str | Path] = ()) -> list[Path]:
    """The user's recipe folders: ``$VERL_ASYNCWEB_RECIPE_PATH`` (``os.pathsep``-separated), then ``extra_dirs``."""
    from_env = [entry for entry in os.environ.get(RECIPE_PATH_ENV, "").split(os.pathsep) if entry.strip()]
    dirs = [Path(entry).expanduser().resolve() for entry in [*from_env, *extra_dirs]]
    for path in dirs:
        if not path.is_dir():
            raise RecipeError(f"recipe folder {path} does not exist (from {RECIPE_PATH_ENV} or --recipe-dir)")
    return list(dict.fromkeys(dirs))


def recipe_files(extra_dirs: Sequence[str | Path] = ()) -> dict[str, Path]:
    """Every recipe and shared base by name, packaged first; a user file that reuses a name is an error."""
    found: dict[str, Path] = {}
    for folder in [recipes_dir(), *user_recipe_dirs(extra_dirs)]:
        for path in sorted(folder.glob("*.yaml")):
            if path.stem in found and found[path.stem].resolve() != path.resolve():
                raise RecipeError(
                    f"recipe {path.stem!r} is defined twice: {found[path.stem]} and {path}; rename one "
                    "(a user recipe may not shadow another)"
                )
            found[path.stem] = path
    return found


def recipe_names(files: Mapping[str, Path]) -> list[str]:
    """The recipes among :func:`recipe_files`: every name except shared bases, which start with ``_``."""
    return sorted(name for name in files if not name.startswith("_"))


def available_recipes(extra_dirs: Sequence[str | Path] = ()) -> list[str]:
    """Recipe names of the package's and the user's recipe folders."""
    return recipe_names(recipe_files(extra_dirs))


def recipe_summary(path: Path) -> tuple[str, str]:
    """(what, hardware) from a recipe's header comment: the first sentence after ``NAME:`` and the first sentence
    after ``Hardware:`` (continuation lines included in both)."""
    header = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        header.append(line[1:])

    def paragraph(label: str) -> str:
        for index, line in enumerate(header):
            if line.strip().startswith(label):
                more = itertools.takewhile(lambda x: x.startswith("   "), header[index + 1 :])
                return " ".join([line.strip().split(":", 1)[1].strip(), *(text.strip() for text in more)])
        return ""

    def first_sentence(text: str) -> str:
        return text.split(". ")[0].rstrip(".") + "." if text else ""

    return first_sentence(paragraph(f"{path.stem}:")), first_sentence(paragraph("Hardware:"))


def resolve_recipe(name: str, extra_dirs: Sequence[str | Path] = ()) -> tuple[str, list[Path]]:
    """``recipe=NAME`` or ``recipe=path/to/file.yaml`` -> (name, the user folders to search)."""
    if name.endswith(".yaml"):  # the recipe folders hold *.yaml only
        path = Path(name).expanduser().resolve()
        if not path.is_file():
            raise RecipeError(f"recipe file {path} does not exist")
        return path.stem, user_recipe_dirs([*extra_dirs, path.parent])
    return name, user_recipe_dirs(extra_dirs)


def check_recipe_name(name: str, extra_dirs: Sequence[str | Path] = ()) -> tuple[str, list[Path], dict[str, Path]]:
    """``(name, user recipe folders, recipe files)`` of an existing recipe; raises :class:`RecipeError` naming the
    valid ones otherwise. Imports nothing heavy, so a misspelt recipe is answered before verl is imported."""
    name, user_dirs = resolve_recipe(name, extra_dirs)
    files = recipe_files(user_dirs)
    names = recipe_names(files)
    if name not in names and name in RENAMED_RECIPES:
        raise RecipeError(
            f"recipe {name!r} is now {RENAMED_RECIPES[name]!r}: a pipeline demo on the random tiny model, renamed so "
            "that its name does not promise learning (see docs/recipes.md)"
        )
    if name not in names:
        raise RecipeError(
            f"recipe must be one of {names}, got {name!r}; add {name}.yaml to a recipe folder "
            f"(--recipe-dir DIR or {RECIPE_PATH_ENV}) or pass recipe=path/to/{name}.yaml"
        )
    return name, user_dirs, files


def compose_recipe(
    name: str, overrides: list[str] | tuple[str, ...] = (), extra_dirs: Sequence[str | Path] = ()
) -> DictConfig:
    """Compose recipe ``name`` (or a recipe file) with Hydra-style ``overrides`` into one config (verl's keys plus
    ``asyncweb``). User recipes may name ``_cpu_base``/``_gpu_base``, ``ppo_trainer`` and ``asyncweb: default``.

    Raises:
        RecipeError: unknown recipe, a shadowing user recipe, unknown config key, or a malformed override.
    """
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    name, user_dirs, files = check_recipe_name(name, extra_dirs)
    # Hydra finds the primary config only in the config dir: the recipe's own folder; every recipe folder is on the
    # search path for the shared bases and recipes named in defaults lists.
    folders = [recipes_dir(), *user_dirs]
    searchpath = [f"file://{verl_config_dir()}", PLUGIN_CONFIG_PATH, *(f"file://{folder}" for folder in folders)]
    config_dir = str(files[name].parent.resolve())

    def compose_with(overrides) -> DictConfig:
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            return compose(config_name=name, overrides=[f"hydra.searchpath=[{','.join(searchpath)}]", *overrides])

    base = functools.cache(lambda: compose_with([]))  # the recipe without the overrides, for hints and checks
    try:
        cfg = compose_with(overrides)
    except (HydraException, OmegaConfBaseException) as exc:
        unknown = _unknown_key(exc)
        if unknown is not None:
            raise RecipeError(
                f"{unknown} is not a key of recipe {name!r}{did_you_mean(base(), unknown)} (a key that verl "
                f"or the plugin reads but the recipe lacks is added with +{unknown}=VALUE)"
            ) from exc
        raise RecipeError(
            f"recipe {name!r} with overrides {list(overrides)} does not compose: {_first_lines(exc)}"
        ) from exc
    try:
        check_overrides(cfg, list(overrides), base)
    except ValueError as exc:
        raise RecipeError(str(exc)) from exc
    OmegaConf.set_struct(cfg, False)
    cfg.asyncweb.recipe = name
    OmegaConf.set_struct(cfg, True)
    return cfg


def _unknown_key(exc: Exception) -> str | None:
    """The key of Hydra's "Could not override 'KEY'" (an override of a key the config lacks), else ``None``."""
    match = re.search(r"Could not override '([^']+)'", str(exc))
    return match.group(1) if match else None


def _first_lines(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return " ".join(lines[:3])
