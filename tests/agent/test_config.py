"""AgentConfig: defaults, validation messages, unknown keys."""

from __future__ import annotations

import pytest

from verl_asyncweb.agent.config import AgentConfig


def test_agent_config_defaults_match_design():
    config = AgentConfig()
    assert config.history_images == 1 and config.max_history_text_rounds == 8
    assert config.max_prompt_tokens == 4096
    assert config.screenshot_store_budget_bytes is None  # derived from the recipe by verl_asyncweb.main
    assert config.screenshot_store_name == "asyncweb_screenshot_store"
    assert config.screenshot_max_side == 1280 and config.stuck_repeat_limit == 2


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"history_images": 0}, "asyncweb.agent.history_images must be >= 1, got 0"),
        ({"history_images": 1.5}, "asyncweb.agent.history_images must be an integer >= 1, got 1.5"),
        ({"max_history_text_rounds": -1}, "asyncweb.agent.max_history_text_rounds must be >= 0, got -1"),
        ({"max_prompt_tokens": 0}, "asyncweb.agent.max_prompt_tokens must be >= 1, got 0"),
        ({"stuck_repeat_limit": 1}, "asyncweb.agent.stuck_repeat_limit must be >= 2, got 1"),
        ({"screenshot_store_name": " "}, "asyncweb.agent.screenshot_store_name must be a non-empty string"),
        ({"screenshot_put_timeout_s": 0}, "asyncweb.agent.screenshot_put_timeout_s must be a number > 0, got 0"),
        ({"observation": "pixels"}, "asyncweb.agent.observation must be one of"),
        ({"max_element_lines": 0}, "asyncweb.agent.max_element_lines must be >= 1, got 0"),
        ({"click_target": "xy"}, "asyncweb.agent.click_target must be one of"),
        ({"click_target": "element"}, "asyncweb.agent.click_target=element names elements of the element list"),
    ],
)
def test_agent_config_rejects_bad_values_with_key_and_value(overrides, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        AgentConfig(**overrides)


def test_agent_config_from_dict_rejects_unknown_keys_and_lists_valid_ones():
    assert AgentConfig.from_dict({"history_images": 2, "_target_": "x"}).history_images == 2
    assert AgentConfig.from_dict(None) == AgentConfig()
    with pytest.raises(ValueError, match=r"unknown keys \['history_image'\]; valid keys are \[.*'history_images'"):
        AgentConfig.from_dict({"history_image": 2})


def test_element_observation_turns_on_the_pools_element_list():
    from verl_asyncweb.config.schema import AsyncWebConfig

    plain = AsyncWebConfig.from_config({"agent": {"observation": "screenshot"}})
    assert plain.env.accessibility_text is False and not plain.agent.shows_elements
    with_elements = AsyncWebConfig.from_config({"agent": {"observation": "screenshot+elements"}})
    assert with_elements.env.accessibility_text is True and with_elements.agent.shows_elements
