"""A warm start is evaluated with the prompt settings its demonstrations were recorded with, not the recipe's."""

import json

from verl_asyncweb.learning.evaluate import resolve


def _warm_start(tmp_path, agent: dict):
    demos, model = tmp_path / "demos", tmp_path / "warm"
    demos.mkdir(parents=True)
    model.mkdir()
    (demos / "manifest.json").write_text(json.dumps({"episodes": 1, "instances": [], "agent": agent}))
    (model / "config.json").write_text("{}")
    (model / "warm_start.json").write_text(json.dumps({"demos": str(demos)}))
    return model


def test_a_warm_start_keeps_the_click_target_of_its_demonstrations(tmp_path):
    recipe_default = resolve(_warm_start(tmp_path / "a", {}), "laptop_learning")[1].asyncweb.agent
    # Recorded before click_target existed: coordinates, whatever the recipe says.
    assert recipe_default.click_target == "coordinate"
    element = {"observation": "screenshot+elements", "click_target": "element", "max_element_lines": 12}
    agent = resolve(_warm_start(tmp_path / "b", element), "laptop_learning")[1].asyncweb.agent
    assert agent.click_target == "element" and agent.max_element_lines == 12
    assert agent.observation == "screenshot+elements"


def test_a_plain_model_folder_gets_the_recipes_settings(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    cfg = resolve(tmp_path, "laptop_learning")[1]
    assert cfg.asyncweb.agent.system_prompt == "compact" and cfg.asyncweb.agent.max_element_lines == 24
