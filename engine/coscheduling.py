"""The built-in queue through which clueue gang-schedules coscheduling PodGroups without a queue.

The coscheduling seed admits a group only where ``minMember`` of its pods can run at once; a
cluster's default kube-scheduler has no such rule, so with clueue the pods of a PodGroup without
``kueue.x-k8s.io/queue-name`` are gated too (docs/podgroups.md), and their gang
(workloads.py, ``podgroup-<name>``) is queued in :data:`~.podgroups.COSCHEDULING_QUEUE`. For
the cycle, :func:`with_coscheduling_queue` adds that queue to the snapshot: a LocalQueue of that
name in each namespace with such pods, pointing to a ClusterQueue of that name with one
ResourceFlavor of that name (no node labels, no taints; the cluster's Topology if it has exactly
one, for Kueue's topology-aware scheduling) whose quota, resource by resource, is
twice what every such pod and every Workload admitted there request together. Quota never
binds there, so only the nodes decide: the gang is admitted whole where its pods fit on the
nodes at once, placed and pinned as every other workload (placement.lp), in the order of the
coscheduling QueueSort (ordering.lp); it neither preempts nor is preempted (the ClusterQueue
has no preemption policy and no cohort). Without Nodes in the snapshot nothing is checked: the
gang is admitted once its ``minMember`` pods exist.

The added objects exist only within the cycle: the plan names the queue (an admitted gang's
``clusterQueue`` and flavor), and its Workload object records it, but no queue status is
written for it.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from fractions import Fraction

from .objects import ClusterQueue, FlavorQuotas, LabelSelector, LocalQueue, ResourceFlavor, ResourceGroup, ResourceQuota
from .kueue_api import POD_GROUP_LABEL, QUEUE_LABEL
from .podgroups import COSCHEDULING_QUEUE
from .snapshot import Snapshot

__all__ = ["with_coscheduling_queue"]


def with_coscheduling_queue(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` with the built-in queue of PodGroups without a queue (see the module
    docstring), or ``snapshot`` itself when no pod or Workload needs it."""
    asked: dict[str, Fraction] = defaultdict(Fraction)
    namespaces = set()
    for pod in snapshot.pods.values():
        if pod.labels.get(POD_GROUP_LABEL) and QUEUE_LABEL not in pod.labels:
            namespaces.add(pod.namespace)
            for r, q in pod.requests.items():
                asked[r] += q
    for obj in snapshot.workloads.values():
        admitted = obj.admission is not None and obj.admission.cluster_queue == COSCHEDULING_QUEUE
        if obj.queue_name != COSCHEDULING_QUEUE and not admitted:
            continue
        namespaces.add(obj.namespace)
        for ps in obj.pod_sets:  # every pod set at its whole count: never less than it holds
            for r, q in ps.requests.items():
                asked[r] += q * max(ps.count, 0)
    if not namespaces:
        return snapshot
    # twice what all ask: a quota above what its workloads ask together never binds, and is
    # counted as that (compiler.resource_units), so it never coarsens the amounts
    quotas = {r: ResourceQuota(2 * q) for r, q in sorted(asked.items())}
    resources = tuple(quotas) or ("cpu",)
    queue = ClusterQueue(
        name=COSCHEDULING_QUEUE, cohort=None,
        resource_groups=(ResourceGroup(resources, (FlavorQuotas(COSCHEDULING_QUEUE, quotas or
                                                                {"cpu": ResourceQuota(Fraction(0))}),)),),
        namespace_selector=LabelSelector(), queueing_strategy="BestEffortFIFO", when_can_borrow="Borrow",
        when_can_preempt="TryNextFlavor", stop_policy="None")
    # the cluster's one Topology, if it has exactly one, so that pods asking for topology-aware
    # scheduling may have it (those asking for none go to any node of a flavor with a Topology)
    topology = next(iter(snapshot.topologies)) if len(snapshot.topologies) == 1 else ""
    local = {f"{ns}/{COSCHEDULING_QUEUE}": LocalQueue(ns, COSCHEDULING_QUEUE, COSCHEDULING_QUEUE)
             for ns in sorted(namespaces)}
    return dataclasses.replace(
        snapshot,
        flavors={**snapshot.flavors, COSCHEDULING_QUEUE: ResourceFlavor(COSCHEDULING_QUEUE, {}, (), topology)},
        cluster_queues={**snapshot.cluster_queues, COSCHEDULING_QUEUE: queue},
        local_queues={**snapshot.local_queues, **local})
