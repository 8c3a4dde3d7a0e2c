"""Workloads built from a snapshot: Kueue Workload objects, single Pods and groups of Pods.

Follows the plain-pods design (KEP-976): a Pod with a queue name is a workload ``pod-<name>``;
Pods sharing ``pod-group-name`` form one workload once ``pod-group-total-count`` of them exist,
split into pod sets by role hash (at most 8 roles), or shaped by the ``pod-group-sets``
annotation when a driver creates its workers later. Extra pods get ``delete-pod`` actions,
youngest first; failed pods are replaced within the same quota; succeeded pods of an admitted
group release their quota (reclaimable pods).

Pods are tracked by the finalizer ``kueue.x-k8s.io/managed``; a ``finalize-pod`` action removes
it once the pod no longer matters (:meth:`_Builder._finalize_group`). A group whose live pods
were ungated for a Workload (``clueue.dev/workload-uid``, recorded by the adapter when it
ungates them) that is now gone or being deleted has ended: its pods are deleted (:meth:`_Builder._ended`).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Callable, Iterable, Mapping

from .config import Config
from .errors import SnapshotError
from .memo import Changes, Memo
from .plan import PodSetAssignment, PodSetRequest
from .quantity import common_divisor, format_quantity
from .parsing import parse_yaml
from .checks import admission_flavors, check_states, eviction, required_checks, retrying, multikueue_check
from .objects import Admission, CheckState, KueueWorkload, ResourceGroup, Namespace, Pod, PodSetAdmission, PodSetSpec
from .reasons import Reason, make_reason
from .quota import by_resource, nominal, quota_trees
from .podgroups import COSCHEDULING_QUEUE, WORKLOAD_PREFIX, group_queue, rfc3339
from .kueue_api import (ADMISSION_GATE, GROUP_LABEL, MANAGED_LABEL, POD_GROUP_LABEL, PREBUILT_LABEL, PRIORITY_CLASS_LABEL,
                        QUEUE_LABEL, RETRIABLE_ANNOTATION, ROLE_LABEL, SETS_ANNOTATION, TOTAL_ANNOTATION)
from .fields import INT32_LIMIT, Document, Fields
from .snapshot import Snapshot, parse_pod_shape, parse_topology_request

__all__ = ["Workload", "PodAction", "Workloads", "build_workloads", "MAX_ROLES", "WORKLOAD_UID_ANNOTATION"]

#: Recorded on each pod when it is ungated: the uid of the Workload whose admission it runs
#: under. A live pod whose recorded Workload is gone (or being deleted) belongs to a group that
#: ended: deleting the Workload is how a user declares a group failed (KEP-976).
WORKLOAD_UID_ANNOTATION = "clueue.dev/workload-uid"
MAX_ROLES = 8
# The most units the compiler lets one quota tree's amounts add up to (compiler._MAX_TOTAL).
_SOLVER_RANGE = 2**30
_TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Workload:
    """A unit of admission: all its pod sets are admitted together or not at all.

    ``pods`` lists, per pod set, the pods that belong to it (for plain pods); ``held`` holds the
    reasons that keep it from being considered (an incomplete group, ...); ``evict`` is why an
    admitted one is evicted whatever the solver decides (a queue drained, deactivated).
    """

    namespace: str
    name: str
    queue: str
    priority: int
    created: int  # what it is ordered by in its queue: its creation, or its requeue (KueueWorkload.requeued_at)
    pod_sets: tuple[PodSetSpec, ...]
    origin: str  # "pod", "pod-group" or "workload"
    pods: Mapping[str, tuple[Pod, ...]] = field(default_factory=dict)
    admission: Admission | None = None
    finished: bool = False
    held: tuple[Reason, ...] = ()
    evict: Reason | None = None
    reclaimable: Mapping[str, int] = field(default_factory=dict)  # pod set -> status.reclaimablePods of its object
    finish: Mapping[str, Any] = field(default_factory=dict)  # for finished pods: details of the Finished reason
    coscheduled: bool = False  # the gang of a coscheduling PodGroup (podgroups.py): ordered after lone pods
    # The admission checks its recorded admission requires, with their states (checks.py): while
    # one is not Ready its quota is only reserved, and its pods stay gated.
    checks: tuple[CheckState, ...] = ()
    confirmed: bool = False  # its Workload records Admitted=True
    # MultiKueue: its MultiKueue check (checks.multikueue_check), if any: it runs in the worker
    # its Workload's status.clusterName names, and its pods here are never ungated
    multikueue: str = ""
    cluster_name: str = ""
    prebuilt: bool = False  # its pods name its Workload (PREBUILT_LABEL): their Workload is someone else's
    kept_gated: tuple[Reason, ...] = ()  # why some of its pods stay gated even once it is admitted
    reserved: int = 0  # when its Workload's QuotaReserved condition turned True (0: unknown)

    # Derived once per workload object: every phase of a cycle looks workloads up by key, and a
    # Session spells out plan entries for the same pending workloads cycle after cycle.
    key: str = field(init=False, repr=False, compare=False)
    pod_refs: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)  # (name, uid), by name
    requests: tuple[PodSetRequest, ...] = field(init=False, repr=False, compare=False)  # pod sets as a plan shows them

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}")
        object.__setattr__(self, "pod_refs", tuple(sorted((p.name, p.uid) for pods in self.pods.values() for p in pods)))
        object.__setattr__(self, "requests", _pod_set_requests(
            tuple((ps.name, ps.count, tuple(ps.requests.items())) for ps in self.pod_sets)))

    @property
    def reserved_since(self) -> int:
        """When its quota was reserved, which orders it among preemption victims (Kueue takes the
        most recently admitted first): its QuotaReserved condition, else its creation."""
        return self.reserved or self.created

    def admitted_count(self, pod_set: str) -> int:
        """Pods of ``pod_set`` that hold quota: the admitted count less succeeded pods (or
        less the Workload's ``reclaimablePods``, if it counts more)."""
        if self.admission is None:
            return 0
        count = next((a.count for a in self.admission.pod_sets if a.name == pod_set), 0)
        spec = next((p.count for p in self.pod_sets if p.name == pod_set), 0)
        count = spec if count < 0 else count
        succeeded = sum(1 for p in self.pods.get(pod_set, ()) if p.phase == "Succeeded")
        return max(0, count - max(succeeded, self.reclaimable.get(pod_set, 0)))

    def held_admission(self) -> tuple[PodSetAssignment, ...]:
        """The admission this workload holds from before the cycle, each pod set's count
        resolved to the pods that still hold quota (:meth:`admitted_count` where it is unset)."""
        assert self.admission is not None
        return tuple(PodSetAssignment(a.name, a.count if a.count >= 0 else self.admitted_count(a.name), a.flavors)
                     for a in self.admission.pod_sets)

    def succeeded(self) -> tuple[tuple[str, int], ...]:
        """(pod set, succeeded pods) of each pod set with some: its reclaimable pods."""
        counts = ((name, sum(1 for p in pods if p.phase == "Succeeded")) for name, pods in sorted(self.pods.items()))
        return tuple((name, n) for name, n in counts if n)


@functools.lru_cache(maxsize=4096)
def _pod_set_requests(pod_sets: tuple[tuple[str, int, tuple[tuple[str, Fraction], ...]], ...]) -> tuple[PodSetRequest, ...]:
    # A backlog repeats a few shapes many times: build each shape's requests once.
    return tuple(PodSetRequest(name, count, {r: format_quantity(v) for r, v in requests})
                 for name, count, requests in pod_sets)


@dataclass(frozen=True)
class PodAction:
    """An action on one pod decided while building workloads: ``delete-pod`` (an excess pod, a
    pod of a group that ended) or ``finalize-pod`` (its finalizer removed)."""

    kind: str
    pod: Pod
    workload: str
    reason: Reason


@dataclass(frozen=True)
class Workloads:
    """The workloads of a cycle by key, and what changed in them since the memo's last cycle
    (everything, without a memory); the pod actions and notices that building them gave."""

    by_key: Mapping[str, Workload]
    actions: tuple[PodAction, ...]
    notices: tuple[str, ...]
    changes: Changes[str, Workload]

    @functools.cached_property
    def workloads(self) -> tuple[Workload, ...]:
        """Every workload, in key order."""
        return tuple(map(self.by_key.__getitem__, sorted(self.by_key)))


def build_workloads(snapshot: Snapshot, config: Config = Config(), memo: Memo | None = None) -> Workloads:
    """Build every workload of the snapshot; see the module docstring for the rules.

    With a ``memo`` (see memo.py), a Workload object seen in an earlier cycle, and not made
    of pods, yields the workload built from it then.
    """
    builder = _Builder(snapshot, config, memo or Memo(remember=False))
    return builder.build()


class _FromObjects:
    """Workloads built from Workload objects alone (not from pods), by key; kept from cycle to
    cycle by a Session (memo.py). An object owned by pods waits in ``orphans``: it is built
    from its pods when they exist."""

    def __init__(self) -> None:
        self.built: dict[str, Workload] = {}
        self.orphans: dict[str, KueueWorkload] = {}
        self.from_pods: set[str] = set()  # keys of the workloads built from pods last cycle

    def update(self, changes: Changes[str, KueueWorkload], build: Callable[[KueueWorkload], Workload]) -> None:
        for key in changes.gone:
            if self.built.pop(key, None) is None:
                del self.orphans[key]
        for key, obj in changes.new.items():
            if obj.owned_by_pods:
                self.orphans[key] = obj
            else:
                self.built[key] = build(obj)


def _youngest_first(pods: Iterable[Pod]) -> list[Pod]:
    return sorted(pods, key=lambda p: (p.created, p.name), reverse=True)


class _Builder:
    def __init__(self, snapshot: Snapshot, config: Config, memo: Memo) -> None:
        self.snap = snapshot
        self.config = config
        self.memo = memo
        self.actions: list[PodAction] = []
        self.notices: list[str] = []

    # -- priority --------------------------------------------------------------------------
    def _class_priority(self, workload_class: str | None, pod_class: str | None) -> int | None:
        if workload_class and workload_class in self.snap.workload_priority_classes:
            return self.snap.workload_priority_classes[workload_class].value
        if pod_class and pod_class in self.snap.priority_classes:
            return self.snap.priority_classes[pod_class].value
        return None

    def _default_priority(self) -> int:
        defaults = [pc.value for pc in self.snap.priority_classes.values() if pc.global_default]
        return max(defaults, default=0)

    def _pod_priority(self, pod: Pod) -> int:
        by_class = self._class_priority(pod.labels.get(PRIORITY_CLASS_LABEL), None)
        if by_class is not None:
            return by_class
        if pod.priority is not None:
            return pod.priority
        by_class = self._class_priority(None, pod.priority_class_name)
        return self._default_priority() if by_class is None else by_class

    # -- which pods are queued --------------------------------------------------------------
    def _namespace(self, name: str) -> Namespace:
        ns = self.snap.namespaces.get(name) or Namespace(name, {})
        return replace(ns, labels={**ns.labels, "kubernetes.io/metadata.name": name})

    def _queued(self, pod: Pod) -> bool:
        if QUEUE_LABEL not in pod.labels:
            return False
        if any(self.config.owner_is_managed(o) for o in pod.owner_kinds):
            return False
        if not self.config.effective_namespace_selector().matches(self._namespace(pod.namespace).labels):
            self.notices.append(f"pod {pod.namespace}/{pod.name}: namespace is excluded from queueing")
            return False
        return self.config.pod_selector.matches(pod.labels)

    def _coscheduled_without_queue(self, pod: Pod) -> bool:
        """Whether ``pod``, of a coscheduling PodGroup and without a queue name, is gang-scheduled
        by clueue (docs/podgroups.md): with ``podGroups.gangScheduleWithoutQueue`` on, as the
        webhook gates it (a controlling owner no other integration manages, a namespace the
        namespace selector selects, a pod ``podGroups.podSelector`` selects); and whatever the
        switch, once the webhook gated it (:data:`MANAGED_LABEL`): what clueue gated, it admits."""
        if QUEUE_LABEL in pod.labels or not pod.labels.get(POD_GROUP_LABEL):
            return False
        if any(self.config.owner_is_managed(o) for o in pod.owner_kinds):
            return False
        if pod.labels.get(MANAGED_LABEL) == "true":
            return True
        settings = self.config.pod_groups
        return settings.gang_schedule_without_queue and settings.pod_selector.matches(pod.labels) and \
            self.config.effective_namespace_selector().matches(self._namespace(pod.namespace).labels)

    # -- building ---------------------------------------------------------------------------
    def build(self) -> Workloads:
        singles: list[Pod] = []
        groups: dict[tuple[str, str], list[Pod]] = defaultdict(list)
        gangs: dict[tuple[str, str], list[Pod]] = defaultdict(list)  # coscheduling PodGroups
        prebuilt: dict[tuple[str, str], list[Pod]] = defaultdict(list)  # by the Workload they name
        for pod in self.snap.pods.values():
            if not self._queued(pod):
                if self._coscheduled_without_queue(pod):
                    gangs[(pod.namespace, pod.labels[POD_GROUP_LABEL])].append(pod)
                continue
            group = pod.labels.get(GROUP_LABEL)
            if pod.labels.get(PREBUILT_LABEL):
                prebuilt[(pod.namespace, pod.labels[PREBUILT_LABEL])].append(pod)
            elif group:
                groups[(pod.namespace, group)].append(pod)
            elif pod.labels.get(POD_GROUP_LABEL):
                gangs[(pod.namespace, pod.labels[POD_GROUP_LABEL])].append(pod)
            else:
                singles.append(pod)
        built: dict[str, Workload] = {}
        for pod in singles:
            single = self._single(pod)
            if single is not None:
                built[single.key] = single
        for (ns, group), pods in sorted(groups.items()):
            w = self._group(ns, group, pods)
            if w is not None:
                built[w.key] = w
        for (ns, group), pods in sorted(gangs.items()):
            w = self._gang(ns, group, pods)
            if w is not None:
                built[w.key] = w
        for (ns, name), pods in sorted(prebuilt.items()):
            w = self._prebuilt(ns, name, pods)
            if w is not None:
                built[w.key] = w
        self._hold_rejected(built)
        from_objects, changes = self.memo.track("workload", self.snap.workloads, _FromObjects)
        from_objects.update(changes, lambda obj: self._merge_object(None, obj))
        for key in built:
            obj = self.snap.workloads.get(key)
            built[key] = self._checked(built[key]) if obj is None else self._merge_object(built[key], obj)
        for key in sorted(from_objects.orphans.keys() - built.keys()):
            # e.g. a preempted group: admitting it would hold quota for nothing
            self.notices.append(f"workload {key}: the pods it was made for are gone; it is left for garbage collection")
        # A workload built from pods stands in for the one built from its object, if any. Only
        # keys whose object changed, or that were or are built from pods, can differ from last
        # cycle. In key order, which is nearly rank order within a shape: selection then sorts
        # the members of a first cycle's shapes in linear time.
        touched = sorted(changes.gone | changes.new.keys() | from_objects.from_pods | built.keys())
        from_objects.from_pods = set(built)
        everything, built_changes = self.memo.update(
            "built", touched, lambda key: built[key] if key in built else from_objects.built.get(key))
        # The memo changes its mapping next cycle, and this cycle's plan may be read after that.
        return Workloads(dict(everything), tuple(self.actions), tuple(self.notices), built_changes)

    def _hold_rejected(self, built: dict[str, Workload]) -> None:
        """Hold the workload of each object the snapshot rejected (a Workload, or a queued Pod)
        with an InvalidObject reason; one that holds an admission keeps it."""
        held: dict[str, list[Reason]] = defaultdict(list)
        for r in self.snap.rejected:
            ns = r.namespace or "default"
            if r.kind == "Workload" and r.name:
                key, queue, origin = f"{ns}/{r.name}", r.queue_name, "workload"
            elif r.kind == "Pod" and r.name and r.labels.get(QUEUE_LABEL) and r.labels.get(PREBUILT_LABEL):
                key, queue, origin = f"{ns}/{r.labels[PREBUILT_LABEL]}", r.labels[QUEUE_LABEL], "workload"
            elif r.kind == "Pod" and r.name and r.labels.get(QUEUE_LABEL):
                group = r.labels.get(GROUP_LABEL)
                key, queue, origin = f"{ns}/{group or 'pod-' + r.name}", r.labels[QUEUE_LABEL], "pod-group" if group else "pod"
            else:
                continue
            if key not in built:
                # Its requests are unknown: one pod of nothing, so that a Workload can record why.
                pod_sets = () if origin == "workload" else (PodSetSpec("main", 1, {}),)
                built[key] = Workload(namespace=ns, name=key.split("/", 1)[1], queue=queue, priority=0, created=0,
                                      pod_sets=pod_sets, origin=origin)
            held[key].append(make_reason("InvalidObject", kind=r.kind, name=f"{ns}/{r.name}", field=r.field,
                                         error=r.message))
        for key, reasons in held.items():
            built[key] = replace(built[key], held=tuple(reasons) + built[key].held)

    def _pod_set(self, name: str, pods: list[Pod]) -> PodSetSpec:
        first = min(pods, key=lambda p: p.name)
        return PodSetSpec(name, len(pods), first.requests, first.node_labels, first.tolerations, first.topology,
                          needs=first.needs)

    def _infer_admission(self, queue_ns: str, queue: str, pod_sets: Mapping[str, list[Pod]]) -> Admission:
        """Pods that run ungated were admitted before; find which flavors their selectors name.

        Per resource group the pods ask of: the first flavor whose node labels the selector
        holds, else the first whose labels contradict neither the selector nor the flavors
        chosen for the other groups (the pods still gated get all of their labels), else the
        first flavor."""
        lq = self.snap.local_queues.get(f"{queue_ns}/{queue}")
        cq = self.snap.cluster_queues.get(lq.cluster_queue) if lq else None
        assignments = []
        for name, pods in pod_sets.items():
            selector = dict(pods[0].node_selector) if pods else {}
            asked = {r for p in pods for r in p.requests}
            flavors: dict[str, str] = {}
            for group in cq.resource_groups if cq else ():
                names = [fq.flavor for fq in group.flavors if fq.flavor in self.snap.flavors]
                if not names or not asked & set(group.covered):
                    continue
                labels = {n: self.snap.flavors[n].node_labels for n in names}
                chosen = next((n for n in names if all(selector.get(k) == v for k, v in labels[n].items())), None) \
                    or next((n for n in names if all(selector.get(k, v) == v for k, v in labels[n].items())), names[0])
                selector = {**labels[chosen], **selector}
                flavors.update({r: chosen for r in group.covered})
            assignments.append(PodSetAdmission(name, flavors, len(pods)))
        return Admission(cq.name if cq else "", tuple(assignments))

    def _single(self, pod: Pod) -> Workload | None:
        """The workload of a single pod; None when it has none: a pod being deleted that does not
        run (Kueue's rule for when a deleted pod's quota is free again: it holds quota only while
        Running; one no kubelet runs, gated or not scheduled, has its finalizer removed so that
        the deletion completes, as Kueue does) or one whose Workload was deleted (:meth:`_ended`)."""
        key = f"{pod.namespace}/pod-{pod.name}"
        if self._ended(key, [pod]):
            return None
        gated = ADMISSION_GATE in pod.scheduling_gates
        terminal = pod.phase in _TERMINAL
        if pod.deleting and not terminal and (not pod.scheduled or pod.phase != "Running"):
            # Being deleted and not running (an evicted pod still Pending): it holds no quota,
            # as Kueue counts only Running pods active. Its kubelet, if any, ends it.
            if not pod.scheduled:
                self._finalize(pod, key, "PodDeleting")
            return None
        if terminal:
            self._finalize(pod, key, "WorkloadFinished")
        pod_sets = {"main": [pod]}
        return Workload(
            namespace=pod.namespace, name=f"pod-{pod.name}", queue=pod.labels[QUEUE_LABEL],
            priority=self._pod_priority(pod), created=pod.created,
            pod_sets=(self._pod_set("main", [pod]),), origin="pod", pods={"main": (pod,)},
            admission=None if gated or terminal else self._infer_admission(pod.namespace, pod.labels[QUEUE_LABEL], pod_sets),
            finished=terminal,
            finish={"outcome": pod.phase, "succeeded": int(pod.phase == "Succeeded"), "total": 1} if terminal else {},
        )

    def _finalize(self, pod: Pod, workload: str, code: str, **details: Any) -> None:
        """A ``finalize-pod`` action for ``pod``, if it still holds the finalizer."""
        if pod.finalizer:
            self.actions.append(PodAction("finalize-pod", pod, workload, make_reason(code, workload=workload, **details)))

    def _ended(self, key: str, pods: list[Pod]) -> bool:
        """Whether the group (or single pod) of workload ``key`` ended because its Workload was
        deleted; if so, its live pods get ``delete-pod`` actions and the others ``finalize-pod``.

        The rule: its live pods (not terminated, not being deleted), or its terminated pods if
        none is live, record the uid of the Workload they were ungated for; that Workload is
        gone, being deleted, or another one (same name, other uid) stands in its place. A group
        whose Workload is not created yet, or whose pods were never ungated, records none, so it
        never ends this way; neither do pods ungated by another tool, which record no uid.
        """
        live = [p for p in pods if p.phase not in _TERMINAL and not p.deleting]
        recorded = {p.annotations.get(WORKLOAD_UID_ANNOTATION, "") for p in live or pods} - {""}
        if not recorded or key in self._rejected_workloads:
            return False  # a Workload clueue cannot read is not a deleted one: its pods are kept
        obj = self.snap.workloads.get(key)
        if obj is not None and not obj.deleting and (obj.uid in recorded or not obj.uid):
            return False
        reason = make_reason("WorkloadDeleted", workload=key)
        running = {id(p) for p in live}
        for pod in pods:
            if id(pod) in running:
                self.actions.append(PodAction("delete-pod", pod, key, reason))
            elif pod.finalizer:
                self.actions.append(PodAction("finalize-pod", pod, key, reason))
        return True

    def _finalize_group(self, key: str, pods: list[Pod], finished: bool, admitted: bool,
                        role_of: Callable[[Pod], str | None], counts: Mapping[str, int]) -> None:
        """``finalize-pod`` actions for the pods of group ``key`` that no longer matter (KEP-976):
        terminated ones once the group finished or its Workload is being deleted; ones being
        deleted that no kubelet runs (gated, or not scheduled) or whose group holds no
        admission; failed ones that a pod its Workload owns replaces. Per pod set of ``counts`` pods (``role_of`` a
        pod), as Kueue counts it: as many failed pods are kept as the pod set lacks owned live
        pods, those that failed last (by when they stopped running, else by creation): a new pod
        replaces the pod that failed first.
        """
        obj = self.snap.workloads.get(key)
        ending = obj is not None and obj.deleting
        for pod in pods:
            if pod.phase in _TERMINAL and (finished or ending):
                self._finalize(pod, key, "WorkloadFinished" if finished else "WorkloadDeleted")
            elif pod.deleting and pod.phase not in _TERMINAL and (not pod.scheduled or not admitted):
                self._finalize(pod, key, "PodDeleting")
        if finished or ending or obj is None:
            return  # without a Workload, no pod is owned: a replacement is not known to be adopted
        owned = set(obj.owners)
        for role, count in sorted(counts.items()):
            members = [p for p in pods if role_of(p) == role]
            live = sum(1 for p in members if p.phase != "Failed" and not p.deleting and p.uid in owned)
            failed = sorted((p for p in members if p.phase == "Failed" and p.finalizer),
                            key=lambda p: (p.ended, p.created, p.name), reverse=True)
            replaced = min(len(failed), len(failed) + live - count)
            for pod in failed[len(failed) - replaced:] if replaced > 0 else ():
                self._finalize(pod, key, "PodReplaced", podSet=role)

    def _gang(self, ns: str, name: str, pods: list[Pod]) -> Workload | None:
        """The workload of a coscheduling PodGroup's queued pods (podgroups.py): a pod group of
        ``max(minMember, pods that exist)`` pods, created when its PodGroup was (the seed's
        QueueSort), held while the PodGroup is missing or backing off after a release."""
        pg = self.snap.pod_groups.get(f"{ns}/{name}")
        active = [p for p in pods if p.phase != "Failed" and not p.deleting]
        # its pods' queue, else its PodGroup's; without one, the built-in queue of no quota
        queue = next((p.labels[QUEUE_LABEL] for p in sorted(pods, key=lambda p: p.name) if QUEUE_LABEL in p.labels),
                     "") or (group_queue(pg, []) if pg else "") or COSCHEDULING_QUEUE
        w = self._group(ns, WORKLOAD_PREFIX + name, pods, total=max(pg.min_member if pg else 1, len(active), 1),
                        created=pg.created if pg else None, queue=queue)
        if w is None:
            return None
        w = replace(w, coscheduled=True)
        if pg is None and w.admission is None and not w.finished:
            bad = next((r for r in self.snap.rejected if r.kind == "PodGroup" and r.name == name
                        and (r.namespace or "default") == ns), None)
            reason = make_reason("PodGroupNotFound", group=f"{ns}/{name}") if bad is None else make_reason(
                "InvalidObject", kind="PodGroup", name=f"{ns}/{name}", field=bad.field, error=bad.message)
            return replace(w, held=(reason,) + w.held)
        if pg is not None and pg.backoff_until and w.admission is None and not w.finished:
            return replace(w, held=(make_reason("PodGroupBackoff", group=f"{ns}/{name}", requeues=pg.requeues,
                                                until=rfc3339(pg.backoff_until)),) + w.held)
        return w

    def _group(self, ns: str, group: str, all_pods: list[Pod], total: int | None = None,
               created: int | None = None, queue: str = "") -> Workload | None:
        """A Kueue pod group; ``total``, ``created`` (and ``queue``) stand in for its pods'
        annotation, their latest creation time (and their queue-name label) for a coscheduling
        PodGroup's gang."""
        if self._ended(f"{ns}/{group}", all_pods):
            return None
        active = [p for p in all_pods if p.phase != "Failed" and not p.deleting]
        queue = queue or sorted(all_pods, key=lambda p: p.name)[0].labels[QUEUE_LABEL]
        base = dict(namespace=ns, name=group, queue=queue, origin="pod-group",
                    priority=max(self._pod_priority(p) for p in all_pods),
                    created=max(p.created for p in all_pods) if created is None else created)
        obj = self.snap.workloads.get(f"{ns}/{group}")
        sets_pod = next((p for p in sorted(all_pods, key=lambda p: p.name) if SETS_ANNOTATION in p.annotations), None)
        if sets_pod is not None and total is None:
            return self._group_from_sets(group, sets_pod, all_pods, base)

        totals = [str(total)] if total is not None else \
            sorted({p.annotations.get(TOTAL_ANNOTATION, "") for p in active or all_pods})
        if len(totals) > 1:
            return self._unshaped(base, all_pods, make_reason("GroupCountMismatch", group=group, counts=totals))
        try:
            total = int(totals[0])
            if not 1 <= total < INT32_LIMIT:
                raise ValueError
        except ValueError:
            return self._unshaped(base, all_pods, make_reason("InvalidGroupCount", group=group, value=totals[0]))

        finished = _group_finished(all_pods, total)
        admitted = obj is not None and obj.admission is not None
        kept = self._drop_excess(group, active, total, per_role=None if not admitted else obj.admission)
        roles: dict[str, list[Pod]] = defaultdict(list)
        for pod in kept:
            roles[pod.role_hash].append(pod)
        pod_sets = tuple(self._pod_set(name, roles[name]) for name in sorted(roles))
        pods = {name: tuple(sorted(roles[name], key=lambda p: p.name)) for name in sorted(roles)}
        held: tuple[Reason, ...] = ()
        if len(roles) > MAX_ROLES:
            held = (make_reason("TooManyRoles", group=group, roles=len(roles), limit=MAX_ROLES),)
        elif len(kept) < total and not finished:
            held = (make_reason("GroupIncomplete", group=group, pods=len(kept), total=total),)
        ungated = [p for p in kept if ADMISSION_GATE not in p.scheduling_gates and p.phase not in _TERMINAL]
        admission = None
        if ungated and not finished:
            admission = self._infer_admission(ns, queue, roles)
        if obj is not None and obj.admission is not None:
            counts = {a.name: a.count if a.count >= 0 else len(roles.get(a.name, ())) for a in obj.admission.pod_sets}
        else:
            counts = {name: len(members) for name, members in roles.items()}
        self._finalize_group(f"{ns}/{group}", all_pods, finished, admitted or admission is not None,
                             lambda p: p.role_hash, counts)
        return Workload(**base, pod_sets=pod_sets, pods=pods, admission=admission, finished=finished,
                        held=() if admission else held, finish=_finish(all_pods, total) if finished else {})

    def _prebuilt(self, ns: str, name: str, pods: list[Pod]) -> Workload | None:
        """The workload of pods labelled ``prebuilt-workload-name: name`` (single pods or a group):
        the Workload object of that name, which someone else made (MultiKueue's manager), with
        each pod in the pod set its role hash names (the only one, if it has one pod set), as
        Kueue's pod integration uses a prebuilt Workload. Its pods wait, gated, while it does not
        exist; a pod whose pod set, requests or count do not match it stays gated, with a
        ``PrebuiltWorkloadMismatch`` reason, and holds back a Workload not admitted yet. None if
        the Workload its pods ran under is gone (:meth:`_ended`)."""
        key = f"{ns}/{name}"
        if self._ended(key, pods):
            return None
        obj = self.snap.workloads.get(key)
        by_name = sorted(pods, key=lambda p: p.name)
        if obj is None:
            return Workload(namespace=ns, name=name, queue=by_name[0].labels[QUEUE_LABEL],
                            priority=max(self._pod_priority(p) for p in pods), created=max(p.created for p in pods),
                            pod_sets=(self._pod_set("main", by_name),), origin="workload", pods={"main": tuple(by_name)},
                            prebuilt=True, held=(make_reason("PrebuiltWorkloadNotFound", workload=key,
                                                             pods=[p.name for p in by_name]),))
        members, mismatches = _match_prebuilt(key, obj.pod_sets, pods)
        matched = [p for ps in members.values() for p in ps]
        total = sum(ps.count for ps in obj.pod_sets)
        finished, finish = False, {}
        if obj.admission is not None and matched:
            if any(GROUP_LABEL in p.labels for p in pods):
                finished, finish = _group_finished(matched, total), _finish(matched, total)
            else:  # single pods: finished when all are, failed if one failed (as a single pod's workload)
                succeeded = sum(1 for p in matched if p.phase == "Succeeded")
                finished = all(p.phase in _TERMINAL for p in matched)
                finish = {"outcome": "Succeeded" if succeeded == len(matched) else "Failed",
                          "succeeded": succeeded, "total": total}
        pod_set_of = {p.uid or p.name: ps for ps, group in members.items() for p in group}
        self._finalize_group(key, pods, finished, obj.admission is not None,
                             lambda p: pod_set_of.get(p.uid or p.name), {ps.name: ps.count for ps in obj.pod_sets})
        priority = self._object_priority(obj)
        return Workload(namespace=ns, name=name, queue=obj.queue_name, priority=priority, created=obj.created,
                        pod_sets=obj.pod_sets, origin="workload", pods={n: tuple(sorted(g, key=lambda p: p.name))
                                                                        for n, g in members.items()},
                        finished=finished, finish=finish if finished else {}, prebuilt=True,
                        held=mismatches, kept_gated=mismatches)

    def _object_priority(self, obj: KueueWorkload) -> int:
        """A Workload's priority: its own, else its class's, else the default class's."""
        if obj.priority is not None:
            return obj.priority
        by_class = self._class_priority(obj.priority_class, obj.priority_class)
        return self._default_priority() if by_class is None else by_class

    def _unshaped(self, base: dict[str, Any], pods: list[Pod], reason: Reason) -> Workload:
        """A group whose shape cannot be told, held: one pod set of the pods it has, so that a
        Workload owned by them can record why (the API requires a pod set)."""
        members = tuple(sorted(pods, key=lambda p: p.name))
        return Workload(**base, pod_sets=(self._pod_set("main", list(members)),), pods={"main": members},
                        held=(reason,))

    def _group_from_sets(self, group: str, sets_pod: Pod, all_pods: list[Pod], base: dict[str, Any]) -> Workload:
        try:
            entries = _parse_group_sets(sets_pod)
        except (ValueError, SnapshotError) as e:
            return self._unshaped(base, all_pods, make_reason("InvalidPodGroupSets", group=group, error=str(e)))
        finished = _group_finished(all_pods, sum(count for count, _ in entries.values()))
        active = [p for p in all_pods if p.phase != "Failed" and not p.deleting]
        own = [name for name, (_, spec) in entries.items() if spec is None]
        roles: dict[str, list[Pod]] = defaultdict(list)

        def role_of(pod: Pod) -> str | None:
            return pod.labels.get(ROLE_LABEL) or (own[0] if own and pod.name == sets_pod.name else None)

        for pod in active:
            role = role_of(pod)
            if role not in entries:
                self.notices.append(f"pod {pod.namespace}/{pod.name}: role {role!r} is not declared by the "
                                    f"pod-group-sets of group {group}; it stays gated")
                continue
            roles[role].append(pod)
        pod_sets = []
        pods: dict[str, tuple[Pod, ...]] = {}
        for name, (count, spec) in entries.items():
            members = roles.get(name, [])
            for extra in _youngest_first(members)[:max(0, len(members) - count)]:
                self._delete(extra, group, count)
                members.remove(extra)
            shape = spec or PodSetSpec(name, count, sets_pod.requests, sets_pod.node_labels, sets_pod.tolerations,
                                       sets_pod.topology, needs=sets_pod.needs)
            pod_sets.append(replace(shape, name=name, count=count))
            pods[name] = tuple(sorted(members, key=lambda p: p.name))
        ungated = [p for ps in pods.values() for p in ps if ADMISSION_GATE not in p.scheduling_gates and p.phase not in _TERMINAL]
        admission = None
        if ungated and not finished:
            admission = self._infer_admission(sets_pod.namespace, base["queue"], {n: list(p) or [sets_pod] for n, p in pods.items()})
            admission = replace(admission, pod_sets=tuple(replace(a, count=e[0]) for a, e in zip(admission.pod_sets, entries.values())))
        key = f"{base['namespace']}/{group}"
        obj = self.snap.workloads.get(key)
        self._finalize_group(key, all_pods, finished, admission is not None or (obj is not None and obj.admission is not None),
                             role_of, {name: count for name, (count, _) in entries.items()})
        return Workload(**base, pod_sets=tuple(pod_sets), pods=pods, admission=admission, finished=finished,
                        finish=_finish(all_pods, sum(count for count, _ in entries.values())) if finished else {})

    def _drop_excess(self, group: str, active: list[Pod], total: int, per_role: Admission | None) -> list[Pod]:
        """Delete the youngest pods beyond the declared total (per role once admitted)."""
        kept = list(active)
        if per_role is None:
            for extra in _youngest_first(kept)[:max(0, len(kept) - total)]:
                self._delete(extra, group, total)
                kept.remove(extra)
            return kept
        for assignment in per_role.pod_sets:
            members = [p for p in kept if p.role_hash == assignment.name]
            for extra in _youngest_first(members)[:max(0, len(members) - assignment.count)]:
                self._delete(extra, group, total)
                kept.remove(extra)
        return kept

    def _delete(self, pod: Pod, group: str, total: int) -> None:
        self.actions.append(PodAction("delete-pod", pod, f"{pod.namespace}/{group}",
                                      make_reason("ExcessPod", group=group, total=total)))

    def _merge_object(self, built: Workload | None, obj: KueueWorkload) -> Workload:
        """A Workload object is authoritative for admission; pods built it, or it stands alone."""
        checks = self._check_states(obj)
        remote = dict(multikueue=multikueue_check(checks, self.snap.admission_checks), cluster_name=obj.cluster_name)
        if obj.admission is None and obj.active:
            retry = retrying(obj.checks, evicted=False)
            if retry is not None:  # a check asks to retry: not considered while it does
                w = self._merge_object(built, replace(obj, checks=()))
                return replace(w, held=w.held + (retry,))
        # a requeued one is ordered by when it was requeued (Kueue's requeuingStrategy.timestamp)
        settings = self.snap.kueue_settings.wait_for_pods_ready
        requeued = obj.requeued_at(settings.requeuing_timestamp if settings else "Eviction")
        if built is not None:
            return self._checked(replace(built, created=requeued or built.created,
                                      admission=obj.admission or built.admission,
                                      finished=built.finished or obj.finished, reclaimable=obj.reclaimable,
                                      held=() if obj.admission else built.held, checks=checks,
                                      confirmed=obj.admitted, reserved=obj.reserved_at, **remote), obj.active)
        return self._checked(Workload(
            namespace=obj.namespace, name=obj.name, queue=obj.queue_name,
            priority=self._object_priority(obj), created=requeued or obj.created,
            pod_sets=obj.pod_sets, origin="workload", admission=obj.admission, finished=obj.finished,
            reclaimable=obj.reclaimable, checks=checks, confirmed=obj.admitted, reserved=obj.reserved_at, **remote,
        ), obj.active)

    def _check_states(self, obj: KueueWorkload) -> tuple[CheckState, ...]:
        """The checks the quota reservation of ``obj`` requires (those of its ClusterQueue for the
        flavors it holds), with the states it records (checks.py); none without a reservation.
        Of an admitted one only those it records: a check added to its ClusterQueue since does
        not hold back what runs (Kueue), though a Retry or Rejected state still evicts it."""
        if obj.admission is None:
            return ()
        cq = self.snap.cluster_queues.get(obj.admission.cluster_queue)
        required = required_checks(cq, admission_flavors(obj.admission))
        if obj.admitted:
            required = tuple(n for n in required if n in {c.name for c in obj.checks})
        return check_states(obj, required)

    def _checked(self, w: Workload, active: bool = True) -> Workload:
        """:meth:`_stop`, then :meth:`_beyond_its_tree`, :meth:`_in_an_unknown_tree` and
        :meth:`_never_complete`."""
        return self._never_complete(self._in_an_unknown_tree(self._beyond_its_tree(self._stop(w, active))))

    @functools.cached_property
    def _rejected_workloads(self) -> frozenset[str]:
        """``namespace/name`` of the Workload objects the snapshot left out as malformed."""
        return frozenset(f"{r.namespace or 'default'}/{r.name}" for r in self.snap.rejected if r.kind == "Workload")

    @functools.cached_property
    def _trees(self) -> tuple[dict[str, str], dict[str, list[ResourceGroup]]]:
        """:func:`quota_trees` of the snapshot, once per build."""
        return quota_trees(self.snap)

    @functools.cached_property
    def _unknown_trees(self) -> dict[str, Reason]:
        """Quota tree -> why its usage is unknown: a rejected object in it may hold quota (an
        admitted Workload, a started Pod), and counting none for it could over-commit the tree."""
        tree_of, _ = self._trees
        out: dict[str, Reason] = {}
        for r in self.snap.rejected:
            if not r.holds_quota:
                continue
            queue = r.queue_name if r.kind == "Workload" else r.labels.get(QUEUE_LABEL, "")
            lq = self.snap.local_queues.get(f"{r.namespace or 'default'}/{queue}")
            cq = r.admitted_in or (lq.cluster_queue if lq else "")
            if cq in tree_of:
                out.setdefault(tree_of[cq], make_reason("QuotaUnknown", clusterQueue=cq,
                                                        object=f"{r.kind} {r.namespace or 'default'}/{r.name}"))
        return out

    def _in_an_unknown_tree(self, w: Workload) -> Workload:
        """Hold a pending workload whose quota tree's usage is unknown (:attr:`_unknown_trees`)."""
        if not self.snap.rejected or w.admission is not None or w.finished or w.held:
            return w
        lq = self.snap.local_queues.get(f"{w.namespace}/{w.queue}")
        tree = self._trees[0].get(lq.cluster_queue) if lq else None
        reason = self._unknown_trees.get(tree) if tree else None
        return w if reason is None else replace(w, held=(reason,))

    def _never_complete(self, w: Workload) -> Workload:
        """Say so of an incomplete pod group that could never be admitted once complete: with
        every pod its count declares, it would ask more of a resource than its whole quota tree
        holds. The pods still to come are counted at the smallest request of the pods there (their
        roles are unknown yet), so the need stated is the least the complete group asks."""
        incomplete = next((r for r in w.held if r.code == "GroupIncomplete"), None)
        lq = self.snap.local_queues.get(f"{w.namespace}/{w.queue}") if incomplete else None
        tree = self._tree_quota.get(lq.cluster_queue) if lq else None
        if incomplete is None or lq is None or tree is None:
            return w
        missing = incomplete.details["total"] - incomplete.details["pods"]
        totals = tree[0]
        for r in sorted(totals):
            need = sum((ps.requests.get(r, Fraction(0)) * ps.count for ps in w.pod_sets), Fraction(0)) \
                + missing * min((ps.requests.get(r, Fraction(0)) for ps in w.pod_sets), default=Fraction(0))
            if need > totals[r]:
                return replace(w, held=w.held + (make_reason(
                    "GroupNeverFits", group=incomplete.details["group"], total=incomplete.details["total"],
                    clusterQueue=lq.cluster_queue, resource=r, need=format_quantity(need),
                    quota=format_quantity(totals[r])),))
        return w

    @functools.cached_property
    def _tree_quota(self) -> dict[str, tuple[dict[str, Fraction], dict[str, Fraction], dict[str, float]]]:
        """ClusterQueue -> the nominal quota of its whole quota tree, the largest quantity
        dividing every quota of it, and that quota as a float a little short, per resource."""
        tree_of, groups = self._trees
        totals = {tree: by_resource(nominal(tree_groups)) for tree, tree_groups in groups.items()}
        steps: dict[str, dict[str, Fraction]] = defaultdict(dict)
        for tree, tree_groups in groups.items():
            for g in tree_groups:
                for fq in g.flavors:
                    for r, q in fq.resources.items():
                        if q.nominal:
                            steps[tree][r] = common_divisor((steps[tree].get(r, q.nominal), q.nominal))
        # A float a little below the total: whatever a float of the asks rounds, less is surely less.
        return {cq: (totals[tree], steps[tree], {r: float(q) * (1 - 1e-9) for r, q in totals[tree].items()})
                for cq, tree in tree_of.items()}

    def _beyond_its_tree(self, w: Workload) -> Workload:
        """Hold a pending workload that asks more of a resource than its whole quota tree holds,
        by so much that the solver's 32-bit integers could not count it beside the tree's quotas
        (``count: 2147483647`` pods of 1m cpu): it can never be admitted, and left in the solve it
        would make the tree's unit so coarse that its quotas round to nothing, or overflow."""
        if w.admission is not None or w.finished or w.held:
            return w
        lq = self.snap.local_queues.get(f"{w.namespace}/{w.queue}")
        tree = self._tree_quota.get(lq.cluster_queue) if lq else None
        if tree is None:
            return w
        totals, steps, roughly = tree
        rough: dict[str, float] = {}
        for ps in w.pod_sets:  # in floats first: nearly every workload asks far less than its tree holds
            for r, v in ps.requests.items():
                rough[r] = rough.get(r, 0.0) + ps.count * (v.numerator / v.denominator)
        if all(need < roughly.get(r, 0.0) for r, need in rough.items()):
            return w
        asks: dict[str, Fraction] = defaultdict(Fraction)
        for ps in w.pod_sets:
            for r, v in ps.requests.items():
                asks[r] += v * ps.count
        for r, need in sorted(asks.items()):
            quota = totals.get(r, Fraction(0))
            # counted exactly, the unit divides the tree's quotas and this workload's requests
            finest = common_divisor([steps.get(r, Fraction(0)), *(ps.requests.get(r, Fraction(0)) for ps in w.pod_sets)])
            if need > quota and need / finest > _SOLVER_RANGE:
                return replace(w, held=(make_reason("ExceedsQuotaTree", clusterQueue=lq.cluster_queue, resource=r,
                                                    need=format_quantity(need), quota=format_quantity(quota)),))
        return w

    def _stop(self, w: Workload, active: bool = True) -> Workload:
        """Kueue's switches that stop a workload. Deactivated (``spec.active: false``), it is held,
        or evicted if admitted; admitted through a LocalQueue or in a ClusterQueue stopped with
        HoldAndDrain, it is evicted; so is one whose admission check asks to retry or rejects
        it (checks.py). (Stopped queues admit nothing new: eligibility.lp.)"""
        if w.finished:
            return w
        if not active:
            reason = make_reason("Deactivated")
            return replace(w, evict=reason) if w.admission else replace(w, held=w.held + (reason,))
        if w.admission is None:
            return w
        lq = self.snap.local_queues.get(f"{w.namespace}/{w.queue}")
        if lq is not None and lq.stop_policy == "HoldAndDrain":
            return replace(w, evict=make_reason("LocalQueueDrained", namespace=w.namespace, localQueue=w.queue))
        cq = self.snap.cluster_queues.get(w.admission.cluster_queue)
        if cq is not None and cq.stop_policy == "HoldAndDrain":
            return replace(w, evict=make_reason("ClusterQueueDrained", clusterQueue=cq.name))
        failed = eviction(w.checks)
        return w if failed is None else replace(w, evict=failed)


def _match_prebuilt(key: str, pod_sets: tuple[PodSetSpec, ...], pods: list[Pod]
                    ) -> tuple[dict[str, list[Pod]], tuple[Reason, ...]]:
    """The pods of prebuilt Workload ``key`` by the pod set each belongs to, oldest first, and a
    ``PrebuiltWorkloadMismatch`` reason for each that belongs to none: its role hash names no pod
    set (and there are several), it requests other resources than its pod set, or it is beyond
    its pod set's count (the youngest live ones are)."""
    index = {ps.name: i for i, ps in enumerate(pod_sets)}
    members: dict[str, list[Pod]] = defaultdict(list)
    mismatches: list[Reason] = []

    def mismatch(pod: Pod, field: str, why: str) -> None:
        mismatches.append(make_reason("PrebuiltWorkloadMismatch", pod=f"{pod.namespace}/{pod.name}", workload=key,
                                      field=field, why=why))

    for pod in sorted(pods, key=lambda p: (p.created, p.name)):
        name = pod.role_hash if pod.role_hash in index else pod_sets[0].name if len(pod_sets) == 1 else None
        if name is None:
            mismatch(pod, "metadata.annotations[kueue.x-k8s.io/role-hash]",
                     f"its role {pod.role_hash} names none of the pod sets {', '.join(index)}")
            continue
        i, ps = index[name], pod_sets[index[name]]
        asks, per_pod = _nonzero(pod.requests), _nonzero(ps.requests)
        if asks != per_pod:
            mismatch(pod, f"spec.podSets[{i}].template (pod set {name})",
                     f"the pod requests {_show(asks)}, a pod of the pod set {_show(per_pod)}")
            continue
        live = sum(1 for p in members[name] if p.phase != "Failed" and not p.deleting)
        if pod.phase != "Failed" and not pod.deleting and live >= ps.count:
            mismatch(pod, f"spec.podSets[{i}].count (pod set {name})",
                     f"the pod set has {ps.count} pod(s), and this one is in excess")
            continue
        members[name].append(pod)
    return members, tuple(mismatches)


def _nonzero(requests: Mapping[str, Fraction]) -> dict[str, Fraction]:
    return {r: q for r, q in requests.items() if q}


def _show(requests: Mapping[str, Fraction]) -> str:
    return ", ".join(f"{r} {format_quantity(q)}" for r, q in sorted(requests.items())) or "nothing"


def _group_finished(pods: list[Pod], total: int) -> bool:
    """A group is finished when no pod is pending or running and either ``total`` pods
    succeeded or a terminated pod says ``retriable-in-group: false``."""
    if any(p.phase not in _TERMINAL for p in pods):
        return False
    stop = any(p.annotations.get(RETRIABLE_ANNOTATION) == "false" for p in pods)
    return stop or sum(1 for p in pods if p.phase == "Succeeded") >= total


def _finish(pods: list[Pod], total: int) -> dict[str, Any]:
    """The Finished reason's details for a finished group. Kueue records a finished group as
    ``Succeeded`` whatever its pods' phases (``Pods succeeded: n/total``), and so does clueue."""
    return {"outcome": "Succeeded", "succeeded": sum(1 for p in pods if p.phase == "Succeeded"), "total": total}


def _parse_group_sets(pod: Pod) -> dict[str, tuple[int, PodSetSpec | None]]:
    """Parse ``pod-group-sets``: a YAML or JSON list of ``{name, count, template}``."""
    raw = parse_yaml(pod.annotations[SETS_ANNOTATION], f"Pod {pod.namespace}/{pod.name}: {SETS_ANNOTATION}")
    if not isinstance(raw, list) or not raw:
        raise ValueError("expected a non-empty list of pod sets")
    entries: dict[str, tuple[int, PodSetSpec | None]] = {}
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ValueError(f"entry {i} needs a name")
        count = entry.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count < INT32_LIMIT:
            raise ValueError(f"entry {entry['name']!r} needs a positive 32-bit integer count")
        spec = None
        template = entry.get("template")
        if template:
            doc = Document(pod.source, {"metadata": {"name": pod.name, "namespace": pod.namespace}})
            f = Fields(doc, "Pod")
            path = f"metadata.annotations[{SETS_ANNOTATION}][{i}].template"
            shape = parse_pod_shape(f, f"{path}.spec", f.mapping(path, template).get("spec"))
            meta = f.mapping(f"{path}.metadata", f.mapping(path, template).get("metadata"))
            annotations = f.string_map(f"{path}.metadata.annotations", meta.get("annotations"))
            spec = PodSetSpec(entry["name"], count, shape.requests, shape.node_labels, shape.tolerations,
                              parse_topology_request(f, f"{path}.metadata.annotations", annotations),
                              needs=shape.needs)
        entries[entry["name"]] = (count, spec)
    return entries
