"""Typed config of the agent loop: the ``asyncweb.agent`` node."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from verl.base_config import BaseConfig

from verl_asyncweb.config.build import build_config, check_int

_PREFIX = "asyncweb.agent"
OBSERVATIONS = ("screenshot", "screenshot+elements")
SYSTEM_PROMPT_NAMES = ("full", "compact")
CLICK_TARGETS = ("coordinate", "element")


@dataclass
class AgentConfig(BaseConfig):
    """The ``asyncweb.agent`` node: context window, token limits, screenshot store and stuck detection.

    Args:
        history_images: Screenshots of the last ``history_images`` rounds (the current one included) are sent as
            images; older rounds are summarised as text. AsyncWebRL keeps 1.
        max_history_text_rounds: At most this many older rounds are summarised as text lines (oldest dropped
            first); 0 sends no text history.
        max_prompt_tokens: Prompt limit per step, in tokens; a longer prompt ends the episode as a context
            overflow (a failure, counted in ``asyncweb/context_overflows``).
        screenshot_store_budget_bytes: Bytes the :class:`~verl_asyncweb.agent.screenshots.ScreenshotStore` may
            hold; ``put`` waits (back-pressure) while the budget is full. ``None`` (the default): derived by
            ``verl_asyncweb.main`` from the recipe (:mod:`~verl_asyncweb.agent.store_budget`); a value below the
            recipe's peak stops the run at start-up.
        screenshot_store_peak_screenshots: Screenshots held at the peak, set by ``verl_asyncweb.main`` when it
            derives the budget: the store then follows the run's measured bytes per screenshot. ``None`` keeps an
            explicit budget fixed.
        screenshot_store_name: Name of the store's Ray actor (one per job).
        screenshot_put_timeout_s: How long a ``put`` may wait for budget before it fails with
            :class:`~verl_asyncweb.agent.screenshots.ScreenshotStoreFull`.
        screenshot_max_side: Longest image side in pixels; screenshots are stored as the env's JPEG bytes and
            only down-scaled when larger.
        max_steps: Cap on every task's step budget (0 keeps each task's own ``max_steps``); small recipes use it
            to bound episode length.
        stuck_repeat_limit: A step is stuck when it ends a run of this many steps with the same action on the
            same screenshot (2: it repeated the previous step's action, which did not change the page).
        observation: What the prompt shows of the page: ``screenshot`` (always) or ``screenshot+elements``, which
            adds the pool's list of visible elements (kind, text, centre in 0-1000 coordinates) as text.
        max_element_lines: With ``screenshot+elements``, at most this many element lines are shown.
        system_prompt: ``full`` (the paper's instructions) or ``compact`` (the same action schema and layout in
            less than half the text; see :data:`~verl_asyncweb.agent.prompts.SYSTEM_PROMPTS`).
        click_target: How the system prompt tells the model to name what it clicks or types into: ``coordinate``
            (``[x, y]``, the paper's) or ``element`` (``{"element": i}``, the index of a listed element, as
            BrowserGym's element ids; needs ``screenshot+elements``). With the element list shown, the parser
            accepts both.
        branch_step: Branch rollouts (:mod:`~verl_asyncweb.agent.branch`): with K >= 1, the first member of each
            group runs to step K and snapshots it, and the group's other members play on from that shared state;
            0 (the default) is off; validation episodes never branch. The step-sample taken from the branch point
            (step K of the anchor and of each member) records it as ``branch_point``; the others record none.
        branch_members: How many of a group's other episodes play on from its branch point; the rest play whole
            episodes, so the group holds trajectories that did not pass through the point and a step-level
            baseline over the point's trajectories (``asyncweb.algo.step_credit=branch``) differs from the
            group's. 0 (the default): all ``rollout.n - 1`` of them.
        branch_wait_s: How long a member waits for its anchor's branch point before it plays a whole episode
            from the start instead (counted as ``asyncweb/branch/fallbacks``).
        worker_resources: Ray resources every agent-loop worker requests, e.g. ``{browser_host: 1}``: workers,
            and so their browsers, run only on the nodes that offer them (:mod:`~verl_asyncweb.agent.placement`);
            empty (the default) keeps verl's placement over every node with CPUs.
    """

    history_images: int = 1
    max_history_text_rounds: int = 8
    max_prompt_tokens: int = 4096
    screenshot_store_budget_bytes: int | None = None
    screenshot_store_peak_screenshots: int | None = None
    screenshot_store_name: str = "asyncweb_screenshot_store"
    screenshot_put_timeout_s: float = 120.0
    screenshot_max_side: int = 1280
    max_steps: int = 0
    stuck_repeat_limit: int = 2
    observation: str = "screenshot"
    max_element_lines: int = 40
    system_prompt: str = "full"
    click_target: str = "coordinate"
    branch_step: int = 0
    branch_members: int = 0
    branch_wait_s: float = 600.0
    worker_resources: dict[str, float] = field(default_factory=dict)

    def __post_init__(self):
        check_int(f"{_PREFIX}.history_images", self.history_images, 1)
        check_int(f"{_PREFIX}.max_history_text_rounds", self.max_history_text_rounds, 0)
        check_int(f"{_PREFIX}.max_prompt_tokens", self.max_prompt_tokens, 1)
        check_int(f"{_PREFIX}.max_steps", self.max_steps, 0)
        if self.screenshot_store_budget_bytes is not None:
            check_int(f"{_PREFIX}.screenshot_store_budget_bytes", self.screenshot_store_budget_bytes, 1)
        if self.screenshot_store_peak_screenshots is not None:
            check_int(f"{_PREFIX}.screenshot_store_peak_screenshots", self.screenshot_store_peak_screenshots, 1)
        check_int(f"{_PREFIX}.screenshot_max_side", self.screenshot_max_side, 1)
        check_int(f"{_PREFIX}.stuck_repeat_limit", self.stuck_repeat_limit, 2)
        check_int(f"{_PREFIX}.max_element_lines", self.max_element_lines, 1)
        if self.system_prompt not in SYSTEM_PROMPT_NAMES:
            raise ValueError(
                f"{_PREFIX}.system_prompt must be one of {list(SYSTEM_PROMPT_NAMES)}, got {self.system_prompt!r}"
            )
        if self.observation not in OBSERVATIONS:
            raise ValueError(f"{_PREFIX}.observation must be one of {list(OBSERVATIONS)}, got {self.observation!r}")
        if self.click_target not in CLICK_TARGETS:
            raise ValueError(f"{_PREFIX}.click_target must be one of {list(CLICK_TARGETS)}, got {self.click_target!r}")
        if self.click_target == "element" and not self.shows_elements:
            raise ValueError(
                f"{_PREFIX}.click_target=element names elements of the element list; "
                f"set {_PREFIX}.observation=screenshot+elements"
            )
        check_int(f"{_PREFIX}.branch_step", self.branch_step, 0)
        check_int(f"{_PREFIX}.branch_members", self.branch_members, 0)
        for name in ("screenshot_put_timeout_s", "branch_wait_s"):
            timeout = getattr(self, name)
            if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
                raise ValueError(f"{_PREFIX}.{name} must be a number > 0, got {timeout!r}")
        for name, amount in self.worker_resources.items():
            if (
                not isinstance(name, str)
                or isinstance(amount, bool)
                or not isinstance(amount, int | float)
                or amount <= 0
            ):
                raise ValueError(
                    f"{_PREFIX}.worker_resources must map Ray resource names to amounts > 0, got {name!r}: {amount!r}"
                )
        if not isinstance(self.screenshot_store_name, str) or not self.screenshot_store_name.strip():
            raise ValueError(
                f"{_PREFIX}.screenshot_store_name must be a non-empty string, got {self.screenshot_store_name!r}"
            )

    @property
    def shows_elements(self) -> bool:
        """The prompt carries the page's element list (the pool must collect it)."""
        return self.observation == "screenshot+elements"

    @classmethod
    def from_dict(cls, node: Mapping[str, Any] | None) -> AgentConfig:
        """Build from a plain dict or a ``DictConfig`` node, rejecting unknown keys.

        Args:
            node: The ``asyncweb.agent`` node; ``None`` gives the defaults. ``_target_`` is ignored.

        Returns:
            The validated config.

        Raises:
            ValueError: On an unknown key or an invalid value.
        """
        return build_config(cls, _PREFIX, node)
