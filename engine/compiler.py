"""The compiler: a snapshot and its workloads in, the facts of facts.py out.

Resource amounts become integers, in units chosen per quota tree (a ClusterQueue without a
cohort, or a root cohort with everything below it): for each tree and resource, the unit is
the largest quantity that divides every quota of the tree and every request of the workloads
queued in it (so ``500m`` and ``2`` CPU become 1 and 4 in units of ``500m``). The policy
compares amounts only within a tree, so a tree's unit is its own business: a huge quota in one
tree never coarsens another's. If a tree's quotas and requests, added up, could overflow
clingo's 32-bit integers, that tree's unit grows and its amounts are rounded in the safe
direction (requests up, quotas and limits down), so rounding never over-commits; the cycle
says so in a notice (:attr:`Units.notices`).
"""

from __future__ import annotations

import functools
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from math import ceil, floor
from typing import Any, Callable, Iterable, Mapping, Sequence

from .checks import inactive_checks
from .facts import PREDICATES, Node, Value, fact_text
from .fairsharing import fair_sharing_facts
from .memo import Memo
from .objects import ClusterQueue, LabelSelector, PodSetSpec, ResourceGroup
from .placement import NodeClasses, class_fits, node_classes
from .podgroups import holds
from .quota import cohort_parents, holding_queue, refuse_cohort_cycles, root_of
from .quantity import common_divisor, format_quantity
from .snapshot import Snapshot
from .topology import domain, domain_costs, split_labels
from .workloads import Workload

__all__ = ["Compiled", "Units", "compile_facts", "resource_units"]

# A tree's quotas and requests, in its unit, add up to less than 2**30: sums of such sums stay
# below clingo's 2**31, and a draw from a cohort's pool needs bits 0 to 29 (capacity.lp).
_MAX_TOTAL = 2**30 - 1


@dataclass(frozen=True)
class Units:
    """The quantity one integer unit stands for, per quota tree and resource."""

    trees: Mapping[Node | None, Mapping[str, Fraction]]  # tree root -> resource -> unit (None: no tree)
    node_tree: Mapping[Node, Node]  # every node of the quota trees -> the root of its tree
    local_queues: Mapping[str, str]  # "namespace/name" of a LocalQueue -> its ClusterQueue
    notices: tuple[str, ...] = ()  # the trees and resources whose unit rounds amounts
    # tree -> resource -> (amount, units): a quota or limit of at least the amount, what all the
    # tree's workloads ask together, counts as the units they ask in all, rounded up as the facts
    # round them, where counting more would coarsen the unit (see resource_units)
    caps: Mapping[Node | None, Mapping[str, tuple[Fraction, int]]] = field(default_factory=dict)

    def of_queue(self, cluster_queue: str | None) -> Mapping[str, Fraction]:
        """The units of the tree ClusterQueue ``cluster_queue`` is in."""
        return self.trees.get(self.node_tree.get(Node("cq", cluster_queue or "")), {})

    def tree(self, namespace: str, queue: str, admitted_in: str) -> Node | None:
        """The tree whose quota a workload counts in: that of its holding ClusterQueue
        (:func:`~.quota.holding_queue`; ``admitted_in`` is "" when it is not admitted)."""
        return self.node_tree.get(Node("cq", holding_queue(admitted_in, namespace, queue, self.local_queues)))


@dataclass(frozen=True)
class Compiled:
    """The facts of one cycle, with what is needed to read the answer back."""

    lines: Mapping[str, Sequence[str]]  # predicate -> its facts as ASP text (facts.render_facts)
    units: Units
    # (tree root, flavor, resource) -> (InQueue PodGroup, amount) it holds there (podgroups.py)
    reserved: Mapping[tuple[Node | None, str, str], tuple[tuple[str, Fraction], ...]] = field(default_factory=dict)

    def amount(self, cluster_queue: str | None, resource: str, units: int) -> Fraction:
        """``units`` of ``resource`` in the tree of ``cluster_queue``, as a quantity."""
        return self.units.of_queue(cluster_queue).get(resource, Fraction(1)) * units


