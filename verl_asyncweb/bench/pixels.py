"""Benchmark: the trainer's pixel rebuild of one batch, whole in the trainer process vs chunked vs a builder pool.

``python -m verl_asyncweb.bench pixels [--samples 160] [--width 1280 --height 720] [--modes whole,chunked,pool]
[--workers 2] [--chunk-samples 32] [--out FILE]``

One step's batch of step-samples, each referencing one realistic 1280x720 JPEG screenshot in a real
ScreenshotStore (64 distinct images, as a batch repeats pages), sits in a real TransferQueue as verl's agent
loop leaves it (screenshot keys and image grid, no pixels). :class:`verl_asyncweb.trainer.pixels_ahead.PixelRebuild`
then rebuilds ``multi_modal_inputs`` with the offline Qwen3-VL processor at Qwen3-VL-8B's pixel bounds (the GPU
recipes' model: 16-pixel patches, 3,600 patches of 1,536 floats, ~21 MiB of float32 per 1280x720 screenshot):

* ``whole``: the batch as one chunk in the trainer process (the path before ``asyncweb.pixels`` existed);
* ``chunked``: ``--chunk-samples`` rows at a time in the trainer process (``asyncweb.pixels.workers: 0``);
* ``pool``: the chunks spread over ``--workers`` :class:`~verl_asyncweb.trainer.pixels.PixelBuilder` actors, which
  read and write TransferQueue themselves;
* ``ahead``: the pool, with the batch handed over as the previous local update's look-ahead does
  (``asyncweb.pixels.build_ahead``) and ``--update-s`` seconds of that update's training (a sleep: the GPU's
  work) before the batch is needed.

Each mode runs in its own subprocess with its own Ray cluster; figures are the rebuild's time on the critical path
(from the moment the batch is needed until its pixels are in TransferQueue) and the growth of the trainer (driver)
process's resident memory meanwhile, sampled every 10 ms.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path

logger = logging.getLogger(__name__)

MODES = ("whole", "chunked", "pool", "ahead")
DISTINCT_IMAGES = 64
QWEN3_VL_8B_SIZE = {"longest_edge": 16777216, "shortest_edge": 65536}
"""Qwen3-VL-8B-Instruct's image-processor pixel bounds (its preprocessor_config.json): a 1280x720 screenshot is
kept whole (3,600 patches); the offline tiny model's own bounds are smaller, so the bench passes these."""
PARTITION = "bench_pixels"


class PeakRSS:
    """The largest resident set size of this process while the ``with`` block runs, sampled every 10 ms."""

    def __init__(self) -> None:
        import psutil

        self._process = psutil.Process()
        self._stop = threading.Event()
        self.start_bytes = self.peak_bytes = self._process.memory_info().rss
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            self.peak_bytes = max(self.peak_bytes, self._process.memory_info().rss)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_bytes = max(self.peak_bytes, self._process.memory_info().rss)


def _put_batch(
    samples: int, width: int, height: int, processor, client, mm_kwargs: dict | None = None
) -> tuple[list[str], list[dict]]:
    """``samples`` step-sample rows in TransferQueue as the agent loop leaves them; returns their keys and tags."""
    import torch
    import transfer_queue as tq
    from PIL import Image
    from tensordict import NonTensorStack, TensorDict

    from verl_asyncweb.agent.fields import IMAGE_GRID_FIELD, SCREENSHOT_KEYS_FIELD
    from verl_asyncweb.bench.screenshots import make_screenshot

    blobs = [make_screenshot(seed, width, height) for seed in range(DISTINCT_IMAGES)]
    image_keys = client.put_batch(blobs, "bench-pixels")
    image = Image.open(io.BytesIO(blobs[0])).convert("RGB")
    grid = processor.image_processor(images=[image], return_tensors="pt", **(mm_kwargs or {}))[
        "image_grid_thw"
    ].tolist()
    keys = [f"bench{index // 8}_{index % 8}_0" for index in range(samples)]  # verl's {uid}_{session}_{index}
    extras = [
        {SCREENSHOT_KEYS_FIELD: [image_keys[i % DISTINCT_IMAGES]], IMAGE_GRID_FIELD: grid} for i in range(samples)
    ]
    masks = [torch.ones(48, dtype=torch.long) for _ in range(samples)]
    fields = TensorDict(
        {
            "extra_fields": NonTensorStack(*extras),
            "response_mask": torch.nested.as_nested_tensor(masks, layout=torch.jagged),
            "multi_modal_inputs": NonTensorStack(*[{} for _ in range(samples)]),
        },
        batch_size=[samples],
    )
    tags = [{"status": "finished"} for _ in range(samples)]
    tq.kv_batch_put(keys=keys, partition_id=PARTITION, fields=fields, tags=tags)
    return keys, tags


