"""Coscheduling PodGroups (scheduling.x-k8s.io/v1alpha1): phases, InQueue, timeouts, back-off.

A PodGroup's pods carry the label ``scheduling.x-k8s.io/pod-group=<name>``. Those that also
carry ``kueue.x-k8s.io/queue-name`` are one gang workload (workloads.py, ``podgroup-<name>``):
admitted, quota and all, once ``minMember`` of them exist, all together or not at all. Those
without a queue name are left to the nodes: clueue does not gate them; it writes their group's
status only (docs/podgroups.md).

:func:`podgroup_statuses` computes what the controller writes after a cycle, from the
snapshot, the cycle's plan and the time (the engine has no clock: the adapter passes it):

* each group's ``status`` (phase, running, succeeded, failed, scheduleStartTime, occupiedBy),
  following the coscheduling state diagram, plus ``InQueue`` (delay-pod-creation): a group
  whose pods are not placed goes InQueue when its ``minResources`` fit both the idle node
  capacity and its queue's free quota, in FCFS order of creation; the capacity is then
  reserved for it (counted as used by every later group) until its gang is admitted.
* the groups to release: placed for longer than ``scheduleTimeoutSeconds`` without
  ``minMember`` pods running. Scheduling gates cannot be added back, so releasing deletes
  the group's live pods and its gang's Workload (as Kueue's waitForPodsReady evicts plain
  pods and gives back their quota) and holds the group
  for a back-off (60 s doubling per release, at most an hour), kept in annotations.
* the groups whose back-off is over (their back-off annotation is removed).

"Idle capacity" is :class:`SummedCapacity`: the allocatable of schedulable Nodes summed, less
what the pods placed on them (or about to be) request. It is one :class:`Capacity`, so that a
node-by-node placement can stand in for it. Without Nodes in the snapshot only quota decides.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from fractions import Fraction
from typing import Any, Mapping, Protocol

from .objects import Pod, PodGroup
from .plan import Plan, WorkloadEntry
from .quantity import format_quantity
from .queues import entry_usage
from .snapshot import KUEUE_PREFIX, Snapshot

__all__ = ["POD_GROUP_LABEL", "WORKLOAD_PREFIX", "PHASES", "Capacity", "SummedCapacity", "PodGroupStatus",
           "PodGroupRelease", "PodGroupDecisions", "podgroup_statuses", "group_members", "workload_key",
           "backoff_seconds", "group_queue", "rfc3339"]

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
WORKLOAD_PREFIX = "podgroup-"  # a gang's workload name: apart from Kueue pod groups of the same name
PHASES = ("Pending", "InQueue", "Scheduling", "Running", "Finished", "Failed", "Unknown")
BACKOFF_BASE_S = 60
BACKOFF_MAX_S = 3600
_QUEUE_LABEL = KUEUE_PREFIX + "queue-name"
_ADMISSION_GATE = KUEUE_PREFIX + "admission"
_TERMINAL = ("Succeeded", "Failed")
_WAITING = ("", "Pending", "InQueue")  # phases before any pod is placed

Resources = Mapping[str, Fraction]


def workload_key(namespace: str, name: str) -> str:
    """The key of the gang workload made of PodGroup ``namespace/name``'s queued pods."""
    return f"{namespace}/{WORKLOAD_PREFIX}{name}"


def backoff_seconds(requeues: int) -> int:
    """How long a group released ``requeues`` times waits: 60 s, doubling, at most an hour."""
    return min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** max(0, min(requeues - 1, 16)))


def group_members(snapshot: Snapshot) -> dict[str, list[Pod]]:
    """``namespace/group`` -> the pods labelled into that PodGroup, by name."""
    out: dict[str, list[Pod]] = defaultdict(list)
    for pod in snapshot.pods.values():
        group = pod.labels.get(POD_GROUP_LABEL)
        if group:
            out[f"{pod.namespace}/{group}"].append(pod)
    return {k: sorted(v, key=lambda p: p.name) for k, v in out.items()}


def group_queue(group: PodGroup, pods: list[Pod]) -> str:
    """The LocalQueue of a group: its own ``kueue.x-k8s.io/queue-name`` label, else its first
    pod's ("" : no queue, only nodes decide)."""
    return group.labels.get(_QUEUE_LABEL) or next((p.labels[_QUEUE_LABEL] for p in pods if _QUEUE_LABEL in p.labels), "")


