"""Quota trees: the one home of Kueue's quota notions as clueue counts them.

- **Quota tree.** A ClusterQueue without a cohort (``cq/<name>``), or a root cohort with every
  cohort and ClusterQueue below it (``cohort/<root>``). Borrowing and lending never cross a
  tree, so its nominal quota bounds what all its workloads together can hold
  (:func:`quota_trees`, :func:`tree_nominal`).
- **Holding ClusterQueue.** A workload's quota is counted in the ClusterQueue its admission
  names, else in the one its LocalQueue points to (:func:`holding_queue`), as eligibility.lp's
  ``workload_cq/2`` counts it.
- **Nominal quota.** Per (flavor, resource), summed over resource groups: of one node (a
  ClusterQueue or Cohort), or of all the nodes of a tree (:func:`nominal`, :func:`by_resource`).
- **Cohort cycles.** Cohorts whose parents form a cycle have no root, so none of their quota can
  be counted. One rule says which cohorts and ClusterQueues are in or under such a cycle, and
  why (:func:`cohort_cycles`): a live snapshot leaves them out (snapshot.py), and offline
  the compiler refuses the first of them with the same words (:func:`refuse_cohort_cycles`). Walks up the parents (:func:`root_of`) stop where a cycle turns
  back, so that what runs before the refusal ends.
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction
from typing import TYPE_CHECKING, Iterable, Mapping

from .errors import SnapshotError
from .objects import ClusterQueue, Cohort, ResourceGroup

if TYPE_CHECKING:
    from .snapshot import Snapshot
    from .workloads import Workload

__all__ = ["FlavorResource", "holding_queue", "workload_queue", "nominal", "by_resource", "cohort_parents",
           "root_of", "quota_trees", "tree_nominal", "cohort_cycles", "refuse_cohort_cycles"]

FlavorResource = tuple[str, str]  # (flavor, resource)


# --------------------------------------------------------------------------------------------
# Which ClusterQueue holds a workload's quota
# --------------------------------------------------------------------------------------------

def holding_queue(admitted_in: str, namespace: str, queue: str, local_queues: Mapping[str, str]) -> str:
    """The ClusterQueue whose quota a workload counts in: ``admitted_in`` (the ClusterQueue its
    admission names, "" when not admitted), else the one its LocalQueue ``namespace/queue``
    points to (``local_queues``: "namespace/name" -> ClusterQueue); "" if neither.

    >>> holding_queue("", "ns", "lq", {"ns/lq": "cq"}), holding_queue("other", "ns", "lq", {"ns/lq": "cq"})
    ('cq', 'other')
    """
    return admitted_in or local_queues.get(f"{namespace}/{queue}", "")


def workload_queue(w: Workload, local_queues: Mapping[str, str]) -> str:
    """:func:`holding_queue` of workload ``w``."""
    return holding_queue(w.admission.cluster_queue if w.admission is not None else "", w.namespace, w.queue,
                         local_queues)


# --------------------------------------------------------------------------------------------
# Nominal quota
# --------------------------------------------------------------------------------------------

def nominal(groups: Iterable[ResourceGroup]) -> dict[FlavorResource, Fraction]:
    """(flavor, resource) -> nominal quota, summed over ``groups`` (one node's, or a whole
    tree's: :func:`quota_trees`). Every (flavor, resource) the groups name is a key, with 0 if
    that is its quota."""
    out: dict[FlavorResource, Fraction] = defaultdict(Fraction)
    for g in groups:
        for fq in g.flavors:
            for r, q in fq.resources.items():
                out[fq.flavor, r] += q.nominal
    return out


def by_resource(*amounts: Mapping[FlavorResource, Fraction]) -> dict[str, Fraction]:
    """Amounts by (flavor, resource), summed by resource over the flavors and the mappings."""
    out: dict[str, Fraction] = defaultdict(Fraction)
    for each in amounts:
        for (_, r), v in each.items():
            out[r] += v
    return dict(out)


# --------------------------------------------------------------------------------------------
# Quota trees
# --------------------------------------------------------------------------------------------

def cohort_parents(snapshot: Snapshot) -> dict[str, str | None]:
    """Cohort name -> its parent (None at a root), for every cohort named anywhere: a Cohort
    object, a ClusterQueue's cohort, or a cohort's parent (those without an object are roots)."""
    parents: dict[str, str | None] = {c.name: c.parent for c in snapshot.cohorts.values()}
    for cq in snapshot.cluster_queues.values():
        if cq.cohort:
            parents.setdefault(cq.cohort, None)
    for c in list(parents.values()):
        if c:
            parents.setdefault(c, None)
    return parents


def root_of(cohort: str, parents: Mapping[str, str | None]) -> str:
    """The root cohort above ``cohort``: the walk up ``parents`` stops where it would turn back
    into a cycle (:func:`cohort_cycles`; such a snapshot is refused or left out before it counts)."""
    seen = set()
    while parents.get(cohort) and cohort not in seen:
        seen.add(cohort)
        cohort = parents[cohort]  # type: ignore[assignment]
    return cohort


def quota_trees(snapshot: Snapshot) -> tuple[dict[str, str], dict[str, list[ResourceGroup]]]:
    """ClusterQueue -> its quota tree (``cq/<name>`` or ``cohort/<root>``), and tree -> the
    resource groups of all its nodes."""
    parents = {c.name: c.parent for c in snapshot.cohorts.values()}

    def tree(cohort: str) -> str:
        return "cohort/" + root_of(cohort, parents)

    groups: dict[str, list[ResourceGroup]] = defaultdict(list)
    for c in snapshot.cohorts.values():
        groups[tree(c.name)] += c.resource_groups
    tree_of = {}
    for cq in snapshot.cluster_queues.values():
        tree_of[cq.name] = tree(cq.cohort) if cq.cohort else "cq/" + cq.name
        groups[tree_of[cq.name]] += cq.resource_groups
    return tree_of, dict(groups)


def tree_nominal(snapshot: Snapshot) -> tuple[dict[str, str], dict[str, dict[FlavorResource, Fraction]],
                                             dict[str, list[ResourceGroup]]]:
    """ClusterQueue -> its quota tree; tree -> (flavor, resource) -> the nominal quota of the
    whole tree; and tree -> the resource groups of all its nodes (:func:`quota_trees`)."""
    tree_of, groups = quota_trees(snapshot)
    return tree_of, {tree: nominal(gs) for tree, gs in groups.items()}, groups


# --------------------------------------------------------------------------------------------
# Cohort cycles
# --------------------------------------------------------------------------------------------

def cohort_cycles(cohorts: Mapping[str, Cohort],
                  queues: Mapping[str, ClusterQueue]) -> list[tuple[str, str, SnapshotError]]:
    """The Cohorts in or under a cycle of parents (by name), then the ClusterQueues under them,
    each as (kind, name, why)."""
    cycle_of: dict[str, str] = {}
    for start in cohorts:
        path, node = [start], cohorts[start].parent
        while node in cohorts and node not in path and node not in cycle_of:
            path.append(node)
            node = cohorts[node].parent
        if node in path:
            loop = path[path.index(node):]
            for member in loop:
                cycle_of[member] = " -> ".join(loop + [node])
    in_cycle: dict[str, str] = {}  # every cohort under a cycle, and the cycle
    for start in cohorts:
        at: str | None = start
        seen = set()
        while at in cohorts and at not in cycle_of and at not in seen:
            seen.add(at)
            at = cohorts[at].parent
        if at in cycle_of:
            in_cycle[start] = cycle_of[at]
    out = [("Cohort", name, SnapshotError(f"cohort parents form a cycle: {why}", field="spec.parentName"))
           for name, why in sorted(in_cycle.items())]
    out += [("ClusterQueue", cq.name, SnapshotError(f"its cohort {cq.cohort} is in or under a cycle of cohort "
                                                    f"parents: {in_cycle[cq.cohort]}", field="spec.cohort"))
            for cq in queues.values() if cq.cohort in in_cycle]
    return out


def refuse_cohort_cycles(snapshot: Snapshot) -> None:
    """Offline, a cycle of cohort parents is an error: raise the first of :func:`cohort_cycles`
    (the first Cohort by name in or under a cycle), as a live snapshot would reject it.

    Raises:
        SnapshotError: naming the Cohort, ``spec.parentName`` and the cycle.
    """
    for kind, name, error in cohort_cycles(snapshot.cohorts, snapshot.cluster_queues):
        raise SnapshotError(error.detail, obj=f"{kind} {name}", field=error.field)
