"""Screenshots by reference (DESIGN.md section 2): a Ray actor holding image bytes, and its client.

The agent loop ``put``s each step's screenshot (the env's JPEG bytes) once and puts only the returned key (a
sha256 hex string) and the store's incarnation id into the training sample. The trainer side resolves keys to
bytes with ``get`` and to images with :func:`decode_images` only where pixel values are built, so no Ray message
on the rollout -> trainer path carries image bytes (verl issues #7391, #2847, #4995: host RAM exhaustion).

Memory contract:

* Keys are reference counted per owner (a trajectory id). A key leaves the store only when its last reference
  is dropped by :meth:`ScreenshotStore.release` or :meth:`ScreenshotStore.free` (counted as ``evictions``); the
  store never drops a referenced key on its own.
* The byte budget is enforced by back-pressure: ``put`` of new bytes waits while the budget is full and raises
  :class:`ScreenshotStoreFull` after its timeout. Consumers must release what they consumed: in training runs the
  trainer releases every trajectory whose prompt group has left TransferQueue
  (:mod:`~verl_asyncweb.trainer.screenshot_sweep`), and a failed episode releases its own at once.
* A budget derived from the recipe (``peak_screenshots`` given) follows the run's measured bytes per screenshot:
  once :data:`MEASURED_AFTER` screenshots are stored it becomes ``peak_screenshots`` x their mean size x
  :data:`~verl_asyncweb.agent.store_budget.HEADROOM`, never below the derived budget nor above
  :data:`MAX_BUDGET_FRACTION` of the host's memory.

Restart detection (AsyncWebRL keeps its store in a Ray actor and drops batches whose keys went missing): every
store draws a random incarnation id at start. Samples record the incarnation their keys were put under;
:meth:`ScreenshotClient.check` is False when the store has since restarted or a key is gone, and the consumer
drops such samples and counts them.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import logging
import math
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # PIL and ray are imported where they are used
    from PIL import Image

logger = logging.getLogger(__name__)

DEFAULT_STORE_NAME = "asyncweb_screenshot_store"
DEFAULT_BUDGET_BYTES = 512 * 1024 * 1024
STORE_MAX_RESTARTS = 10
"""Restarts of the store process before clients give up (a crash loop must surface as an error)."""
MEASURED_AFTER = 32
"""Distinct screenshots stored before a derived budget follows their measured mean size."""
MAX_BUDGET_FRACTION = 0.25
"""Most of the host's memory a derived budget grows to."""
BUDGET_STEP = 1.05
"""A derived budget grows once the measured size asks for this factor more, or for the ceiling (not on every
screenshot)."""


class ScreenshotStoreFull(TimeoutError):
    """``put`` waited longer than its timeout for budget to be released."""


def screenshot_key(data: bytes) -> str:
    """Content key of ``data``: its sha256 hex digest (64 characters)."""
    return hashlib.sha256(data).hexdigest()


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB"


