"""Kueue's topology-aware scheduling (TAS): topology domains of nodes, what a pod set asks of
them, and the topology assignment of an admitted pod set (docs/placement.md).

A ``Topology`` names node labels as levels, from the highest (e.g. block) to the lowest (e.g.
rack, or ``kubernetes.io/hostname``). A node's DOMAIN at a level is the values of that level's
label and of every label above it: rack ``r1`` of block ``b1`` is not rack ``r1`` of block
``b2`` (Kueue does not assume a level's values are unique across the cluster). A ResourceFlavor
with ``spec.topologyName`` places its pods topology-aware; a pod set asks, by annotation, for
all its pods within one domain of a level (required), for as few domains as can be (preferred),
or for no domain at all (unconstrained, also what a pod set without annotation gets).

The policy (policies/topology.lp) decides; this module only works out the domains of node
classes (which placement.py splits by the labels of the levels asked for), the facts' weights,
and, for explanations, the best domain of a pod set that fits in none.

Pure Python: no clingo here.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Mapping, Sequence

from .objects import PodSetSpec, Topology, TopologyRequest
from .plan import TopologyAssignment
from .kueue_api import HOSTNAME_LABEL, SLICE_SIZE_ANNOTATION, SLICE_TOPOLOGY_ANNOTATION, topology_annotation
from .snapshot import Snapshot

__all__ = ["Fits", "annotation", "domain", "domain_costs", "flavor_topology", "split_labels",
           "topology_assignment", "topology_unfit", "unusable"]

#: A preferred pod set's cost of one domain at a level grows by this factor per level up, at most:
#: the sums stay far below clingo's 2**31 (a level's domains are never more than the pods).
_MAX_COST = 2**20


def annotation(request: TopologyRequest) -> str:
    """The pod set annotation ``request`` was read from, for messages."""
    return topology_annotation(request.mode)


def flavor_topology(snapshot: Snapshot, flavor: str) -> Topology | None:
    """The Topology flavor ``flavor`` names in ``spec.topologyName``, if it names one that exists."""
    f = snapshot.flavors.get(flavor)
    return snapshot.topologies.get(f.topology_name) if f is not None and f.topology_name else None


def unusable(snapshot: Snapshot, ps: PodSetSpec, flavor: str) -> str | None:
    """Why the pods of ``ps`` cannot go to the nodes of ``flavor`` under topology-aware
    scheduling, in words naming the object and field at fault; None if they can.

    As in Kueue: a pod set with a topology annotation needs a flavor with a Topology, whose
    levels include the one it asks for; a flavor naming a Topology that does not exist takes no
    pods at all."""
    f = snapshot.flavors.get(flavor)
    if f is None:
        return None
    if f.topology_name:
        topology = snapshot.topologies.get(f.topology_name)
        if topology is None:
            return (f"ResourceFlavor {f.name} names Topology {f.topology_name} in spec.topologyName, "
                    "which does not exist")
        request = ps.topology
        if request is not None and request.level and request.level not in topology.levels:
            return (f"Topology {topology.name} has no level {request.level} (spec.levels), which the pod set "
                    f"asks for in {annotation(request)}")
        if request is not None and request.slice_level:
            return _slice_problem(topology, ps.count, request)
        return None
    if ps.topology is not None:
        return (f"ResourceFlavor {f.name} has no spec.topologyName, and the pod set asks for "
                f"topology-aware scheduling ({annotation(ps.topology)})")
    return None


def _slice_problem(topology: Topology, count: int, request: TopologyRequest) -> str | None:
    """What is wrong with a pod set's slices in ``topology``, as Kueue validates them: their level
    is one of the Topology's, at or below the pod set's, and their size divides its pods."""
    where = SLICE_TOPOLOGY_ANNOTATION
    if request.slice_level not in topology.levels:
        return f"Topology {topology.name} has no level {request.slice_level} (spec.levels), which {where} names"
    if topology.levels.index(request.slice_level) < topology.levels.index(request.level):
        return f"{where} {request.slice_level} is above the pod set's level {request.level} in Topology {topology.name}"
    if count % request.slice_size:
        return f"its {count} pods are no whole number of slices of {SLICE_SIZE_ANNOTATION} {request.slice_size}"
    return None


def _above(topology: Topology, level: str) -> tuple[str, ...]:
    """The levels of ``topology`` from the highest down to ``level``, without the hostname level
    (a node is its own domain there: node classes are never split by it)."""
    if level not in topology.levels:
        return ()
    return tuple(l for l in topology.levels[:topology.levels.index(level) + 1] if l != HOSTNAME_LABEL)


def split_labels(snapshot: Snapshot, pod_sets: Iterable[PodSetSpec]) -> set[str]:
    """The node labels node classes are split by for topology: for every level some pod set of
    ``pod_sets`` asks for, that level's label and those above it, in every Topology that has it.
    Never the hostname label, so that identical nodes stay one class."""
    levels = {level for ps in pod_sets if ps.topology is not None
              for level in (ps.topology.level, ps.topology.slice_level) if level}
    return {label for t in snapshot.topologies.values() for level in levels for label in _above(t, level)}


def domain(topology: Topology, level: str, labels: Mapping[str, str]) -> str | None:
    """The domain at ``level`` of a node (or node class) with ``labels``: the values of the
    labels of ``level`` and the levels above it, joined by ``/`` (label values hold no ``/``);
    None if it lacks one of them.

    >>> domain(Topology("t", ("block", "rack")), "rack", {"block": "b1", "rack": "r1"})
    'b1/r1'
    """
    values = [labels.get(label) for label in _above(topology, level)]
    if not values or any(v is None for v in values):
        return None
    return "/".join(v for v in values if v is not None)


def domain_costs(topology: Topology, ps: PodSetSpec) -> dict[str, int]:
    """A preferred pod set's cost of one domain at each level counted (the preferred level and
    those above it, but the hostname level): each level up costs ``count + 1`` times the one
    below, so that one domain fewer at a higher level outweighs any number at lower ones (Kueue
    goes up a level only when no domain of the lower one holds the pod set); capped at
    ``_MAX_COST``, beyond which higher levels weigh the same."""
    assert ps.topology is not None
    costs: dict[str, int] = {}
    cost = 1
    for label in reversed(_above(topology, ps.topology.level)):
        costs[label] = cost
        cost = min(cost * (ps.count + 1), _MAX_COST)
    return costs


#: Per node shape: its labels, how many pods of the pod set one of its nodes holds, how many nodes.
Fits = Sequence[tuple[Mapping[str, str], int, int]]


def _best_domain(topology: Topology, request: TopologyRequest, fits: Fits) -> tuple[str, int]:
    """The domain at the pod set's level that holds the most of its pods, in whole slices if it
    has slices, and how many (``("", 0)`` when no node is in a domain of the level); at the
    hostname level, the best node (unnamed)."""
    size = request.slice_size or 1
    if request.level == HOSTNAME_LABEL:
        return "", max((per_node // size * size for _, per_node, _ in fits), default=0)
    # pods per domain of the slice level (or per node), rounded down to whole slices
    pieces: dict[tuple[str, str], int] = defaultdict(int)
    for i, (labels, per_node, nodes) in enumerate(fits):
        d = domain(topology, request.level, labels)
        if d is None:
            continue
        if request.slice_level == HOSTNAME_LABEL:
            pieces[d, f"node shape {i}"] += per_node // size * size * nodes
        else:
            pieces[d, domain(topology, request.slice_level or request.level, labels) or ""] += per_node * nodes
    held: dict[str, int] = defaultdict(int)
    for (d, _), pods in pieces.items():
        held[d] += pods // size * size
    return max(sorted(held.items()), key=lambda dk: dk[1], default=("", 0))


def topology_unfit(snapshot: Snapshot, ps: PodSetSpec, flavors: Mapping[str, Fits]) -> dict[str, object] | None:
    """Why the pods of ``ps`` fit in none of ``flavors`` (flavor -> :data:`Fits` of the nodes
    left free) for topology's sake, as the details of a ``TopologyUnfit`` reason, for the flavor
    that comes closest; None if one holds them as the pod set asks (or it asks nothing of a
    topology that could keep it out).

    A flavor it cannot use (:func:`unusable`) holds none; one of a Topology holds a pod set that
    requires a level if one domain of that level (one node, for the hostname) holds all of it.
    """
    best: tuple[int, dict[str, object]] | None = None
    request = ps.topology
    for flavor, fits in sorted(flavors.items()):
        why, fit = unusable(snapshot, ps, flavor), 0
        topology = flavor_topology(snapshot, flavor)
        if why is None:
            if request is None or request.mode != "required" or topology is None:
                return None
            where, fit = _best_domain(topology, request, fits)
            if fit >= ps.count:
                return None
            one = "node" if request.level == HOSTNAME_LABEL else f"{request.level} domain"
            if request.slice_size:
                one += f", in slices of {request.slice_size} within one {request.slice_level}"
            why = f"needs {ps.count} pods in one {one}; " + (
                f"the best, {where}, holds {fit}" if where else f"the best holds {fit}")
        if best is None or fit > best[0]:
            best = (fit, {"podSet": ps.name, "pods": ps.count, "flavor": flavor,
                          "level": request.level if request else "", "fit": fit, "why": why})
    return best[1] if best else None


def topology_assignment(snapshot: Snapshot, flavors: Mapping[str, str], nodes: Sequence[str]) -> TopologyAssignment | None:
    """Kueue's ``topologyAssignment`` of a pod set admitted in ``flavors`` (resource -> flavor)
    with a pod on each of ``nodes``: the pods per domain at the Topology's lowest level, or only
    per node when that level is the hostname (the node names the rest); None when no flavor has
    a Topology or a pod has no node."""
    topology = next((t for t in (flavor_topology(snapshot, f) for f in sorted(set(flavors.values()))) if t), None)
    if topology is None or not nodes:
        return None
    levels = (HOSTNAME_LABEL,) if topology.levels[-1] == HOSTNAME_LABEL else topology.levels
    counts: dict[tuple[str, ...], int] = defaultdict(int)
    for name in nodes:
        node = snapshot.nodes.get(name)
        # the hostname level's value is the Node's own label (what pins its pods), else its name
        labels = {HOSTNAME_LABEL: name, **(node.labels if node is not None else {})}
        counts[tuple(labels.get(level, "") for level in levels)] += 1
    return TopologyAssignment(levels, tuple(sorted(counts.items())))
