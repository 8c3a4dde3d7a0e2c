"""The compiler: a snapshot and its workloads in, the facts of facts.py out.

Resource amounts become integers: for each resource, the unit is the largest quantity that
divides every amount (so ``500m`` and ``2`` CPU become 1 and 4 in units of ``500m``). If the
sums could overflow clingo's 32-bit integers, the unit grows and amounts are rounded in the
safe direction (requests up, quotas and limits down), so rounding never over-commits.
"""

from __future__ import annotations

import functools
from collections import Counter, defaultdict
from dataclasses import dataclass
from fractions import Fraction
from math import ceil, floor, gcd
from typing import Iterable, Mapping, Sequence

from .errors import SnapshotError
from .facts import PREDICATES, Node, Value, fact_text
from .memo import Memo
from .objects import ClusterQueue, LabelSelector, ResourceGroup
from .quantity import format_quantity
from .snapshot import Snapshot
from .workloads import Workload

__all__ = ["Compiled", "compile_facts"]

_MAX_TOTAL = 2**30  # headroom below clingo's 2**31 for sums of sums


@dataclass(frozen=True)
class Compiled:
    """The facts of one cycle, with what is needed to read the answer back."""

    lines: Mapping[str, Sequence[str]]  # predicate -> its facts as ASP text (facts.render_facts)
    units: Mapping[str, Fraction]  # resource -> the quantity one integer unit stands for

    def amount(self, resource: str, units: int) -> Fraction:
        return self.units.get(resource, Fraction(1)) * units


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


def _gcd(values: Iterable[Fraction]) -> Fraction:
    nums, dens = 0, 1
    for v in values:
        if v:
            nums = gcd(nums, v.numerator)
            dens = dens * v.denominator // gcd(dens, v.denominator)
    return Fraction(nums, dens) if nums else Fraction(1)


def resource_units(snapshot: Snapshot, workloads: Iterable[Workload]) -> dict[str, Fraction]:
    """Per resource, the quantity one integer unit stands for (see the module docstring)."""
    quotas: dict[str, set[Fraction]] = defaultdict(set)
    quota_total: dict[str, Fraction] = defaultdict(Fraction)
    for groups in [cq.resource_groups for cq in snapshot.cluster_queues.values()] + \
                  [c.resource_groups for c in snapshot.cohorts.values()]:
        for g in groups:
            for fq in g.flavors:
                for r, q in fq.resources.items():
                    for v in (q.nominal, q.borrowing_limit, q.lending_limit):
                        if v is not None:
                            quotas[r].add(v)
                            quota_total[r] += v
    # Many workloads ask the same: count each (request, pod count) once, then multiply. The
    # request is counted by numerator and denominator: hashing a Fraction runs Python code.
    asks: Counter[tuple[str, int, int, int]] = Counter(
        (r, v.numerator, v.denominator, max(ps.count, 1))
        for w in workloads for ps in w.pod_sets for r, v in ps.requests.items())
    units = {}
    for r in sorted(set(quotas) | {r for r, _, _, _ in asks}):
        mine = [(Fraction(n, d), count, times) for (res, n, d, count), times in asks.items() if res == r]
        unit = _gcd(quotas[r] | {v for v, _, _ in mine} | {v * count for v, count, _ in mine})
        total = (quota_total[r] + sum((v * count * times for v, count, times in mine), Fraction(0))) / unit
        if total > _MAX_TOTAL:
            unit *= ceil(total / _MAX_TOTAL)
        units[r] = unit
    return units


def _tree(snapshot: Snapshot) -> dict[str, str | None]:
    """Cohort name -> parent, for every cohort named anywhere; rejects cycles."""
    parents: dict[str, str | None] = {c.name: c.parent for c in snapshot.cohorts.values()}
    for cq in snapshot.cluster_queues.values():
        if cq.cohort:
            parents.setdefault(cq.cohort, None)
    for c in list(parents.values()):
        if c:
            parents.setdefault(c, None)
    for start in parents:
        seen, node = [start], parents[start]
        while node is not None:
            if node in seen:
                raise SnapshotError(f"cohort parents form a cycle: {' -> '.join(seen + [node])}",
                                    obj=f"Cohort {start}", field="spec.parentName")
            seen.append(node)
            node = parents.get(node)
    return parents