class ScreenshotStore:
    """Screenshot bytes keyed by content hash, de-duplicated and reference counted; run as an async Ray actor.

    Use it through :class:`ScreenshotClient`, which creates the named actor. The class is plain Python so that
    it can also be driven directly in an event loop (tests, single-process tools).

    Args:
        budget_bytes: Most bytes held at once; ``put`` of new bytes waits while it would be exceeded.
        put_timeout_s: Default time a ``put`` waits for budget before raising :class:`ScreenshotStoreFull`.
        peak_screenshots: Screenshots the run holds at its peak, when ``budget_bytes`` was derived from them: the
            budget then follows the measured bytes per screenshot (see the module docstring); ``None`` keeps
            ``budget_bytes`` fixed.
    """

    def __init__(
        self,
        budget_bytes: int = DEFAULT_BUDGET_BYTES,
        put_timeout_s: float = 120.0,
        peak_screenshots: int | None = None,
    ):
        if isinstance(budget_bytes, bool) or not isinstance(budget_bytes, int) or budget_bytes <= 0:
            raise ValueError(f"ScreenshotStore budget_bytes must be an integer > 0, got {budget_bytes!r}")
        if not put_timeout_s > 0:
            raise ValueError(f"ScreenshotStore put_timeout_s must be > 0, got {put_timeout_s!r}")
        self._budget = budget_bytes
        self._derived_budget = budget_bytes
        self._peak_screenshots = peak_screenshots
        self._stored = 0  # distinct screenshots ever stored, and their bytes: the measured size
        self._stored_bytes = 0
        self._peak_held = 0
        self._put_timeout_s = float(put_timeout_s)
        self._incarnation = uuid.uuid4().hex
        self._data: dict[str, bytes] = {}
        self._refs: dict[str, Counter[str]] = {}  # key -> owner -> number of puts by that owner
        self._owned: dict[str, set[str]] = {}  # owner -> keys it references
        self._held = 0
        self._freed: asyncio.Condition | None = None  # created lazily inside the actor's event loop
        self._waiting = 0
        self._counts = Counter(puts=0, dedup_hits=0, gets=0, missing=0, evictions=0, put_timeouts=0, lost=0)
        self._started = time.time()
        logger.info("ScreenshotStore %s started with a budget of %s", self._incarnation, _mib(budget_bytes))

    def _condition(self) -> asyncio.Condition:
        if self._freed is None:
            self._freed = asyncio.Condition()
        return self._freed

    async def incarnation(self) -> str:
        """The random id drawn when this store started; a different id means the store restarted."""
        return self._incarnation

    async def put(self, data: bytes, owner: str, timeout_s: float | None = None) -> str:
        """Store ``data`` (or add a reference to identical bytes already held) on behalf of ``owner``.

        Args:
            data: Encoded image bytes.
            owner: Id of the holder of the reference (the trajectory id).
            timeout_s: How long to wait for budget; the store's default when ``None``.

        Returns:
            The content key.

        Raises:
            ValueError: ``data`` is not bytes or is larger than the whole budget.
            ScreenshotStoreFull: The budget stayed full for ``timeout_s``.
        """
        if not isinstance(data, bytes | bytearray | memoryview):
            raise ValueError(f"ScreenshotStore.put data must be bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) > self._budget:
            raise ValueError(
                f"screenshot of {len(data)} bytes exceeds the whole store budget of {self._budget} bytes; "
                "raise asyncweb.agent.screenshot_store_budget_bytes"
            )
        key = screenshot_key(data)
        self._counts["puts"] += 1
        if key not in self._data:
            await self._wait_for_budget(key, len(data), self._put_timeout_s if timeout_s is None else timeout_s)
        if key in self._data:
            self._counts["dedup_hits"] += 1
        else:
            self._data[key] = data
            self._held += len(data)
            self._peak_held = max(self._peak_held, self._held)
            self._refs[key] = Counter()
            self._measure(len(data))
        self._refs[key][owner] += 1
        self._owned.setdefault(owner, set()).add(key)
        return key

    async def _wait_for_budget(self, key: str, size: int, timeout_s: float) -> None:
        cond = self._condition()
        deadline = time.monotonic() + timeout_s
        async with cond:
            self._waiting += 1
            try:
                # Identical bytes put by someone else while we waited need no new budget.
                while key not in self._data and self._held + size > self._budget:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        self._counts["put_timeouts"] += 1
                        raise ScreenshotStoreFull(
                            f"ScreenshotStore budget full: {_mib(self._held)} in {len(self._data)} screenshots "
                            f"(~{self._mean_bytes() // 1024} KiB each) held of {_mib(self._budget)} by "
                            f"{len(self._owned)} trajectories, waited {timeout_s:g} s to store {size} bytes; "
                            "raise asyncweb.agent.screenshot_store_budget_bytes"
                        )
                    try:
                        await asyncio.wait_for(cond.wait(), timeout=left)
                    except asyncio.TimeoutError:
                        continue  # the loop condition decides
            finally:
                self._waiting -= 1

    def _mean_bytes(self) -> int:
        return self._stored_bytes // max(self._stored, 1)

    def _measure(self, size: int) -> None:
        """Count a newly stored screenshot; a derived budget follows the measured mean size."""
        self._stored += 1
        self._stored_bytes += size
        if self._peak_screenshots is None or self._stored < MEASURED_AFTER:
            return
        from verl_asyncweb.agent.store_budget import HEADROOM

        wanted = math.ceil(self._peak_screenshots * self._mean_bytes() * HEADROOM)
        ceiling = max(self._derived_budget, _memory_ceiling())
        budget = min(max(self._derived_budget, wanted), ceiling)
        if budget > self._budget and (budget >= self._budget * BUDGET_STEP or budget == ceiling):
            logger.info(
                "ScreenshotStore budget %s -> %s: %d screenshots at the peak x %d KiB measured",
                _mib(self._budget),
                _mib(budget),
                self._peak_screenshots,
                self._mean_bytes() // 1024,
            )
            self._budget = budget

    async def put_batch(self, items: Sequence[bytes], owner: str, timeout_s: float | None = None) -> list[str]:
        """``put`` each item in order for ``owner``; returns their keys."""
        return [await self.put(data, owner, timeout_s) for data in items]

    async def get(self, keys: Sequence[str]) -> list[bytes | None]:
        """Bytes of each key, ``None`` for unknown keys (counted as ``missing``)."""
        out = [self._data.get(key) for key in keys]
        self._counts["gets"] += len(out)
        self._counts["missing"] += sum(1 for blob in out if blob is None)
        return out

    async def contains(self, keys: Sequence[str]) -> list[bool]:
        """Whether each key is held (not counted as a get)."""
        return [key in self._data for key in keys]

    async def check(self, keys: Sequence[str], incarnation: str) -> bool:
        """True when this store is ``incarnation`` and holds every key; a False answer is counted as ``lost``."""
        ok = incarnation == self._incarnation and all(key in self._data for key in keys)
        if not ok:
            self._counts["lost"] += 1
        return ok

    async def release(self, owner: str) -> int:
        """Drop every reference held by ``owner``; returns the number of keys removed from the store."""
        return await self.release_owners([owner])

    async def release_owners(self, owners: Iterable[str]) -> int:
        """Drop every reference held by each of ``owners``; returns the number of keys removed from the store."""
        removed = 0
        for owner in owners:
            for key in self._owned.pop(owner, set()):
                refs = self._refs.get(key)
                if refs is not None:
                    refs.pop(owner, None)
                    removed += await self._drop_if_unreferenced(key)
        await self._notify()
        return removed

    async def owners(self) -> list[str]:
        """The owners (trajectory ids) holding references now."""
        return list(self._owned)

    async def free(self, keys: Iterable[str], owner: str | None = None) -> int:
        """Drop references to ``keys``: those of ``owner``, or all of them when ``owner`` is ``None``.

        Returns:
            The number of keys removed from the store (their last reference was dropped).
        """
        removed = 0
        for key in keys:
            refs = self._refs.get(key)
            if refs is None:
                continue
            owners = [owner] if owner is not None else list(refs)
            for name in owners:
                if refs.pop(name, None) is not None:
                    held = self._owned.get(name)
                    if held is not None:
                        held.discard(key)
                        if not held:
                            del self._owned[name]
            removed += await self._drop_if_unreferenced(key)
        await self._notify()
        return removed

    async def _drop_if_unreferenced(self, key: str) -> int:
        refs = self._refs.get(key)
        if refs is None or refs:
            return 0
        del self._refs[key]
        self._held -= len(self._data.pop(key))
        self._counts["evictions"] += 1
        return 1

    async def _notify(self) -> None:
        cond = self._condition()
        async with cond:
            cond.notify_all()

    async def stats(self) -> dict[str, Any]:
        """Counters and sizes: bytes held, keys, puts, dedup hits, gets, missing, evictions, incarnation, ..."""
        return {
            "incarnation": self._incarnation,
            "bytes_held": self._held,
            "peak_bytes_held": self._peak_held,
            "budget_bytes": self._budget,
            "bytes_per_screenshot": self._mean_bytes(),
            "keys": len(self._data),
            "owners": len(self._owned),
            "waiting_puts": self._waiting,
            "uptime_s": time.time() - self._started,
            **self._counts,
        }


class ScreenshotClient:
    """Handle on the job's :class:`ScreenshotStore` actor, used by agent-loop workers and the trainer.

    The actor handle is acquired once (creating the named actor when missing, ``get_if_exists=True`` used only
    then) and cached; it is re-acquired only after the actor died. The store's incarnation is recorded at first
    contact and whenever a dead store is replaced (``restarts_seen`` counts those).

    The actor is not detached: its lifetime follows the process that created it. Create it first on the driver
    (``ScreenshotClient(...).connect()``) so that it lives as long as the job; workers then find it by name.

    Args:
        name: Name of the actor (``asyncweb.agent.screenshot_store_name``).
        budget_bytes: Byte budget, used only when this client creates the actor.
        put_timeout_s: Back-pressure wait of ``put``, used only when this client creates the actor.
        peak_screenshots: See :class:`ScreenshotStore`; used only when this client creates the actor.
        call_timeout_s: Timeout of every call to the actor on top of a put's wait.
        namespace: Ray namespace of the actor; the job's namespace when ``None``.
    """

    def __init__(
        self,
        name: str = DEFAULT_STORE_NAME,
        budget_bytes: int = DEFAULT_BUDGET_BYTES,
        put_timeout_s: float = 120.0,
        peak_screenshots: int | None = None,
        call_timeout_s: float = 60.0,
        namespace: str | None = None,
    ):
        self.name = name
        self.budget_bytes = budget_bytes
        self.put_timeout_s = put_timeout_s
        self.peak_screenshots = peak_screenshots
        self.call_timeout_s = call_timeout_s
        self.namespace = namespace
        self._handle = None
        self.incarnation: str | None = None
        self.restarts_seen = 0

    @classmethod
    def from_config(cls, config: Any, **kwargs: Any) -> ScreenshotClient:
        """Build from an :class:`~verl_asyncweb.agent.config.AgentConfig` (or a dict with its keys)."""
        return cls(
            name=config["screenshot_store_name"],
            budget_bytes=config["screenshot_store_budget_bytes"] or DEFAULT_BUDGET_BYTES,
            put_timeout_s=config["screenshot_put_timeout_s"],
            peak_screenshots=config["screenshot_store_peak_screenshots"],
            **kwargs,
        )

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_handle"] = None  # each process acquires its own handle
        return state

    # -- handle management ---------------------------------------------------------------------------------------

    def _acquire(self):
        import ray

        actor_cls = ray.remote(ScreenshotStore)
        options: dict[str, Any] = {
            "name": self.name,
            "get_if_exists": True,
            "num_cpus": 0,
            "max_concurrency": 1000,
            # A crashed store comes back under the same name with a new incarnation. Without a restart, Ray keeps
            # the name bound to the dead actor while its owner lives, so it could never be re-created.
            "max_restarts": STORE_MAX_RESTARTS,
        }
        if self.namespace is not None:
            options["namespace"] = self.namespace
        return actor_cls.options(**options).remote(self.budget_bytes, self.put_timeout_s, self.peak_screenshots)

    def _reset_after_death(self, exc: BaseException) -> None:
        logger.warning("ScreenshotStore %r died (%s); acquiring a new one", self.name, type(exc).__name__)
        self._handle = None

    def _record(self, incarnation: str) -> str:
        if self.incarnation is not None and incarnation != self.incarnation:
            self.restarts_seen += 1
            logger.warning(
                "ScreenshotStore %r restarted: incarnation %s -> %s; samples of the old one are lost",
                self.name,
                self.incarnation,
                incarnation,
            )
        self.incarnation = incarnation
        return incarnation

    @property
    def handle(self):
        """The cached actor handle, acquired (and the incarnation recorded) on first use."""
        if self._handle is None:
            self._handle = self._acquire()
        return self._handle

    def _call(self, method: str, *args: Any, extra_timeout_s: float = 0.0) -> Any:
        import ray
        from ray.exceptions import RayActorError

        for attempt in (0, 1):
            handle = self.handle
            try:
                if self.incarnation is None or attempt:
                    self._record(ray.get(handle.incarnation.remote(), timeout=self.call_timeout_s))
                ref = getattr(handle, method).remote(*args)
                return ray.get(ref, timeout=self.call_timeout_s + extra_timeout_s)
            except RayActorError as exc:
                if attempt:
                    raise
                self._reset_after_death(exc)
        raise AssertionError("unreachable")

    async def _acall(self, method: str, *args: Any, extra_timeout_s: float = 0.0) -> Any:
        from ray.exceptions import RayActorError

        for attempt in (0, 1):
            handle = self.handle
            try:
                if self.incarnation is None or attempt:
                    ref = handle.incarnation.remote()
                    self._record(await asyncio.wait_for(ref, timeout=self.call_timeout_s))
                ref = getattr(handle, method).remote(*args)
                return await asyncio.wait_for(ref, timeout=self.call_timeout_s + extra_timeout_s)
            except RayActorError as exc:
                if attempt:
                    raise
                self._reset_after_death(exc)
        raise AssertionError("unreachable")

    def start(self) -> None:
        """Acquire (or ask Ray to create) the store without waiting for it to be up; :meth:`connect` waits."""
        _ = self.handle

    def connect(self) -> str:
        """Acquire (or create) the store and return its current incarnation."""
        return self.current_incarnation()

    # -- synchronous API (trainer side, tools) ------------------------------------------------------------------

    def current_incarnation(self) -> str:
        """Ask the store for its incarnation now (re-acquiring a dead store) and record it."""
        return self._record(self._call("incarnation"))

    def put(self, data: bytes, owner: str) -> str:
        """Store ``data`` for ``owner``; returns its key. See :meth:`ScreenshotStore.put`."""
        return self._call("put", data, owner, self.put_timeout_s, extra_timeout_s=self.put_timeout_s)

    def put_batch(self, items: Sequence[bytes], owner: str) -> list[str]:
        """Store each item for ``owner``; returns the keys."""
        wait = self.put_timeout_s * max(1, len(items))
        return self._call("put_batch", list(items), owner, self.put_timeout_s, extra_timeout_s=wait)

    def get(self, keys: Sequence[str]) -> list[bytes | None]:
        """Bytes of each key, ``None`` where the store does not hold it."""
        return self._call("get", list(keys))

    def check(self, keys: Sequence[str], incarnation: str) -> bool:
        """Whether samples whose ``keys`` were put under ``incarnation`` are still resolvable.

        False when the store restarted since (a new incarnation) or any key is gone; the consumer then drops
        the samples and counts them.
        """
        return bool(self._call("check", list(keys), incarnation))

    def release(self, owner: str) -> int:
        """Drop every reference held by ``owner`` (a consumed trajectory); returns keys removed."""
        return self._call("release", owner)

    def free(self, keys: Iterable[str], owner: str | None = None) -> int:
        """Drop references to ``keys`` (``owner``'s, or all); returns keys removed."""
        return self._call("free", list(keys), owner)

    def release_owners(self, owners: Iterable[str]) -> int:
        """Drop every reference held by each of ``owners``; returns keys removed."""
        return self._call("release_owners", list(owners))

    def owners(self) -> list[str]:
        """The trajectory ids holding references now."""
        return self._call("owners")

    def stats(self) -> dict[str, Any]:
        """The store's counters, see :meth:`ScreenshotStore.stats`."""
        return self._call("stats")

    # -- asynchronous API (agent loop) --------------------------------------------------------------------------

    async def aput(self, data: bytes, owner: str) -> str:
        """Async :meth:`put`."""
        return await self._acall("put", data, owner, self.put_timeout_s, extra_timeout_s=self.put_timeout_s)

    async def aput_batch(self, items: Sequence[bytes], owner: str) -> list[str]:
        """Async :meth:`put_batch`."""
        wait = self.put_timeout_s * max(1, len(items))
        return await self._acall("put_batch", list(items), owner, self.put_timeout_s, extra_timeout_s=wait)

    async def aget(self, keys: Sequence[str]) -> list[bytes | None]:
        """Async :meth:`get`."""
        return await self._acall("get", list(keys))

    async def acheck(self, keys: Sequence[str], incarnation: str) -> bool:
        """Async :meth:`check`."""
        return bool(await self._acall("check", list(keys), incarnation))

    async def arelease(self, owner: str) -> int:
        """Async :meth:`release`."""
        return await self._acall("release", owner)

    async def astats(self) -> dict[str, Any]:
        """Async :meth:`stats`."""
        return await self._acall("stats")


def _memory_ceiling() -> int:
    """:data:`MAX_BUDGET_FRACTION` of this host's physical memory."""
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * MAX_BUDGET_FRACTION)


