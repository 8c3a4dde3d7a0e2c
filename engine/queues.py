"""Queue status: what Kueue writes in a ClusterQueue's and a LocalQueue's ``status``, from one cycle.

After a cycle's plan is applied, every admitted workload holds its admission and every other
one waits; this module counts them per queue as Kueue's status does (``pendingWorkloads``,
``reservingWorkloads``, ``admittedWorkloads``), sums the quota the admitted ones hold per flavor
and resource (``flavorsReservation``, ``flavorsUsage``), and decides the ``Active`` condition
with Kueue's reasons. clueue admits without admission checks, so a workload that reserves quota
is admitted: reservation and usage are the same numbers.

It also gives each waiting workload its position in its ClusterQueue and in its LocalQueue, as
Kueue's visibility API numbers them: from 0, in the order the cycle ranked them (a workload the
cycle did not rank comes after the ranked ones, by priority, then as the plan lists it).

Kueue's rules followed here: a workload of a stopped LocalQueue is not pending anywhere (Kueue
takes the queue out of its queueing), and is given no position; nor is a deactivated workload
(``spec.active: false``, or being deactivated by this plan), nor a group of pods that has
no Workload object yet (incomplete, or its pods disagree on their count:
``WorkloadEntry.has_workload_object``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar, Iterable, Mapping

from .checks import inactive_checks
from .objects import ClusterQueue
from .plan import Plan, PodSetAssignment, WorkloadEntry
from .quantity import format_quantity, parse_quantity
from .quota import nominal
from .snapshot import Snapshot

__all__ = ["ResourceUsage", "FlavorUsage", "Condition", "QueueStatus", "ClusterQueueStatus", "LocalQueueStatus", "QueueStatuses",
           "queue_statuses", "pending_positions", "assignment_usage", "entry_usage", "WAITING", "DEACTIVATED",
           "deactivated"]

#: The plan's states of a workload that waits in its queue (Kueue: pending, active or inadmissible).
WAITING = ("pending", "inadmissible")

#: Reasons of a workload that is (or is being) deactivated (``spec.active: false``): not queued.
DEACTIVATED = ("Deactivated", "AdmissionCheckRejected", "RequeuingLimitExceeded")


@dataclass(frozen=True)
class ResourceUsage:
    """One resource's quantity held in a flavor; ``borrowed`` (ClusterQueues only) is what
    exceeds the nominal quota."""

    name: str
    total: str
    borrowed: str | None = None


@dataclass(frozen=True)
class FlavorUsage:
    name: str
    resources: tuple[ResourceUsage, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "resources": [
            {"name": r.name, "total": r.total, **({"borrowed": r.borrowed} if r.borrowed is not None else {})}
            for r in self.resources]}


@dataclass(frozen=True)
class Condition:
    """The ``Active`` condition, without its time: the writer keeps or sets it."""

    type: str
    status: str  # "True" or "False"
    reason: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "status": self.status, "reason": self.reason, "message": self.message}


@dataclass(frozen=True)
class QueueStatus:
    """What a ClusterQueue's and a LocalQueue's status have in common."""

    active: Condition
    pending: int = 0  # waiting in the queue (Kueue: active and inadmissible ones)
    reserving: int = 0  # holding quota: admitted, or with quota reserved while admission checks are not Ready
    admitted: int = 0
    flavors_reservation: tuple[FlavorUsage, ...] = ()  # per flavor and resource: held quota
    flavors_usage: tuple[FlavorUsage, ...] = ()  # the same, of admitted workloads

    def to_dict(self) -> dict[str, Any]:
        """The ``status`` fields as kueue.x-k8s.io names them, conditions apart."""
        usage = [f.to_dict() for f in self.flavors_usage]
        return {"pendingWorkloads": self.pending, "reservingWorkloads": self.reserving,
                "admittedWorkloads": self.admitted,
                "flavorsReservation": [f.to_dict() for f in self.flavors_reservation],
                **{name: usage for name in self._usage_fields}}

    _usage_fields: ClassVar[tuple[str, ...]] = ("flavorsUsage",)


@dataclass(frozen=True)
class ClusterQueueStatus(QueueStatus):
    name: str = ""


@dataclass(frozen=True)
class LocalQueueStatus(QueueStatus):
    namespace: str = ""
    name: str = ""
    cluster_queue: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    # Kueue renamed a LocalQueue's admitted usage in v1beta2 (flavorUsage -> flavorsUsage). Both
    # are written: clueue's CRDs return an object as stored whichever version is asked for, so a
    # client of either version finds its name; Kueue's own CRDs prune the other version's name.
    _usage_fields = ("flavorUsage", "flavorsUsage")


@dataclass(frozen=True)
class QueueStatuses:
    """Every queue's status after the cycle, keyed as the snapshot keys queues, and each waiting
    workload's ``(position in ClusterQueue, position in LocalQueue)``, from 0."""

    cluster_queues: Mapping[str, ClusterQueueStatus]
    local_queues: Mapping[str, LocalQueueStatus]
    positions: Mapping[str, tuple[int, int]]


