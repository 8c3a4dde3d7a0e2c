"""What the dashboard's pages show, from one snapshot and its plan: plain data for the templates.

The numbers are the engine's own: a ClusterQueue's usage and its pending workloads' positions
are :func:`~clueue.engine.queues.queue_statuses`' (what clueue writes in the queues' status),
the reasons are the plan's. Nothing here decides anything.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Iterable

from clueue.engine import Plan, Snapshot
from clueue.engine.objects import ResourceGroup
from clueue.engine.quantity import format_quantity, parse_quantity
from clueue.engine.queues import ClusterQueueStatus, queue_statuses
from clueue.engine.quota import quota_trees

from .svg import BORROWED, SEGMENT_COLOURS, USED, Bar, Segment, quota_bars

__all__ = ["Current", "QuotaRow", "overview", "pending", "workload_entry"]


@dataclass(frozen=True)
class Current:
    """The snapshot and plan the pages show, when they were taken and from where (a sentence)."""

    snapshot: Snapshot
    plan: Plan
    taken: float  # epoch seconds
    origin: str


@dataclass(frozen=True)
class QuotaRow:
    """One flavor and resource of a ClusterQueue: its quota and what its workloads hold."""

    flavor: str
    resource: str
    nominal: Fraction
    used: Fraction
    borrowing_limit: Fraction | None  # None: no limit (within its cohort)
    lending_limit: Fraction | None  # None: lends all it does not use

    @property
    def borrowed(self) -> Fraction:
        return max(Fraction(0), self.used - self.nominal)

    def to_dict(self) -> dict[str, Any]:
        q = format_quantity
        return {"flavor": self.flavor, "resource": self.resource, "nominal": q(self.nominal), "used": q(self.used),
                "borrowed": q(self.borrowed), "free": q(max(Fraction(0), self.nominal - self.used)),
                "borrowingLimit": None if self.borrowing_limit is None else q(self.borrowing_limit),
                "lendingLimit": None if self.lending_limit is None else q(self.lending_limit)}


def _quotas(groups: Iterable[ResourceGroup]) -> dict[tuple[str, str], Any]:
    """(flavor, resource) -> its ResourceQuota, in the groups' order."""
    return {(fq.flavor, r): quota for g in groups for fq in g.flavors for r, quota in fq.resources.items()}


def _rows(groups: Iterable[ResourceGroup], status: ClusterQueueStatus) -> list[QuotaRow]:
    quotas = _quotas(groups)
    used = {(f.name, r.name): parse_quantity(r.total) for f in status.flavors_reservation for r in f.resources}
    rows = []
    for key in [*quotas, *(k for k in used if k not in quotas)]:  # its own, then any held from before a change
        quota = quotas.get(key)
        rows.append(QuotaRow(key[0], key[1], quota.nominal if quota else Fraction(0), used.get(key, Fraction(0)),
                             quota.borrowing_limit if quota else Fraction(0), quota.lending_limit if quota else None))
    return rows


def _label(flavor: str, resource: str) -> str:
    return f"{flavor} {resource}"


def _cq_bar(row: QuotaRow, in_cohort: bool) -> Bar:
    within = min(row.used, row.nominal)
    headroom = None if not in_cohort else float(row.borrowing_limit) if row.borrowing_limit is not None else None
    q = format_quantity
    text = f"{q(row.used)} of {q(row.nominal)}" + (f", {q(row.borrowed)} borrowed" if row.borrowed else "")
    return Bar(_label(row.flavor, row.resource),
               (Segment("used", float(within), USED), Segment("borrowed", float(row.borrowed), BORROWED)),
               float(row.nominal), headroom, text)


