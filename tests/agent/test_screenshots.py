"""ScreenshotStore: dedup, missing keys, release, back-pressure, no eviction of referenced keys, restarts."""

from __future__ import annotations

import asyncio
import io
import time
import uuid

import pytest
from PIL import Image

from verl_asyncweb.agent.screenshots import (
    ScreenshotClient,
    ScreenshotStore,
    ScreenshotStoreFull,
    decode_images,
    fit_max_side,
    screenshot_key,
)

RAY_TIMEOUT_S = 60


def _jpeg(seed: int, size: tuple[int, int] = (64, 36)) -> bytes:
    img = Image.new("RGB", size, ((seed * 37) % 256, (seed * 91) % 256, (seed * 13) % 256))
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=80)
    return out.getvalue()


# -- the store's logic, driven directly in an event loop ---------------------------------------------------------


async def test_store_put_same_bytes_twice_stores_once_with_two_references():
    store = ScreenshotStore(budget_bytes=10_000)
    data = b"x" * 100
    k1 = await store.put(data, "traj-a")
    k2 = await store.put(data, "traj-b")
    stats = await store.stats()
    assert k1 == k2 == screenshot_key(data)
    assert stats["keys"] == 1 and stats["bytes_held"] == 100
    assert stats["puts"] == 2 and stats["dedup_hits"] == 1
    await store.release("traj-a")
    assert (await store.get([k1])) == [data]  # traj-b still references it
    await store.release("traj-b")
    assert (await store.stats())["bytes_held"] == 0


async def test_store_get_unknown_key_returns_none_and_counts_missing():
    store = ScreenshotStore(budget_bytes=10_000)
    key = await store.put(b"abc", "t")
    assert await store.get([key, "0" * 64, "nope"]) == [b"abc", None, None]
    stats = await store.stats()
    assert stats["gets"] == 3 and stats["missing"] == 2


async def test_store_release_frees_bytes_and_counts_evictions():
    store = ScreenshotStore(budget_bytes=10_000)
    await store.put_batch([b"a" * 10, b"b" * 20, b"a" * 10], "t1")
    assert (await store.stats())["bytes_held"] == 30
    assert await store.release("t1") == 2
    stats = await store.stats()
    assert stats["bytes_held"] == 0 and stats["keys"] == 0 and stats["evictions"] == 2 and stats["owners"] == 0


async def test_store_free_by_owner_keeps_other_owners_references():
    store = ScreenshotStore(budget_bytes=10_000)
    key = await store.put(b"shared", "t1")
    await store.put(b"shared", "t2")
    assert await store.free([key], owner="t1") == 0
    assert await store.get([key]) == [b"shared"]
    assert await store.free([key]) == 1  # no owner: drop every reference
    assert await store.get([key]) == [None]


async def test_store_put_blocks_until_release_frees_budget():
    store = ScreenshotStore(budget_bytes=100)
    await store.put(b"a" * 80, "old")
    waiter = asyncio.create_task(store.put(b"b" * 50, "new", timeout_s=10.0))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    assert (await store.stats())["waiting_puts"] == 1
    await store.release("old")
    key = await asyncio.wait_for(waiter, timeout=5.0)
    assert await store.get([key]) == [b"b" * 50]
    assert (await store.stats())["bytes_held"] == 50


async def test_store_put_times_out_with_clear_error_when_budget_stays_full():
    store = ScreenshotStore(budget_bytes=100)
    await store.put(b"a" * 80, "holder")
    with pytest.raises(
        ScreenshotStoreFull,
        match=r"full: 0.0 MiB in 1 screenshots \(~0 KiB each\) held of 0.0 MiB by 1 traj.*raise asyncweb",
    ):
        await store.put(b"b" * 50, "new", timeout_s=0.1)
    stats = await store.stats()
    assert stats["put_timeouts"] == 1 and stats["waiting_puts"] == 0


async def test_store_releases_owners_in_one_call_and_lists_the_rest():
    store = ScreenshotStore(budget_bytes=1_000)
    for owner, blob in [("g1-a", b"a" * 10), ("g1-b", b"a" * 10), ("g2-a", b"b" * 10), ("g3-a", b"c" * 10)]:
        await store.put(blob, owner)
    assert sorted(await store.owners()) == ["g1-a", "g1-b", "g2-a", "g3-a"]
    assert await store.release_owners(["g1-a", "g2-a", "unknown"]) == 1  # b"a" is still held by g1-b
    assert sorted(await store.owners()) == ["g1-b", "g3-a"]
    stats = await store.stats()
    assert (stats["bytes_held"], stats["peak_bytes_held"], stats["keys"]) == (20, 30, 2)


