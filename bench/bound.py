"""A proven upper bound on the resources one cycle can admit, and the gap of a plan to it.

What is bounded: for each resource name R (summed over flavors), the total request of R over
the workloads admitted *this cycle* (count x per-pod request over their pod sets), by any plan
that respects the quota tree of :mod:`clueue.bench.model`, whatever its order or flavors.

How: per quota tree (a root cohort, or a ClusterQueue without a cohort), two relaxations of
the admission problem, each a valid bound, and the smaller is kept:

1. *Pooled tree*: every flavor of R in the tree is merged into one bin whose size is the
   root's limit less what earlier admissions already use. The best any plan can do is then
   the largest subset sum of the candidates' R-requests that fits the bin (a 0/1 knapsack of
   equal value and weight, solved exactly by a bitset over integer units).
2. *Per ClusterQueue*: each ClusterQueue's new usage of R is bounded by the tightest limit on
   its path, per flavor, less held usage; again the largest subset sum of its candidates.

Both relax the real problem (flavors merged, resources independent, per-node limits dropped
or kept one at a time), so the optimum of the real problem is never above either of them.
Candidates larger than their ClusterQueue could ever hold are left out of the sums.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import gcd, lcm
from typing import Iterable, Mapping, Sequence

from clueue.engine import Snapshot
from clueue.engine.workloads import Workload

from .model import Node, QuotaTree, eligibility, workload_resources

__all__ = ["Bound", "upper_bound", "subset_sum_max", "gap"]

ZERO = Fraction(0)
_MAX_BITS = 4_000_000  # above this many units the knapsack falls back to min(sum, capacity)


@dataclass(frozen=True)
class Bound:
    """Upper bound per resource, with the pending demand and free capacity it came from."""

    resources: Mapping[str, Fraction]
    demand: Mapping[str, Fraction]
    capacity: Mapping[str, Fraction]

    def to_dict(self) -> dict[str, dict[str, float]]:
        return {k: {r: float(v) for r, v in sorted(getattr(self, k).items())}
                for k in ("resources", "demand", "capacity")}


def subset_sum_max(sizes: Iterable[Fraction], capacity: Fraction) -> Fraction:
    """The largest sum of a subset of ``sizes`` that is at most ``capacity``.

    >>> subset_sum_max([Fraction(4), Fraction(6), Fraction(6)], Fraction(10))
    Fraction(10, 1)
    >>> subset_sum_max([Fraction(3), Fraction(7)], Fraction(9))
    Fraction(7, 1)
    """
    items = [s for s in sizes if 0 < s <= capacity]
    if capacity <= 0 or not items:
        return ZERO
    total = sum(items, ZERO)
    if total <= capacity:
        return total
    den = lcm(*(s.denominator for s in items), capacity.denominator)
    ints = [int(s * den) for s in items]
    unit = 0
    for v in ints:
        unit = gcd(unit, v)
    cap = int(capacity * den) // unit
    if cap > _MAX_BITS:
        return capacity  # still a bound: no subset exceeds the capacity
    mask = (1 << (cap + 1)) - 1
    reach = 1
    for v in ints:
        reach |= (reach << (v // unit)) & mask
    return Fraction(reach.bit_length() - 1) * unit / den


def upper_bound(snapshot: Snapshot, workloads: Sequence[Workload]) -> Bound:
    """Bound the resources admitted this cycle by any plan (see the module docstring)."""
    elig = eligibility(snapshot, workloads)
    tree = QuotaTree(snapshot)
    for cq, usage in elig.held:
        tree.add(cq, usage)
    resources = sorted({r for _, r in tree.pairs})

    def flavors_of(r: str) -> list[str]:
        return [f for f, rr in tree.pairs if rr == r]

    def cq_cap(cq: str, r: str) -> Fraction:
        """Per flavor, the tightest (limit - raw held usage) on the path; summed over flavors."""
        total = ZERO
        for f in flavors_of(r):
            room = [tree.limit[(n, f, r)] - tree.raw[(n, f, r)] for n in tree.path(cq) if (n, f, r) in tree.limit]
            total += max(ZERO, min(room)) if room else ZERO
        return total

    by_tree: dict[Node, dict[str, list[tuple[str, Fraction]]]] = {}
    for c in elig.candidates:
        need = workload_resources(c.workload.pod_sets)
        for r, v in need.items():
            by_tree.setdefault(tree.root(c.cluster_queue), {}).setdefault(r, []).append((c.cluster_queue, v))
    bound: dict[str, Fraction] = {r: ZERO for r in resources}
    demand: dict[str, Fraction] = {r: ZERO for r in resources}
    capacity: dict[str, Fraction] = {r: ZERO for r in resources}
    roots = {tree.path(cq)[-1] for cq in snapshot.cluster_queues}
    for root in sorted(roots):
        for r in resources:
            free = sum((max(ZERO, tree.limit[(root, f, r)] - tree.raw[(root, f, r)]) for f in flavors_of(r)), ZERO)
            capacity[r] += free
            items = by_tree.get(root, {}).get(r, [])
            caps = {cq: cq_cap(cq, r) for cq in {q for q, _ in items}}
            items = [(q, v) for q, v in items if v <= caps[q]]
            demand[r] += sum((v for _, v in items), ZERO)
            pooled = subset_sum_max((v for _, v in items), free)
            per_queue: dict[str, list[Fraction]] = {}
            for q, v in items:
                per_queue.setdefault(q, []).append(v)
            per_cq = sum((subset_sum_max(vs, caps[q]) for q, vs in per_queue.items()), ZERO)
            bound[r] += min(pooled, per_cq)
    for r in list(bound):
        if r not in demand or (bound[r] == 0 and demand[r] == 0 and capacity[r] == 0):
            bound.pop(r), demand.pop(r), capacity.pop(r)
    return Bound(bound, demand, capacity)


def gap(admitted: Fraction | float, bound: Fraction | float) -> float:
    """Relative distance of ``admitted`` below ``bound``: 0 is optimal, 1 admits nothing.

    >>> gap(98, 100)
    0.02
    """
    return 0.0 if bound <= 0 else float((bound - admitted) / bound)
