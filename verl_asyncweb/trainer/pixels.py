"""Build ``pixel_values`` on the trainer side from the screenshot keys that ``web_agent`` samples carry.

Rollout workers put screenshots into the ScreenshotStore and send only keys (see
:mod:`verl_asyncweb.agent.worker`). Right before pi_prox is recomputed, the batch is rebuilt in chunks
(``asyncweb.pixels``): for each chunk of rows, the screenshots are fetched, run through the model's image processor
and written as ``multi_modal_inputs`` into TransferQueue, where verl's actor workers read them as usual. A pool of
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
from transfer_queue import KVBatchMeta

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
            names.SCREENSHOTS_PAYLOAD_BYTES_PER_TRAJ: per_traj,
        }


def rollout_image_payload_bytes(extra: dict, multi_modal_inputs: dict) -> int:
    """Serialized bytes of a sample's image-related fields as they arrived from rollout (keys, grid, pixels)."""
    import ray

    image_fields = {k: extra.get(k) for k in (SCREENSHOT_KEYS_FIELD, IMAGE_GRID_FIELD)}
    return len(ray.cloudpickle.dumps((image_fields, multi_modal_inputs)))


def _as_list(value) -> list:
    return value.tolist() if hasattr(value, "tolist") else list(value)


def _decode(blob: bytes):
    from PIL import Image

    return Image.open(io.BytesIO(blob)).convert("RGB")


def _blank_pixels(image_processor, grid: torch.Tensor) -> torch.Tensor:
    patch_dim = 3 * image_processor.temporal_patch_size * image_processor.patch_size**2
    return torch.zeros(int(grid.prod(dim=-1).sum()), patch_dim)


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


def fetch_screenshots(client, keys: list[str]) -> tuple[dict[str, bytes | None], int]:
    """The bytes of each key, from the store or else from the run folder's copy (a store that restarted, or died
    with the previous attempt of a resumed job, lost its keys). Returns the bytes (``None`` where neither has
    them) and how many came from the run folder."""
    blobs = dict(zip(keys, client.get(keys), strict=True))
    from_run_folder = 0
    for key in [k for k, blob in blobs.items() if blob is None]:
        path = screenshot_path(key)
        if path is not None and path.exists():
            blobs[key] = path.read_bytes()
            from_run_folder += 1
    return blobs, from_run_folder


def build_pixel_chunk(
    keys: list[str], partition_id: str, tags: list[dict], processor, client, mm_kwargs: dict
) -> PixelStats:
    """Rebuild ``multi_modal_inputs`` of one chunk of a batch's rows and put them into TransferQueue (see the
    module docstring); the chunk's pixels are the most this call holds."""
    stats = PixelStats()
    data = tq.kv_batch_get(
        keys=keys, partition_id=partition_id, select_fields=["extra_fields", "response_mask", "multi_modal_inputs"]
    )
    extras = _as_list(data["extra_fields"])
    arrived = _as_list(data["multi_modal_inputs"])
    stats.rollout_image_payload_bytes = sum(map(rollout_image_payload_bytes, extras, arrived))
    wanted = sorted({key for extra in extras for key in (extra.get(SCREENSHOT_KEYS_FIELD) or [])})
    if not wanted:
        return stats
    blobs, stats.from_run_folder = fetch_screenshots(client, wanted)
    image_processor = processor.image_processor
    inputs, masks, dropped_any = [], [], False
    for extra, mask, tag in zip(extras, data["response_mask"].unbind(), tags, strict=True):
        if tag.get("is_padding", False):
            # verl's padding rows (upsample_batch_to_divisible_size) copy a real row's fields, screenshot keys
            # included, but carry a text-only prompt: they must get no images.
            inputs.append({})
            masks.append(mask)
            stats.padding_samples += 1
            continue
        screenshot_keys = extra.get(SCREENSHOT_KEYS_FIELD) or []
        grid = torch.tensor(extra[IMAGE_GRID_FIELD], dtype=torch.long)
        stats.samples += 1
        if all(blobs.get(key) is not None for key in screenshot_keys):
            images = [_decode(blobs[key]) for key in screenshot_keys]
            inputs.append(
                {"pixel_values": rebuild_pixels(image_processor, images, grid, mm_kwargs), IMAGE_GRID_FIELD: grid}
            )
            masks.append(mask)
            stats.images += len(screenshot_keys)
            stats.image_bytes += sum(len(blobs[key]) for key in screenshot_keys)
        else:
            inputs.append({"pixel_values": _blank_pixels(image_processor, grid), IMAGE_GRID_FIELD: grid})
            masks.append(torch.zeros_like(mask))
            stats.dropped_samples += 1
            dropped_any = True
    fields = {"multi_modal_inputs": NonTensorStack(*inputs)}
    if dropped_any:
        logger.warning("%d samples lost their screenshots (store restarted) and are dropped", stats.dropped_samples)
        fields["response_mask"] = torch.nested.as_nested_tensor(masks, layout=torch.jagged)
    tq.kv_batch_put(keys=keys, partition_id=partition_id, fields=TensorDict(fields, batch_size=[len(keys)]))
    return stats


class PixelBuilder:
    """A Ray actor that rebuilds chunks of a batch (:func:`build_pixel_chunk`) in its own process."""

    def __init__(self, processor, client, mm_kwargs: dict) -> None:
        tq.init()  # attaches to the job's TransferQueue controller
        self.processor = processor
        self.client = client
        self.mm_kwargs = mm_kwargs

    def build(self, keys: list[str], partition_id: str, tags: list[dict]) -> PixelStats:
        return build_pixel_chunk(keys, partition_id, tags, self.processor, self.client, self.mm_kwargs)


def start_pixel_builders(config: PixelRebuildConfig, processor, client, mm_kwargs: dict | None) -> list:
    """The pool of :class:`PixelBuilder` actors (empty when ``config.workers`` is 0)."""
    import ray

    actor = ray.remote(PixelBuilder).options(num_cpus=config.worker_cpus, max_restarts=-1, max_task_retries=1)
    return [actor.remote(processor, client, plain_dict(mm_kwargs or {})) for _ in range(config.workers)]


def attach_pixel_values(
    batch: KVBatchMeta,
    processor,
    client,
    mm_kwargs: dict | None = None,
    chunk_samples: int = 32,
    builders: list | None = None,
) -> PixelStats:
    """Resolve the batch's screenshot keys into ``multi_modal_inputs`` in TransferQueue, ``chunk_samples`` rows at
    a time: by the ``builders`` pool in parallel when there is one, else one chunk after another in this process.

    ``mm_kwargs`` is ``data.mm_processor_kwargs``, the image-processor arguments the rollout used.
    """
    import ray

    mm_kwargs = plain_dict(mm_kwargs or {})
    keys = list(batch.keys)
    tags = list(batch.tags or []) or [{}] * len(keys)
    chunks = [(keys[i : i + chunk_samples], tags[i : i + chunk_samples]) for i in range(0, len(keys), chunk_samples)]
    if builders:
        pending = [
            builders[index % len(builders)].build.remote(chunk_keys, batch.partition_id, chunk_tags)
            for index, (chunk_keys, chunk_tags) in enumerate(chunks)
        ]
        parts = ray.get(pending)
    else:
        parts = [build_pixel_chunk(k, batch.partition_id, t, processor, client, mm_kwargs) for k, t in chunks]
    stats = PixelStats()
    for part in parts:
        stats.add(part)
    stats.trajectories = count_real_trajectories(keys, tags)
    return stats
