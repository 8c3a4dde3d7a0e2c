"""Placement on nodes: node classes for the solver, and the exact node-by-node check after it.

When a snapshot has Nodes, the built-in policy (policies/placement.lp) places the pods of every
workload it admits. Nodes alike in everything placement looks at (free resources, the labels
some flavor or pod set asks about, taints, schedulability) form one NODE CLASS, so that 1,000
nodes of a few shapes are a few classes to the solver and identical nodes are never told apart
(symmetry broken). The solver chooses how many pods of each pod set go to each class, against
the class's total free capacity (an aggregate relaxation); :func:`assign_nodes` then packs the
pods onto the nodes of each class, first-fit decreasing, and names the classes where that fails,
so that the cycle can forbid them and solve again.

Pure Python: no clingo here.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from fractions import Fraction
from math import floor
from typing import Iterable, Mapping, Sequence

from .nodematch import Demands
from .objects import Pod, PodSetSpec, Taint, Toleration
from .podgroups import holds
from .quantity import common_divisor, format_quantity
from .snapshot import Snapshot
from .kueue_api import ADMISSION_GATE, HOSTNAME_LABEL
from .topology import split_labels
from .workloads import Workload

__all__ = ["Pins", "NodeClass", "NodeClasses", "node_classes", "per_node", "tolerates",
           "assign_nodes", "Assignment", "free_shapes", "shortage", "bundle", "eligible_shapes"]

_MAX_TOTAL = 2**30 - 1  # as compiler.py: sums of amounts stay below clingo's 2**31
_TERMINATED = ("Succeeded", "Failed")


@dataclass(frozen=True)
class NodeClass:
    """Nodes alike for placement: ``free`` is what each has left (allocatable less the requests
    of the pods on it); ``idle`` says no pod runs on them."""

    id: int
    nodes: tuple[str, ...]
    free: Mapping[str, Fraction]
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    idle: bool


@dataclass(frozen=True)
class NodeClasses:
    """The schedulable nodes of a snapshot in classes, and the integer unit of each resource."""

    classes: tuple[NodeClass, ...]
    units: Mapping[str, Fraction]
    node_free: Mapping[str, Mapping[str, Fraction]] = field(default_factory=dict)  # node -> free
    demands: Demands | None = None  # the placement-only resources (nodematch.py)

    def placed(self, ps: PodSetSpec, namespace: str) -> PodSetSpec:
        """``ps`` (of a workload in ``namespace``) with what one pod takes of a node as its
        requests: the resources it requests and the placement-only ones (pods, host ports,
        anti-affinity), and the pod affinity labels it needs of a node in its node selector.
        Placement counts these; quota only the requests."""
        if self.demands is None:
            return ps
        needs = ps.needs
        affine = self.demands.selector(namespace, needs)
        if affine:
            needs = replace(needs, node_selector=needs.node_selector + affine)
        return replace(ps, requests={**ps.requests, **self.demands.takes(namespace, ps.needs)}, needs=needs)

    def free_units(self, c: NodeClass, resource: str) -> int:
        """What one node of ``c`` has free of ``resource``, in whole units (rounded down)."""
        return floor(c.free.get(resource, Fraction(0)) / self.units.get(resource, Fraction(1)))

    def request_units(self, resource: str, amount: Fraction) -> int:
        """``amount`` of ``resource`` in whole units (rounded up: never under-count use)."""
        return -floor(-amount / self.units.get(resource, Fraction(1)))


def tolerates(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    """Whether a pod with ``tolerations`` may run on a node with ``taint`` (Kubernetes' rule;
    PreferNoSchedule never keeps a pod away)."""
    if taint.effect == "PreferNoSchedule":
        return True
    for t in tolerations:
        if t.effect and t.effect != taint.effect:
            continue
        if t.key == "" and t.operator == "Exists":
            return True
        if t.key == taint.key and (t.operator == "Exists" or t.value == taint.value):
            return True
    return False


def admits(c: NodeClass, ps: PodSetSpec, flavor_labels: Mapping[str, str]) -> bool:
    """Whether the nodes of ``c`` may take pods of ``ps`` in a flavor whose nodes carry
    ``flavor_labels``: the flavor's labels, node selector and required node affinity, taints."""
    # a class's nodes share every label and every name placement asks about: one stands for all
    return all(c.labels.get(k) == v for k, v in flavor_labels.items()) and \
        ps.needs.selects(c.nodes[0], c.labels) and all(tolerates(ps.tolerations, t) for t in c.taints)


