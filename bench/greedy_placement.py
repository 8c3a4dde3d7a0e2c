"""The greedy placement reference: gangs placed pod by pod, first fit, as kube-scheduler with the
coscheduling plugin places them, and what a plan's placement leaves stranded.

:func:`greedy_place` takes the pending gangs in the coscheduling plugin's queue order (priority,
then creation time, then name: the pods of a gang come one after the other) and places each pod
on the first node, in name order, that passes kube-scheduler's filters: room for its requests,
the labels of the gang's flavor and its own node selector, its taints tolerated. A placed pod
waits at Permit until every pod of its gang is placed (minMember is the gang's size), then the
gang is admitted. When a pod finds no node, the plugin's PostFilter decides: if more than 10% of
the gang is still unplaced, the waiting pods of the gang are rejected and give their nodes back;
if 10% or less, they keep waiting (until the plugin's timeout, after this cycle) and hold their
nodes, in case the few missing pods still find room. A gang not admitted at the end of its pods
leaves the pods placed since its last rejection waiting: what they hold is stranded.

The flavor is the first of its ClusterQueue's flavors on whose nodes the whole gang fits so; a
gang that fits in none tries the first. That is more than Kueue knows, which picks the flavor by
quota alone: the reference is generous. Quota is not checked (the ``placement`` scenario's quota
exceeds its nodes). kube-scheduler's default scoring spreads pods over the least allocated
nodes, which strands more than first fit: first fit is the kinder reference.

:func:`plan_placement` reads the same figures off a clueue plan: the nodes its ``admit`` actions
place each pod on. Both report pods placed, gangs admitted and GPUs stranded, by one definition
(:func:`stranded_gpus`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Mapping, Sequence

from clueue.engine import Plan, Snapshot
from clueue.engine.objects import Node, PodSetSpec
from clueue.engine.placement import tolerates
from clueue.engine.workloads import Workload

__all__ = ["PlacementResult", "greedy_place", "plan_placement", "stranded_gpus", "GPU", "PERMIT_GAP"]

GPU = "nvidia.com/gpu"
#: The coscheduling plugin's PostFilter keeps a gang's pods waiting when at most this share of
#: the gang is unplaced, and rejects them when more is.
PERMIT_GAP = Fraction(1, 10)


@dataclass(frozen=True)
class PlacementResult:
    pods_placed: int  # pods of admitted gangs
    gangs_admitted: int
    gpus_stranded: int  # free GPUs on partly used nodes
    gpus_waiting: int = 0  # GPUs held by pods of gangs not admitted, waiting at Permit
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
            _take(free[pod.node_name], pod.requests)
    return free


def stranded_gpus(snapshot: Snapshot, free: Mapping[str, Mapping[str, Fraction]], waiting: Fraction) -> tuple[int, int]:
    """GPUs stranded after a cycle, for clueue and greedy alike: (free GPUs on partly used nodes,
    GPUs held by pods waiting at Permit). ``free`` is what each schedulable node has left with
    every pod on it counted (running, placed this cycle, waiting); a node is partly used when
    some of its GPUs are taken and some free. Both parts are capacity no gang can use: the
    first is split into pieces smaller than a whole node, the second is held by pods that do
    not run."""
    out = Fraction(0)
    for name, left in free.items():
        total = snapshot.nodes[name].allocatable.get(GPU, Fraction(0))
        have = left.get(GPU, Fraction(0))
        if 0 < have < total:
            out += have
    return int(out), int(waiting)


def _take(free: dict[str, Fraction], requests: Mapping[str, Fraction], sign: int = 1) -> None:
    for r, v in requests.items():
        free[r] = free.get(r, Fraction(0)) - sign * v


class _Filter:
    """kube-scheduler's filters for the pods of one shape (pod set) in one flavor: the nodes
    whose labels and taints let them in, in name order, computed once per shape and flavor."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = nodes
        self.eligible: dict[tuple, list[str]] = {}

    def __call__(self, ps: PodSetSpec, labels: Mapping[str, str]) -> list[str]:
        key = (tuple(sorted(labels.items())), ps.node_labels, ps.tolerations)
        if key not in self.eligible:
            self.eligible[key] = [n.name for n in self.nodes
                                  if all(n.labels.get(k) == v for k, v in labels.items())
                                  and all(n.labels.get(r.key) in r.values for r in ps.node_labels)
                                  and all(tolerates(ps.tolerations, t) for t in n.taints)]
        return self.eligible[key]


def _first_fit(free: Mapping[str, dict[str, Fraction]], pods: Sequence[PodSetSpec], labels: Mapping[str, str],
               eligible: _Filter) -> tuple[list[tuple[str, PodSetSpec]], bool]:
    """The pods of one gang in turn, each on the first eligible node with room, through Permit
    and PostFilter (module docstring). Returns the pods placed (and taken from ``free``): the
    whole gang if it is admitted (True), else those left waiting."""
    placed: list[tuple[str, PodSetSpec]] = []
    missed = False
    for ps in pods:
        asks = [(r, v) for r, v in ps.requests.items() if v > 0]
        node = next((n for n in eligible(ps, labels) if all(free[n].get(r, 0) >= v for r, v in asks)), None)
        if node is not None:
            _take(free[node], ps.requests)
            placed.append((node, ps))
            continue
        missed = True
        if Fraction(len(pods) - len(placed), len(pods)) > PERMIT_GAP:  # PostFilter rejects the waiting pods
            for n, p in placed:
                _take(free[n], p.requests, -1)
            placed = []
    return placed, not missed


def greedy_place(snapshot: Snapshot, workloads: Iterable[Workload]) -> PlacementResult:
    """Place the pending workloads pod by pod, first fit, in the coscheduling order (module docstring)."""
    free = _free(snapshot)
    eligible = _Filter(sorted((n for n in snapshot.nodes.values() if n.name in free), key=lambda n: n.name))
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
        if not flavors or not mine:
            continue
        # the first flavor whose nodes hold the whole gang, else the first flavor
        for labels in flavors:
            taken, whole = _first_fit(free, mine, labels, eligible)
            if whole:
                break
            for n, ps in taken:  # only a try: give back what it took
                _take(free[n], ps.requests, -1)
        else:
            taken, whole = _first_fit(free, mine, flavors[0], eligible)
        if whole:
            admitted.add(w.key)
            placed += len(taken)
        else:  # these pods wait at Permit, holding their nodes
            waiting += sum(ps.requests.get(GPU, Fraction(0)) for _, ps in taken)
    return PlacementResult(placed, len(admitted), *stranded_gpus(snapshot, free, waiting), frozenset(admitted))


def plan_placement(snapshot: Snapshot, plan: Plan, workloads: Mapping[str, Workload]) -> PlacementResult:
    """The placement of ``plan``: the nodes its ``admit`` actions place each pod set's pods on
    (``nodes``: pod set -> a node per pod). No pod of a clueue plan waits: a gang is admitted
    whole or not ungated at all."""
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
    return PlacementResult(placed, len(gangs), *stranded_gpus(snapshot, free, Fraction(0)), admitted=frozenset(gangs))
