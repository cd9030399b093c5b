"""Build ``pixel_values`` on the trainer side from the screenshot keys that ``web_agent`` samples carry.

Rollout workers put screenshots into the ScreenshotStore and send only keys (see
:mod:`verl_asyncweb.agent.worker`). Before pi_prox is recomputed (right before, or built ahead during the previous
local update: :mod:`verl_asyncweb.trainer.pixels_ahead`), the batch is rebuilt in chunks (``asyncweb.pixels``):
for each chunk of rows, the screenshots are fetched, run through the model's image processor and written as
``multi_modal_inputs`` into TransferQueue, where verl's actor workers read them as usual. A pool of
:class:`PixelBuilder` actors does the chunks in parallel, each reading and writing TransferQueue itself, so the
trainer process never holds the batch's pixels; without a pool the trainer does them one after another.

verl's padding rows (tag ``is_padding``) have text-only prompts and get no images. A missing key (the store
restarted, or died with a previous attempt of the job) is read from the run folder's copy (``episodes/screens``,
written by the agent loop). A sample that can be rebuilt from neither gets blank images of the same grid and a
zero response mask, so it trains on nothing, and is counted.
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass

import torch
import transfer_queue as tq
from tensordict import NonTensorStack, TensorDict

from verl_asyncweb.agent.fields import IMAGE_GRID_FIELD, SCREENSHOT_KEYS_FIELD
from verl_asyncweb.algo.trajectories import count_real_trajectories
from verl_asyncweb.compare import metric_names as names
from verl_asyncweb.config.build import plain_dict
from verl_asyncweb.run_folder import screenshot_path
from verl_asyncweb.trainer.config import PixelRebuildConfig

logger = logging.getLogger(__name__)


@dataclass
class PixelStats:
    samples: int = 0
    trajectories: int = 0
    images: int = 0
    image_bytes: int = 0
    dropped_samples: int = 0
    padding_samples: int = 0
    from_run_folder: int = 0
    rollout_image_payload_bytes: int = 0
    built_ahead: int = 0

    def add(self, other: PixelStats) -> None:
        """Add another chunk's counts (``trajectories`` is set for the whole batch)."""
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def metrics(self) -> dict[str, float]:
        per_traj = self.rollout_image_payload_bytes / max(self.trajectories, 1)
        return {
            names.SCREENSHOTS_IMAGES_PER_STEP: float(self.images),
            names.SCREENSHOTS_BYTES_FETCHED: float(self.image_bytes),
            names.SCREENSHOTS_DROPPED_SAMPLES: float(self.dropped_samples),
            names.SCREENSHOTS_PADDING_SAMPLES: float(self.padding_samples),
            names.SCREENSHOTS_FROM_RUN_FOLDER: float(self.from_run_folder),
            names.SCREENSHOTS_BUILT_AHEAD: float(self.built_ahead),
            names.SCREENSHOTS_PAYLOAD_BYTES_PER_TRAJ: per_traj,
        }


def rollout_image_payload_bytes(extra: dict, multi_modal_inputs: dict) -> int:
    """Serialized bytes of a sample's image-related fields as they arrived from rollout (keys, grid, pixels)."""
    import ray

    image_fields = {k: extra.get(k) for k in (SCREENSHOT_KEYS_FIELD, IMAGE_GRID_FIELD)}
    return len(ray.cloudpickle.dumps((image_fields, multi_modal_inputs)))


def as_list(value) -> list:
    """A TransferQueue field's values as a list (a ``NonTensorStack`` or a tensor)."""
    return value.tolist() if hasattr(value, "tolist") else list(value)


def _decode(blob: bytes):
    from PIL import Image

    return Image.open(io.BytesIO(blob)).convert("RGB")