def per_node(requests: Mapping[str, Fraction], free: Mapping[str, Fraction], most: int) -> int:
    """How many pods requesting ``requests`` fit on one node with ``free`` (at most ``most``)."""
    n = most
    for r, v in requests.items():
        if v > 0:
            n = min(n, floor(free.get(r, Fraction(0)) / v))
    return max(n, 0)


class Pins:
    """How a pod is pinned to the Node placement chose, and which Node a pinned pod waits for.

    kube-scheduler matches a node selector against a Node's labels, and a Node's
    ``kubernetes.io/hostname`` label is what its kubelet says its host is: it differs from the
    Node's ``metadata.name`` wherever the kubelet runs with ``--hostname-override`` or the cloud
    names Nodes by DNS name (Node ``ip-10-0-1-14.ec2.internal``, label ``ip-10-0-1-14``). So a
    pod is pinned by the Node's own label value, when that value names this Node alone among
    the snapshot's Nodes; otherwise (no such label, or Nodes sharing it) by required node
    affinity ``matchFields`` on ``metadata.name``, which names exactly one Node
    (docs/placement.md).

    >>> pins = Pins(Snapshot())
    >>> pins.selector("n1")   # a Node the snapshot does not label: pinned by its name
    {}
    """

    def __init__(self, snapshot: Snapshot) -> None:
        self._nodes = snapshot.nodes
        self._by_label: dict[str, list[str]] = defaultdict(list)  # hostname label value -> Node names
        for node in snapshot.nodes.values():
            value = node.labels.get(HOSTNAME_LABEL)
            if value is not None:
                self._by_label[value].append(node.name)

    def selector(self, node: str) -> dict[str, str]:
        """The node selector pinning a pod to Node ``node``: ``{kubernetes.io/hostname: <its
        label>}``, or ``{}`` when the label does not name it alone (see :meth:`match_fields`)."""
        n = self._nodes.get(node)
        value = n.labels.get(HOSTNAME_LABEL) if n is not None else None
        return {HOSTNAME_LABEL: value} if value is not None and self._by_label[value] == [node] else {}

    def match_fields(self, node: str) -> list[dict[str, object]]:
        """The ``matchFields`` pinning a pod to ``node`` where :meth:`selector` cannot ([]: it can)."""
        return [] if self.selector(node) else [{"key": "metadata.name", "operator": "In", "values": [node]}]

    def node_of(self, pod: Pod) -> str:
        """The Node an ungated pod that is not bound yet is pinned to ("" none): by its node
        selector's hostname (the Node labelled so; if several are, the first by name; if none,
        the Node of that name, as clueue pinned pods before it read the label), or by
        ``matchFields`` on ``metadata.name`` that every term of its required node affinity has."""
        value = pod.node_selector.get(HOSTNAME_LABEL)
        if value is not None:
            named = sorted(self._by_label.get(value, ()))
            return named[0] if named else value if value in self._nodes else ""
        terms = pod.needs.terms or ()
        names = {frozenset(v for r in t.fields if r.operator == "In" for v in r.values) for t in terms}
        if len(names) == 1:
            [only] = names
            if len(only) == 1:
                return next(iter(only))
        return ""