class _Facts:
    """Facts as text, by predicate; only predicates of the schema, with their arity."""

    def __init__(self) -> None:
        self.lines: defaultdict[str, list[str]] = defaultdict(list)

    def add(self, predicate: str, *args: Value) -> None:
        expected = PREDICATES[predicate].args
        if len(args) != len(expected):
            raise AssertionError(f"{predicate} takes {len(expected)} arguments, got {args}")
        self.lines[predicate].append(fact_text(predicate, args))

    def extend(self, lines: Iterable[tuple[str, str]]) -> None:
        """Add ``(predicate, text)`` pairs rendered by another ``_Facts``."""
        for predicate, text in lines:
            self.lines[predicate].append(text)

    def pairs(self) -> tuple[tuple[str, str], ...]:
        return tuple((p, text) for p, texts in self.lines.items() for text in texts)


def resource_units(snapshot: Snapshot, workloads: Iterable[Workload]) -> Units:
    """Per quota tree and resource, the quantity one integer unit stands for (see the module
    docstring). A workload counts in the tree of its LocalQueue's ClusterQueue; workloads
    whose queue is in no tree share units of their own (they are never candidates)."""
    node_tree = _roots(_tree(snapshot), snapshot)
    local_queues = {key: lq.cluster_queue for key, lq in snapshot.local_queues.items()}
    quotas: dict[tuple[Node | None, str], list[Fraction]] = defaultdict(list)
    nodes = [(Node("cq", cq.name), cq.resource_groups) for cq in snapshot.cluster_queues.values()] + \
            [(Node("cohort", c.name), c.resource_groups) for c in snapshot.cohorts.values()]
    for node, groups in nodes:
        for g in groups:
            for fq in g.flavors:
                for r, q in fq.resources.items():
                    quotas[node_tree[node], r] += [v for v in (q.nominal, q.borrowing_limit, q.lending_limit)
                                                   if v is not None]
    # Many workloads ask the same: count each (queue, request, pod count) once, then multiply.
    # The request is counted by numerator and denominator: hashing a Fraction runs Python code.
    asks: Counter[tuple[str, str, str, str, int, int, int]] = Counter(
        (w.namespace, w.queue, _admitted_in(w), r, v.numerator, v.denominator, max(ps.count, 1))
        for w in workloads if not _beyond(w) for ps in w.pod_sets for r, v in ps.requests.items())
    located = Units({}, node_tree, local_queues)
    mine: dict[tuple[Node | None, str], list[tuple[Fraction, int]]] = defaultdict(list)
    for (ns, queue, admitted_in, r, n, d, count), times in asks.items():
        mine[located.tree(ns, queue, admitted_in), r].append((Fraction(n, d), count * times))
    for hold in holds(snapshot).held.values():  # what InQueue PodGroups hold counts as a request
        for _, r, q in hold.quota:
            mine[node_tree.get(Node("cq", hold.cluster_queue)), r].append((q, 1))
    trees: dict[Node | None, dict[str, Fraction]] = defaultdict(dict)
    caps: dict[Node | None, dict[str, tuple[Fraction, int]]] = defaultdict(dict)
    notices = []
    for tree, r in sorted(quotas.keys() | mine.keys(), key=lambda k: (str(k[0]), k[1])):
        amounts, asked = quotas.get((tree, r), []), mine.get((tree, r), [])
        unit, rounds = _unit(amounts, asked)
        demand = sum((v * pods for v, pods in asked), Fraction(0))
        if rounds and any(q > demand for q in amounts):
            # No usage of the tree can exceed what all its workloads ask together, so a quota or
            # limit beyond that decides nothing more than that amount: counted so, a huge quota
            # (1e12 cpu) does not coarsen the unit of the small quotas beside it.
            unit, rounds = _unit([min(q, demand) for q in amounts], asked)
            caps[tree][r] = (demand, sum(ceil(v / unit) * pods for v, pods in asked))
            what = "ClusterQueue" if tree is not None and tree.kind == "cq" else "cohort"
            if tree is not None:
                notices.append(f"{what} {tree.name}: quotas of {r} above what its workloads ask together "
                               f"({format_quantity(demand)}) count as that much, so that its amounts fit the "
                               "solver's integers; reasons show them so")
        trees[tree][r] = unit
        if rounds and tree is not None:
            notices.append(f"{'ClusterQueue' if tree.kind == 'cq' else 'cohort'} {tree.name}: {r} is counted in "
                           f"units of {format_quantity(unit)} so that the quota tree's amounts fit the solver's "
                           "integers; its quotas are rounded down and requests up to whole units")
    return Units(dict(trees), node_tree, local_queues, tuple(notices), dict(caps))


