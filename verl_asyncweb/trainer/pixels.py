"""Build ``pixel_values`` on the trainer side from the screenshot keys that ``web_agent`` samples carry.

Rollout workers put screenshots into the ScreenshotStore and send only keys (see
:mod:`verl_asyncweb.agent.worker`). Right before pi_prox is recomputed, the trainer fetches the bytes for the
sampled batch, runs the model's image processor and writes ``multi_modal_inputs`` into TransferQueue, where
verl's actor workers read them as usual. verl's padding rows (tag ``is_padding``) have text-only prompts and get
no images. A missing key (the store of a previous attempt died with it) is read
from the run folder's copy (``episodes/screens``, written by the agent loop). A sample that can be rebuilt from
neither gets blank images of the same grid and a zero response mask, so it trains on nothing, and is counted.
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
from verl_asyncweb.config.build import plain_dict
from verl_asyncweb.run_folder import screenshot_path

logger = logging.getLogger(__name__)


@dataclass
class PixelStats:
    samples: int = 0
    trajectories: int = 0
    images: int = 0
    image_bytes: int = 0
    dropped_samples: int = 0
    padding_samples: int = 0
    rollout_image_payload_bytes: int = 0

    def metrics(self) -> dict[str, float]:
        per_traj = self.rollout_image_payload_bytes / max(self.trajectories, 1)
        return {
            "asyncweb/screenshots/images_per_step": float(self.images),
            "asyncweb/screenshots/bytes_fetched": float(self.image_bytes),
            "asyncweb/screenshots/dropped_samples": float(self.dropped_samples),
            "asyncweb/screenshots/padding_samples": float(self.padding_samples),
            "asyncweb/screenshots/rollout_payload_bytes_per_traj": per_traj,
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


def attach_pixel_values(batch: KVBatchMeta, processor, client, mm_kwargs: dict | None = None) -> PixelStats:
    """Resolve the batch's screenshot keys into ``multi_modal_inputs`` in TransferQueue (see module docstring).

    ``mm_kwargs`` is ``data.mm_processor_kwargs``, the image-processor arguments the rollout used.
    """
    mm_kwargs = plain_dict(mm_kwargs or {})
    stats = PixelStats()
    data = tq.kv_batch_get(
        keys=batch.keys,
        partition_id=batch.partition_id,
        select_fields=["extra_fields", "response_mask", "multi_modal_inputs"],
    )
    extras = _as_list(data["extra_fields"])
    arrived = _as_list(data["multi_modal_inputs"])
    stats.rollout_image_payload_bytes = sum(map(rollout_image_payload_bytes, extras, arrived))
    stats.trajectories = len({extra.get("traj_id") for extra in extras})
    wanted = sorted({key for extra in extras for key in (extra.get(SCREENSHOT_KEYS_FIELD) or [])})
    if not wanted:
        return stats
    blobs = dict(zip(wanted, client.get(wanted), strict=True))
    for key in [k for k, blob in blobs.items() if blob is None]:
        # A resumed job restores samples whose store died with the previous job: use the run folder's copy.
        path = screenshot_path(key)
        if path is not None and path.exists():
            blobs[key] = path.read_bytes()
    image_processor = processor.image_processor
    inputs, masks, dropped_any = [], [], False
    tags = list(batch.tags or []) or [{}] * len(extras)
    for extra, mask, tag in zip(extras, data["response_mask"].unbind(), tags, strict=True):
        if tag.get("is_padding", False):
            # verl's padding rows (upsample_batch_to_divisible_size) copy a real row's fields, screenshot keys
            # included, but carry a text-only prompt: they must get no images.
            inputs.append({})
            masks.append(mask)
            stats.padding_samples += 1
            continue
        keys = extra.get(SCREENSHOT_KEYS_FIELD) or []
        grid = torch.tensor(extra[IMAGE_GRID_FIELD], dtype=torch.long)
        stats.samples += 1
        if all(blobs.get(key) is not None for key in keys):
            pixel_values = rebuild_pixels(image_processor, [_decode(blobs[key]) for key in keys], grid, mm_kwargs)
            inputs.append({"pixel_values": pixel_values, IMAGE_GRID_FIELD: grid})
            masks.append(mask)
            stats.images += len(keys)
            stats.image_bytes += sum(len(blobs[key]) for key in keys)
        else:
            inputs.append({"pixel_values": _blank_pixels(image_processor, grid), IMAGE_GRID_FIELD: grid})
            masks.append(torch.zeros_like(mask))
            stats.dropped_samples += 1
            dropped_any = True
    fields = {"multi_modal_inputs": NonTensorStack(*inputs)}
    if dropped_any:
        logger.warning("%d samples lost their screenshots (store restarted) and are dropped", stats.dropped_samples)
        fields["response_mask"] = torch.nested.as_nested_tensor(masks, layout=torch.jagged)
    tq.kv_batch_put(
        keys=batch.keys, partition_id=batch.partition_id, fields=TensorDict(fields, batch_size=[len(batch)])
    )
    return stats
