"""Launch a recipe with overrides from Python, the same as `python -m verl_asyncweb.main recipe=NAME key=value ...`.

Usage (CPU, a few minutes: two steps of ``cpu_smoke`` on two MiniWoB++ tasks with the 1/|tau| step normalizer):
    python examples/launch_recipe.py             # extra key=value arguments are passed on
    python examples/launch_recipe.py --cfg job   # print the config it would run, start nothing
"""

import sys

from verl_asyncweb.main import main

if __name__ == "__main__":
    overrides = [
        "recipe=cpu_smoke",
        "trainer.total_training_steps=2",
        "trainer.default_local_dir=runs/example",
        # Any asyncweb or verl key can be overridden; unknown keys stop before any worker starts.
        "asyncweb.algo.step_norm=traj",
        # One source naming two MiniWoB++ tasks; quoted, or Hydra would read two sources.
        'asyncweb.tasks.train=["miniwob:click-test,click-button"]',
    ]
    sys.exit(main(overrides + sys.argv[1:]))
