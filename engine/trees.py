"""Quota trees: which tree each ClusterQueue is in, and the resource groups of each tree.

A quota tree is a ClusterQueue without a cohort (``cq/<name>``), or a root cohort with every
cohort and ClusterQueue below it (``cohort/<root>``). Borrowing and lending never cross a tree,
so its nominal quota bounds what all its workloads together can hold.
"""

from __future__ import annotations

from collections import defaultdict

from .objects import ResourceGroup
from .snapshot import Snapshot

__all__ = ["quota_trees"]


def quota_trees(snapshot: Snapshot) -> tuple[dict[str, str], dict[str, list[ResourceGroup]]]:
    """ClusterQueue -> its quota tree, and tree -> the resource groups of all its nodes.

    Cohort parents that form a cycle end the walk where it turns back (the compiler refuses
    such a cycle, a live snapshot leaves it out)."""
    parent = {c.name: c.parent for c in snapshot.cohorts.values()}

    def root(cohort: str) -> str:
        seen = set()
        while parent.get(cohort) and cohort not in seen:
            seen.add(cohort)
            cohort = parent[cohort]  # type: ignore[assignment]
        return "cohort/" + cohort

    groups: dict[str, list[ResourceGroup]] = defaultdict(list)
    for c in snapshot.cohorts.values():
        groups[root(c.name)] += c.resource_groups
    tree_of = {}
    for cq in snapshot.cluster_queues.values():
        tree_of[cq.name] = root(cq.cohort) if cq.cohort else "cq/" + cq.name
        groups[tree_of[cq.name]] += cq.resource_groups
    return tree_of, dict(groups)
