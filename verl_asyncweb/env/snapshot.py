"""``EnvSnapshot``: the state of an episode, small enough to send through Ray and store in a run folder.

:meth:`BrowserPool.snapshot` takes one, :meth:`BrowserPool.restore` puts it on any page of any pool (same
viewport), :meth:`BrowserPool.fork` does so on a free page. How a snapshot is restored depends on its ``kind``:

- ``"site"`` (pages of the pool's bundled site server): state restore, independent of the episode's length. The
  server's episode state is copied under a new episode token; cookies, web storage, the URL (re-rendered from that
  state), the episode's earlier URLs (for ``go_back``), form values, focus and text selection, scroll positions and
  page time are put back. Exact.
- ``"miniwob"``: the task page is regenerated from its seed with the episode counters and reward history the page
  showed, then the recorded actions are re-executed in the page without observations. MiniWoB++ keeps its state in
  script closures that cannot be read, but the page is a function of seed, page time and input, so with
  ``asyncweb.env.deterministic_clock`` this is exact; without it the page time follows the wall clock and the
  snapshot says ``exact=False``.
- ``"web"`` (any page the pool does not serve, e.g. WebGym's live sites): the server side cannot be captured, so
  restore replays the recorded action prefix from the start URL; ``exact`` is False and the pool counts it in
  ``stats()["snapshots_replayed"]``.
- ``"browsergym"`` (a BrowserGym task): the task object is built again with its seed and its ``setup`` run, then
  the recorded actions are re-executed and validated as they were; ``exact`` is False (the task class owns its
  state) and it counts as replayed.

Every kind records the same fields (replayed kinds rebuild cookies, storage and form values by replaying and do not
apply the recorded ones); ``fingerprint`` (page text, form values, focus, scroll) is compared after a restore: an
exact snapshot that does not reproduce it fails the restore (``env_failed``), an inexact one counts a divergence in
``stats()["snapshots_diverged"]``. Not captured: iframes' and shadow roots' state, ``contenteditable`` carets, and
pages an episode visited twice keep only the form values of their last departure.
URLs on the pool's site server are stored as paths (``/shop/cart``), since each pool serves on its own port.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any

from verl_asyncweb.env.actions import Action, Answer, GoBack, KeyPress, LeftClick, Navigate, Scroll, TypeText, Wait
from verl_asyncweb.env.tasks.task import RubricFact, Task

SNAPSHOT_VERSION = 1
KINDS = ("site", "miniwob", "web", "browsergym")
_ACTIONS: dict[str, type] = {
    cls.__name__: cls for cls in (LeftClick, TypeText, KeyPress, Scroll, Wait, GoBack, Navigate, Answer)
}


@dataclass(frozen=True)
class EnvSnapshot:
    """What makes the state of one episode (no screenshots).

    Args:
        task: The task as a JSON object (:func:`task_to_dict`; its ``seed`` seeds MiniWoB++ pages).
        kind: ``"site"``, ``"miniwob"``, ``"web"`` or ``"browsergym"`` (how it is restored; see the module
            docstring).
        exact: Restoring reproduces the state exactly; False for action replay on pages the pool does not serve.
        reason: Why it is (not) exact, for logs and run folders.
        url: Page URL (a path on the pool's site server).
        viewport: ``(width, height)`` of the pool that took it; recorded actions are in its pixels.
        steps: Steps the episode has taken (invalid actions included).
        done: The episode had ended.
        answer: The episode's answer so far.
        reward: The programmatic reward if the episode had ended.
        actions: The executed action prefix (:func:`encode_action`; ``None`` for an invalid action), oldest first.
        history: The episode's earlier pages, oldest first (``go_back`` targets): ``url`` and the ``form`` values
            and ``scroll`` the episode left the page with (the browser restores them on going back).
        site_state: The site server's state of the episode (``None`` off the site server).
        cookies: Cookies of the context, the episode cookie excluded.
        local_storage: ``localStorage`` of the page's origin.
        session_storage: ``sessionStorage`` of the page's origin.
        form: Form fields whose value, checked state or selection differ from the page's defaults.
        focus: Focused element (document-order index), whether it showed a focus ring, its text selection.
        selection: Selected page text (node paths and offsets) outside text fields.
        scroll: Window scroll ``x``, ``y`` and ``elements`` (``[index, left, top]`` of scrolled elements).
        clock_ms: Page time in ms since the Unix epoch, ``None`` when the pool does not control the clock.
        miniwob: MiniWoB++ counters when the episode started (``episode_id``, ``latest``, ``scores``, ``display``).
        fingerprint: Digest of the page's path, title, text, form values, focus and scroll.
        version: Format version.
    """

    task: dict[str, Any]
    kind: str
    exact: bool
    reason: str
    url: str
    viewport: tuple[int, int]
    steps: int = 0
    done: bool = False
    answer: str | None = None
    reward: float | None = None
    actions: tuple[dict[str, Any] | None, ...] = ()
    history: tuple[dict[str, Any], ...] = ()
    site_state: dict[str, Any] | None = None
    cookies: tuple[dict[str, Any], ...] = ()
    local_storage: dict[str, str] | None = None
    session_storage: dict[str, str] | None = None
    form: tuple[dict[str, Any], ...] = ()
    focus: dict[str, Any] | None = None
    selection: dict[str, Any] | None = None
    scroll: dict[str, Any] | None = None
    clock_ms: int | None = None
    miniwob: dict[str, Any] | None = None
    fingerprint: str = ""
    version: int = SNAPSHOT_VERSION

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"EnvSnapshot.kind must be one of {KINDS}, got {self.kind!r}")
        if self.version != SNAPSHOT_VERSION:
            raise ValueError(
                f"EnvSnapshot.version must be {SNAPSHOT_VERSION}, got {self.version!r}; "
                "take the snapshot again with this version of verl_asyncweb"
            )

    @property
    def task_obj(self) -> Task:
        """The task as a :class:`Task`."""
        return task_from_dict(self.task)

    def to_json(self) -> str:
        """Compact JSON text (round-trips through :meth:`from_json` to an equal snapshot)."""
        return json.dumps(asdict(self), separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> EnvSnapshot:
        """Parse :meth:`to_json` output.

        Raises:
            ValueError: On a malformed snapshot, naming the field.
        """
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError(f"EnvSnapshot JSON must be an object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"EnvSnapshot JSON has unknown field(s) {unknown}; known fields are {sorted(known)}")
        for name in ("actions", "history", "cookies", "form", "viewport"):
            if name in data:
                if not isinstance(data[name], list):
                    raise ValueError(f"EnvSnapshot field {name!r} must be a list, got {data[name]!r:.60}")
                data[name] = tuple(data[name])
        try:
            return cls(**data)
        except TypeError as exc:
            raise ValueError(f"EnvSnapshot JSON is missing fields: {exc}") from None


def task_to_dict(task: Task) -> dict[str, Any]:
    """A task as plain JSON types."""
    return json.loads(json.dumps(asdict(task)))


def task_from_dict(data: dict[str, Any]) -> Task:
    """Inverse of :func:`task_to_dict`."""
    data = dict(data)
    data["allowed_origins"] = tuple(data.get("allowed_origins", ()))
    data["rubric"] = tuple(RubricFact(**fact) for fact in data.get("rubric", ()))
    return Task(**data)


def relative_url(url: str, site_origin: str) -> str:
    """``url`` as a path when it is on the pool's site server (each pool serves on its own port)."""
    if site_origin and (url == site_origin or url.startswith(site_origin + "/")):
        return url[len(site_origin) :] or "/"
    return url


def absolute_url(url: str, site_origin: str) -> str:
    """Inverse of :func:`relative_url`."""
    return site_origin + url if url.startswith("/") else url


def encode_action(action: Action, site_origin: str) -> dict[str, Any]:
    """A parsed action (viewport pixels) as a JSON object, e.g. ``{"type": "LeftClick", "x": 12.0, "y": 40.0}``."""
    data = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(action).items()}
    if isinstance(action, Navigate):
        data["url"] = relative_url(action.url, site_origin)
    return {"type": type(action).__name__, **data}


def decode_action(data: dict[str, Any], site_origin: str) -> Action:
    """Inverse of :func:`encode_action`.

    Raises:
        ValueError: On an unknown action type (the message lists the known ones).
    """
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k != "type"}
    cls = _ACTIONS.get(data.get("type", ""))
    if cls is None:
        raise ValueError(f"snapshot action type must be one of {sorted(_ACTIONS)}, got {data.get('type')!r}")
    if cls is Navigate:
        kwargs["url"] = absolute_url(kwargs["url"], site_origin)
    return cls(**kwargs)


def mouse_position(actions: tuple[dict[str, Any] | None, ...] | list, viewport: tuple[int, int]) -> tuple[float, float]:
    """Where the recorded actions left the mouse (hover styles depend on it); ``(0, 0)`` before any pointer action."""
    for data in reversed(actions):
        if data is None:
            continue
        if data["type"] == "LeftClick":
            return data["x"], data["y"]
        if data["type"] == "TypeText" and data.get("at"):
            return tuple(data["at"])
        if data["type"] == "Scroll":
            return tuple(data["at"]) if data.get("at") else (viewport[0] / 2, viewport[1] / 2)
    return 0.0, 0.0