def _blank_pixels(image_processor, grid: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    patch_dim = 3 * image_processor.temporal_patch_size * image_processor.patch_size**2
    return torch.zeros(int(grid.prod(dim=-1).sum()), patch_dim, dtype=dtype)


def pixel_dtype(actor_config) -> torch.dtype:
    """The dtype the actor's model reads pixels in: verl's FSDP engines cast every forward input to the mixed
    precision's ``param_dtype`` (bf16 unless the recipe sets one), so pixels rebuilt in it are what the model
    computes with, in half the bytes of float32 under bf16."""
    from verl.utils.torch_dtypes import PrecisionType

    mixed_precision = actor_config.get("fsdp_config", {}).get("mixed_precision") or {}
    return PrecisionType.to_dtype(mixed_precision.get("param_dtype", "bf16"))


def rebuild_pixels(image_processor, images: list, grid: torch.Tensor, mm_kwargs: dict) -> torch.Tensor:
    """The pixel values of one step's images, with the image grid the rollout saw (else an error, never a silent
    mismatch between image tokens and features)."""
    pixels = image_processor(images=images, return_tensors="pt", **mm_kwargs)
    if not torch.equal(pixels["image_grid_thw"], grid):
        raise ValueError(
            f"rebuilt image grid {pixels['image_grid_thw'].tolist()} != the rollout's {grid.tolist()}: the rollout "
            f"and the trainer must process images with the same data.mm_processor_kwargs (trainer: {mm_kwargs})"
        )
    return pixels["pixel_values"]


def fetch_screenshots(client, keys: list[str]) -> tuple[dict[str, bytes | None], set[str]]:
    """The bytes of each key, from the store or else from the run folder's copy (a store that restarted, or died
    with the previous attempt of a resumed job, lost its keys). Returns the bytes (``None`` where neither has
    them) and the keys that came from the run folder."""
    blobs = dict(zip(keys, client.get(keys), strict=True))
    from_run_folder = set()
    for key in [k for k, blob in blobs.items() if blob is None]:
        path = screenshot_path(key)
        if path is not None and path.exists():
            blobs[key] = path.read_bytes()
            from_run_folder.add(key)
    return blobs, from_run_folder


def build_pixel_chunk(
    keys: list[str],
    partition_id: str,
    tags: list[dict],
    processor,
    client,
    mm_kwargs: dict,
    dtype: torch.dtype = torch.float32,
) -> list[PixelStats]:
    """Rebuild ``multi_modal_inputs`` of one chunk of a batch's rows (pixels in ``dtype``) and put them into
    TransferQueue (see the module docstring); the chunk's pixels are the most this call holds. Returns each row's
    counts."""
    data = tq.kv_batch_get(
        keys=keys, partition_id=partition_id, select_fields=["extra_fields", "response_mask", "multi_modal_inputs"]
    )
    extras = as_list(data["extra_fields"])
    arrived = as_list(data["multi_modal_inputs"])
    payloads = map(rollout_image_payload_bytes, extras, arrived)
    rows = [PixelStats(rollout_image_payload_bytes=payload) for payload in payloads]
    wanted = sorted({key for extra in extras for key in (extra.get(SCREENSHOT_KEYS_FIELD) or [])})
    if not wanted:
        return rows
    blobs, from_run_folder = fetch_screenshots(client, wanted)
    image_processor = processor.image_processor
    inputs, masks, dropped = [], [], 0
    for stats, extra, mask, tag in zip(rows, extras, data["response_mask"].unbind(), tags, strict=True):
        if tag.get("is_padding", False):
            # verl's padding rows (upsample_batch_to_divisible_size) copy a real row's fields, screenshot keys
            # included, but carry a text-only prompt: they must get no images.
            inputs.append({})
            masks.append(mask)
            stats.padding_samples = 1
            continue
        screenshot_keys = extra.get(SCREENSHOT_KEYS_FIELD) or []
        grid = torch.tensor(extra[IMAGE_GRID_FIELD], dtype=torch.long)
        stats.samples = 1
        stats.from_run_folder = len(from_run_folder.intersection(screenshot_keys))
        from_run_folder.difference_update(screenshot_keys)  # counted once, for the first row that shows it
        if all(blobs.get(key) is not None for key in screenshot_keys):
            images = [_decode(blobs[key]) for key in screenshot_keys]
            pixels = rebuild_pixels(image_processor, images, grid, mm_kwargs).to(dtype)
            inputs.append({"pixel_values": pixels, IMAGE_GRID_FIELD: grid})
            masks.append(mask)
            stats.images = len(screenshot_keys)
            stats.image_bytes = sum(len(blobs[key]) for key in screenshot_keys)
        else:
            inputs.append({"pixel_values": _blank_pixels(image_processor, grid, dtype), IMAGE_GRID_FIELD: grid})
            masks.append(torch.zeros_like(mask))
            stats.dropped_samples = 1
            dropped += 1
    fields = {"multi_modal_inputs": NonTensorStack(*inputs)}
    if dropped:
        logger.warning("%d samples lost their screenshots (store restarted) and are dropped", dropped)
        fields["response_mask"] = torch.nested.as_nested_tensor(masks, layout=torch.jagged)
    tq.kv_batch_put(keys=keys, partition_id=partition_id, fields=TensorDict(fields, batch_size=[len(keys)]))
    return rows


class PixelBuilder:
    """A Ray actor that rebuilds chunks of a batch (:func:`build_pixel_chunk`) in its own process."""

    def __init__(self, processor, client, mm_kwargs: dict, dtype: torch.dtype) -> None:
        tq.init()  # attaches to the job's TransferQueue controller
        self.processor = processor
        self.client = client
        self.mm_kwargs = mm_kwargs
        self.dtype = dtype

    def build(self, keys: list[str], partition_id: str, tags: list[dict]) -> list[PixelStats]:
        return build_pixel_chunk(keys, partition_id, tags, self.processor, self.client, self.mm_kwargs, self.dtype)


def start_pixel_builders(
    config: PixelRebuildConfig, processor, client, mm_kwargs: dict | None, dtype: torch.dtype = torch.float32
) -> list:
    """The pool of :class:`PixelBuilder` actors (empty when ``config.workers`` is 0)."""
    import ray

    actor = ray.remote(PixelBuilder).options(num_cpus=config.worker_cpus, max_restarts=-1, max_task_retries=1)
    return [actor.remote(processor, client, plain_dict(mm_kwargs or {}), dtype) for _ in range(config.workers)]


def batch_stats(rows: list[PixelStats], keys: list[str], tags: list[dict]) -> PixelStats:
    """The counts of a batch from its rows' counts."""
    stats = PixelStats()
    for row in rows:
        stats.add(row)
    stats.trajectories = count_real_trajectories(keys, tags)
    return stats
