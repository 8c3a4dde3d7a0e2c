"""Coscheduling PodGroups (scheduling.x-k8s.io/v1alpha1): phases, InQueue, timeouts, back-off.

A PodGroup's pods carry the label ``scheduling.x-k8s.io/pod-group=<name>``. Those that also
carry ``kueue.x-k8s.io/queue-name`` are one gang workload (workloads.py, ``podgroup-<name>``):
admitted, quota and all, once ``minMember`` of them exist, all together or not at all. Those
without a queue name are gang-scheduled the same way, through the built-in queue
:data:`COSCHEDULING_QUEUE` where no quota applies (coscheduling.py), unless the Configuration's
``podGroups.gangScheduleWithoutQueue`` is off: then they are left to the nodes, and clueue
writes their group's status only (docs/podgroups.md).

InQueue (delay-pod-creation): a group none of whose pods is placed goes InQueue when its need
(``minResources``, or what its pods request where that is more) fits both the idle node capacity
and the free nominal quota of its queue's ClusterQueue, first come first served by creation; it
then *holds* that capacity until its gang is admitted. Both steps are functions of the snapshot
(which records each group's phase), so a cycle stays pure:

* :func:`holds`, before the solve: every group the snapshot records InQueue keeps what it holds
  while its need still fits beside the Workloads admitted before and the pods on the nodes
  (FCFS); one that no longer fits goes back to Pending. The cycle subtracts the holds before it
  solves (quota: the ``reservation/5`` facts, compiler.py and capacity.lp; nodes:
  placement.py), so that nothing admitted in the cycle takes them, but the group's own gang:
  admitting it frees the hold it takes the place of.
* :func:`podgroup_statuses`, after the cycle: each group's ``status`` (phase, running,
  succeeded, failed, scheduleStartTime, occupiedBy), following the coscheduling state diagram;
  a Pending group goes InQueue when its need fits what the plan leaves beside the holds (FCFS),
  and holds it from the next cycle on. It also names the groups to release: placed for longer
  than ``scheduleTimeoutSeconds`` without ``minMember`` pods running. Scheduling gates cannot be
  added back, so releasing deletes the group's live pods and its gang's Workload (as Kueue's
  waitForPodsReady evicts plain pods and gives back their quota) and holds the group for a
  back-off (60 s doubling per release, at most an hour), kept in annotations; and the groups
  whose back-off is over (their back-off annotation is removed). The cycle puts all of it in
  the plan (:func:`plan_entries`: its ``podGroups[]``, each phase with a reason and its
  numbers); adapters write what the plan says and decide nothing.

"Idle node capacity" is summed over the schedulable Nodes (allocatable less what the pods bound
there, or about to be placed, request); a hold is spread over the nodes in name order. Without
Nodes in the snapshot only quota decides.

Kueue Workloads of a Job are admitted before their pods exist (their admission is their
InQueue, and holds their quota): with Nodes, :func:`holds` also holds, on the nodes of their
flavors, what the pods still to come of each admitted one will request.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from fractions import Fraction
from typing import Any, Callable, Collection, Iterable, Iterator, Mapping

from .objects import KueueWorkload, Pod, PodGroup, PodSetAdmission, PodSetSpec, ResourceGroup
from .plan import Plan, PodGroupEntry, PodGroupRelease as ReleaseEntry, WorkloadEntry
from .quantity import format_quantity
from .queues import entry_usage
from .reasons import Reason, make_reason
from .kueue_api import ADMISSION_GATE, JOB_UID_LABEL, MANAGED_LABEL, PODSET_LABEL, POD_GROUP_LABEL, QUEUE_LABEL
from .snapshot import Snapshot
from .quota import nominal, quota_trees

__all__ = ["COSCHEDULING_QUEUE", "WORKLOAD_PREFIX", "gang_scheduled", "PHASES", "Hold", "Holds", "holds", "PodGroupStatus",
           "PodGroupRelease", "PodGroupDecisions", "podgroup_statuses", "describe_group", "group_members", "workload_key",
           "backoff_seconds", "group_queue", "rfc3339", "plan_entries"]

#: The LocalQueue (in each namespace), ClusterQueue and ResourceFlavor through which the gangs
#: of PodGroups without a queue are admitted: no quota applies there, only the nodes decide
#: (coscheduling.py). The name is reserved.
COSCHEDULING_QUEUE = "clueue-coscheduling"
WORKLOAD_PREFIX = "podgroup-"  # a gang's workload name: apart from Kueue pod groups of the same name
PHASES = ("Pending", "InQueue", "Scheduling", "Running", "Finished", "Failed", "Unknown")
BACKOFF_BASE_S = 60
BACKOFF_MAX_S = 3600
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


def gang_scheduled(queue: str, pods: Iterable[Pod]) -> bool:
    """Whether clueue decides when a group's pods start: it has a queue, or its pods were gated
    by clueue's webhook (labelled :data:`MANAGED_LABEL`, or gated still), as the pods of
    PodGroups without a queue are unless ``podGroups.gangScheduleWithoutQueue`` is off."""
    return bool(queue) or any(p.labels.get(MANAGED_LABEL) == "true" or ADMISSION_GATE in p.scheduling_gates
                              for p in pods)


def group_queue(group: PodGroup, pods: list[Pod]) -> str:
    """The LocalQueue of a group: its own ``kueue.x-k8s.io/queue-name`` label, else its first
    pod's ("" : no queue, only nodes decide)."""
    return group.labels.get(QUEUE_LABEL) or next((p.labels[QUEUE_LABEL] for p in pods if QUEUE_LABEL in p.labels), "")