async def test_a_derived_budget_follows_the_measured_screenshot_size_within_its_bounds(monkeypatch):
    import verl_asyncweb.agent.screenshots as screenshots

    monkeypatch.setattr(screenshots, "_memory_ceiling", lambda: 20_000)
    # Planned for 10 screenshots of 100 bytes (1,500 with headroom); they turn out to be 1,000 bytes each.
    store = ScreenshotStore(budget_bytes=1_500, peak_screenshots=10)
    for i in range(screenshots.MEASURED_AFTER - 1):
        await store.put(bytes([i]) * 1_000, f"t{i}")
        await store.release(f"t{i}")
    assert (await store.stats())["budget_bytes"] == 1_500, "too few screenshots measured to follow their size"
    await store.put(b"\xff" * 1_000, "last")
    stats = await store.stats()
    assert stats["bytes_per_screenshot"] == 1_000
    assert stats["budget_bytes"] == 15_000  # 10 screenshots x 1,000 bytes x 1.5
    for i in range(4 * screenshots.MEASURED_AFTER):  # larger still: capped at the host's share
        await store.put(i.to_bytes(2, "big") * 5_000, "big")
        await store.release("big")
    assert (await store.stats())["budget_bytes"] == 20_000
    fixed = ScreenshotStore(budget_bytes=1_500)  # an explicit budget stays as it was set
    for i in range(screenshots.MEASURED_AFTER + 1):
        await fixed.put(bytes([i]) * 1_000, f"t{i}")
        await fixed.release(f"t{i}")
    assert (await fixed.stats())["budget_bytes"] == 1_500


async def test_store_never_evicts_referenced_keys_under_pressure():
    store = ScreenshotStore(budget_bytes=100)
    keys = [await store.put(bytes([i]) * 30, f"t{i}") for i in range(3)]
    with pytest.raises(ScreenshotStoreFull):
        await store.put(b"z" * 30, "t9", timeout_s=0.05)
    assert all(blob is not None for blob in await store.get(keys))
    assert (await store.stats())["evictions"] == 0


async def test_store_dedup_put_does_not_wait_when_budget_full():
    store = ScreenshotStore(budget_bytes=100)
    await store.put(b"a" * 90, "t1")
    key = await store.put(b"a" * 90, "t2", timeout_s=0.05)  # no new bytes: no wait
    assert key == screenshot_key(b"a" * 90)


async def test_store_put_larger_than_budget_raises_value_error():
    store = ScreenshotStore(budget_bytes=10)
    with pytest.raises(ValueError, match="exceeds the whole store budget"):
        await store.put(b"x" * 11, "t")


async def test_store_check_false_for_other_incarnation_or_missing_key():
    store = ScreenshotStore(budget_bytes=100)
    key = await store.put(b"abc", "t")
    inc = await store.incarnation()
    assert await store.check([key], inc)
    assert not await store.check([key], uuid.uuid4().hex)
    assert not await store.check([key, "f" * 64], inc)
    assert (await store.stats())["lost"] == 2


def test_store_rejects_bad_budget():
    with pytest.raises(ValueError, match="budget_bytes must be an integer > 0, got 0"):
        ScreenshotStore(budget_bytes=0)


# -- helpers ------------------------------------------------------------------------------------------------------


def test_decode_images_returns_rgb_images_in_order():
    images = decode_images([_jpeg(1, (20, 10)), _jpeg(2, (8, 8))])
    assert [img.size for img in images] == [(20, 10), (8, 8)]
    assert all(img.mode == "RGB" for img in images)


def test_decode_images_missing_or_garbage_raises_value_error():
    with pytest.raises(ValueError, match="screenshot 1 is missing"):
        decode_images([_jpeg(1), None])
    with pytest.raises(ValueError, match="not a decodable image"):
        decode_images([b"not an image"])


def test_fit_max_side_keeps_small_and_shrinks_large():
    small = _jpeg(3, (100, 50))
    assert fit_max_side(small, 100) is small
    shrunk = fit_max_side(_jpeg(3, (400, 200)), 100)
    assert Image.open(io.BytesIO(shrunk)).size == (100, 50)


# -- through Ray ------------------------------------------------------------------------------------------------


@pytest.fixture
def client(ray_cluster):
    name = f"store-{uuid.uuid4().hex[:8]}"
    client = ScreenshotClient(name=name, budget_bytes=1_000_000, put_timeout_s=5.0, call_timeout_s=RAY_TIMEOUT_S)
    yield client
    if client._handle is not None:
        ray_cluster.kill(client._handle)


@pytest.mark.ray
def test_client_put_get_roundtrip_and_handle_cached(client, ray_cluster):
    data = _jpeg(5)
    key = client.put(data, "traj-0")
    handle = client.handle
    assert client.get([key, "missing"]) == [data, None]
    assert client.handle is handle
    assert client.check([key], client.incarnation)
    other = ScreenshotClient(name=client.name, call_timeout_s=RAY_TIMEOUT_S)
    assert other.connect() == client.incarnation  # a second client finds the same named actor
    stats = client.stats()
    assert stats["keys"] == 1 and stats["missing"] == 1


