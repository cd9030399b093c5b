"""Names of the ``extra_fields`` a ``web_agent`` step-sample carries to the trainer, and of its trajectory.

No imports here, so that any module (also one half-initialised while verl loads the plugin) can use them.
"""

SCREENSHOT_KEYS_FIELD = "screenshot_keys"
IMAGE_GRID_FIELD = "image_grid_thw"


def trajectory_id(group: str, suffix: str) -> str:
    """The id of one episode of prompt group ``group`` (verl's ``uid``): the owner of its screenshots."""
    return f"{group}-{suffix}"


def group_of(traj_id: str) -> str:
    """The prompt group (verl's ``uid``) of a :func:`trajectory_id`."""
    return traj_id.rsplit("-", 1)[0]