@dataclass(frozen=True)
class Hold:
    """What an InQueue group holds until its gang is admitted (or it goes back to Pending)."""

    group: str  # namespace/name
    gang: str  # the key of its gang's workload (:func:`workload_key`)
    need: Resources
    cluster_queue: str = ""  # whose quota it holds ("": it has no queue)
    quota: tuple[tuple[str, str, Fraction], ...] = ()  # (flavor, resource, amount) in cluster_queue
    nodes: tuple[tuple[str, str, Fraction], ...] = ()  # (node, resource, amount)
    arrived: bool = False  # it has a queue and its minMember pods exist: its gang may be admitted in their place


@dataclass(frozen=True)
class Holds:
    """The InQueue groups of a snapshot and what they hold before the cycle's solve, and the
    nodes held for the pods to come of admitted Kueue Workloads of a Job (:func:`holds`), keyed
    ``namespace/name``."""

    held: Mapping[str, Hold] = field(default_factory=dict)
    dropped: Mapping[str, str] = field(default_factory=dict)  # recorded InQueue, no longer fitting: why
    # admitted Kueue Workloads of a Job whose pods are not all there yet: what the missing pods
    # will take of the nodes, (node, resource, amount), keyed by Workload namespace/name
    workloads: Mapping[str, tuple[tuple[str, str, Fraction], ...]] = field(default_factory=dict)

    def _on_nodes(self) -> list[tuple[str, tuple[tuple[str, str, Fraction], ...]]]:
        """(holder, its node amounts), but groups whose pods have arrived: those pods are about
        to take that room themselves."""
        return [(h.group, h.nodes) for h in self.held.values() if h.nodes and not h.arrived] + \
            [(f"Workload {k}", v) for k, v in self.workloads.items() if v]

    def on_nodes(self) -> list[tuple[str, dict[str, Fraction]]]:
        """(node, amounts) the holds take of the nodes."""
        out: dict[str, dict[str, Fraction]] = defaultdict(dict)
        for _, taken in self._on_nodes():
            for node, r, q in taken:
                out[node][r] = out[node].get(r, Fraction(0)) + q
        return sorted(out.items())

    def nodes_text(self) -> str:
        """What the holds take of the nodes, in words ("" if nothing): ``cpu 3 (default/a)``."""
        total: dict[str, Fraction] = defaultdict(Fraction)
        holders = self._on_nodes()
        for _, taken in holders:
            for _, r, q in taken:
                total[r] += q
        return f"{_amounts(total)} ({_names(sorted(h for h, _ in holders))})" if holders else ""