class Capacity(Protocol):
    """Where a group's ``minResources`` must fit before it goes InQueue; node placement may
    replace :class:`SummedCapacity` with a check node by node."""

    def shortage(self, need: Resources) -> str:
        """Why ``need`` does not fit ("" if it does)."""

    def take(self, need: Resources) -> None:
        """Reserve ``need``."""


@dataclass
class _Pool:
    """Free amounts per resource; what is not listed is not there."""

    free: dict[str, Fraction]
    what: str  # "idle node capacity", "quota of ClusterQueue x"
    reserved: dict[str, Fraction] = field(default_factory=lambda: defaultdict(Fraction))

    def shortage(self, need: Resources) -> str:
        for r, q in sorted(need.items()):
            have = self.free.get(r, Fraction(0))
            if q > have:
                held = self.reserved.get(r, Fraction(0))
                also = f" ({format_quantity(held)} reserved for InQueue groups)" if held else ""
                return f"needs {r} {format_quantity(q)}, {self.what} has {format_quantity(max(have, Fraction(0)))}{also}"
        return ""

    def take(self, need: Resources) -> None:
        for r, q in need.items():
            self.free[r] = self.free.get(r, Fraction(0)) - q
            self.reserved[r] += q


class SummedCapacity(_Pool):
    """The allocatable of the snapshot's schedulable Nodes summed, less the requests of the
    pods that are placed or will be: live pods without scheduling gates (bound, or left to the
    scheduler) and the pods the plan admits."""

    def __init__(self, snapshot: Snapshot, plan: Plan) -> None:
        free: dict[str, Fraction] = defaultdict(Fraction)
        for node in snapshot.nodes.values():
            if not node.unschedulable:
                for r, q in node.allocatable.items():
                    free[r] += q
        admitted = {uid for w in plan.workloads if w.state == "admitted" for _, uid in w.pods}
        for pod in snapshot.pods.values():
            if pod.phase in _TERMINAL or pod.deleting:
                continue
            if pod.scheduled or not pod.scheduling_gates or pod.uid in admitted:
                for r, q in pod.requests.items():
                    free[r] -= q
        super().__init__(dict(free), "idle node capacity")