@pytest.mark.ray
def test_client_start_creates_the_store_without_waiting_and_connect_finds_it(client, ray_cluster):
    client.start()
    handle = client._handle
    assert handle is not None  # Ray was asked for the store ...
    assert client.incarnation is None  # ... and nothing waited for it yet
    incarnation = client.connect()
    assert client.handle is handle  # connect used the store start() asked for
    assert ScreenshotClient(name=client.name, call_timeout_s=RAY_TIMEOUT_S).connect() == incarnation


@pytest.mark.ray
def test_client_sees_new_incarnation_after_store_killed(client, ray_cluster):
    key = client.put(_jpeg(6), "traj-0")
    old = client.incarnation
    handle = client.handle
    ray_cluster.kill(handle)
    _wait_until_dead(handle, ray_cluster)  # ray.kill returns before the actor stops serving calls
    assert not client.check([key], old)
    assert client.incarnation != old
    assert client.restarts_seen == 1
    assert client.get([key]) == [None]


def _wait_until_dead(handle, ray_cluster) -> None:
    deadline = time.monotonic() + RAY_TIMEOUT_S
    while True:
        try:
            ray_cluster.get(handle.incarnation.remote(), timeout=RAY_TIMEOUT_S)
        except ray_cluster.exceptions.RayActorError:
            return
        assert time.monotonic() < deadline, "the killed store still answers"
        time.sleep(0.2)


def _wait_for_restart(client, old: str, ray_cluster) -> None:
    deadline = time.monotonic() + RAY_TIMEOUT_S
    while True:  # ray.kill returns before the process is gone
        try:
            if client.current_incarnation() != old:
                return
        except ray_cluster.exceptions.RayActorError:
            pass
        assert time.monotonic() < deadline, "the store did not come back"
        time.sleep(0.2)


@pytest.mark.ray
def test_crashed_store_restarts_under_its_name_with_a_new_incarnation(client, ray_cluster):
    key = client.put(_jpeg(7), "traj-0")
    old = client.incarnation
    ray_cluster.kill(client.handle, no_restart=False)  # a crash: Ray restarts the actor
    _wait_for_restart(client, old, ray_cluster)
    assert client.restarts_seen == 1
    assert client.get([key]) == [None], "the restarted store starts empty"
    assert not client.check([key], old)
    new_key = client.put(_jpeg(8), "traj-1")
    assert client.get([new_key]) == [_jpeg(8)]


@pytest.mark.ray
def test_client_put_raises_store_full_through_ray(ray_cluster):
    client = ScreenshotClient(
        name=f"store-{uuid.uuid4().hex[:8]}", budget_bytes=1000, put_timeout_s=0.2, call_timeout_s=RAY_TIMEOUT_S
    )
    try:
        client.put(b"a" * 900, "t")
        with pytest.raises(ScreenshotStoreFull, match="budget full"):
            client.put(b"b" * 200, "t")
    finally:
        ray_cluster.kill(client.handle)


@pytest.mark.ray
async def test_client_async_put_waits_for_release_through_ray(ray_cluster):
    client = ScreenshotClient(
        name=f"store-{uuid.uuid4().hex[:8]}", budget_bytes=1000, put_timeout_s=20.0, call_timeout_s=RAY_TIMEOUT_S
    )
    try:
        await client.aput(b"a" * 900, "old")
        waiter = asyncio.create_task(client.aput(b"b" * 200, "new"))
        await asyncio.sleep(0.5)
        assert not waiter.done()
        await client.arelease("old")
        key = await asyncio.wait_for(waiter, timeout=RAY_TIMEOUT_S)
        assert await client.aget([key]) == [b"b" * 200]
        assert await client.acheck([key], client.incarnation)
    finally:
        ray_cluster.kill(client.handle)


@pytest.mark.ray
def test_trainer_reads_screenshots_the_restarted_store_lost_from_the_run_folder(
    client, ray_cluster, tmp_path, monkeypatch
):
    from verl_asyncweb.run_folder import RUN_DIR_ENV, screenshot_path
    from verl_asyncweb.trainer.pixels import fetch_screenshots

    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path))
    kept, lost, gone = _jpeg(8), _jpeg(9), _jpeg(10)
    lost_key, gone_key = client.put(lost, "traj-0"), client.put(gone, "traj-0")
    # The agent loop keeps a copy of every screenshot in the run folder; this one's copy is missing too.
    screenshot_path(lost_key).parent.mkdir(parents=True)
    screenshot_path(lost_key).write_bytes(lost)
    old = client.incarnation
    ray_cluster.kill(client.handle, no_restart=False)
    _wait_for_restart(client, old, ray_cluster)
    kept_key = client.put(kept, "traj-1")  # after the restart
    blobs, from_run_folder = fetch_screenshots(client, [kept_key, lost_key, gone_key])
    assert blobs == {kept_key: kept, lost_key: lost, gone_key: None}
    assert from_run_folder == {lost_key}