def overview(current: Current) -> dict[str, Any]:
    """The front page: every ClusterQueue with its quota bars and counts, every cohort tree
    with its members' usage stacked against the tree's nominal quota, and the plan's summary."""
    snapshot, plan = current.snapshot, current.plan
    statuses = queue_statuses(snapshot, plan)
    tree_of, _ = quota_trees(snapshot)
    queues, rows_of = [], {}
    for name, status in statuses.cluster_queues.items():
        cq = snapshot.cluster_queues[name]
        rows = _rows(cq.resource_groups, status)
        rows_of[name] = rows
        queues.append({
            "name": name, "cohort": cq.cohort, "strategy": cq.queueing_strategy, "active": status.active.to_dict(),
            "pending": status.pending, "admitted": status.reserving, "rows": [r.to_dict() for r in rows],
            "chart": quota_bars([_cq_bar(r, bool(cq.cohort)) for r in rows], title=f"ClusterQueue {name}: quota")
            if rows else None})
    cohorts = []
    for tree in sorted({t for t in tree_of.values() if t.startswith("cohort/")}):
        members = sorted(n for n, t in tree_of.items() if t == tree)
        own = [c for c in snapshot.cohorts.values() if _in_tree(c.name, tree, snapshot)]
        nominal: dict[tuple[str, str], Fraction] = defaultdict(Fraction)
        for groups in [snapshot.cluster_queues[m].resource_groups for m in members] + [c.resource_groups for c in own]:
            for key, quota in _quotas(groups).items():
                nominal[key] += quota.nominal
        used = {m: {(r.flavor, r.resource): r.used for r in rows_of[m]} for m in members}
        keys = list(dict.fromkeys([*nominal, *(k for m in members for k in used[m])]))
        bars, table = [], []
        for key in keys:
            total = sum((used[m].get(key, Fraction(0)) for m in members), Fraction(0))
            segments = tuple(Segment(m, float(used[m].get(key, Fraction(0))), SEGMENT_COLOURS[i % len(SEGMENT_COLOURS)])
                             for i, m in enumerate(members))
            text = f"{format_quantity(total)} of {format_quantity(nominal[key])}"
            bars.append(Bar(_label(*key), segments, float(nominal[key]), None, text))
            table.append({"flavor": key[0], "resource": key[1], "nominal": format_quantity(nominal[key]),
                          "used": format_quantity(total),
                          "by": {m: format_quantity(used[m].get(key, Fraction(0))) for m in members}})
        cohorts.append({"name": tree.split("/", 1)[1], "members": members,
                        "colours": {m: SEGMENT_COLOURS[i % len(SEGMENT_COLOURS)] for i, m in enumerate(members)},
                        "cohorts": sorted(c.name for c in own), "rows": table,
                        "chart": quota_bars(bars, title=f"cohort {tree.split('/', 1)[1]}: usage by ClusterQueue")
                        if bars else None})
    return {"clusterQueues": queues, "cohorts": cohorts, "summary": dict(Counter(w.state for w in plan.workloads)),
            "workloads": len(plan.workloads)}


def _in_tree(cohort: str, tree: str, snapshot: Snapshot) -> bool:
    seen = set()
    while cohort not in seen:
        seen.add(cohort)
        parent = snapshot.cohorts[cohort].parent if cohort in snapshot.cohorts else None
        if not parent:
            break
        cohort = parent
    return f"cohort/{cohort}" == tree


def _row(w: Any, position: int | None) -> dict[str, Any]:
    return {"position": position, "name": w.name, "queue": w.queue, "priority": w.priority, "state": w.state,
            "rank": w.rank, "reasons": [r.to_dict() for r in w.reasons]}


def pending(current: Current) -> dict[str, Any]:
    """Each ClusterQueue's waiting workloads in the order they are queued (their positions, as
    Kueue's visibility API numbers them, from 0), with the plan's reasons; then the waiting
    workloads that are in no queue (no ClusterQueue, a stopped LocalQueue, an incomplete group)."""
    statuses = queue_statuses(current.snapshot, current.plan)
    by_queue: dict[str, list[dict[str, Any]]] = {name: [] for name in statuses.cluster_queues}
    elsewhere = []
    for w in current.plan.workloads:
        if w.name in statuses.positions:
            by_queue.setdefault(w.cluster_queue or "", []).append(_row(w, statuses.positions[w.name][0]))
        elif w.state in ("pending", "inadmissible"):
            elsewhere.append(_row(w, None))
    for rows in by_queue.values():
        rows.sort(key=lambda r: r["position"])
    return {"queues": [{"name": n, "workloads": rows} for n, rows in by_queue.items()], "elsewhere": elsewhere}


def workload_entry(current: Current, name: str) -> dict[str, Any] | None:
    """The plan's entry for ``name`` (``namespace/name``) as data, with its position; None if
    the plan has no such workload."""
    entry = next((w for w in current.plan.workloads if w.name == name), None)
    if entry is None:
        return None
    positions = queue_statuses(current.snapshot, current.plan).positions
    return {**entry.to_dict(), "position": positions.get(name, (None, None))[0]}