def _namespace_labels(snapshot: Snapshot, name: str) -> dict[str, str]:
    ns = snapshot.namespaces.get(name)
    return {**(ns.labels if ns else {}), "kubernetes.io/metadata.name": name}


def _selects(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    return selector is not None and selector.matches(labels)


def compile_facts(snapshot: Snapshot, workloads: Iterable[Workload],
                  units: Mapping[str, Fraction] | None = None, memo: Memo | None = None) -> Compiled:
    """Emit the facts for one cycle. Finished workloads are left out: they hold no quota.

    ``units`` fixes the resource units, so that facts compiled for different subsets of the
    workloads speak the same integers; by default they are computed from ``workloads``. A
    ``memo`` keeps each workload's and ClusterQueue's own facts, as text, for the next
    compilation that meets the same object with the same units (a controller's cycles meet
    most of them again).
    """
    live = sorted((w for w in workloads if not w.finished), key=lambda w: w.key)
    units = dict(units) if units is not None else resource_units(snapshot, live)
    kept = memo or Memo(remember=False)
    out = _Facts()

    for r, unit in units.items():
        out.add("resource_unit", r, format_quantity(unit))
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
        _quota_facts(out, Node("cohort", c.name), c.resource_groups, units)

    # A ClusterQueue's facts, like a workload's, are kept for the next compilation that meets
    # the same object: a cycle compiles once per round and again for the explanation.
    unit_key = tuple(sorted(units.items()))
    queue_facts = kept.per_object("cq_facts", unit_key, functools.partial(_cluster_queue_facts, units))
    for cq in snapshot.cluster_queues.values():
        out.extend(queue_facts(cq))
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
    own = kept.per_object("facts", unit_key, functools.partial(_own_facts, units))
    for position, w in enumerate(live):
        out.extend(own(w))
        out.add("workload_tiebreak", w.key, position)
    _eviction_order(out, live)
    return Compiled(dict(out.lines), units)


def _quota_facts(out: _Facts, node: Node, groups: tuple[ResourceGroup, ...], units: Mapping[str, Fraction]) -> None:
    def down(resource: str, value: Fraction) -> int:  # quotas: round down, never over-commit
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


def _cluster_queue_facts(units: Mapping[str, Fraction], cq: ClusterQueue) -> tuple[tuple[str, str], ...]:
    """The facts of ``cq`` (and the units), as (predicate, text) pairs."""
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
    _quota_facts(out, node, cq.resource_groups, units)
    return out.pairs()


def _eviction_order(out: _Facts, live: Sequence[Workload]) -> None:
    """Number the admitted workloads of each ClusterQueue in the order preemption takes them:
    lower priority first, then the newest first (so the least work is lost), then by name."""
    by_queue: dict[str, list[Workload]] = defaultdict(list)
    for w in live:
        if w.admission is not None and w.admission.cluster_queue:
            by_queue[w.admission.cluster_queue].append(w)
    for cq, admitted in sorted(by_queue.items()):
        admitted.sort(key=lambda w: (w.priority, -w.created, w.key))
        for n, w in enumerate(admitted):
            out.add("eviction_order", cq, w.key, n)


def _own_facts(units: Mapping[str, Fraction], w: Workload) -> tuple[tuple[str, str], ...]:
    """The facts of ``w`` that depend on it alone (and the units), as (predicate, text) pairs."""
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
    if w.held:
        out.add("held", k)
    for ps in w.pod_sets:
        out.add("pod_set", k, ps.name, ps.count)
        for r, v in ps.requests.items():
            out.add("pod_request", k, ps.name, r, ceil(v / units[r]))  # round up: never under-count use
        for req in ps.node_labels:
            for value in req.values:
                out.add("pod_set_node_label", k, ps.name, req.key, value)
        for t in ps.tolerations:
            out.add("pod_set_toleration", k, ps.name, t.key, t.operator, t.value, t.effect)
    if w.admission is not None:
        out.add("admitted", k)
        for a in w.admission.pod_sets:
            for r, f in a.flavors.items():
                out.add("admitted_flavor", k, a.name, r, f)
            out.add("admitted_count", k, a.name, w.admitted_count(a.name))