def run_mode(
    mode: str, samples: int, width: int, height: int, workers: int, chunk_samples: int, update_s: float, dtype: str
) -> dict:
    """Rebuild one batch in ``mode`` (in this process's own Ray cluster) and return its figures."""
    import ray
    import torch
    import transfer_queue as tq
    from transfer_queue import KVBatchMeta
    from transformers import AutoProcessor

    from verl_asyncweb.agent.screenshots import ScreenshotClient
    from verl_asyncweb.backends.tiny_model import build_tiny_model
    from verl_asyncweb.trainer.config import PixelRebuildConfig
    from verl_asyncweb.trainer.pixels_ahead import PixelRebuild

    # Logical CPUs: TransferQueue's storage units and the controller each reserve one.
    ray.init(num_cpus=max(8, workers + 6), include_dashboard=False, logging_level=logging.WARNING)
    try:
        tq.init()
        processor = AutoProcessor.from_pretrained(build_tiny_model(size="qwen3-tiny"))
        client = ScreenshotClient(name="bench_pixels_store", budget_bytes=1 << 30, call_timeout_s=600)
        mm_kwargs = {"size": QWEN3_VL_8B_SIZE}
        keys, tags = _put_batch(samples, width, height, processor, client, mm_kwargs)
        batch = KVBatchMeta(keys=keys, tags=tags, partition_id=PARTITION)
        pooled = mode in ("pool", "ahead")
        chunk = samples if mode == "whole" else chunk_samples
        config = PixelRebuildConfig(workers=workers if pooled else 0, chunk_samples=chunk, worker_cpus=0)
        rebuild = PixelRebuild(config, processor, client, mm_kwargs, getattr(torch, dtype))
        ray.get([builder.__ray_ready__.remote() for builder in rebuild.builders])  # started before the clock
        ahead_s: list[float] = []
        watcher = None
        if mode == "ahead":
            handed_at = time.perf_counter()
            rebuild.build_ahead(batch, step=1)
            watcher = threading.Thread(
                target=lambda: (rebuild.settle(), ahead_s.append(time.perf_counter() - handed_at))
            )
            watcher.start()
            time.sleep(update_s)
        with PeakRSS() as rss:
            started = time.perf_counter()
            stats = rebuild.attach(batch)
            seconds = time.perf_counter() - started
        if watcher is not None:
            watcher.join()
        pixels = tq.kv_batch_get(keys=keys[:1], partition_id=PARTITION, select_fields=["multi_modal_inputs"])
        first = pixels["multi_modal_inputs"][0]["pixel_values"]
        return {
            "mode": mode,
            "samples": samples,
            "image": f"{width}x{height}",
            "dtype": dtype,
            "workers": workers if pooled else 0,
            "chunk_samples": chunk,
            "update_s": update_s if mode == "ahead" else 0,
            "critical_path_s": round(seconds, 2),
            "built_ahead_in_s": round(ahead_s[0], 2) if ahead_s else None,
            "driver_rss_growth_mib": round((rss.peak_bytes - rss.start_bytes) / 2**20, 1),
            "pixel_values_mib": round(samples * first.numel() * first.element_size() / 2**20, 1),
            "images": stats.images,
            "built_ahead": stats.built_ahead,
        }
    finally:
        ray.shutdown()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_asyncweb.bench pixels", description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=160, help="step-samples in the batch (the GPU recipe: ~640)")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=720)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--workers", type=int, default=2, help="PixelBuilder actors of the pool mode")
    parser.add_argument("--chunk-samples", type=int, default=32)
    parser.add_argument(
        "--update-s", type=float, default=60.0, help="ahead mode: seconds the previous local update trains"
    )
    parser.add_argument(
        "--dtype",
        choices=("bfloat16", "float32"),
        default="bfloat16",
        help="the pixels' dtype: the actor's mixed-precision param dtype (bf16 in the GPU recipes)",
    )
    parser.add_argument("--out", type=Path, default=None, help="also write the figures here (JSON)")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)  # a mode, run in this process
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    common = (args.samples, args.width, args.height, args.workers, args.chunk_samples, args.update_s, args.dtype)
    if args.one:
        print(json.dumps(run_mode(args.one, *common)))
        return 0
    modes = [mode for mode in args.modes.split(",") if mode]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        parser.error(f"--modes must be among {list(MODES)}, got {unknown}")
    results = []
    for mode in modes:
        logger.info("pixels: %s, %d samples of %dx%d ...", mode, args.samples, args.width, args.height)
        command = [sys.executable, "-m", "verl_asyncweb.bench", "pixels", *argv, "--one", mode]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            logger.error("mode %s failed:\n%s", mode, done.stderr[-3000:])
            return 1
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        logger.info("  %s", results[-1])
    header = f"{'mode':<8} {'workers':>7} {'chunk':>5} {'critical s':>10} {'driver +MiB':>11} {'pixels MiB':>10}"
    lines = [header] + [
        f"{r['mode']:<8} {r['workers']:>7} {r['chunk_samples']:>5} {r['critical_path_s']:>10} "
        f"{r['driver_rss_growth_mib']:>11} {r['pixel_values_mib']:>10}"
        for r in results
    ]
    print("\n".join(lines))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0
