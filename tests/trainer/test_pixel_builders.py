"""The trainer's pixel rebuild: whole, chunked, by a pool of builder actors and built ahead give the same pixels in
TransferQueue and the same counts.

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


def _rebuild(
    pixel_batch, chunk_samples: int, workers: int, ahead: int = 0, dtype: torch.dtype = torch.float32
) -> tuple[list[dict], object]:
    """Rebuild the batch; with ``ahead``, its first ``ahead`` rows were handed to the builders beforehand."""
    import ray
    import transfer_queue as tq
    from transfer_queue import KVBatchMeta

    from verl_asyncweb.bench.pixels import PARTITION
    from verl_asyncweb.trainer.config import PixelRebuildConfig
    from verl_asyncweb.trainer.pixels_ahead import PixelRebuild

    keys, tags, processor, client = pixel_batch
    config = PixelRebuildConfig(workers=workers, chunk_samples=chunk_samples, worker_cpus=0)
    rebuild = PixelRebuild(config, processor, client, {}, dtype)
    try:
        handed = rebuild.build_ahead(KVBatchMeta(keys=keys[:ahead], tags=tags[:ahead], partition_id=PARTITION), step=1)
        assert handed == (ahead if workers else 0)
        rebuild.settle()
        stats = rebuild.attach(KVBatchMeta(keys=keys, tags=tags, partition_id=PARTITION))
        inputs = tq.kv_batch_get(keys=keys, partition_id=PARTITION, select_fields=["multi_modal_inputs"])
        return list(inputs["multi_modal_inputs"]), stats
    finally:
        for builder in rebuild.builders:
            ray.kill(builder)


def test_chunked_pooled_and_ahead_rebuilds_equal_the_whole_batch(pixel_batch):
    whole, whole_stats = _rebuild(pixel_batch, chunk_samples=ROWS, workers=0)
    assert whole_stats.samples == ROWS - 1 and whole_stats.padding_samples == 1 and whole_stats.images == ROWS - 1
    assert whole_stats.built_ahead == 0
    assert whole[-1] == {}, "the padding row gets no images"
    for row in whole[:-1]:
        assert row["pixel_values"].shape[0] == int(row["image_grid_thw"].prod())
    for chunk_samples, workers, ahead in [(3, 0, 0), (2, 2, 0), (2, 2, 4)]:
        rebuilt, stats = _rebuild(pixel_batch, chunk_samples, workers, ahead)
        assert stats.built_ahead == ahead, "rows built ahead are taken as they are, the rest built now"
        # (The rows now hold the first rebuild's pixels, so only what arrived from rollout may differ.)
        counts = replace(stats, rollout_image_payload_bytes=0, built_ahead=0)
        assert counts == replace(whole_stats, rollout_image_payload_bytes=0)
        assert rebuilt[-1] == {}
        for expected, got in zip(whole[:-1], rebuilt[:-1], strict=True):
            torch.testing.assert_close(got["pixel_values"], expected["pixel_values"], rtol=0, atol=0)
            assert torch.equal(got["image_grid_thw"], expected["image_grid_thw"])


def test_pixels_in_the_models_dtype_are_the_float32_pixels_cast(pixel_batch):
    """Under bf16 mixed precision verl's FSDP2 engine casts the forward's inputs to bf16 (``cast_forward_inputs``):
    rebuilding in bf16 gives the model the same input in half the bytes."""
    from pathlib import Path

    import verl

    engine = Path(verl.__file__).parent / "workers" / "engine" / "fsdp" / "transformer_impl.py"
    assert "param_dtype=param_dtype, reduce_dtype=reduce_dtype, cast_forward_inputs=True" in engine.read_text()
    full, _ = _rebuild(pixel_batch, chunk_samples=ROWS, workers=0)
    half, _ = _rebuild(pixel_batch, chunk_samples=3, workers=2, ahead=2, dtype=torch.bfloat16)
    for expected, got in zip(full[:-1], half[:-1], strict=True):
        assert got["pixel_values"].dtype == torch.bfloat16
        assert torch.equal(got["pixel_values"], expected["pixel_values"].to(torch.bfloat16))


def test_rows_built_ahead_are_unbuilt_before_a_checkpoint(pixel_batch):
    """verl saves TransferQueue's rows with a checkpoint: rows built ahead and not sampled lose their pixels first,
    except rows the replay buffer no longer holds (a write would create an evicted row again)."""
    import ray
    import transfer_queue as tq
    from transfer_queue import KVBatchMeta

    from verl_asyncweb.bench.pixels import PARTITION
    from verl_asyncweb.trainer.config import PixelRebuildConfig
    from verl_asyncweb.trainer.pixels_ahead import PixelRebuild

    keys, tags, processor, client = pixel_batch
    rebuild = PixelRebuild(PixelRebuildConfig(workers=2, chunk_samples=2, worker_cpus=0), processor, client, {})
    try:
        ahead = KVBatchMeta(keys=keys[:4], tags=tags[:4], partition_id=PARTITION)
        assert rebuild.build_ahead(ahead, step=3) == 4
        evicted = keys[3]
        assert rebuild.unbuild_ahead(live_rows=set(keys) - {evicted}) == 3
        rows = tq.kv_batch_get(keys=keys[:4], partition_id=PARTITION, select_fields=["multi_modal_inputs"])
        inputs = list(rows["multi_modal_inputs"])
        assert inputs[:3] == [{}, {}, {}]
        assert "pixel_values" in inputs[3], "the evicted row was not written to"
        stats = rebuild.attach(KVBatchMeta(keys=keys[:3], tags=tags[:3], partition_id=PARTITION))
        assert stats.built_ahead == 0 and stats.images == 3, "unbuilt rows are built again when sampled"
    finally:
        for builder in rebuild.builders:
            ray.kill(builder)
