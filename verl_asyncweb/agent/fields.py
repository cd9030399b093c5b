"""Names of the ``extra_fields`` a ``web_agent`` step-sample carries to the trainer.

No imports here, so that any module (also one half-initialised while verl loads the plugin) can use them.
"""

SCREENSHOT_KEYS_FIELD = "screenshot_keys"
IMAGE_GRID_FIELD = "image_grid_thw"
