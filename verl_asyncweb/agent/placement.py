"""Where agent-loop workers run, and which worker gets each prompt group.

verl places agent-loop workers round-robin over every node with CPUs, so on a cluster their browser pools (all of
Chromium) may land on the GPU nodes. ``asyncweb.agent.worker_resources`` (a Ray resources dict, e.g.
``{browser_host: 1}``) pins every worker to the nodes that offer it: CPU hosts started with
``ray start --resources='{"browser_host": 40}'``.

verl also splits each dispatch into ``len(workers)`` consecutive chunks, so a batch smaller than the worker count
always lands on the first workers (16 groups on 32 workers leaves half of them idle). :class:`EpisodeDispatch`
gives each group to the worker with the fewest episodes in flight instead. A group's sessions stay on one worker:
verl's worker runs them as one task that writes the group's status, and branch rollouts share their anchor's
state there.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from verl_asyncweb.agent.watchdog import TERMINAL_STATUSES

logger = logging.getLogger(__name__)


def resource_nodes(resources: Mapping[str, float]) -> list[str]:
    """Ids of the alive Ray nodes that offer at least ``resources`` (sorted, so placement is stable).

    Raises:
        RuntimeError: No alive node offers them (the message says how to start one).
    """
    import ray

    nodes = sorted(
        node["NodeID"]
        for node in ray.nodes()
        if node["Alive"] and all(node["Resources"].get(name, 0) >= amount for name, amount in resources.items())
    )
    if not nodes:
        spec = ", ".join(f'"{name}": {amount:g}' for name, amount in resources.items())
        raise RuntimeError(
            f"no alive Ray node offers asyncweb.agent.worker_resources {dict(resources)}; start the browser hosts "
            f"with `ray start --address=HEAD:6379 --resources='{{{spec}}}'` (any amount >= the request per worker)"
        )
    return nodes


class WorkerPlacement:
    """Ray options of the agent-loop workers, one call per worker in creation order.

    Each worker asks for ``resources`` and, like verl's default placement, prefers a node round-robin (soft node
    affinity, here over the nodes that offer the resources only): a full node's overflow goes to another one
    that has the resources left.

    Args:
        resources: Ray resources every worker requests; empty keeps verl's placement unchanged.
    """

    def __init__(self, resources: Mapping[str, float] | None = None) -> None:
        self.resources = dict(resources or {})
        self._nodes: list[str] | None = None
        self._created = 0

    def options(self, options: dict) -> dict:
        """``options`` (verl's, for the next worker) with the resource request and node preference applied."""
        if not self.resources:
            return options
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if self._nodes is None:
            self._nodes = resource_nodes(self.resources)
            logger.info("agent-loop workers placed on %d nodes offering %s", len(self._nodes), self.resources)
        node = self._nodes[self._created % len(self._nodes)]
        self._created += 1
        strategy = NodeAffinitySchedulingStrategy(node_id=node, soft=True)
        return {
            **options,
            "resources": {**options.get("resources", {}), **self.resources},
            "scheduling_strategy": strategy,
        }


class EpisodeDispatch:
    """Assigns prompt groups to workers by episodes in flight, not by position in the batch.

    Args:
        num_workers: Agent-loop workers to spread over.
    """

    def __init__(self, num_workers: int) -> None:
        self.num_workers = num_workers
        # (partition, uid) -> (worker index, episodes of the group)
        self._in_flight: dict[tuple[str, str], tuple[int, int]] = {}
        self._next = 0

    def settle(self, listing: Mapping[str, Mapping[str, Mapping]]) -> None:
        """Forget the groups that are terminal or gone in a TransferQueue ``kv_list()`` listing."""
        for key in list(self._in_flight):
            partition_id, uid = key
            status = ((listing.get(partition_id) or {}).get(uid) or {}).get("status")
            if status is None or status in TERMINAL_STATUSES:
                del self._in_flight[key]

    def load(self) -> list[int]:
        """Episodes in flight per worker."""
        load = [0] * self.num_workers
        for worker, episodes in self._in_flight.values():
            load[worker] += episodes
        return load

    def assign(self, partition_id: str, uids: list[str], episodes_per_group: int) -> list[list[int]]:
        """Rows of ``uids`` for each worker: every group goes to the least-loaded worker (ties rotate).

        Returns:
            One list of row indices per worker (empty for a worker that gets nothing).
        """
        load = self.load()
        rows: list[list[int]] = [[] for _ in range(self.num_workers)]
        for row, uid in enumerate(uids):
            start = self._next
            worker = min(range(self.num_workers), key=lambda i: (load[i], (i - start) % self.num_workers))
            self._next = (worker + 1) % self.num_workers
            load[worker] += episodes_per_group
            rows[worker].append(row)
            self._in_flight[(partition_id, uid)] = (worker, episodes_per_group)
        return rows
