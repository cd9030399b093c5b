"""A newcomer's mistyped overrides are refused at composition, naming the key, the expected type or the nearest
valid key (before Ray, workers or a run folder exist: ``test_main_stops_before_any_worker_starts``)."""

import pytest

from verl_asyncweb.main import load_config
from verl_asyncweb.recipes_registry import RecipeError


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "actor_rollout_ref.actor.optim.lr=abc",
            "actor_rollout_ref.actor.optim.lr='abc' (str): verl's FSDPOptimizerConfig.lr is float",
        ),
        (
            "actor_rollout_ref.actor.ppo_epochs=2.5",
            "actor_rollout_ref.actor.ppo_epochs=2.5 (float): verl's FSDPActorConfig.ppo_epochs is int",
        ),
        (
            "+actor_rollout_ref.actor.optim.lrr=1e-3",
            "actor_rollout_ref.actor.optim.lrr is not a field of verl's FSDPOptimizerConfig "
            "(actor_rollout_ref.actor.optim), so nothing reads it; did you mean actor_rollout_ref.actor.optim.lr?",
        ),
        ("+foo.bar=1", "+foo.bar adds a section 'foo' that neither verl nor the plugin reads"),
        ("+data.foo.bar=1", "+data.foo.bar adds 'foo' under data, which neither verl nor the plugin reads"),
        (
            "+trainer.vall_only=true",
            "+trainer.vall_only adds 'vall_only' under trainer, which neither verl nor the plugin reads; "
            "did you mean trainer.val_only?",
        ),
        (
            "asyncweb.agnt.max_steps=3",
            "asyncweb.agnt.max_steps is not a key of recipe 'cpu_smoke'; did you mean asyncweb.agent.max_steps? "
            "(a key that verl or the plugin reads but the recipe lacks is added with +asyncweb.agnt.max_steps=VALUE)",
        ),
        (
            "trainer.total_training_steps=x",
            "trainer.total_training_steps='x' is text, but the recipe's value is int (3)",
        ),
    ],
)
def test_a_mistyped_override_gets_one_line_naming_the_key(override, message):
    with pytest.raises(RecipeError) as refused:
        load_config([override])
    assert str(refused.value) == message


@pytest.mark.parametrize(
    "override",
    [
        "actor_rollout_ref.actor.optim.lr=1e-5",
        "actor_rollout_ref.actor.optim.lr=1",  # an int where verl types a float
        "trainer.project_name=my_project",
        "+data.mm_processor_kwargs.max_pixels=1000",  # into a map the recipe leaves empty
        "+ray_kwargs.ray_init.runtime_env.env_vars.X=1",  # runtime_env: read with .get by verl
        "+actor_rollout_ref.model.override_config.hidden_act=gelu",  # a dataclass field typed as a dict
    ],
)
def test_well_formed_overrides_pass(override):
    load_config([override])