def decode_images(blobs: Sequence[bytes | None]) -> list[Image.Image]:
    """Decode encoded screenshots into RGB PIL images, in order.

    Args:
        blobs: Encoded image bytes, e.g. from :meth:`ScreenshotClient.get`.

    Returns:
        One fully loaded RGB image per blob.

    Raises:
        ValueError: A blob is ``None`` (a missing key: the sample should have been dropped by ``check``) or
            cannot be decoded.
    """
    from PIL import Image, UnidentifiedImageError

    images = []
    for i, blob in enumerate(blobs):
        if blob is None:
            raise ValueError(f"screenshot {i} is missing from the store; drop samples whose check() is False")
        try:
            with Image.open(io.BytesIO(blob)) as img:
                images.append(img.convert("RGB"))
        except (UnidentifiedImageError, OSError) as exc:
            raise ValueError(f"screenshot {i} ({len(blob)} bytes) is not a decodable image: {exc}") from None
    return images


def fit_max_side(data: bytes, max_side: int, quality: int = 80) -> bytes:
    """Return ``data`` unchanged when its longest side is <= ``max_side``, else a down-scaled JPEG of it.

    Args:
        data: Encoded image bytes (the env's JPEG).
        max_side: ``asyncweb.agent.screenshot_max_side``.
        quality: JPEG quality of a re-encoded image.
    """
    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:
        if max(img.size) <= max_side:
            return data
        scale = max_side / max(img.size)
        size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
        out = io.BytesIO()
        img.convert("RGB").resize(size, Image.Resampling.LANCZOS).save(out, format="JPEG", quality=quality)
        return out.getvalue()