def _beyond(w: Workload) -> bool:
    """Whether ``w`` is held for asking more than its quota tree and the solver's integers hold
    (workloads.py): its requests are left out of the units and the facts, which could not count them."""
    return any(r.code == "ExceedsQuotaTree" for r in w.held)


def _admitted_in(w: Workload) -> str:
    """The ClusterQueue ``w``'s admission names ("" when it is not admitted)."""
    return w.admission.cluster_queue if w.admission is not None else ""


def _unit(quotas: Sequence[Fraction], asks: Sequence[tuple[Fraction, int]]) -> tuple[Fraction, bool]:
    """The unit of one resource in one tree, and whether it rounds any amount: the largest
    quantity dividing every quota and request, made as much coarser as the total of quotas and
    requests (``asks``: request, pods asking it) needs to stay within ``_MAX_TOTAL``."""
    amounts = [*quotas, *(v for v, _ in asks)]
    unit = common_divisor(amounts)

    def total(unit: Fraction) -> int:
        return sum(floor(q / unit) for q in quotas) + sum(ceil(v / unit) * pods for v, pods in asks)

    exact = total(unit)
    if exact <= _MAX_TOTAL:
        return unit, False
    # Coarser by a power of two or of ten, whichever is less coarse, so the unit reads well
    # (a power of two of Mi is a binary quantity, a power of ten of m a decimal one). Requests
    # rounded up may still add too much: then coarser still, until every request is one unit.
    scale = _round_scale(-(-exact // _MAX_TOTAL))
    while total(unit * scale) > _MAX_TOTAL and unit * scale < max(amounts):
        scale = _round_scale(scale + 1)
    unit *= scale
    return unit, any((v / unit).denominator != 1 for v in amounts)


def _round_scale(least: int) -> int:
    """The smallest power of two or of ten not below ``least``."""
    return min(2 ** (least - 1).bit_length(), 10 ** len(str(least - 1)) if least > 1 else 1)


def _roots(parents: Mapping[str, str | None], snapshot: Snapshot) -> dict[Node, Node]:
    """Every node of the quota trees (cohorts of ``parents``, ClusterQueues) -> its tree's root."""
    roots = {Node("cohort", c): Node("cohort", root_of(c, parents)) for c in parents}  # _tree rejects cycles
    for cq in snapshot.cluster_queues.values():
        node = Node("cq", cq.name)
        roots[node] = roots[Node("cohort", cq.cohort)] if cq.cohort else node
    return roots


def _tree(snapshot: Snapshot) -> dict[str, str | None]:
    """Cohort name -> parent, for every cohort named anywhere; refuses cycles (quota.py)."""
    refuse_cohort_cycles(snapshot)
    return cohort_parents(snapshot)


def _namespace_labels(snapshot: Snapshot, name: str) -> dict[str, str]:
    ns = snapshot.namespaces.get(name)
    return {**(ns.labels if ns else {}), "kubernetes.io/metadata.name": name}


def _selects(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    return selector is not None and selector.matches(labels)


def compile_facts(snapshot: Snapshot, workloads: Iterable[Workload],
                  units: Units | None = None, memo: Memo | None = None, *,
                  nodes: NodeClasses | None = None, unplaceable: Iterable[tuple[str, int]] = ()) -> Compiled:
    """Emit the facts for one cycle. Finished workloads are left out: they hold no quota.

    ``units`` fixes the resource units, so that facts compiled for different subsets of the
    workloads speak the same integers; by default they are computed from ``workloads``. A
    ``memo`` keeps each workload's and ClusterQueue's own facts, as text, for the next
    compilation that meets the same object with the same units of its quota tree (a
    controller's cycles meet most of them again).

    When the snapshot has Nodes, the node facts (placement.py) are emitted too, from ``nodes``
    (by default the classes of the snapshot's nodes), with the ``unplaceable`` (workload, class)
    nogoods of earlier solves of the cycle.
    """
    live = sorted((w for w in workloads if not w.finished), key=lambda w: w.key)
    units = units if units is not None else resource_units(snapshot, live)
    kept = memo or Memo(remember=False)
    out = _Facts()

    shared: dict[str, set[Fraction]] = defaultdict(set)
    for tree, of_tree in units.trees.items():
        if tree is not None:
            for r, unit in of_tree.items():
                out.add("tree_unit", tree, r, format_quantity(unit))
                shared[r].add(unit)
    for r, same in shared.items():
        if len(same) == 1:
            out.add("resource_unit", r, format_quantity(*same))
    for f in snapshot.flavors.values():
        out.add("flavor", f.name)
        for k, v in f.node_labels.items():
            out.add("flavor_label", f.name, k, v)
        for t in f.node_taints:
            if t.effect != "PreferNoSchedule":
                out.add("flavor_taint", f.name, t.key, t.value, t.effect)

    for name, parent in _tree(snapshot).items():
        out.add("cohort", name)
        if parent:
            out.add("queue_parent", Node("cohort", name), Node("cohort", parent))
    for c in snapshot.cohorts.values():
        node = Node("cohort", c.name)
        tree = units.node_tree[node]
        _quota_facts(out, node, c.resource_groups, units.trees.get(tree, {}), units.caps.get(tree, {}))

    # A ClusterQueue's facts, like a workload's, are kept for the next compilation that meets
    # the same object with the same units of its tree: a cycle compiles once per round and
    # again for the explanation, and a change of one tree's units leaves the others' kept.
    queue_facts = _PerTree(kept, "cq_facts", units, _cluster_queue_facts, capped=True)
    for cq in snapshot.cluster_queues.values():
        out.extend(queue_facts(units.node_tree[Node("cq", cq.name)])(cq))
        for check, _, why in inactive_checks(cq, snapshot.admission_checks):
            out.add("cq_check_inactive", cq.name, check, why)
    # A namespace matters to a ClusterQueue only through a LocalQueue of that namespace pointing
    # to it, so only those pairs are checked (not every ClusterQueue against every namespace).
    queued = {(w.namespace, w.queue) for w in live}
    for lq in snapshot.local_queues.values():
        out.add("local_queue", lq.namespace, lq.name, lq.cluster_queue)
        if lq.stopped:
            out.add("lq_stopped", lq.namespace, lq.name)
    pairs = {(lq.cluster_queue, lq.namespace) for lq in snapshot.local_queues.values()
             if (lq.namespace, lq.name) in queued and lq.cluster_queue in snapshot.cluster_queues}
    for cq, ns in sorted(pairs):
        if _selects(snapshot.cluster_queues[cq].namespace_selector, _namespace_labels(snapshot, ns)):
            out.add("cq_namespace", cq, ns)

    # The workload's own facts do not depend on the other workloads; its tie-break does.
    own = _PerTree(kept, "facts", units, _own_facts)
    for position, w in enumerate(live):
        out.extend(own(units.tree(w.namespace, w.queue, _admitted_in(w)))(w))
        out.add("workload_tiebreak", w.key, position)
    _eviction_order(out, live)
    for predicate, args in fair_sharing_facts(snapshot, live, snapshot.kueue_settings):
        out.add(predicate, *args)  # type: ignore[arg-type]
    reserved = _reservation_facts(out, snapshot, units)
    if nodes is None and snapshot.nodes:
        nodes = node_classes(snapshot, live)
    if nodes is not None:
        _node_facts(out, snapshot, nodes, live)
        for w, c in unplaceable:
            out.add("unplaceable", w, c)
    return Compiled(dict(out.lines), units, reserved)


def _reservation_facts(out: _Facts, snapshot: Snapshot, units: Units
                       ) -> dict[tuple[Node | None, str, str], tuple[tuple[str, Fraction], ...]]:
    """The quota InQueue PodGroups hold (podgroups.py), in their trees' units (rounded up:
    never under-count use); returns it by (tree, flavor, resource) for explanations."""
    reserved: dict[tuple[Node | None, str, str], list[tuple[str, Fraction]]] = defaultdict(list)
    for hold in holds(snapshot).held.values():
        tree = units.node_tree.get(Node("cq", hold.cluster_queue))
        for f, r, q in hold.quota:
            unit = units.trees.get(tree, {}).get(r)
            if unit is not None:
                out.add("reservation", hold.group, hold.cluster_queue, f, r, ceil(q / unit))
                reserved[tree, f, r].append((hold.group, q))
        if hold.quota:
            out.add("reservation_gang", hold.group, hold.gang)
    return {k: tuple(v) for k, v in reserved.items()}


def _node_facts(out: _Facts, snapshot: Snapshot, nodes: NodeClasses, live: Sequence[Workload]) -> None:
    """The node classes, and where the pods of each pending pod set fit, with each flavor."""
    out.add("node_count", sum(len(c.nodes) for c in nodes.classes))
    for c in nodes.classes:
        out.add("node_class", c.id, len(c.nodes))
        if c.idle:
            out.add("class_idle", c.id)
        for r in nodes.units:
            out.add("class_free", c.id, r, max(nodes.free_units(c, r), 0))
    for r, unit in nodes.units.items():
        out.add("node_unit", r, format_quantity(unit))
    flavors = {f.name: f.node_labels for f in snapshot.flavors.values()}
    seen: dict[tuple, dict[str, dict[int, int]]] = {}  # pods alike fit alike: many workloads share a shape
    for w in live:
        if w.admission is not None or _beyond(w):
            continue
        for ps in w.pod_sets:
            if ps.count <= 0:
                continue
            # what a pod takes of a node: its requests and the placement-only resources (pods, ...)
            placed = nodes.placed(ps, w.namespace)
            for r, v in placed.requests.items():
                out.add("node_request", w.key, ps.name, r, nodes.request_units(r, v))
            shape = (tuple(sorted(placed.requests.items())), placed.needs.asked, ps.tolerations, ps.count)
            if shape not in seen:
                seen[shape] = {f: class_fits(nodes, ps, labels, w.namespace) for f, labels in flavors.items()}
            for f, fits in seen[shape].items():
                for c, n in fits.items():
                    out.add("fits", w.key, ps.name, f, c, n)
            if ps.topology is not None:
                _topology_request_facts(out, snapshot, w, ps)
    _topology_facts(out, snapshot, nodes, live)


def _topology_request_facts(out: _Facts, snapshot: Snapshot, w: Workload, ps: PodSetSpec) -> None:
    """A pending pod set's topology annotation, and for a preferred one its cost of a domain at
    each level counted, in every Topology that has its level (topology.py)."""
    assert ps.topology is not None
    out.add("pod_set_topology", w.key, ps.name, ps.topology.mode, ps.topology.level)
    if ps.topology.slice_level:
        out.add("pod_set_slice", w.key, ps.name, ps.topology.slice_level, ps.topology.slice_size)
    if ps.topology.mode == "preferred":
        for t in snapshot.topologies.values():
            for level, cost in domain_costs(t, ps).items():
                out.add("domain_cost", w.key, ps.name, t.name, level, cost)


def _topology_facts(out: _Facts, snapshot: Snapshot, nodes: NodeClasses, live: Sequence[Workload]) -> None:
    """The Topologies and the flavors naming them, and the domain of each node class at each
    level pending pod sets ask for (and the levels above it)."""
    for f in snapshot.flavors.values():
        if f.topology_name:
            out.add("flavor_topology", f.name, f.topology_name)
    asked = split_labels(snapshot, (ps for w in live if w.admission is None for ps in w.pod_sets))
    for t in snapshot.topologies.values():
        for i, level in enumerate(t.levels):
            out.add("topology_level", t.name, level, i)
            if level in asked:
                for c in nodes.classes:
                    d = domain(t, level, c.labels)
                    if d is not None:
                        out.add("class_domain", t.name, level, c.id, d)


class _PerTree:
    """Facts derived from one object and the units of its quota tree, kept per tree (Memo.per_object).
    ``capped``: the facts hold quotas, so the tree's caps are part of what they derive from."""

    def __init__(self, memo: Memo, table: str, units: Units,
                 derive: Callable[[Mapping[str, Fraction], Mapping[str, tuple[Fraction, int]], Any],
                                  tuple[tuple[str, str], ...]], *, capped: bool = False) -> None:
        self.memo, self.table, self.units, self.derive, self.capped = memo, table, units, derive, capped
        self.tables: dict[Node | None, Callable[[Any], tuple[tuple[str, str], ...]]] = {}

    def __call__(self, tree: Node | None) -> Callable[[Any], tuple[tuple[str, str], ...]]:
        """The kept facts of objects in ``tree``, by object."""
        table = self.tables.get(tree)
        if table is None:
            of_tree = self.units.trees.get(tree, {})
            caps = self.units.caps.get(tree, {}) if self.capped else {}  # quotas only: requests never
            table = self.tables[tree] = self.memo.per_object(
                f"{self.table} {tree}", (tuple(sorted(of_tree.items())), tuple(sorted(caps.items()))),
                functools.partial(self.derive, of_tree, caps))
        return table


def _quota_facts(out: _Facts, node: Node, groups: tuple[ResourceGroup, ...], units: Mapping[str, Fraction],
                 caps: Mapping[str, tuple[Fraction, int]]) -> None:
    def down(resource: str, value: Fraction) -> int:  # quotas: round down, never over-commit
        cap = caps.get(resource)
        if cap is not None and value >= cap[0]:
            return cap[1]  # no usage can reach it: as much as all asks, counted as the facts count them
        return floor(value / units[resource])

    for g in groups:
        for fq in g.flavors:
            for r in g.covered:
                q = fq.resources.get(r)
                out.add("quota", node, fq.flavor, r, down(r, q.nominal) if q else 0)
                if q and q.borrowing_limit is not None:
                    out.add("borrowing_limit", node, fq.flavor, r, down(r, q.borrowing_limit))
                if q and q.lending_limit is not None:
                    out.add("lending_limit", node, fq.flavor, r, down(r, q.lending_limit))


def _cluster_queue_facts(units: Mapping[str, Fraction], caps: Mapping[str, tuple[Fraction, int]],
                         cq: ClusterQueue) -> tuple[tuple[str, str], ...]:
    """The facts of ``cq`` (and the units and caps of its tree), as (predicate, text) pairs."""
    out = _Facts()
    out.add("cluster_queue", cq.name)
    if cq.stopped:
        out.add("cq_stopped", cq.name)
    node = Node("cq", cq.name)
    if cq.cohort:
        out.add("queue_parent", node, Node("cohort", cq.cohort))
    out.add("queueing_strategy", cq.name, cq.queueing_strategy)
    out.add("flavor_fungibility", cq.name, "whenCanBorrow", cq.when_can_borrow)
    out.add("flavor_fungibility", cq.name, "whenCanPreempt", cq.when_can_preempt)
    if cq.within_cluster_queue != "Never":
        out.add("preemption", cq.name, "withinClusterQueue", cq.within_cluster_queue)
    if cq.reclaim_within_cohort != "Never":
        out.add("preemption", cq.name, "reclaimWithinCohort", cq.reclaim_within_cohort)
    if cq.borrow_within_cohort != "Never":
        out.add("preemption", cq.name, "borrowWithinCohort", cq.borrow_within_cohort)
    if cq.borrow_max_priority is not None:
        out.add("borrow_max_priority", cq.name, cq.borrow_max_priority)
    for gi, g in enumerate(cq.resource_groups):
        for r in g.covered:
            out.add("cq_resource", cq.name, gi, r)
        for pos, fq in enumerate(g.flavors):
            out.add("cq_flavor", cq.name, gi, fq.flavor, pos)
    _quota_facts(out, node, cq.resource_groups, units, caps)
    return out.pairs()


def _eviction_order(out: _Facts, live: Sequence[Workload]) -> None:
    """Number the admitted workloads of each ClusterQueue in the order preemption takes them:
    lower priority first, then the most recently admitted first (so the least work is lost, as
    Kueue orders its candidates), then by name."""
    by_queue: dict[str, list[Workload]] = defaultdict(list)
    for w in live:
        if w.admission is not None and w.admission.cluster_queue:
            by_queue[w.admission.cluster_queue].append(w)
    for cq, admitted in sorted(by_queue.items()):
        admitted.sort(key=lambda w: (w.priority, -w.reserved_since, w.key))
        for n, w in enumerate(admitted):
            out.add("eviction_order", cq, w.key, n)


def _own_facts(units: Mapping[str, Fraction], caps: Mapping[str, tuple[Fraction, int]], w: Workload) -> tuple[tuple[str, str], ...]:
    """The facts of ``w`` that depend on it alone (and the units), as (predicate, text) pairs;
    ``caps`` bound quotas, never requests."""
    out = _Facts()
    _workload_facts(out, w, units)
    return out.pairs()


def _workload_facts(out: _Facts, w: Workload, units: Mapping[str, Fraction]) -> None:
    k = w.key
    out.add("workload", k)
    out.add("workload_namespace", k, w.namespace)
    out.add("workload_queue", k, w.queue)
    out.add("workload_priority", k, w.priority)
    out.add("workload_created", k, w.created)
    if w.coscheduled:
        out.add("pod_group_member", k)
    if w.held:
        out.add("held", k)
    for ps in w.pod_sets:
        out.add("pod_set", k, ps.name, ps.count)
        for r, v in () if _beyond(w) else ps.requests.items():
            out.add("pod_request", k, ps.name, r, ceil(v / units[r]))  # round up: never under-count use
        for req in ps.node_labels:
            for value in req.values:
                out.add("pod_set_node_label", k, ps.name, req.key, value)
        for t in ps.tolerations:
            out.add("pod_set_toleration", k, ps.name, t.key, t.operator, t.value, t.effect)
    if w.admission is not None:
        out.add("admitted", k)
        out.add("workload_reserved", k, w.reserved_since)
        if w.admission.cluster_queue:
            out.add("admitted_cq", k, w.admission.cluster_queue)
        for a in w.admission.pod_sets:
            for r, f in a.flavors.items():
                out.add("admitted_flavor", k, a.name, r, f)
            out.add("admitted_count", k, a.name, w.admitted_count(a.name))
