"""The waiting workloads of one plan, per ClusterQueue in queue order: what the visibility API pages.

The order and the positions are ``clueue list``'s (:func:`~clueue.engine.queues.pending_positions`,
docs/queue-status.md): the order in which the cycle ranked the waiting workloads for admission,
those it did not rank after them by priority; each workload's position in its ClusterQueue and in
its LocalQueue counts from 0. Workloads of a stopped or missing LocalQueue, or without a Workload
object yet, wait nowhere and are not listed.

Pages are taken as Kueue takes them: of a ClusterQueue, ``offset`` and ``limit`` cut its list;
of a LocalQueue, they cut the list of that LocalQueue's workloads, each keeping its positions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

from clueue.engine import Plan, Snapshot
from clueue.engine.plan import WorkloadEntry
from clueue.engine.queues import pending_positions

__all__ = ["PendingWorkload", "PendingWorkloads"]


@dataclass(frozen=True)
class PendingWorkload:
    """One waiting workload as the visibility API shows it."""

    namespace: str
    name: str
    local_queue: str
    priority: int
    position_in_cluster_queue: int
    position_in_local_queue: int
    created: int | None = None  # its Workload object's creation (epoch seconds); None before it exists
    pods: tuple[tuple[str, str], ...] = ()  # (name, uid) of the Pods that own it (plain pods, groups)

    def to_dict(self) -> dict[str, Any]:
        """A ``PendingWorkload`` object: its metadata (name, namespace, owner references, creation
        time), priority, LocalQueue and positions, in Kueue's field names."""
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        owners = [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid} for pod, uid in self.pods if uid]
        if owners:
            metadata["ownerReferences"] = owners
        metadata["creationTimestamp"] = (datetime.fromtimestamp(self.created, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
                                         if self.created else None)
        return {"metadata": metadata, "priority": self.priority, "localQueueName": self.local_queue,
                "positionInClusterQueue": self.position_in_cluster_queue,
                "positionInLocalQueue": self.position_in_local_queue}


class PendingWorkloads:
    """The waiting workloads of ``plan`` (made from ``snapshot``), by ClusterQueue and LocalQueue.

    >>> pending = PendingWorkloads(snapshot, plan)            # doctest: +SKIP
    >>> pending.cluster_queue("cq", limit=10, offset=0)      # doctest: +SKIP
    """

    def __init__(self, snapshot: Snapshot, plan: Plan) -> None:
        positions = pending_positions(plan, snapshot)
        entries: dict[str, WorkloadEntry] = {w.name: w for w in plan.workloads if w.name in positions}
        by_cq: dict[str, list[PendingWorkload]] = {name: [] for name in snapshot.cluster_queues}
        for key in sorted(entries, key=lambda k: positions[k][0]):
            w = entries[key]
            ns, name = key.split("/", 1)
            obj = snapshot.workloads.get(key)
            by_cq.setdefault(w.cluster_queue or "", []).append(PendingWorkload(
                ns, name, w.queue, w.priority, *positions[key], created=obj.created if obj is not None else None,
                pods=w.pods))
        self._by_cq: Mapping[str, Sequence[PendingWorkload]] = by_cq
        # LocalQueue (namespace/name) -> its ClusterQueue, for those that exist
        self._local_queues = {key: lq.cluster_queue for key, lq in snapshot.local_queues.items()}

    def cluster_queue(self, name: str, *, limit: int, offset: int) -> list[PendingWorkload] | None:
        """The page of ClusterQueue ``name``'s waiting workloads; None when it does not exist."""
        waiting = self._by_cq.get(name)
        return None if waiting is None else list(waiting[offset:offset + limit])

    def local_queue(self, namespace: str, name: str, *, limit: int, offset: int) -> list[PendingWorkload] | None:
        """The page of LocalQueue ``namespace/name``'s waiting workloads; None when it does not exist."""
        cq = self._local_queues.get(f"{namespace}/{name}")
        if cq is None:
            return None
        mine = [w for w in self._by_cq.get(cq, ()) if w.namespace == namespace and w.local_queue == name]
        return mine[offset:offset + limit]
