"""Quota held beyond what a quota tree has: found and named, never evicted silently.

Admitted workloads can hold more than their quota tree's nominal quota of a flavor: the quota
was lowered below the usage, a user wrote a Workload's ``status.admission`` by hand, or two
deciders admitted at once (which the decider lease now prevents). As in Kueue, such workloads
keep running and nothing new is admitted into that flavor of that tree until the usage falls
below the quota (the cycle counts what they hold, prune.py); clueue evicts nothing on its own
for it. :func:`over_quota` says where it happens and who holds the quota there, so a person
can act (lower the usage, or raise the quota).

A tree is a ClusterQueue without a cohort, or a root cohort with every ClusterQueue and cohort
below it; its quota is the nominal quota of all of them. Borrowing moves quota within a tree,
never beyond it, so a tree holding more than this is over-committed whatever its limits.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable

from .prune import _held_in
from .quantity import format_quantity
from .quota import tree_nominal
from .snapshot import Snapshot
from .workloads import Workload

__all__ = ["OverQuota", "over_quota"]

_NAMED = 5  # workloads named per finding


@dataclass(frozen=True)
class OverQuota:
    """A quota tree that holds more of a flavor's resource than its nominal quota."""

    tree: str  # "ClusterQueue <name>" or "cohort <name>"
    flavor: str
    resource: str
    held: Fraction
    quota: Fraction
    workloads: tuple[str, ...]  # the admitted workloads holding it, by name

    def message(self) -> str:
        named = ", ".join(self.workloads[:_NAMED]) + (f" and {len(self.workloads) - _NAMED} more"
                                                        if len(self.workloads) > _NAMED else "")
        return (f"{self.tree} holds {format_quantity(self.held)} {self.resource} in flavor {self.flavor}, more than "
                f"its quota of {format_quantity(self.quota)} (admitted: {named}); nothing more is admitted there "
                "until usage falls below the quota, and clueue evicts nothing for it: lower the usage or raise the quota")


def over_quota(snapshot: Snapshot, workloads: Iterable[Workload]) -> tuple[OverQuota, ...]:
    """Every (tree, flavor, resource) whose admitted workloads hold more than the tree's quota."""
    tree_of, quotas, _ = tree_nominal(snapshot)
    held: dict[tuple[str, str, str], Fraction] = defaultdict(Fraction)
    holders: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for w in workloads:
        if w.admission is None or w.finished or w.admission.cluster_queue not in tree_of:
            continue
        tree = tree_of[w.admission.cluster_queue]
        for (flavor, resource), amount in _held_in(w).items():
            if amount > 0 and flavor:  # a resource without a flavor is the snapshot's to report
                held[(tree, flavor, resource)] += amount
                holders[(tree, flavor, resource)].append(w.key)
    found = []
    for (tree, flavor, resource), amount in sorted(held.items()):
        quota = quotas.get(tree, {}).get((flavor, resource), Fraction(0))
        if amount > quota:
            kind, _, name = tree.partition("/")
            found.append(OverQuota(f"{'ClusterQueue' if kind == 'cq' else 'cohort'} {name}", flavor, resource, amount,
                                   quota, tuple(sorted(holders[(tree, flavor, resource)]))))
    return tuple(found)
