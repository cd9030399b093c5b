"""Agent-loop workers on the nodes that offer ``asyncweb.agent.worker_resources``, fed by episodes in flight."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from verl_asyncweb.agent.config import AgentConfig
from verl_asyncweb.agent.placement import EpisodeDispatch, WorkerPlacement, resource_nodes

CLUSTER_SCRIPT = Path(__file__).with_name("placement_cluster.py")


@pytest.mark.ray
@pytest.mark.browser
@pytest.mark.timeout(400)
def test_workers_and_their_chromium_run_only_on_browser_hosts_and_every_worker_gets_episodes():
    # Its own process: a three-node cluster cannot share the session's Ray. Its own Ray temporary folder: a
    # cluster started like `ray start` records its address there, which every later ray.init() would join.
    ray_tmp = tempfile.mkdtemp(prefix="rc", dir="/tmp")  # short: Ray's socket paths must stay under 108 bytes
    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
    env |= {"RAY_TMPDIR": ray_tmp, "RAY_ENABLE_AUTO_CONNECT": "0"}
    try:
        done = subprocess.run(
            [sys.executable, str(CLUSTER_SCRIPT)], capture_output=True, text=True, timeout=360, env=env
        )
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    browser_nodes, workers = set(report["browser_nodes"]), report["workers"]

    assert len(workers) == 2 and all(w["node"] in browser_nodes for w in workers), (report["head"], workers)
    assert {w["node"] for w in workers} == browser_nodes  # round-robin over the nodes that offer the resource
    # One group per dispatch: verl's chunking would give both to worker 0; here the idle worker gets the second.
    assert report["loads_after_each_dispatch"] == [[2, 0], [2, 2]]
    for worker in workers:
        assert worker["errors"] == [] and worker["rewards"] == [1.0, 1.0], worker
        assert worker["chromium"], worker
    # Every Chromium process of the cluster belongs to a worker on a browser host (its nearest worker ancestor).
    owners = report["chromium_owners"]
    assert owners and set(owners.values()) <= {w["pid"] for w in workers}, owners


def test_dispatch_spreads_groups_over_idle_workers_before_stacking():
    dispatch = EpisodeDispatch(num_workers=32)
    first = dispatch.assign("train", [f"a{i}" for i in range(16)], episodes_per_group=8)
    second = dispatch.assign("train", [f"b{i}" for i in range(16)], episodes_per_group=8)
    busy_first = {w for w, rows in enumerate(first) if rows}
    busy_second = {w for w, rows in enumerate(second) if rows}
    assert len(busy_first) == 16 and len(busy_second) == 16 and not busy_first & busy_second
    assert dispatch.load() == [8] * 32

    # The first batch finishes (one group failed, one was consumed and cleared): its workers are free again.
    listing = {"train": {f"a{i}": {"status": "finished"} for i in range(15)}}
    listing["train"] |= {f"b{i}": {"status": "running"} for i in range(16)}
    dispatch.settle(listing)
    assert sum(dispatch.load()) == 16 * 8
    third = dispatch.assign("train", ["c0", "c1"], episodes_per_group=8)
    assert {w for w, rows in enumerate(third) if rows} <= busy_first


def test_dispatch_weighs_groups_by_their_episodes():
    dispatch = EpisodeDispatch(num_workers=2)
    dispatch.assign("train", ["t0"], episodes_per_group=8)
    rows = dispatch.assign("val", ["v0", "v1", "v2", "v3"], episodes_per_group=1)
    assert rows == [[], [0, 1, 2, 3]] and dispatch.load() == [8, 4]
    dispatch.settle({"train": {"t0": {"status": "running"}}, "val": {"v0": {"status": "failure"}}})
    assert dispatch.load() == [8, 0]  # v1..v3 are gone from the listing: consumed and cleared


def test_placement_without_resources_keeps_verls_options():
    options = {"name": "agent_loop_worker_0", "scheduling_strategy": "verl's"}
    assert WorkerPlacement({}).options(options) == options


@pytest.mark.ray
def test_no_node_with_the_resources_is_a_clear_error(ray_cluster):
    with pytest.raises(RuntimeError, match=r"ray start --address=HEAD:6379 --resources='\{\"browser_host\": 1\}'"):
        resource_nodes({"browser_host": 1})
    with pytest.raises(RuntimeError, match="worker_resources"):
        WorkerPlacement({"browser_host": 1}).options({})


@pytest.mark.parametrize("bad", [{"browser_host": 0}, {"browser_host": True}, {"browser_host": "1"}])
def test_worker_resources_are_validated(bad):
    with pytest.raises(ValueError, match="asyncweb.agent.worker_resources"):
        AgentConfig.from_dict({"worker_resources": bad})