def _quota_pools(snapshot: Snapshot, plan: Plan) -> dict[str, _Pool]:
    """ClusterQueue -> its nominal quota per resource (all flavors), less what the plan leaves
    admitted in it. Borrowing is not counted: a group goes InQueue on quota its queue owns."""
    used: dict[str, dict[str, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    for w in plan.workloads:
        if w.state == "admitted" and w.cluster_queue:
            for (_, r), q in entry_usage(w).items():
                used[w.cluster_queue][r] += q
    pools = {}
    for name, cq in snapshot.cluster_queues.items():
        free: dict[str, Fraction] = defaultdict(Fraction)
        for g in cq.resource_groups:
            for fq in g.flavors:
                for r, quota in fq.resources.items():
                    free[r] += quota.nominal
        for r, q in used[name].items():
            free[r] -= q
        pools[name] = _Pool(dict(free), f"the quota of ClusterQueue {name}")
    return pools


@dataclass(frozen=True)
class PodGroupStatus:
    """A PodGroup's status once the plan is applied; ``message`` says why its phase (for
    logs and explanations; the PodGroup API has no field for it)."""

    namespace: str
    name: str
    phase: str
    running: int
    succeeded: int
    failed: int
    schedule_start: int  # seconds since the epoch, 0: unset
    occupied_by: str
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        """As the PodGroup's ``status`` (scheduling.x-k8s.io/v1alpha1)."""
        out: dict[str, Any] = {"phase": self.phase, "running": self.running, "succeeded": self.succeeded,
                               "failed": self.failed}
        if self.occupied_by:
            out["occupiedBy"] = self.occupied_by
        if self.schedule_start:
            out["scheduleStartTime"] = rfc3339(self.schedule_start)
        return out


@dataclass(frozen=True)
class PodGroupRelease:
    """A group released after its schedule timeout: its live ``pods`` are deleted, and so is
    the Workload its gang was admitted under (``workload``, "" if none: deleting it gives back
    its quota, as Kueue's eviction does), and it is held until ``backoff_until`` (recorded with
    ``requeues`` in its annotations)."""

    namespace: str
    name: str
    pods: tuple[Pod, ...]
    requeues: int
    backoff_until: int
    message: str
    workload: str = ""


@dataclass(frozen=True)
class PodGroupDecisions:
    """What :func:`podgroup_statuses` decided, keyed ``namespace/name``."""

    statuses: Mapping[str, PodGroupStatus]
    releases: tuple[PodGroupRelease, ...] = ()
    backoff_over: tuple[str, ...] = ()  # groups whose back-off annotation is to be removed
    reserved: Mapping[str, Resources] = field(default_factory=dict)  # InQueue groups: what they hold
    # the earliest later time at which a schedule timeout or a back-off ends (0: none): a
    # controller that cycles only on changes should cycle then too
    next_due: int = 0


def _counts(pods: list[Pod]) -> tuple[int, int, int]:
    return (sum(p.phase == "Running" for p in pods), sum(p.phase == "Succeeded" for p in pods),
            sum(p.phase == "Failed" for p in pods))


def _placed(pod: Pod, queued: bool, admitted: bool) -> bool:
    """Whether a live pod that is not running yet is past its group's gang decision: bound, or released by
    clueue (ungated, or being ungated by this plan); a pod of a group without a queue is placed
    once bound."""
    if pod.phase in _TERMINAL or pod.phase == "Running":
        return False  # counted as running or finished
    if pod.scheduled:
        return True
    return queued and (admitted or _ADMISSION_GATE not in pod.scheduling_gates)


def _pod_phase(group: PodGroup, pods: list[Pod], queued: bool, admitted: bool) -> tuple[str, str]:
    """(phase, why) from the pods alone; "Pending" when none is placed (InQueue is decided apart)."""
    live = [p for p in pods if not p.deleting]
    running, succeeded, failed = _counts(live)
    placed = sum(_placed(p, queued, admitted) for p in live)
    need = max(group.min_member, 1)
    if succeeded >= need and all(p.phase in _TERMINAL for p in live):
        return "Finished", f"{succeeded} of minMember {group.min_member} pods succeeded"
    if failed:
        return "Failed", f"{failed} pod(s) failed"
    if running + succeeded >= need:
        return "Running", f"{running} running, {succeeded} succeeded of minMember {group.min_member}"
    if placed + running + succeeded >= need:
        return "Scheduling", f"{placed} of minMember {group.min_member} pods placed, {running} running"
    if placed:
        return "Unknown", f"only {placed} of minMember {group.min_member} pods placed"
    return "Pending", ""


def podgroup_statuses(snapshot: Snapshot, plan: Plan, now: int, capacity: Capacity | None = None) -> PodGroupDecisions:
    """Every PodGroup's status after ``plan`` (a cycle over ``snapshot``) at time ``now``
    (seconds since the epoch), and the groups to release or to let out of back-off; see the
    module docstring. ``capacity``: where InQueue groups must fit (default
    :class:`SummedCapacity` when the snapshot has Nodes; without Nodes only quota decides)."""
    members = group_members(snapshot)
    entries: dict[str, WorkloadEntry] = {w.name: w for w in plan.workloads}
    if capacity is None and snapshot.nodes:
        capacity = SummedCapacity(snapshot, plan)
    quotas = _quota_pools(snapshot, plan)
    statuses: dict[str, PodGroupStatus] = {}
    releases: list[PodGroupRelease] = []
    over: list[str] = []
    waiting: list[tuple[PodGroup, list[Pod], str]] = []
    due: list[int] = []
    for key, group in snapshot.pod_groups.items():
        pods = members.get(key, [])
        queue = group_queue(group, pods)
        entry = entries.get(workload_key(group.namespace, group.name))
        admitted = entry is not None and entry.state == "admitted"
        phase, why = _pod_phase(group, pods, bool(queue), admitted)
        owner = next((p.controller_uid for p in pods if p.controller_uid), "")  # the controller that made them
        start = group.schedule_start
        if phase not in _WAITING and (group.phase in _WAITING or not start):
            start = now  # it starts scheduling now
        running, succeeded, failed = _counts([p for p in pods if not p.deleting])
        held = group.backoff_until > now
        if held:
            due.append(group.backoff_until)
        if group.backoff_until and not held:
            over.append(key)
        # not in the cycle that starts its scheduling: its pods have not been released yet
        if (phase in ("Scheduling", "Unknown") and group.schedule_timeout is not None and start
                and group.phase not in _WAITING and now - start >= group.schedule_timeout):
            live = tuple(p for p in pods if p.phase not in _TERMINAL and not p.deleting)
            requeues = group.requeues + 1
            until = now + backoff_seconds(requeues)
            message = (f"released: {running} of minMember {group.min_member} pods running "
                       f"{now - start}s after scheduling started (scheduleTimeoutSeconds {group.schedule_timeout}); "
                       f"requeue {requeues}, held until {rfc3339(until)}")
            gang = workload_key(group.namespace, group.name)
            releases.append(PodGroupRelease(group.namespace, group.name, live, requeues, until, message,
                                            gang if gang in snapshot.workloads else ""))
            phase, why = "Pending", message
        elif phase in ("Scheduling", "Unknown") and group.schedule_timeout is not None and start:
            due.append(max(start + group.schedule_timeout, now + 1))  # a start of now is released next cycle
        elif phase == "Pending":
            if held:
                why = f"backing off after release {group.requeues} until {rfc3339(group.backoff_until)}"
            else:
                waiting.append((group, pods, queue))
        statuses[key] = PodGroupStatus(group.namespace, group.name, phase, running, succeeded, failed,
                                       start if phase not in _WAITING else group.schedule_start, owner, why)
    reserved = _enqueue(waiting, snapshot, quotas, capacity, statuses)
    return PodGroupDecisions(statuses, tuple(releases), tuple(over), reserved, min(due, default=0))


def _enqueue(waiting: list[tuple[PodGroup, list[Pod], str]], snapshot: Snapshot, quotas: Mapping[str, _Pool],
             capacity: Capacity | None, statuses: dict[str, PodGroupStatus]) -> dict[str, Resources]:
    """delay-pod-creation's enqueue: FCFS by creation, a waiting group goes InQueue when its
    ``minResources`` fit the idle capacity and its queue's quota, and reserves them."""
    reserved: dict[str, Resources] = {}
    for group, pods, queue in sorted(waiting, key=lambda w: (w[0].created, w[0].namespace, w[0].name)):
        key = f"{group.namespace}/{group.name}"
        need = _need(group, pods)
        pools: list[Capacity] = [] if capacity is None else [capacity]
        why = ""
        if queue:
            lq = snapshot.local_queues.get(f"{group.namespace}/{queue}")
            pool = quotas.get(lq.cluster_queue) if lq else None
            if pool is None:
                why = f"LocalQueue {group.namespace}/{queue} or its ClusterQueue does not exist"
            else:
                pools.append(pool)
        why = why or next((s for s in (p.shortage(need) for p in pools) if s), "")
        old = statuses[key]
        if why:
            statuses[key] = PodGroupStatus(**{**old.__dict__, "phase": "Pending", "message": f"minResources do not fit: {why}"})
            continue
        for p in pools:
            p.take(need)
        reserved[key] = dict(need)
        shown = ", ".join(f"{r} {format_quantity(q)}" for r, q in sorted(need.items())) or "nothing"
        statuses[key] = PodGroupStatus(**{**old.__dict__, "phase": "InQueue",
                                          "message": f"minResources fit and are reserved: {shown}"})
    return reserved


def _need(group: PodGroup, pods: list[Pod]) -> dict[str, Fraction]:
    """What a waiting group must find free: its ``minResources``, or what its live pods
    request if they ask more of a resource."""
    asked: dict[str, Fraction] = defaultdict(Fraction)
    for p in pods:
        if p.phase not in _TERMINAL and not p.deleting:
            for r, q in p.requests.items():
                asked[r] += q
    return {r: max(group.min_resources.get(r, Fraction(0)), asked.get(r, Fraction(0)))
            for r in sorted(group.min_resources.keys() | asked.keys())}


def rfc3339(epoch: int) -> str:
    """Seconds since the epoch as Kubernetes writes times."""
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
