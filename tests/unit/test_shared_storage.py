"""The run folder check on a real multi-node Ray cluster (this machine's nodes share one filesystem; a test hook
gives one node a disk of its own)."""

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.ray]

# A head and a node that sees every path under a private prefix: refused, naming the path and that node only. The
# node replaced by one that shares the filesystem: accepted, every node checked.
SCRIPT = """
import json, sys
from pathlib import Path
import ray
from ray.cluster_utils import Cluster
from verl_asyncweb.main import SetupError, check_run_folder_shared
from verl_asyncweb.shared_storage import NODE_VIEW_ENV, check_shared_run_folder

run_dir, private = Path(sys.argv[1]), sys.argv[2]
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
apart = cluster.add_node(num_cpus=1, env_vars={NODE_VIEW_ENV: private})
ray.init(address=cluster.address, log_to_driver=False)
apart_id = apart.node_id
try:
    check_run_folder_shared(run_dir)
    refused = None
except SetupError as exc:
    refused = str(exc)
cluster.remove_node(apart)
cluster.add_node(num_cpus=1)
cluster.wait_for_nodes()
checked = check_shared_run_folder(run_dir)
left = sorted(p.name for p in run_dir.iterdir())
print(json.dumps({"refused": refused, "apart": apart_id, "checked": checked, "left": left}))
ray.shutdown()
cluster.shutdown()
"""


def test_a_node_that_does_not_share_the_run_folder_is_named_and_a_shared_one_passes(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(run_dir), str(tmp_path / "node_local_disk")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    refused = result["refused"]
    assert refused and f"the run folder {run_dir} (trainer.default_local_dir) must be one filesystem" in refused
    assert refused.count("does not see the driver's file") == 1 and result["apart"][:12] in refused
    assert result["checked"] == 2  # the alive nodes after the swap, both sharing the folder
    assert result["left"] == []  # the probe files are removed either way
    # The separate node wrote where it sees the folder: its own disk, not the run folder.
    assert list((tmp_path / "node_local_disk").rglob("*.*"))
