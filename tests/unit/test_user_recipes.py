"""A verl user's recipes and flags: recipe folders of their own, Hydra's ``--cfg job``, ``--help``, refusals."""

import pytest
import yaml

from verl_asyncweb.main import main
from verl_asyncweb.recipes_registry import RECIPE_PATH_ENV, RecipeError, available_recipes, compose_recipe

MY_RECIPE = {
    "defaults": ["_cpu_base", "_self_"],
    "asyncweb": {"staleness": 1, "tasks": {"train": ["miniwob:click-test"]}},
    "trainer": {"total_training_steps": 2},
}


@pytest.fixture
def recipe_folder(tmp_path):
    folder = tmp_path / "my_recipes"
    folder.mkdir()
    (folder / "my_site.yaml").write_text("# my_site: click-test only, eta 1.\n" + yaml.safe_dump(MY_RECIPE))
    return folder


def test_a_recipe_in_the_users_folder_names_the_packaged_bases(recipe_folder, monkeypatch):
    monkeypatch.setenv(RECIPE_PATH_ENV, str(recipe_folder))
    assert "my_site" in available_recipes()
    cfg = compose_recipe("my_site")
    assert cfg.asyncweb.recipe == "my_site" and cfg.asyncweb.platform == "cpu"  # from _cpu_base
    assert list(cfg.asyncweb.tasks.train) == ["miniwob:click-test"] and cfg.trainer.total_training_steps == 2


def test_main_prints_a_recipe_file_as_it_would_run_and_starts_nothing(recipe_folder, capsys):
    assert main([f"recipe={recipe_folder / 'my_site.yaml'}", "--cfg", "job"]) == 0
    out = capsys.readouterr().out
    printed = yaml.safe_load(out)
    assert printed["asyncweb"]["recipe"] == "my_site"
    assert printed["trainer"]["v1"]["sampler"]["max_off_policy_threshold"] == 2  # derived: eta + 1
    assert printed["asyncweb"]["agent"]["screenshot_store_budget_bytes"] > 0  # derived from the recipe
    assert "Started a local Ray instance" not in out


def test_a_user_recipe_may_not_shadow_a_packaged_one(recipe_folder, capsys):
    (recipe_folder / "cpu_smoke.yaml").write_text(yaml.safe_dump(MY_RECIPE))
    with pytest.raises(RecipeError, match="defined twice") as err:
        compose_recipe("my_site", extra_dirs=[recipe_folder])
    assert str(recipe_folder / "cpu_smoke.yaml") in str(err.value) and "recipes/cpu_smoke.yaml" in str(err.value)
    assert main(["--recipe-dir", str(recipe_folder), "recipe=my_site", "--cfg", "job"]) == 2
    assert "defined twice" in capsys.readouterr().err


@pytest.mark.parametrize("recipe", available_recipes())
def test_cfg_job_prints_every_packaged_recipe_with_derived_keys(recipe, capsys):
    assert main([f"recipe={recipe}", "--cfg", "job"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["trainer"]["v1"]["sampler"]["max_off_policy_threshold"] == printed["asyncweb"]["staleness"] + 1
    if recipe.startswith("webgym"):
        assert printed["asyncweb"]["judge"]["base_url"] == "???"  # still to supply, left visible


def test_help_lists_every_recipe_with_its_description_and_hardware(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for recipe in available_recipes():
        assert f"  {recipe}: " in out
    assert "hardware: 8 nodes x 8 H100" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["-m", "asyncweb.algo.step_norm=traj,const"], "compare --sweep"),
        (["--frobnicate"], "unknown option '--frobnicate'"),
        (["--cfg", "hydra"], "--cfg hydra is not supported"),
        (["--recipe-dir", "/no/such/folder", "--cfg", "job"], "recipe folder /no/such/folder does not exist"),
    ],
)
def test_flags_main_does_not_take_are_refused_with_a_pointer(args, message, capsys):
    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_doctor_composes_every_recipe_of_the_users_folder_and_names_the_broken_one(recipe_folder):
    from verl_asyncweb.doctor import recipe_checks

    broken = {**MY_RECIPE, "asyncweb": {"staleness": -1}}
    (recipe_folder / "broken.yaml").write_text(yaml.safe_dump(broken))
    checks = {check.name: check for check in recipe_checks([str(recipe_folder)])}
    assert set(checks) == {"recipe my_site", "recipe broken"}, "the user's recipes, not the packaged ones"
    assert checks["recipe my_site"].ok
    assert not checks["recipe broken"].ok and "asyncweb.staleness" in checks["recipe broken"].detail
    assert str(recipe_folder / "broken.yaml") in checks["recipe broken"].detail