def _local_queue_key(entry: WorkloadEntry) -> str:
    return f"{entry.name.split('/', 1)[0]}/{entry.queue}"


def deactivated(entry: WorkloadEntry) -> bool:
    """Whether a waiting ``entry`` is deactivated (``spec.active: false``), or being deactivated
    by its plan: it sits in no queue, so no count, position or metric of pending ones has it."""
    return any(r.code in DEACTIVATED for r in entry.reasons)


def _queued(entry: WorkloadEntry, snapshot: Snapshot | None) -> bool:
    """Whether a waiting ``entry`` sits in a ClusterQueue's queue: it names one, and (with a
    snapshot) that ClusterQueue exists and its LocalQueue exists and is not stopped."""
    if entry.state not in WAITING or not entry.cluster_queue or not entry.has_workload_object:
        return False
    if deactivated(entry):
        return False  # Kueue takes it out of its queues until it is active again
    if snapshot is None:
        return True
    lq = snapshot.local_queues.get(_local_queue_key(entry))
    return entry.cluster_queue in snapshot.cluster_queues and lq is not None and not lq.stopped


def pending_positions(plan: Plan, snapshot: Snapshot | None = None) -> dict[str, tuple[int, int]]:
    """``namespace/name`` -> (position in its ClusterQueue, position in its LocalQueue), from 0,
    of each workload that waits after ``plan``; with the ``snapshot`` the plan was made from,
    workloads of a missing ClusterQueue or of a missing or stopped LocalQueue are left out."""
    waiting = [(i, w) for i, w in enumerate(plan.workloads) if _queued(w, snapshot)]
    # ranked first, by rank; then by priority, highest first; then as the plan lists them
    waiting.sort(key=lambda iw: (iw[1].rank is None, iw[1].rank or 0, -iw[1].priority, iw[0]))
    in_cq: dict[str, int] = defaultdict(int)
    in_lq: dict[str, int] = defaultdict(int)
    out: dict[str, tuple[int, int]] = {}
    for _, w in waiting:
        lq = _local_queue_key(w)
        out[w.name] = (in_cq[w.cluster_queue or ""], in_lq[lq])
        in_cq[w.cluster_queue or ""] += 1
        in_lq[lq] += 1
    return out


def assignment_usage(entry: WorkloadEntry, assignment: PodSetAssignment) -> dict[str, Fraction]:
    """resource -> quantity one pod set of an admitted entry holds: its pods' requests times
    the admitted count, for each resource its admission names a flavor for (Kueue's
    ``podSetAssignments[].resourceUsage``)."""
    requests = next((p.requests for p in entry.pod_sets if p.name == assignment.name), {})
    return {r: parse_quantity(requests[r]) * assignment.count for r in assignment.flavors if r in requests}


def entry_usage(entry: WorkloadEntry) -> dict[tuple[str, str], Fraction]:
    """(flavor, resource) -> quantity an admitted entry holds: each pod set's requests times its
    admitted count, in the flavor its admission names per resource."""
    held: dict[tuple[str, str], Fraction] = defaultdict(Fraction)
    for a in entry.admission:
        for resource, quantity in assignment_usage(entry, a).items():
            held[(a.flavors[resource], resource)] += quantity
    return held