def _on_nodes(snapshot: Snapshot) -> list[tuple[str, Pod]]:
    """(node, pod) for the pods on a node: bound there (spec.nodeName), or ungated and pinned
    there (:class:`Pins`) but not bound yet; terminated pods hold nothing."""
    out = []
    pins: Pins | None = None
    for pod in snapshot.pods.values():
        if pod.phase in _TERMINATED:
            continue
        node = pod.node_name
        if not node and ADMISSION_GATE not in pod.scheduling_gates and (
                HOSTNAME_LABEL in pod.node_selector or pod.needs.terms):
            pins = pins or Pins(snapshot)
            node = pins.node_of(pod)
        if node:
            out.append((node, pod))
    return out


def _in_use(on_nodes: Iterable[tuple[str, Pod]], demands: Demands,
            reserved: Iterable[tuple[str, Mapping[str, Fraction]]]) -> dict[str, dict[str, Fraction]]:
    """Node -> what the pods on it take (requests and placement-only resources), with what
    ``reserved`` (node, takes) holds besides."""
    used: dict[str, dict[str, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    takes = [(node, {**pod.requests, **demands.takes(pod.namespace, pod.needs)}) for node, pod in on_nodes]
    for node, amounts in [*takes, *reserved]:
        for r, v in amounts.items():
            used[node][r] += v
    return used


def node_classes(snapshot: Snapshot, workloads: Sequence[Workload],
                 reserved: Iterable[tuple[str, Mapping[str, Fraction]]] = ()) -> NodeClasses:
    """Group the schedulable nodes of ``snapshot`` into classes; amounts count in units that
    divide every free amount and every request of ``workloads`` (coarser, rounding free amounts
    down and requests up, only if the totals would overflow the solver's integers).
    ``reserved``: (node, what it takes) of pods placed before the solve (:func:`place_pods`)."""
    on_nodes = _on_nodes(snapshot)
    namespaces = {n: ns.labels for n, ns in snapshot.namespaces.items()}
    demands = Demands(snapshot.nodes.values(), [(w.namespace, ps.needs) for w in workloads for ps in w.pod_sets],
                      [(node, pod.namespace, pod.needs) for node, pod in on_nodes], namespaces,
                      sum(ps.count for w in workloads for ps in w.pod_sets) + 1)
    asked = {r for w in workloads for ps in w.pod_sets for r in ps.requests} | set(demands.names())
    keys = {k for f in snapshot.flavors.values() for k in f.node_labels}
    keys |= {k for w in workloads for ps in w.pod_sets for k in ps.needs.label_keys()}
    # the labels of the topology levels pod sets ask for (never the hostname: topology.py)
    keys |= split_labels(snapshot, (ps for w in workloads if w.admission is None for ps in w.pod_sets))
    keys |= set(demands.label_keys())
    named = {n for w in workloads for ps in w.pod_sets for n in ps.needs.node_names()}
    # what InQueue PodGroups hold of the nodes counts as used (podgroups.py)
    used = _in_use(on_nodes, demands, [*reserved, *holds(snapshot).on_nodes()])
    groups: dict[tuple, list[str]] = defaultdict(list)
    shape: dict[tuple, tuple] = {}
    node_free: dict[str, dict[str, Fraction]] = {}
    for node in snapshot.nodes.values():
        if node.unschedulable:
            continue
        on = used.get(node.name, {})
        has = {**node.allocatable, **demands.capacity(node)}
        free = demands.cap({r: has.get(r, Fraction(0)) - on.get(r, Fraction(0)) for r in sorted(asked)})
        node_free[node.name] = free
        labels = tuple(sorted((k, v) for k, v in {**node.labels, **demands.labels(node.name)}.items() if k in keys))
        taints = tuple(sorted({t for t in node.taints if t.effect in ("NoSchedule", "NoExecute")},
                              key=lambda t: (t.key, t.value, t.effect)))
        # a node some pod set names (matchFields) is a class of its own
        key = (tuple(free.items()), labels, taints, not any(on.values()), node.name if node.name in named else "")
        groups[key].append(node.name)
        shape[key] = (free, dict(labels), taints, not any(on.values()))
    classes = tuple(NodeClass(i, tuple(sorted(groups[k])), *shape[k])
                    for i, k in enumerate(sorted(groups, key=lambda k: (str(k), len(groups[k])))))
    units: dict[str, Fraction] = {}
    done = NodeClasses(classes, units, node_free, demands)
    takes = [done.placed(ps, w.namespace) for w in workloads for ps in w.pod_sets]
    for r in sorted(asked):
        frees = [max(c.free.get(r, Fraction(0)), Fraction(0)) for c in classes]
        asks = [(ps.requests[r], ps.count) for ps in takes if r in ps.requests]
        unit = common_divisor([*frees, *(v for v, _ in asks)])

        def total(u: Fraction) -> int:
            return sum(floor(f / u) * len(c.nodes) for f, c in zip(frees, classes)) + \
                sum(-floor(-v / u) * n for v, n in asks)

        biggest = max([*frees, *(v for v, _ in asks)], default=Fraction(0))
        # coarser: free amounts round down, requests up, so nothing over-commits; beyond the
        # biggest amount every request is one unit and coarser cannot help (pods past 2^30)
        while total(unit) > _MAX_TOTAL and unit <= biggest:
            unit *= 2
        units[r] = unit
    return done


def class_fits(classes: NodeClasses, ps: PodSetSpec, flavor_labels: Mapping[str, str],
               namespace: str) -> dict[int, int]:
    """Class id -> how many pods of ``ps`` (of a workload in ``namespace``) fit on one node of it,
    with a flavor whose nodes carry ``flavor_labels``; classes where none fits are left out."""
    out = {}
    ps = classes.placed(ps, namespace)
    takes = ps.requests
    for c in classes.classes:
        if not admits(c, ps, flavor_labels):
            continue
        n = per_node(takes, c.free, max(ps.count, 1))
        if n > 0:
            out[c.id] = n
    return out


@dataclass(frozen=True)
class Assignment:
    """The exact placement of a decision: the nodes of each placed pod set, in pod order, what
    each node has left, and the (workload, class) pairs that did not fit node by node."""

    nodes: Mapping[tuple[str, str], tuple[str, ...]]  # (workload, pod set) -> a node per pod
    free: Mapping[str, Mapping[str, Fraction]]  # node -> free after placement
    failed: tuple[tuple[str, int], ...] = ()


def bundle(ps: PodSetSpec, pods: int) -> int:
    """How many of the ``pods`` of ``ps`` placed in one class go to one node together: all of
    them where the pod set requires the hostname topology level, a slice where its slices are
    of the hostname level, else one."""
    t = ps.topology
    if t is not None and t.mode == "required" and t.level == HOSTNAME_LABEL:
        return max(pods, 1)
    if t is not None and t.slice_level == HOSTNAME_LABEL and t.slice_size > 0:
        return t.slice_size
    return 1


def assign_nodes(classes: NodeClasses, placements: Mapping[str, Iterable[tuple[str, int, int]]],
                 workloads: Mapping[str, Workload], rank: Mapping[str, int]) -> Assignment:
    """Pack the pods the solver put in each class onto the class's nodes, first-fit decreasing
    (largest pods first, nodes in name order), higher-ranked workloads first among equals. The
    pods that go to one node together (:func:`bundle`) are packed as one, onto the first node
    that holds them all.

    ``placements``: workload -> (pod set, class id, pods). A class whose pods do not all fit
    names the lowest-ranked workload placed there in ``failed``.
    """
    free = {n: dict(f) for n, f in classes.node_free.items()}
    # per class: (workload, pod set, pods packed together, their index)
    by_class: dict[int, list[tuple[str, PodSetSpec, int, int]]] = defaultdict(list)
    for w, placed in placements.items():
        sets = {ps.name: classes.placed(ps, workloads[w].namespace) for ps in workloads[w].pod_sets}
        for ps, c, k in placed:
            size = bundle(sets[ps], k)
            # the policy places whole bundles; any pods left over are packed one by one
            by_class[c].extend((w, sets[ps], size, i) for i in range(k // size))
            by_class[c].extend((w, sets[ps], 1, k // size + i) for i in range(k % size))
    nodes: dict[tuple[str, str], list[str]] = defaultdict(list)
    failed = []
    for c in classes.classes:
        pods = by_class.get(c.id, [])
        if not pods:
            continue
        scale = {r: v for r, v in c.free.items() if v > 0}
        pods.sort(key=lambda p: (-p[2] * max((v / scale[r] if r in scale else 1) for r, v in p[1].requests.items())
                                 if p[1].requests else 0, rank.get(p[0], len(rank)), p[0], p[1].name, p[3]))
        # In whole units (which divide every free amount and request, or round them safely):
        # what is left on each node of the class, in the order of ``resources``.
        resources = sorted({r for _, ps, _, _ in pods for r in ps.requests})
        units = [classes.units.get(r, Fraction(1)) for r in resources]
        left = [[floor(free[n].get(r, Fraction(0)) / u) for r, u in zip(resources, units)] for n in c.nodes]
        asks: dict[int, list[int]] = {}
        fits = True
        for w, ps, n, _ in pods:
            ask = asks.get(id(ps))
            if ask is None:
                ask = asks[id(ps)] = [-floor(-ps.requests.get(r, Fraction(0)) / u) for r, u in zip(resources, units)]
            i = next((i for i, have in enumerate(left) if all(h >= n * a for h, a in zip(have, ask))), None)
            if i is None:
                fits = False
                continue
            left[i] = [h - n * a for h, a in zip(left[i], ask)]
            nodes[w, ps.name].extend([c.nodes[i]] * n)
            for r, v in ps.requests.items():
                free[c.nodes[i]][r] = free[c.nodes[i]].get(r, Fraction(0)) - n * v
        if not fits:  # the lowest-ranked workload placed there gives way, whichever pod was left over
            failed.append((max((p[0] for p in pods), key=lambda w: (rank.get(w, len(rank)), w)), c.id))
    return Assignment({k: tuple(v) for k, v in nodes.items()}, free, tuple(failed))


def free_shapes(classes: NodeClasses, free: Mapping[str, Mapping[str, Fraction]]
                ) -> tuple[tuple[NodeClass, Mapping[str, Fraction], int], ...]:
    """The nodes by class and by what each has ``free``: (class, free, how many nodes), so that
    explaining a shortage looks at a few shapes rather than at every node."""
    counts: dict[tuple[int, tuple[tuple[str, Fraction], ...]], int] = defaultdict(int)
    for c in classes.classes:
        for n in c.nodes:
            counts[c.id, tuple(sorted(free[n].items()))] += 1
    by_id = {c.id: c for c in classes.classes}
    return tuple((by_id[c], dict(f), k) for (c, f), k in sorted(counts.items(), key=lambda i: (i[0][0], str(i[0][1]))))


def eligible_shapes(shapes: Sequence[tuple[NodeClass, Mapping[str, Fraction], int]], ps: PodSetSpec,
                    labels: Mapping[str, str]) -> list[tuple[NodeClass, Mapping[str, Fraction], int]]:
    """The node shapes (:func:`free_shapes`) the pods of ``ps`` may go to in a flavor whose nodes
    carry ``labels``: its labels, the pod set's node selector and tolerations allow it."""
    return [(c, f, k) for c, f, k in shapes if admits(c, ps, labels)]


def shortage(shapes: Sequence[tuple[NodeClass, Mapping[str, Fraction], int]], ps: PodSetSpec,
             flavors: Mapping[str, Mapping[str, str]]) -> dict[str, object] | None:
    """Why the pods of ``ps`` do not all fit on the nodes (``shapes``: :func:`free_shapes`), for
    the flavor of ``flavors`` (name -> node labels; ``{"": {}}`` for none) that comes closest, as
    the details of a ``NodesUnfit`` reason; None if they fit with some flavor."""
    best: tuple[int, dict[str, object]] | None = None
    for flavor, labels in sorted(flavors.items()):
        eligible = [(f, k) for _, f, k in eligible_shapes(shapes, ps, labels)]
        fit = sum(k * per_node(ps.requests, f, ps.count) for f, k in eligible)
        if fit >= ps.count:
            return None
        # The resource that holds it back most: the one the fewest pods fit by.
        asked = [(r, v) for r, v in sorted(ps.requests.items()) if v > 0] or [("pods", Fraction(1))]
        r, v = min(asked, key=lambda rv: sum(k * floor(f.get(rv[0], Fraction(0)) / rv[1]) for f, k in eligible))
        whole = sum(k for f, k in eligible if f.get(r, Fraction(0)) >= v)
        nxt = max((f.get(r, Fraction(0)) for f, _ in eligible if f.get(r, Fraction(0)) < v), default=None)
        words = f"{whole} node{'s' if whole != 1 else ''} {'have' if whole != 1 else 'has'} at least {format_quantity(v)} free"
        if nxt is not None:
            words += f", the next best has {format_quantity(max(nxt, Fraction(0)))}"
        if not eligible:
            words = "no schedulable node matches its node selector, tolerations and flavor"
        details = {"podSet": ps.name, "pods": ps.count, "request": f"{format_quantity(v)} {r}",
                   "flavor": flavor, "fit": fit, "nodes": words}
        if best is None or fit > best[0]:
            best = (fit, details)
    return best[1] if best else None


def first_fit(classes: NodeClasses, free: Mapping[str, Mapping[str, Fraction]],
              asks: Sequence[tuple[PodSetSpec, Mapping[str, str], int]]
              ) -> tuple[list[list[str]], dict[str, dict[str, Fraction]]]:
    """Place ``count`` pods of each (pod set, flavor node labels, count) of ``asks``, in order,
    each on the first node (by class, then name) that admits it and has room in ``free``; the
    pod sets' requests are what a pod takes (:meth:`NodeClasses.placed`). Returns the nodes
    found per ask (fewer than asked where the nodes ran out) and what is free after."""
    left = {n: dict(f) for n, f in free.items()}
    found: list[list[str]] = []
    for ps, labels, count in asks:
        nodes: list[str] = []
        for c in classes.classes:
            if len(nodes) >= count or not admits(c, ps, labels):
                continue
            for n in c.nodes:
                if len(nodes) >= count:
                    break
                k = per_node(ps.requests, left[n], count - len(nodes))
                for r, v in ps.requests.items():
                    left[n][r] = left[n].get(r, Fraction(0)) - k * v
                nodes += [n] * k
        found.append(nodes)
    return found, left


def packing_shortage(classes: NodeClasses, free: Mapping[str, Mapping[str, Fraction]],
                     pod_sets: Sequence[PodSetSpec], flavors: Mapping[str, Mapping[str, str]]
                     ) -> dict[str, object] | None:
    """Why pod sets that each fit on the nodes alone (:func:`shortage` finds nothing) do not fit
    together: packed first fit, in order, with each flavor of ``flavors``, the pod set that runs
    out of nodes with the flavor where most of its pods fit, as the details of a ``NodesUnfit``
    reason; None if they all fit with some flavor. ``pod_sets``: as :meth:`NodeClasses.placed`."""
    best: tuple[int, dict[str, object]] | None = None
    for flavor, labels in sorted(flavors.items()):
        left = free
        for ps in pod_sets:
            found, after = first_fit(classes, left, [(ps, labels, ps.count)])
            if len(found[0]) < ps.count:
                details = shortage(free_shapes(classes, left), ps, {flavor: labels})
                if details is not None and (best is None or len(found[0]) > best[0]):
                    best = (len(found[0]), details)
                break
            left = after
        else:
            return None
    return best[1] if best else None
