"""The greedy placement reference: gangs placed pod by pod, first fit, as the coscheduling
plugin lets kube-scheduler place them, and what a plan's placement leaves stranded.

:func:`greedy_place` takes the pending gangs in Kueue's order (priority, then creation time,
then name) and places each pod on the first node, in name order, with room for it, carrying
the labels of the gang's flavor and with its taints tolerated. The flavor is the first of its
ClusterQueue's flavors on whose nodes the whole gang fits so (more than Kueue, which picks the
flavor by quota alone, knows). A gang that fits in no flavor is not admitted, but the pods that
found a node in its first flavor keep it, waiting at Permit as the coscheduling plugin holds
them until its timeout: that capacity is stranded for every gang after it. Quota is not checked (the
``placement`` scenario's quota exceeds its nodes).

:func:`plan_placement` reads the same figures off a clueue plan: the nodes its ``admit`` actions
place each pod on. Both report pods placed, gangs admitted, and GPUs stranded: free GPUs on nodes
that are partly used (some GPU in use, some free), plus, for greedy, GPUs held by waiting pods.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Mapping, Sequence

from clueue.engine import Plan, Snapshot
from clueue.engine.placement import per_node, tolerates
from clueue.engine.objects import Node, PodSetSpec
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


def _first_fit(nodes: Sequence[Node], free: Mapping[str, Mapping[str, Fraction]], pods: Sequence[PodSetSpec],
               labels: Mapping[str, str]) -> list[tuple[str, PodSetSpec]]:
    """Each pod in turn on the first node of the flavor (``labels``) with room: the pods that
    found a node (all of them if the gang fits), without taking anything yet."""
    left = {n: dict(f) for n, f in free.items()}
    out = []
    for ps in pods:
        node = next((n for n in nodes if n.name in left and all(n.labels.get(k) == v for k, v in labels.items())
                     and all(n.labels.get(r.key) in r.values for r in ps.node_labels)
                     and all(tolerates(ps.tolerations, t) for t in n.taints)
                     and per_node(ps.requests, left[n.name], 1)), None)
        if node is not None:
            _take(left[node.name], ps.requests)
            out.append((node.name, ps))
    return out


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
        mine = [ps for ps in w.pod_sets for _ in range(ps.count)]
        tries = [_first_fit(nodes, free, mine, labels) for labels in flavors]
        fits = next((t for t in tries if len(t) == len(mine)), None)
        taken = fits if fits is not None else (tries[0] if tries else [])
        for node, ps in taken:
            _take(free[node], ps.requests)
        if fits is not None:
            admitted.add(w.key)
            placed += len(fits)
        else:  # the pods placed in the first flavor wait at Permit, holding their nodes
            waiting += sum(ps.requests.get(GPU, Fraction(0)) for _, ps in taken)
    return PlacementResult(placed, len(admitted), _stranded(snapshot, free), int(waiting), frozenset(admitted))


def plan_placement(snapshot: Snapshot, plan: Plan, workloads: Mapping[str, Workload]) -> PlacementResult:
    """The placement of ``plan``: the nodes its ``admit`` actions place each pod set's pods on
    (``nodes``: pod set -> a node per pod)."""
    free = _free(snapshot)
    placed = 0
    gangs: set[str] = set()
    for a in plan.actions:
        if a.kind != "admit" or "nodes" not in a.details:
            continue
        sets = {ps.name: ps for ps in workloads[a.workload].pod_sets}
        for ps, nodes in a.details["nodes"].items():
            for node in nodes:
                _take(free[node], sets[ps].requests)
                placed += 1
        gangs.add(a.workload)
    return PlacementResult(placed, len(gangs), _stranded(snapshot, free), admitted=frozenset(gangs))