def _layout(cq: ClusterQueue | None, used: Iterable[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """The flavors and resources a status lists: the ClusterQueue's own, in its order (as Kueue
    lists them, with zeros), then any other one its workloads hold (an admission from before a
    change of the ClusterQueue)."""
    order: dict[str, list[str]] = {}
    for group in cq.resource_groups if cq else ():
        for fq in group.flavors:
            resources = order.setdefault(fq.flavor, [])
            resources += [r for r in fq.resources if r not in resources]
    for flavor, resource in sorted(used):
        resources = order.setdefault(flavor, [])
        if resource not in resources:
            resources.append(resource)
    return list(order.items())


def _flavors(cq: ClusterQueue | None, held: Mapping[tuple[str, str], Fraction], *,
             borrowed: bool) -> tuple[FlavorUsage, ...]:
    quota = nominal(cq.resource_groups) if cq else {}
    # Borrowing needs a cohort to borrow from: a ClusterQueue without one borrows nothing, even
    # when it holds more than its quota (an over-commit, engine/overcommit.py), as Kueue writes it.
    lends = cq is not None and bool(cq.cohort)
    out = []
    for flavor, resources in _layout(cq, held):
        row = []
        for r in resources:
            total = held.get((flavor, r), Fraction(0))
            excess = max(Fraction(0), total - quota.get((flavor, r), Fraction(0))) if lends else Fraction(0)
            over = format_quantity(excess) if borrowed else None
            row.append(ResourceUsage(r, format_quantity(total), over))
        out.append(FlavorUsage(flavor, tuple(row)))
    return tuple(out)


def _cluster_queue_active(cq: ClusterQueue, snapshot: Snapshot) -> Condition:
    """Kueue's ``Active`` condition: False with the first of its reasons that applies (Stopped,
    FlavorNotFound, an admission check's: AdmissionCheckNotFound, AdmissionCheckInactive, ...),
    the message naming all of them; else True, Ready."""
    problems: list[tuple[str, str]] = []
    if cq.stopped:
        problems.append(("Stopped", f"its stopPolicy is {cq.stop_policy}"))
    missing = sorted({fq.flavor for g in cq.resource_groups for fq in g.flavors} - set(snapshot.flavors))
    if missing:
        problems.append(("FlavorNotFound", f"the ResourceFlavor(s) {', '.join(missing)} it names do not exist"))
    problems += [(reason, f"its admission check {check} {why}")
                 for check, reason, why in inactive_checks(cq, snapshot.admission_checks)]
    if not problems:
        return Condition("Active", "True", "Ready", "Can admit new workloads")
    return Condition("Active", "False", problems[0][0],
                     "Can't admit new workloads: " + "; ".join(m for _, m in problems) + ".")


def _local_queue_active(stopped: str | None, cq: ClusterQueueStatus | None, cq_name: str) -> Condition:
    if stopped:
        return Condition("Active", "False", "Stopped", f"LocalQueue is stopped (stopPolicy {stopped})")
    if cq is None:
        return Condition("Active", "False", "ClusterQueueDoesNotExist",
                         f"Can't submit new workloads: ClusterQueue {cq_name} does not exist")
    if cq.active.status != "True":
        return Condition("Active", "False", "ClusterQueueIsInactive",
                         f"Can't submit new workloads: ClusterQueue {cq_name} is inactive ({cq.active.reason})")
    return Condition("Active", "True", "Ready", "Can submit new workloads to localQueue")


def queue_statuses(snapshot: Snapshot, plan: Plan) -> QueueStatuses:
    """The status of every ClusterQueue and LocalQueue of ``snapshot`` once ``plan`` (a cycle
    over it) is applied, and the waiting workloads' positions (see the module docstring)."""
    positions = pending_positions(plan, snapshot)
    pending_cq: dict[str, int] = defaultdict(int)
    pending_lq: dict[str, int] = defaultdict(int)
    # (reserving, admitted) counts and (reserved, used) quota: a workload whose admission checks
    # are not all Ready reserves quota without being admitted (docs/admission-checks.md)
    reserving_cq: dict[str, int] = defaultdict(int)
    reserving_lq: dict[str, int] = defaultdict(int)
    admitted_cq: dict[str, int] = defaultdict(int)
    admitted_lq: dict[str, int] = defaultdict(int)
    held_cq: dict[str, dict[tuple[str, str], Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    held_lq: dict[str, dict[tuple[str, str], Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    used_cq: dict[str, dict[tuple[str, str], Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    used_lq: dict[str, dict[tuple[str, str], Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    for w in plan.workloads:
        lq = _local_queue_key(w)
        if w.name in positions:
            pending_cq[w.cluster_queue or ""] += 1
            pending_lq[lq] += 1
        elif w.state == "admitted" and w.cluster_queue:
            admitted = w.phase == "Admitted"
            reserving_cq[w.cluster_queue] += 1
            reserving_lq[lq] += 1
            admitted_cq[w.cluster_queue] += admitted
            admitted_lq[lq] += admitted
            for key, q in entry_usage(w).items():
                held_cq[w.cluster_queue][key] += q
                held_lq[lq][key] += q
                if admitted:
                    used_cq[w.cluster_queue][key] += q
                    used_lq[lq][key] += q
    cqs: dict[str, ClusterQueueStatus] = {}
    for name, cq in sorted(snapshot.cluster_queues.items()):
        reserved = _flavors(cq, held_cq.get(name, {}), borrowed=True)
        usage = _flavors(cq, used_cq.get(name, {}), borrowed=True)
        cqs[name] = ClusterQueueStatus(_cluster_queue_active(cq, snapshot), pending_cq[name], reserving_cq[name],
                                       admitted_cq[name], reserved, usage, name=name)
    lqs: dict[str, LocalQueueStatus] = {}
    for key, lq in sorted(snapshot.local_queues.items()):
        cq_of = snapshot.cluster_queues.get(lq.cluster_queue)
        reserved = _flavors(cq_of, held_lq.get(key, {}), borrowed=False)
        usage = _flavors(cq_of, used_lq.get(key, {}), borrowed=False)
        active = _local_queue_active(lq.stop_policy if lq.stopped else None, cqs.get(lq.cluster_queue),
                                     lq.cluster_queue)
        lqs[key] = LocalQueueStatus(active, pending_lq[key], reserving_lq[key], admitted_lq[key], reserved, usage,
                                    namespace=lq.namespace, name=lq.name, cluster_queue=lq.cluster_queue)
    return QueueStatuses(cqs, lqs, positions)
