"""Leaving out of the solve the candidates that provably cannot be admitted.

Two pending workloads of the same *shape* (identical in every fact the compiler emits, except
their name and creation time) are interchangeable to the built-in rules. Under the built-in
ordering, a later one of a shape is considered only after every earlier one, and if an earlier
one does not fit, a later one cannot fit either, with at least as much admitted before it. So
the admitted members of a shape are a prefix of its members in rank order, and no prefix can be
longer than the shape's *bound*: how many of it the whole quota tree of its ClusterQueue could
hold, counting every nominal quota in the tree. Only the first ``bound + 1`` members of each
shape are solved; the extra one is never admitted and stands for the rest in the explanation.

This relies on the built-in ``ordering.lp``, ``capacity.lp`` and ``quota.lp``; if a policy
replaces any of them, nothing is pruned. User rules that only add constraints keep it exact,
as long as they tell workloads apart by their facts (namespace, queue, priority, requests, ...)
and not by name.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction
from math import floor
from typing import Iterable, Mapping

from .policy import Policy
from .snapshot import Snapshot
from .workloads import Workload

__all__ = ["Pruned", "prune_candidates", "RULE_GROUPS"]

#: The rule groups whose semantics the prune relies on.
RULE_GROUPS = ("ordering.lp", "capacity.lp", "quota.lp")


@dataclass(frozen=True)
class Pruned:
    kept: tuple[Workload, ...]
    stand_in: Mapping[str, str]  # pruned workload -> the solved member of its shape standing for it
    shapes: tuple[tuple[str, ...], ...] = ()  # the solved members of each shape, in rank order

    def explained_by(self, admitted: Mapping[str, object]) -> dict[str, str]:
        """Left-out solved members -> the first left-out member of their shape, whose
        explanation they share (same facts, same decision, so the same reasons)."""
        proxy: dict[str, str] = {}
        for members in self.shapes:
            left_out = [w for w in members if w not in admitted]
            proxy.update({w: left_out[0] for w in left_out[1:]})
        return proxy


def _shape(w: Workload) -> tuple[object, ...]:
    return (w.namespace, w.queue, w.priority, tuple(
        (ps.name, ps.count, tuple(sorted(ps.requests.items())), ps.node_labels, ps.tolerations) for ps in w.pod_sets))


def _tree_totals(snapshot: Snapshot) -> dict[str, dict[str, Fraction]]:
    """ClusterQueue -> resource -> nominal quota summed over its whole quota tree and all flavors."""
    parent = {c.name: c.parent for c in snapshot.cohorts.values()}

    def root(cohort: str) -> str:
        seen = set()
        while parent.get(cohort) and cohort not in seen:
            seen.add(cohort)
            cohort = parent[cohort]  # type: ignore[assignment]
        return cohort

    totals: dict[str, dict[str, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    def add(tree: str, groups: Iterable) -> None:  # type: ignore[type-arg]
        for g in groups:
            for fq in g.flavors:
                for r, q in fq.resources.items():
                    totals[tree][r] += q.nominal
    for c in snapshot.cohorts.values():
        add("cohort/" + root(c.name), c.resource_groups)
    tree_of = {}
    for cq in snapshot.cluster_queues.values():
        tree_of[cq.name] = "cohort/" + root(cq.cohort) if cq.cohort else "cq/" + cq.name
        add(tree_of[cq.name], cq.resource_groups)
    return {cq: dict(totals[tree]) for cq, tree in tree_of.items()}


def _bound(w: Workload, totals: Mapping[str, Fraction]) -> int:
    bound: int | None = None
    for r in {r for ps in w.pod_sets for r in ps.requests}:
        need = sum((ps.requests.get(r, Fraction(0)) * ps.count for ps in w.pod_sets), Fraction(0))
        if need > 0:
            fit = floor(totals.get(r, Fraction(0)) / need)
            bound = fit if bound is None else min(bound, fit)
    return 0 if bound is None else bound


def prune_candidates(snapshot: Snapshot, workloads: Iterable[Workload], policy: Policy) -> Pruned:
    """Keep every workload except the pending members of a shape beyond its bound + 1."""
    workloads = tuple(workloads)
    if not all(policy.is_builtin(name) for name in RULE_GROUPS):
        return Pruned(workloads, {})
    queues = {f"{lq.namespace}/{lq.name}": lq.cluster_queue for lq in snapshot.local_queues.values()}
    totals = _tree_totals(snapshot)
    shapes: dict[tuple[object, ...], list[Workload]] = defaultdict(list)
    kept: list[Workload] = []
    for w in workloads:
        cq = queues.get(f"{w.namespace}/{w.queue}")
        if w.admission is not None or w.finished or w.held or cq not in totals:
            kept.append(w)
        else:
            shapes[(cq, *_shape(w))].append(w)
    stand_in: dict[str, str] = {}
    solved: list[tuple[str, ...]] = []
    for (cq, *_), members in shapes.items():
        members.sort(key=lambda w: (w.created, w.key))  # the built-in rank order within a shape
        limit = _bound(members[0], totals[cq]) + 1
        kept += members[:limit]
        solved.append(tuple(w.key for w in members[:limit]))
        for w in members[limit:]:
            stand_in[w.key] = members[limit - 1].key
    kept.sort(key=lambda w: w.key)
    return Pruned(tuple(kept), stand_in, tuple(solved))
