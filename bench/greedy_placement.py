"""The greedy placement reference: gangs placed pod by pod, first fit, as the coscheduling
plugin lets kube-scheduler place them, and what a plan's placement leaves stranded.

:func:`greedy_place` takes the pending pod groups in Kueue's order (priority, then creation
time, then name) and places each pod on the first node, in name order, with room for it whose
labels are those of one of its ClusterQueue's flavors (tried in the queue's order), the node's
taints tolerated. A gang whose pods do not all find a node is not admitted, but the pods that
did find one keep their nodes, waiting at Permit as the coscheduling plugin holds them until its
timeout: that capacity is stranded for every gang after it. Quota is not checked (the
``placement`` scenario's quota exceeds its nodes).

:func:`plan_placement` reads the same figures off a clueue plan: the pods its ``ungate`` actions
pin to nodes. Both report pods placed, gangs admitted, and GPUs stranded: free GPUs on nodes
that are partly used (some GPU in use, some free), plus, for greedy, GPUs held by waiting pods.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Iterable, Mapping

from clueue.engine import Plan, Snapshot
from clueue.engine.placement import HOSTNAME_LABEL, per_node, tolerates
from clueue.engine.workloads import Workload

__all__ = ["PlacementResult", "greedy_place", "plan_placement", "GPU"]

GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class PlacementResult:
    pods_placed: int
    gangs_admitted: int
    gpus_stranded: int  # free GPUs on partly used nodes
    gpus_waiting: int = 0  # GPUs held by pods of gangs that did not complete
    admitted: frozenset[str] = frozenset()  # the gangs admitted

    def to_dict(self) -> dict[str, int]:
        return {"podsPlaced": self.pods_placed, "gangsAdmitted": self.gangs_admitted,
                "gpusStranded": self.gpus_stranded + self.gpus_waiting, "gpusFreeOnPartlyUsedNodes": self.gpus_stranded,
                "gpusHeldByWaitingPods": self.gpus_waiting}


def _free(snapshot: Snapshot) -> dict[str, dict[str, Fraction]]:
    """Schedulable node -> what it has free, the pods bound to it deducted."""
    free = {n.name: dict(n.allocatable) for n in snapshot.nodes.values() if not n.unschedulable}
    for pod in snapshot.pods.values():
        if pod.node_name in free and pod.phase not in ("Succeeded", "Failed"):
            for r, v in pod.requests.items():
                free[pod.node_name][r] = free[pod.node_name].get(r, Fraction(0)) - v
    return free


def _stranded(snapshot: Snapshot, free: Mapping[str, Mapping[str, Fraction]]) -> int:
    out = Fraction(0)
    for name, left in free.items():
        total = snapshot.nodes[name].allocatable.get(GPU, Fraction(0))
        have = left.get(GPU, Fraction(0))
        if 0 < have < total:
            out += have
    return int(out)


def _take(free: dict[str, Fraction], requests: Mapping[str, Fraction]) -> None:
    for r, v in requests.items():
        free[r] = free.get(r, Fraction(0)) - v


def greedy_place(snapshot: Snapshot, workloads: Iterable[Workload]) -> PlacementResult:
    """Place the pending workloads pod by pod, first fit, in Kueue's order (module docstring)."""
    free = _free(snapshot)
    nodes = sorted(snapshot.nodes.values(), key=lambda n: n.name)
    pending = sorted((w for w in workloads if w.admission is None and not w.finished and not w.held),
                     key=lambda w: (-w.priority, w.created, w.key))
    placed = 0
    admitted: set[str] = set()
    waiting = Fraction(0)
    for w in pending:
        lq = snapshot.local_queues.get(f"{w.namespace}/{w.queue}")
        cq = snapshot.cluster_queues.get(lq.cluster_queue) if lq else None
        if cq is None:
            continue
        flavors = [snapshot.flavors[fq.flavor].node_labels for g in cq.resource_groups for fq in g.flavors
                   if fq.flavor in snapshot.flavors]
        mine = [(ps, i) for ps in w.pod_sets for i in range(ps.count)]
        done = 0
        for ps, _ in mine:
            node = next((n for labels in flavors for n in nodes
                         if n.name in free and all(n.labels.get(k) == v for k, v in labels.items())
                         and all(n.labels.get(r.key) in r.values for r in ps.node_labels)
                         and all(tolerates(ps.tolerations, t) for t in n.taints)
                         and per_node(ps.requests, free[n.name], 1)), None)
            if node is None:
                continue  # the pods placed so far wait at Permit, holding their nodes
            _take(free[node.name], ps.requests)
            done += 1
        if done == len(mine):
            admitted.add(w.key)
            placed += done
        else:
            waiting += sum(ps.requests.get(GPU, Fraction(0)) for ps, _ in mine[:done])
    return PlacementResult(placed, len(admitted), _stranded(snapshot, free), int(waiting), frozenset(admitted))


def plan_placement(snapshot: Snapshot, plan: Plan) -> PlacementResult:
    """The placement of ``plan``: the pods its ``ungate`` actions pin to nodes."""
    free = _free(snapshot)
    placed = 0
    gangs: set[str] = set()
    for a in plan.actions:
        node = a.details.get("nodeSelector", {}).get(HOSTNAME_LABEL) if a.kind == "ungate" else None
        pod = snapshot.pods.get(a.target)
        if node is None or pod is None or node not in free:
            continue
        _take(free[node], pod.requests)
        placed += 1
        gangs.add(a.workload)
    return PlacementResult(placed, len(gangs), _stranded(snapshot, free), admitted=frozenset(gangs))


