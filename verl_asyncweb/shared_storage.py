"""The run folder must be one filesystem seen by every node of the cluster.

verl writes each trainer rank's FSDP checkpoint shard under ``trainer.default_local_dir`` and may place its task
runner on any node; the agent-loop workers on the browser hosts write screenshots and branch points into the same
absolute path. On a cluster of several nodes :func:`check_shared_run_folder` proves it before any worker starts:
the driver writes a token file, one small task pinned to each node reads it and writes one of its own, and the
driver reads those back.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

NODE_VIEW_ENV = "VERL_ASYNCWEB_TEST_NODE_VIEW"
"""Test hook: a node whose processes have it set see every path under this prefix (a node-local disk)."""
PROBE_DIR = ".node_check"
PROBE_TIMEOUT_S = 120.0


class RunFolderNotShared(RuntimeError):
    """Some node of the cluster does not see the run folder the driver sees."""


def node_path(path: str) -> Path:
    """``path`` as this node's processes see it (:data:`NODE_VIEW_ENV`)."""
    view = os.environ.get(NODE_VIEW_ENV)
    return Path(view) / Path(path).relative_to("/") if view else Path(path)


def _probe(probe_dir: str, token: str, node_id: str) -> bool:
    """On one node: whether it reads the driver's token; it then leaves a token of its own for the driver."""
    here = node_path(probe_dir)
    driver_file = here / f"{token}.driver"
    seen = driver_file.is_file() and driver_file.read_text() == token
    here.mkdir(parents=True, exist_ok=True)
    (here / f"{token}.{node_id}").write_text(token)
    return seen


def check_shared_run_folder(run_dir: Path, timeout_s: float = PROBE_TIMEOUT_S) -> int:
    """Raise :class:`RunFolderNotShared` naming the path and every node that does not share ``run_dir`` with the
    driver; returns the number of nodes checked (nothing to check on a one-node cluster)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [node for node in ray.nodes() if node["Alive"]]
    if len(nodes) <= 1:
        return len(nodes)
    probe_dir = Path(run_dir) / PROBE_DIR
    token = uuid.uuid4().hex
    probe_dir.mkdir(parents=True, exist_ok=True)
    (probe_dir / f"{token}.driver").write_text(token)
    probe = ray.remote(num_cpus=0, max_retries=0)(_probe)
    pending = {
        probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)).remote(
            str(probe_dir), token, node["NodeID"]
        ): node
        for node in nodes
    }
    problems = []
    try:
        ready, late = ray.wait(list(pending), num_returns=len(pending), timeout=timeout_s)
        for ref in late:
            problems.append(f"{_describe(pending[ref])} did not answer within {timeout_s:.0f} s")
        for ref in ready:
            node = pending[ref]
            try:
                seen = ray.get(ref)
            except ray.exceptions.RayError as exc:
                problems.append(f"{_describe(node)} could not write there ({type(exc).__name__}: {exc})")
                continue
            if not seen:
                problems.append(f"{_describe(node)} does not see the driver's file")
            elif not (probe_dir / f"{token}.{node['NodeID']}").is_file():
                problems.append(f"the driver does not see the file {_describe(node)} wrote")
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
    if problems:
        raise RunFolderNotShared(
            f"the run folder {run_dir} (trainer.default_local_dir) must be one filesystem seen by every node of "
            f"the Ray cluster (checkpoints, screenshots and episodes are written there from every node): "
            + "; ".join(problems)
            + ". Point it at a shared filesystem (NFS, a cluster file system) mounted at the same path everywhere"
        )
    return len(nodes)


def _describe(node: dict) -> str:
    return f"node {node['NodeManagerAddress']} ({node['NodeID'][:12]})"
