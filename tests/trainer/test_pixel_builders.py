"""The trainer's pixel rebuild: whole, chunked and by a pool of builder actors give the same pixels in TransferQueue.

A real TransferQueue, a real ScreenshotStore and real PixelBuilder actors in the session's Ray cluster; the batch is
what verl's agent loop leaves (screenshot keys and grids, no pixels), with one padding row as verl adds them.
"""

from dataclasses import replace

import pytest
import torch

pytestmark = pytest.mark.ray

ROWS = 7
WIDTH, HEIGHT = 640, 400


@pytest.fixture(scope="module")
def pixel_batch(ray_cluster, tiny_model_path):
    import transfer_queue as tq
    from transformers import AutoProcessor

    from verl_asyncweb.agent.screenshots import ScreenshotClient
    from verl_asyncweb.bench import pixels as bench

    tq.init()
    processor = AutoProcessor.from_pretrained(tiny_model_path)
    client = ScreenshotClient(name="test_pixel_builders_store", budget_bytes=1 << 26, call_timeout_s=120)
    keys, tags = bench._put_batch(ROWS, WIDTH, HEIGHT, processor, client)
    tags[-1] = {**tags[-1], "is_padding": True}  # verl's upsampled copy of a real row
    yield keys, tags, processor, client
    tq.kv_clear(keys=keys, partition_id=bench.PARTITION)
    ray_cluster.kill(client.handle)


def _rebuild(pixel_batch, chunk_samples: int, workers: int) -> tuple[list[dict], object]:
    import ray
    import transfer_queue as tq
    from transfer_queue import KVBatchMeta

    from verl_asyncweb.bench.pixels import PARTITION
    from verl_asyncweb.trainer.config import PixelRebuildConfig
    from verl_asyncweb.trainer.pixels import attach_pixel_values, start_pixel_builders

    keys, tags, processor, client = pixel_batch
    config = PixelRebuildConfig(workers=workers, chunk_samples=chunk_samples, worker_cpus=0)
    builders = start_pixel_builders(config, processor, client, {})
    try:
        batch = KVBatchMeta(keys=keys, tags=tags, partition_id=PARTITION)
        stats = attach_pixel_values(batch, processor, client, {}, chunk_samples, builders)
        inputs = tq.kv_batch_get(keys=keys, partition_id=PARTITION, select_fields=["multi_modal_inputs"])
        return list(inputs["multi_modal_inputs"]), stats
    finally:
        for builder in builders:
            ray.kill(builder)


def test_chunked_and_pooled_rebuilds_equal_the_whole_batch(pixel_batch):
    whole, whole_stats = _rebuild(pixel_batch, chunk_samples=ROWS, workers=0)
    assert whole_stats.samples == ROWS - 1 and whole_stats.padding_samples == 1 and whole_stats.images == ROWS - 1
    assert whole[-1] == {}, "the padding row gets no images"
    for row in whole[:-1]:
        assert row["pixel_values"].shape[0] == int(row["image_grid_thw"].prod())
    for chunk_samples, workers in [(3, 0), (2, 2)]:
        rebuilt, stats = _rebuild(pixel_batch, chunk_samples, workers)
        # (The rows now hold the first rebuild's pixels, so only what arrived from rollout may differ.)
        assert replace(stats, rollout_image_payload_bytes=0) == replace(whole_stats, rollout_image_payload_bytes=0)
        assert rebuilt[-1] == {}
        for expected, got in zip(whole[:-1], rebuilt[:-1], strict=True):
            torch.testing.assert_close(got["pixel_values"], expected["pixel_values"], rtol=0, atol=0)
            assert torch.equal(got["image_grid_thw"], expected["image_grid_thw"])