def _names(names: list[str], shown: int = 3) -> str:
    """The first ``shown`` of ``names``, and how many more: a reason stays readable."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _amounts(need: Resources) -> str:
    return ", ".join(f"{r} {format_quantity(q)}" for r, q in sorted(need.items())) or "nothing"


class _Pool:
    """Free amounts by place (a flavor of a ClusterQueue's quota, or a node) and resource. A
    need fits when, resource by resource, the places together have it free (less what is
    ``floating``: asked by pods on no node yet); a hold takes it place by place, in order."""

    def __init__(self, what: str, places: list[str], free: Mapping[tuple[str, str], Fraction],
                 floating: Mapping[str, Fraction] | None = None) -> None:
        self.what = what  # "idle node capacity", "the quota of ClusterQueue x"
        order = {p: i for i, p in enumerate(places)}
        # resource -> place -> what it has free, only places with some, in order: a hold
        # looks at the places it may take from, not at every one already full
        self.open: dict[str, dict[str, Fraction]] = defaultdict(dict)
        self.total: dict[str, Fraction] = defaultdict(Fraction)
        for (p, r), q in sorted(free.items(), key=lambda item: order.get(item[0][0], len(order))):
            if p in order and q > 0:
                self.open[r][p] = q
                self.total[r] += q
        self.floating = dict(floating or {})
        self.holders: dict[str, dict[str, Fraction]] = defaultdict(dict)  # resource -> group -> held

    def has(self, resource: str) -> Fraction:
        return self.total.get(resource, Fraction(0)) - self.floating.get(resource, Fraction(0))

    def shortfall(self, need: Resources) -> dict[str, Any] | None:
        """Why ``need`` does not fit (None if it does), as the details of a ``MinResourcesUnfit``
        reason: the first resource short, what it asks and has, and what InQueue groups hold of
        it (``reserved``, up to three of them in ``reservedFor``, ``reservedCount``)."""
        for r, q in sorted(need.items()):
            have = self.has(r)
            if q > have:
                held = self.holders.get(r, {})
                also = {"reserved": format_quantity(sum(held.values(), Fraction(0))),
                        "reservedFor": sorted(held)[:3], "reservedCount": len(held)} if held else {}
                return {"resource": r, "asks": format_quantity(q), "has": format_quantity(max(have, Fraction(0))),
                        "pool": self.what, **also}
        return None

    def take(self, group: str, need: Resources,
             where: Callable[[str], bool] | None = None) -> tuple[tuple[str, str, Fraction], ...]:
        """Hold ``need`` for ``group``: (place, resource, amount) taken, places (those ``where``
        accepts) in order; what they do not have (a hold kept past a change) counts against
        them all the same."""
        out = []
        for r, q in sorted(need.items()):
            self.holders[r][group] = self.holders[r].get(group, Fraction(0)) + q
            left, full, places = q, [], self.open[r]
            for p, have in places.items():
                if left <= 0:
                    break
                if where is not None and not where(p):
                    continue
                a = min(have, left)
                places[p] = have - a
                if a == have:
                    full.append(p)
                left -= a
                self.total[r] -= a
                out.append((p, r, a))
            for p in full:
                del places[p]
            if left > 0:
                self.floating[r] = self.floating.get(r, Fraction(0)) + left
        return tuple(out)


def _node_pool(snapshot: Snapshot, waiting: Collection[str], placing: frozenset[str] = frozenset()) -> _Pool:
    """The schedulable Nodes' allocatable, less the requests of the pods bound to each; the pods
    placed but not bound yet (ungated, or ``placing``: uids the plan ungates) float, but those
    of the ``waiting`` groups (``namespace/name``): what such a group holds covers them."""
    free: dict[tuple[str, str], Fraction] = defaultdict(Fraction)
    places = sorted(n.name for n in snapshot.nodes.values() if not n.unschedulable)
    for name in places:
        for r, q in snapshot.nodes[name].allocatable.items():
            free[name, r] += q
    floating: dict[str, Fraction] = defaultdict(Fraction)
    for pod in snapshot.pods.values():
        if pod.phase in _TERMINAL or pod.deleting:
            continue
        if pod.node_name or pod.scheduled:
            for r, q in pod.requests.items():
                free[pod.node_name, r] -= q
        elif (not pod.scheduling_gates or pod.uid in placing) and \
                f"{pod.namespace}/{pod.labels.get(POD_GROUP_LABEL)}" not in waiting:
            for r, q in pod.requests.items():
                floating[r] += q
    return _Pool("idle node capacity", places, free, floating)


def _quota_pools(snapshot: Snapshot, used: Mapping[str, Mapping[tuple[str, str], Fraction]]
                 ) -> dict[str, list[tuple[str, _Pool]]]:
    """ClusterQueue -> the quota its groups' needs must fit, as (kind, pool): its own nominal
    quota per flavor and resource less what it ``used`` (ClusterQueue -> (flavor, resource) ->
    held), and in a cohort (kind ``cohort``) also what its whole quota tree has unused, shared
    by the ClusterQueues of the tree: quota lent to another queue is not free. Borrowing is not
    counted: a group goes InQueue on quota its queue owns."""
    tree_of, groups = quota_trees(snapshot)
    trees: dict[str, _Pool] = {}
    for tree, tree_groups in groups.items():
        if tree.startswith("cohort/"):
            free = nominal(tree_groups)
            for name in (q for q, t in tree_of.items() if t == tree):
                for key, q in used.get(name, {}).items():
                    free[key] = free.get(key, Fraction(0)) - q
            trees[tree] = _Pool(f"the unused quota of cohort {tree.removeprefix('cohort/')}",
                                _flavors(tree_groups), free)
    pools = {}
    for name, cq in snapshot.cluster_queues.items():
        free = nominal(cq.resource_groups)
        for key, q in used.get(name, {}).items():
            free[key] = free.get(key, Fraction(0)) - q
        own = _Pool(f"the quota of ClusterQueue {name}", _flavors(cq.resource_groups), free)
        pools[name] = [(name, own)] + ([("cohort", trees[tree_of[name]])] if tree_of[name] in trees else [])
    return pools


def _flavors(groups: Iterable[ResourceGroup]) -> list[str]:
    """The flavors of ``groups``, in their order, each once."""
    return list(dict.fromkeys(fq.flavor for g in groups for fq in g.flavors))


def _recorded_usage(snapshot: Snapshot) -> dict[str, dict[tuple[str, str], Fraction]]:
    """ClusterQueue -> (flavor, resource) -> what the admissions recorded on the snapshot's
    Workload objects hold (every admission clueue or Kueue makes is recorded on one): the
    admitted count, less the reclaimable pods, times the pod set's requests."""
    used: dict[str, dict[tuple[str, str], Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    for obj in snapshot.workloads.values():
        for a, spec, count in _held_pod_sets(obj):
            for r, f in a.flavors.items():
                used[obj.admission.cluster_queue][f, r] += spec.requests.get(r, Fraction(0)) * count
    return used


def _held_pod_sets(obj: KueueWorkload) -> Iterator[tuple[PodSetAdmission, PodSetSpec, int]]:
    """(assignment, pod set, pods holding quota) of each pod set an unfinished Workload object's
    admission names: the admitted count less the reclaimable pods."""
    if obj.admission is None or obj.finished:
        return
    sets = {ps.name: ps for ps in obj.pod_sets}
    for a in obj.admission.pod_sets:
        spec = sets.get(a.name)
        if spec is not None:
            yield a, spec, max(0, (spec.count if a.count < 0 else a.count) - obj.reclaimable.get(a.name, 0))


def _plan_usage(plan: Plan) -> dict[str, dict[tuple[str, str], Fraction]]:
    """ClusterQueue -> (flavor, resource) -> what the workloads admitted after ``plan`` hold."""
    used: dict[str, dict[tuple[str, str], Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    for w in plan.workloads:
        if w.state == "admitted" and w.cluster_queue:
            for key, q in entry_usage(w).items():
                used[w.cluster_queue][key] += q
    return used


def _waiting(snapshot: Snapshot, members: Mapping[str, list[Pod]]) -> list[tuple[PodGroup, list[Pod], str]]:
    """The groups that may hold capacity before the solve, FCFS (creation, namespace, name):
    none of their pods placed, not backing off, their gang not admitted; with their pods and queue."""
    out = []
    for key, group in snapshot.pod_groups.items():
        pods = members.get(key, [])
        queue = group_queue(group, pods)
        gang = snapshot.workloads.get(workload_key(group.namespace, group.name))
        if group.backoff_until or (gang is not None and gang.admission is not None):
            continue
        if _pod_phase(group, pods, gang_scheduled(queue, pods), False)[0] == "Pending":
            out.append((group, pods, queue))
    return sorted(out, key=lambda w: (w[0].created, w[0].namespace, w[0].name))


def _pools_of(snapshot: Snapshot, group: PodGroup, queue: str, quotas: Mapping[str, list[tuple[str, _Pool]]],
              nodes: _Pool | None) -> tuple[list[tuple[str, _Pool]], Reason | None]:
    """The pools a group's need must fit, as (kind: ``nodes``, its ClusterQueue's name or
    ``cohort``, pool), and why it cannot go InQueue at all (None)."""
    pools: list[tuple[str, _Pool]] = [] if nodes is None else [("nodes", nodes)]
    if not queue:
        return pools, None
    lq = snapshot.local_queues.get(f"{group.namespace}/{queue}")
    quota = quotas.get(lq.cluster_queue) if lq else None
    if quota is None:
        return pools, make_reason("PodGroupQueueNotFound", localQueue=f"{group.namespace}/{queue}")
    return pools + quota, None


def _try_hold(snapshot: Snapshot, group: PodGroup, pods: list[Pod], queue: str,
              quotas: Mapping[str, list[tuple[str, _Pool]]], nodes: _Pool | None) -> Hold | Reason:
    """The hold of ``group`` if its need fits its pools (taken from them), else why not."""
    pools, why = _pools_of(snapshot, group, queue, quotas, nodes)
    need = _need(group, pods)
    if why is not None:
        return why
    short = next((s for s in (p.shortfall(need) for _, p in pools) if s), None)
    if short is not None:
        return make_reason("MinResourcesUnfit", need=_quantities(need), **short)
    key = f"{group.namespace}/{group.name}"
    # a gang-scheduled group's pods, all there, are its gang's to place; a group left to the
    # nodes holds them until the scheduler binds its pods
    arrived = gang_scheduled(queue, pods) and sum(1 for p in pods if p.phase not in _TERMINAL and not p.deleting) >= \
        max(group.min_member, 1)
    hold = Hold(key, workload_key(group.namespace, group.name), need, arrived=arrived)
    for kind, pool in pools:
        taken = pool.take(key, need)
        if kind == "nodes":
            hold = replace(hold, nodes=taken)
        elif kind != "cohort":  # the quota of its ClusterQueue: what the solver counts (reservation/5)
            hold = replace(hold, cluster_queue=kind, quota=taken)
    return hold


def _pods_to_come(snapshot: Snapshot) -> list[tuple[str, dict[str, Fraction], Callable[[str], bool]]]:
    """The pods admitted Kueue Workloads of a Job will create, by Workload: what they request,
    and which nodes they may go to (those with their flavors' node labels). Such a Workload
    is admitted before its pods exist (Kueue's delay of pod creation: the Job is unsuspended
    once admitted), so the room its admission was placed in is held for them; its pods are
    known by their controller, the Job the Workload's ``kueue.x-k8s.io/job-uid`` label names,
    and by their ``kueue.x-k8s.io/podset`` label (without it, a one-pod-set Workload's)."""
    admitted = [(key, obj, obj.labels[JOB_UID_LABEL]) for key, obj in sorted(snapshot.workloads.items())
                if obj.admission is not None and not obj.finished and not obj.owned_by_pods
                and obj.labels.get(JOB_UID_LABEL)]
    jobs: dict[str, list[Pod]] = defaultdict(list)
    for pod in snapshot.pods.values() if admitted else ():
        if pod.controller_uid and pod.phase not in _TERMINAL and not pod.deleting:
            jobs[pod.controller_uid].append(pod)
    out = []
    for key, obj, job in admitted:
        for a, spec, count in _held_pod_sets(obj):
            alone = a.name if len(obj.pod_sets) == 1 else ""  # pods without the label: of the one pod set
            missing = count - sum(1 for p in jobs.get(job, ()) if p.labels.get(PODSET_LABEL, alone) == a.name)
            labels = {k: v for f in sorted(set(a.flavors.values())) if f in snapshot.flavors
                      for k, v in snapshot.flavors[f].node_labels.items()}
            if missing > 0:
                out.append((key, {r: q * missing for r, q in spec.requests.items()},
                            lambda n, labels=labels: all(snapshot.nodes[n].labels.get(k) == v for k, v in labels.items())))
    return out


_NO_HOLDS = Holds()
_last: list[Any] = [None, _NO_HOLDS]  # the last snapshot asked about, and its holds


def holds(snapshot: Snapshot) -> Holds:
    """What the groups that ``snapshot`` records InQueue hold before the cycle's solve: FCFS,
    each keeps its hold while its need fits beside the admissions recorded on Workload objects
    and the pods on the nodes (and the holds before it); the others go back to Pending. The
    compiler, placement and :func:`podgroup_statuses` all ask about one snapshot: the answer
    for the last one is kept."""
    if not snapshot.pod_groups and not (snapshot.nodes and snapshot.workloads):
        return _NO_HOLDS
    if _last[0] is snapshot:
        return _last[1]
    out = _holds(snapshot)
    _last[:] = [snapshot, out]
    return out


def _holds(snapshot: Snapshot) -> Holds:
    waiting = [w for w in _waiting(snapshot, group_members(snapshot)) if w[0].phase == "InQueue"] \
        if snapshot.pod_groups else []
    to_come = _pods_to_come(snapshot) if snapshot.nodes else []
    if not waiting and not to_come:
        return _NO_HOLDS
    quotas = _quota_pools(snapshot, _recorded_usage(snapshot))
    nodes = _node_pool(snapshot, {f"{g.namespace}/{g.name}" for g, _, _ in waiting}) if snapshot.nodes else None
    held: dict[str, Hold] = {}
    dropped: dict[str, str] = {}
    jobs: dict[str, tuple[tuple[str, str, Fraction], ...]] = defaultdict(tuple)
    for k, need, where in to_come if nodes is not None else ():
        jobs[k] += nodes.take(f"Workload {k}", need, where)
    for group, pods, queue in waiting:
        hold = _try_hold(snapshot, group, pods, queue, quotas, nodes)
        if isinstance(hold, Hold):
            held[hold.group] = hold
        else:
            dropped[f"{group.namespace}/{group.name}"] = hold.message
    return Holds(held, dropped, dict(jobs))


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
    reason: Reason | None = None  # its code and numbers; ``message`` is its sentence

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
    clueue (ungated, or being ungated by this plan); a pod of a group clueue does not gang-schedule
    (``queued`` false: :func:`gang_scheduled`) is placed once bound."""
    if pod.phase in _TERMINAL or pod.phase == "Running":
        return False  # counted as running or finished
    if pod.scheduled:
        return True
    return queued and (admitted or ADMISSION_GATE not in pod.scheduling_gates)


def _pod_phase(group: PodGroup, pods: list[Pod], queued: bool, admitted: bool) -> tuple[str, Reason | None]:
    """(phase, why) from the pods alone; "Pending" when none is placed (InQueue is decided apart)."""
    live = [p for p in pods if not p.deleting]
    running, succeeded, failed = _counts(live)
    placed = sum(_placed(p, queued, admitted) for p in live)
    need = max(group.min_member, 1)
    if succeeded >= need and all(p.phase in _TERMINAL for p in live):
        return "Finished", make_reason("PodsSucceeded", succeeded=succeeded, minMember=group.min_member)
    if failed:
        return "Failed", make_reason("PodsFailed", failed=failed)
    if running + succeeded >= need:
        return "Running", make_reason("PodsRunning", running=running, succeeded=succeeded, minMember=group.min_member)
    if placed + running + succeeded >= need:
        return "Scheduling", make_reason("PodsPlaced", placed=placed, running=running, minMember=group.min_member)
    if placed:
        return "Unknown", make_reason("PodsPartlyPlaced", placed=placed, minMember=group.min_member)
    return "Pending", None


def podgroup_statuses(snapshot: Snapshot, plan: Plan, now: int) -> PodGroupDecisions:
    """Every PodGroup's status after ``plan`` (a cycle over ``snapshot``) at time ``now``
    (seconds since the epoch), and the groups to release or to let out of back-off; see the
    module docstring."""
    members = group_members(snapshot)
    entries: dict[str, WorkloadEntry] = {w.name: w for w in plan.workloads}
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
        phase, why = _pod_phase(group, pods, gang_scheduled(queue, pods), admitted)
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
            why = make_reason("ScheduleTimeout", running=running, minMember=group.min_member,
                              waitedSeconds=now - start, scheduleTimeoutSeconds=group.schedule_timeout,
                              requeues=requeues, backoffUntil=rfc3339(until))
            gang = workload_key(group.namespace, group.name)
            releases.append(PodGroupRelease(group.namespace, group.name, live, requeues, until, why.message,
                                            gang if gang in snapshot.workloads else ""))
            phase = "Pending"
        elif phase in ("Scheduling", "Unknown") and group.schedule_timeout is not None and start:
            due.append(max(start + group.schedule_timeout, now + 1))  # a start of now is released next cycle
        elif phase == "Pending":
            if held:
                why = make_reason("BackingOff", requeues=group.requeues, backoffUntil=rfc3339(group.backoff_until))
            else:
                waiting.append((group, pods, queue))
        statuses[key] = PodGroupStatus(group.namespace, group.name, phase, running, succeeded, failed,
                                       start if phase not in _WAITING else group.schedule_start, owner,
                                       why.message if why is not None else "", why)
    reserved = _enqueue(waiting, snapshot, plan, statuses)
    return PodGroupDecisions(statuses, tuple(releases), tuple(over), reserved, min(due, default=0))


def _enqueue(waiting: list[tuple[PodGroup, list[Pod], str]], snapshot: Snapshot, plan: Plan,
             statuses: dict[str, PodGroupStatus]) -> dict[str, Resources]:
    """delay-pod-creation's enqueue, after the cycle: the groups that held capacity before the
    solve (:func:`holds`) and still wait stay InQueue (the solve kept their room); then, FCFS,
    a waiting group goes InQueue when its need fits what the plan leaves beside the holds.
    Returns what each InQueue group holds."""
    before = holds(snapshot)
    admitted = frozenset(uid for w in plan.workloads if w.state == "admitted" for _, uid in w.pods)
    quotas = _quota_pools(snapshot, _plan_usage(plan))
    nodes = _node_pool(snapshot, {f"{g.namespace}/{g.name}" for g, _, _ in waiting}, admitted) \
        if snapshot.nodes else None
    for w in plan.workloads if nodes is not None else ():
        obj = snapshot.workloads.get(w.name)
        if w.state == "admitted" and w.origin == "workload" and obj is not None and obj.admission is None:
            nodes.take(f"Workload {w.name}", {r: q for (_, r), q in entry_usage(w).items()})  # its pods to come
    reserved: dict[str, Resources] = {}
    for k, taken in before.workloads.items() if nodes is not None else ():
        amounts: dict[str, Fraction] = defaultdict(Fraction)
        for _, r, q in taken:
            amounts[r] += q
        nodes.take(f"Workload {k}", amounts)
    fresh = []
    for group, pods, queue in sorted(waiting, key=lambda w: (w[0].created, w[0].namespace, w[0].name)):
        key = f"{group.namespace}/{group.name}"
        hold = before.held.get(key)
        if hold is None:
            fresh.append((group, pods, queue))
            continue
        for _, pool in _pools_of(snapshot, group, queue, quotas, nodes)[0]:
            pool.take(key, hold.need)
        reserved[key] = hold.need
        statuses[key] = _in_queue(statuses[key], hold)
    for group, pods, queue in fresh:
        key = f"{group.namespace}/{group.name}"
        hold = _try_hold(snapshot, group, pods, queue, quotas, nodes)
        if isinstance(hold, Hold):
            reserved[key] = hold.need
            statuses[key] = _in_queue(statuses[key], hold)
        else:
            why = make_reason(hold.code, **{**hold.details, "backToPending": key in before.dropped})
            statuses[key] = replace(statuses[key], phase="Pending", message=why.message, reason=why)
    return reserved


def _in_queue(status: PodGroupStatus, hold: Hold) -> PodGroupStatus:
    """``status`` InQueue, holding what ``hold`` holds."""
    why = make_reason("MinResourcesFit", need=_quantities(hold.need), clusterQueue=hold.cluster_queue)
    return replace(status, phase="InQueue", message=why.message, reason=why)


def _quantities(amounts: Resources) -> dict[str, str]:
    """Amounts by resource as Kubernetes quantities, sorted."""
    return {r: format_quantity(q) for r, q in sorted(amounts.items())}


def plan_entries(snapshot: Snapshot, plan: Plan, now: int | None) -> tuple[tuple[PodGroupEntry, ...], int | None]:
    """What a cycle decides about each PodGroup of ``snapshot``, as the plan's ``podGroups[]``
    (:func:`podgroup_statuses` after ``plan``, at ``now``), and when the next schedule timeout
    or back-off ends (None: none). Without ``now`` nothing that depends on time is decided: no
    release, no end of a back-off, no ``scheduleStartTime`` (as waitForPodsReady, podsready.py)."""
    if not snapshot.pod_groups:
        return (), None
    decisions = podgroup_statuses(snapshot, plan, 0 if now is None else now)
    releases = {f"{r.namespace}/{r.name}": r for r in decisions.releases}
    over = set(decisions.backoff_over)
    members = group_members(snapshot)
    out = []
    for key in sorted(decisions.statuses):
        status, group = decisions.statuses[key], snapshot.pod_groups[key]
        r = releases.get(key)
        release = None if r is None else ReleaseEntry(tuple(sorted((p.name, p.uid) for p in r.pods)), r.workload,
                                                      r.requeues, r.backoff_until)
        out.append(PodGroupEntry(key, workload_key(group.namespace, group.name),
                                 group_queue(group, members.get(key, [])),
                                 group.phase, status.phase, status.reason, status.to_dict(),
                                 _quantities(decisions.reserved.get(key, {})), release, key in over))
    return tuple(out), (decisions.next_due or None) if now is not None else None


def describe_group(snapshot: Snapshot, plan: Plan, name: str) -> dict[str, Any] | None:
    """A PodGroup's decision in ``plan`` (its ``podGroups[]`` entry), as ``clueue explain``
    shows it: its phase, why, and what it holds (per flavor and node when it held them before
    the cycle); ``name`` is ``namespace/name``, the key of its gang's workload, or a name unique
    among the groups. None if no group answers to it."""
    keys = [k for k in snapshot.pod_groups if name in (k, workload_key(*k.split("/", 1)))] or \
        [k for k in snapshot.pod_groups if k.split("/", 1)[1] in (name, name.removeprefix(WORKLOAD_PREFIX))]
    if len(keys) != 1:
        return None
    try:
        entry = plan.pod_group(keys[0])
    except KeyError:
        return None
    out: dict[str, Any] = {"podGroup": keys[0], "phase": entry.phase,
                           "message": entry.reason.message if entry.reason is not None else "", "gang": entry.gang}
    if entry.reason is not None:
        out["reason"] = entry.reason.to_dict()
    if entry.holds:
        out["holds"] = dict(entry.holds)
    hold = holds(snapshot).held.get(keys[0])
    if hold is not None and entry.phase == "InQueue":
        out["quota"] = [{"clusterQueue": hold.cluster_queue, "flavor": f, "resource": r, "amount": format_quantity(q)}
                        for f, r, q in hold.quota]
        out["nodes"] = [{"node": n, "resource": r, "amount": format_quantity(q)} for n, r, q in hold.nodes]
    return out


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
