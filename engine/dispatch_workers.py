"""What each MultiKueue worker cluster has free: the view optimized dispatch predicts with.

For one worker (a :class:`~clueue.engine.snapshot.WorkerView`: the worker's own objects as the
manager last read them), :func:`worker_capacity` works out, per ClusterQueue, the quota its
admitted workloads leave free in each flavor and resource, and, when the worker reports Nodes,
what its schedulable nodes have free (in all, and on the roomiest node). Usage is counted as
everywhere else in clueue: each admitted pod set's requests times its admitted count, in the
flavor its admission names (:func:`clueue.engine.queues.entry_usage`).

The prediction is coarse on purpose (docs/dispatch.md): borrowing in the worker's cohort is not
counted as room (a fit it predicts is a fit within nominal quota), and nodes are compared by
totals and by the roomiest node, not packed pod by pod.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Mapping, Sequence

from .config import Config
from .placement import node_classes
from .plan import WorkloadEntry
from .queues import entry_usage
from .quota import nominal
from .snapshot import WorkerView
from .workloads import Workload, build_workloads

__all__ = ["QueueRoom", "WorkerCapacity", "worker_capacity"]


@dataclass(frozen=True)
class QueueRoom:
    """One ClusterQueue of a worker: its resource groups and what is free in them."""

    name: str
    groups: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]  # (flavors in order, resources) per group
    free: Mapping[tuple[str, str], Fraction]  # (flavor, resource) -> nominal quota less what is held
    stopped: bool = False


@dataclass(frozen=True)
class WorkerCapacity:
    """What one worker has room for, as far as its objects tell."""

    name: str
    age: int  # seconds since the view was read, at the cycle's time
    local_queues: Mapping[str, str]  # "namespace/name" of a LocalQueue -> its ClusterQueue
    queues: Mapping[str, QueueRoom]  # ClusterQueue name -> its room
    # resource -> (free on all schedulable nodes, free on the roomiest node); empty without Nodes
    nodes: Mapping[str, tuple[Fraction, Fraction]] = field(default_factory=dict)

    def queue_for(self, namespace: str, local_queue: str) -> QueueRoom | None:
        """The ClusterQueue behind the worker's LocalQueue ``namespace/local_queue`` (None: no
        such LocalQueue, or it points to a ClusterQueue the worker does not have)."""
        cq = self.local_queues.get(f"{namespace}/{local_queue}")
        return self.queues.get(cq) if cq is not None else None


def worker_capacity(view: WorkerView, config: Config = Config(), asking: Sequence[Workload] = (), *,
                    now: int | None = None) -> WorkerCapacity:
    """The room of worker ``view``: free quota per ClusterQueue, and free node capacity of the
    resources its own workloads and ``asking`` (those to dispatch) request; its age at ``now``
    (epoch seconds, the cycle's: :meth:`WorkerView.age_at`)."""
    snapshot = view.snapshot
    built = build_workloads(snapshot, config)
    held: dict[str, dict[tuple[str, str], Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    for w in built.workloads:
        if w.admission is None or w.finished:
            continue
        entry = WorkloadEntry(name=w.key, queue=w.queue, cluster_queue=w.admission.cluster_queue,
                              priority=w.priority, state="admitted", origin=w.origin, pod_sets=w.requests,
                              admission=w.held_admission())
        for key, amount in entry_usage(entry).items():
            held[w.admission.cluster_queue][key] += amount
    queues = {}
    for cq in snapshot.cluster_queues.values():
        free = {key: max(Fraction(0), q - held[cq.name].get(key, Fraction(0)))
                for key, q in nominal(cq.resource_groups).items()}
        groups = tuple((tuple(fq.flavor for fq in g.flavors), tuple(g.covered)) for g in cq.resource_groups)
        queues[cq.name] = QueueRoom(cq.name, groups, free, cq.stopped)
    nodes: dict[str, tuple[Fraction, Fraction]] = {}
    if snapshot.nodes:
        for c in node_classes(snapshot, [*built.workloads, *asking]).classes:
            for r, amount in c.free.items():
                total, largest = nodes.get(r, (Fraction(0), Fraction(0)))
                nodes[r] = (total + amount * len(c.nodes), max(largest, amount))
    return WorkerCapacity(view.name, view.age_at(now),
                          {key: lq.cluster_queue for key, lq in snapshot.local_queues.items() if not lq.stopped},
                          queues, nodes)

