"""The typed objects of a snapshot: frozen dataclasses converted from Kubernetes payloads.

Only the fields clueue decides on are kept. Names follow Kueue's public API (kueue.x-k8s.io
v1beta1 and v1beta2) and core Kubernetes; both API versions load into the same types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Mapping

__all__ = [
    "LabelSelector", "Requirement", "Taint", "Toleration", "NodeLabelRequirement",
    "NodeSelectorRequirement", "NodeSelectorTerm", "PodAffinityTerm", "NodeNeeds",
    "Namespace", "Node", "PriorityClass", "WorkloadPriorityClass", "ResourceFlavor",
    "ResourceQuota", "FlavorQuotas", "ResourceGroup", "ClusterQueue", "Cohort", "LocalQueue",
    "PodSetSpec", "PodSetAdmission", "Admission", "KueueWorkload", "Pod", "PodGroupSetEntry",
    "PodGroup", "Rejected", "MultiKueueCluster", "STOP_POLICIES", "Topology", "TopologyRequest",
    "AdmissionCheck", "CheckRule", "PodSetUpdate", "CheckState", "CHECK_STATES",
]

Resources = Mapping[str, Fraction]

#: A queue's ``spec.stopPolicy`` (Kueue): None admits; Hold admits nothing new; HoldAndDrain
#: also evicts what it admitted.
STOP_POLICIES = ("None", "Hold", "HoldAndDrain")


@dataclass(frozen=True)
class Requirement:
    """One ``matchExpressions`` entry of a label selector."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        return not present  # DoesNotExist


@dataclass(frozen=True)
class LabelSelector:
    """A Kubernetes label selector; the empty selector matches everything."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            r.matches(labels) for r in self.match_expressions
        )


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class Toleration:
    key: str
    operator: str  # Equal or Exists
    value: str
    effect: str  # "" tolerates every effect


@dataclass(frozen=True)
class NodeLabelRequirement:
    """A pod asks for nodes whose label ``key`` has one of ``values`` (nodeSelector or affinity)."""

    key: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class NodeSelectorRequirement:
    """One ``matchExpressions`` (on a node's labels) or ``matchFields`` (on ``metadata.name``)
    entry of a node selector term, with Kubernetes' operators."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt (matchFields: In, NotIn)
    values: tuple[str, ...] = ()

    def matches(self, value: str | None) -> bool:
        """Whether a node whose ``key`` is ``value`` (None: it has no such label) satisfies it.
        Gt and Lt compare integers; a missing or non-integer label never satisfies them."""
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        if self.operator == "DoesNotExist":
            return value is None
        try:
            have = int(value or "")
        except ValueError:
            return False
        bound = int(self.values[0])  # one integer: checked when read (snapshot.py)
        return have > bound if self.operator == "Gt" else have < bound


@dataclass(frozen=True)
class NodeSelectorTerm:
    """One of a required node affinity's ``nodeSelectorTerms``: all its expressions (on labels)
    and fields (on the node's name) hold. An empty term selects no node (Kubernetes' rule)."""

    expressions: tuple[NodeSelectorRequirement, ...] = ()
    fields: tuple[NodeSelectorRequirement, ...] = ()

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if not self.expressions and not self.fields:
            return False
        return all(r.matches(labels.get(r.key)) for r in self.expressions) and \
            all(r.matches(name) for r in self.fields)


@dataclass(frozen=True)
class PodAffinityTerm:
    """A required pod (anti-)affinity term: pods matching ``selector`` in ``namespaces``, or in
    the namespaces ``namespace_selector`` selects (with neither: the pod's own namespace), on
    nodes alike in ``topology_key``."""

    selector: LabelSelector | None  # None matches no pod
    namespaces: tuple[str, ...]
    namespace_selector: LabelSelector | None
    topology_key: str


@dataclass(frozen=True)
class NodeNeeds:
    """What a pod asks of its node besides resources and tolerations (docs/placement.md):
    ``node_selector`` and the required node affinity's terms (ORed; None: no affinity), the
    host ports it binds as (protocol, port), its required pod anti-affinity and pod affinity
    terms, and its own labels (which other pods' terms may match). The default asks nothing."""

    node_selector: tuple[tuple[str, str], ...] = ()
    terms: tuple[NodeSelectorTerm, ...] | None = None
    host_ports: tuple[tuple[str, int], ...] = ()
    anti_affinity: tuple[PodAffinityTerm, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    affinity: tuple[PodAffinityTerm, ...] = ()

    def selects(self, name: str, labels: Mapping[str, str]) -> bool:
        """Whether node ``name`` with ``labels`` passes the node selector and the required node
        affinity (both must hold; of the affinity's terms one suffices)."""
        return all(labels.get(k) == v for k, v in self.node_selector) and (
            self.terms is None or any(t.matches(name, labels) for t in self.terms))

    def label_keys(self) -> frozenset[str]:
        """The node label keys :meth:`selects` looks at."""
        return frozenset(k for k, _ in self.node_selector) | frozenset(
            r.key for t in self.terms or () for r in t.expressions)

    @property
    def asked(self) -> tuple[object, ...]:
        """What it asks, without what it is (its labels): pod sets alike in this and in all
        else are decided alike, unless another pod's anti-affinity tells their labels apart."""
        return (self.node_selector, self.terms, self.host_ports, self.anti_affinity, self.affinity)

    def node_names(self) -> frozenset[str]:
        """The node names :meth:`selects` looks at (``matchFields`` on ``metadata.name``)."""
        return frozenset(v for t in self.terms or () for r in t.fields for v in r.values)


@dataclass(frozen=True)
class Namespace:
    name: str
    labels: Mapping[str, str]


@dataclass(frozen=True)
class Node:
    name: str
    labels: Mapping[str, str]
    allocatable: Resources
    taints: tuple[Taint, ...]
    unschedulable: bool


@dataclass(frozen=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool


@dataclass(frozen=True)
class WorkloadPriorityClass:
    name: str
    value: int


@dataclass(frozen=True)
class ResourceFlavor:
    name: str
    node_labels: Mapping[str, str]
    node_taints: tuple[Taint, ...]
    topology_name: str = ""  # spec.topologyName: its nodes are placed topology-aware ("" none)


@dataclass(frozen=True)
class Topology:
    """A Kueue ``Topology``: the node labels of its levels, from the highest (e.g. block) to the
    lowest (e.g. ``kubernetes.io/hostname``); docs/placement.md."""

    name: str
    levels: tuple[str, ...]


@dataclass(frozen=True)
class TopologyRequest:
    """A pod set's topology annotation: ``mode`` is ``required``, ``preferred`` or
    ``unconstrained``; ``level`` the node label of the level asked for ("" if unconstrained);
    with slices, every ``slice_size`` pods in one domain of ``slice_level``."""

    mode: str
    level: str = ""
    slice_level: str = ""  # kueue.x-k8s.io/podset-slice-required-topology ("" none)
    slice_size: int = 0  # kueue.x-k8s.io/podset-slice-size


@dataclass(frozen=True)
class ResourceQuota:
    nominal: Fraction
    borrowing_limit: Fraction | None = None
    lending_limit: Fraction | None = None


@dataclass(frozen=True)
class FlavorQuotas:
    flavor: str
    resources: Mapping[str, ResourceQuota]


@dataclass(frozen=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


#: The states of an admission check on a Workload (``status.admissionChecks[].state``).
CHECK_STATES = ("Pending", "Ready", "Retry", "Rejected")


@dataclass(frozen=True)
class AdmissionCheck:
    """A ``kueue.x-k8s.io`` AdmissionCheck: a gate run by ``controller`` after quota is reserved."""

    name: str
    controller: str  # spec.controllerName
    parameters: tuple[str, str, str] | None  # spec.parameters (apiGroup, kind, name)
    active: bool  # its Active condition is True: the controller evaluates it


@dataclass(frozen=True)
class CheckRule:
    """An admission check a ClusterQueue requires, for workloads using one of ``on_flavors``
    (every workload when empty): ``spec.admissionChecks`` or ``spec.admissionChecksStrategy``."""

    name: str
    on_flavors: tuple[str, ...] = ()


@dataclass(frozen=True)
class PodSetUpdate:
    """What a check asks to add to the pods of one pod set before they start."""

    name: str  # the pod set
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, object], ...] = ()  # as written: they are copied to pods unchanged


@dataclass(frozen=True)
class CheckState:
    """One entry of a Workload's ``status.admissionChecks``."""

    name: str
    state: str  # one of CHECK_STATES
    message: str = ""
    pod_set_updates: tuple[PodSetUpdate, ...] = ()


@dataclass(frozen=True)
class ClusterQueue:
    name: str
    cohort: str | None
    resource_groups: tuple[ResourceGroup, ...]
    namespace_selector: LabelSelector | None  # None: no namespace is selected
    queueing_strategy: str  # BestEffortFIFO or StrictFIFO
    when_can_borrow: str  # Borrow or TryNextFlavor
    when_can_preempt: str  # Preempt or TryNextFlavor
    stop_policy: str  # one of STOP_POLICIES
    within_cluster_queue: str = "Never"  # preemption: Never, LowerPriority or LowerOrNewerEqualPriority
    reclaim_within_cohort: str = "Never"  # preemption: Never, LowerPriority or Any
    borrow_within_cohort: str = "Never"  # preemption while borrowing: Never or LowerPriority
    borrow_max_priority: int | None = None  # borrowWithinCohort.maxPriorityThreshold
    admission_checks: tuple[CheckRule, ...] = ()  # checks its workloads pass after quota reservation
    fair_weight: Fraction = Fraction(1)  # spec.fairSharing.weight (docs/fair-sharing.md)
    admission_scope: str = ""  # spec.admissionScope.admissionMode ("": none)

    @property
    def stopped(self) -> bool:
        """Admits nothing new (Hold or HoldAndDrain)."""
        return self.stop_policy != "None"


@dataclass(frozen=True)
class Cohort:
    name: str
    parent: str | None
    resource_groups: tuple[ResourceGroup, ...]
    fair_weight: Fraction = Fraction(1)  # spec.fairSharing.weight (docs/fair-sharing.md)


@dataclass(frozen=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str
    stop_policy: str = "None"  # one of STOP_POLICIES
    fair_weight: Fraction = Fraction(1)  # spec.fairSharing.weight: admission fair sharing (docs/fair-sharing.md)
    # status.fairSharing.admissionFairSharingStatus.consumedResources: the usage it consumed (decayed)
    consumed: Resources = field(default_factory=dict)
    # ...and its lastUpdate (seconds since the epoch; 0: no such status): engine/admission_usage.py
    consumed_at: int = 0

    @property
    def stopped(self) -> bool:
        """Admits nothing new (Hold or HoldAndDrain)."""
        return self.stop_policy != "None"


@dataclass(frozen=True)
class PodSetSpec:
    """A set of identical pods: ``count`` pods, each requesting ``requests``."""

    name: str
    count: int
    requests: Resources
    node_labels: tuple[NodeLabelRequirement, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology: TopologyRequest | None = None  # its topology annotation, if any
    needs: NodeNeeds = NodeNeeds()  # what placement on nodes checks besides (docs/placement.md)


@dataclass(frozen=True)
class PodSetAdmission:
    name: str
    flavors: Mapping[str, str]  # resource -> flavor
    count: int


@dataclass(frozen=True)
class Admission:
    cluster_queue: str
    pod_sets: tuple[PodSetAdmission, ...]


@dataclass(frozen=True)
class KueueWorkload:
    """A ``kueue.x-k8s.io`` Workload object."""

    namespace: str
    name: str
    queue_name: str
    priority: int | None
    priority_class: str | None
    pod_sets: tuple[PodSetSpec, ...]
    admission: Admission | None
    finished: bool
    created: int
    reclaimable: Mapping[str, int] = field(default_factory=dict)
    owned_by_pods: bool = False  # made for plain pods: it stands for them and ends with them
    active: bool = True  # spec.active: false keeps it from being admitted and evicts it
    labels: Mapping[str, str] = field(default_factory=dict)  # metadata.labels, for `clueue plan -l`
    uid: str = ""  # metadata.uid: the pods ungated for it record it (a group whose Workload is gone has ended)
    deleting: bool = False  # metadata.deletionTimestamp is set
    owners: tuple[str, ...] = ()  # uids of the Pods among its ownerReferences, sorted
    checks: tuple[CheckState, ...] = ()  # status.admissionChecks, by name
    admitted: bool = False  # its Admitted condition is True (quota reserved and every check Ready)
    # MultiKueue (docs/dispatch.md): status.clusterName (the worker that admitted it), and
    # status.nominatedClusterNames (the workers a dispatcher chose for its copies)
    cluster_name: str = ""
    nominated_clusters: tuple[str, ...] = ()
    reserved_at: int = 0  # when its QuotaReserved condition turned True (seconds since the epoch; 0: not reserved)
    # waitForPodsReady (podsready.py): its PodsReady condition (None: absent), when that last
    # changed and Kueue's reason for it; status.requeueState (count, requeueAt: 0 if unset)
    pods_ready: bool | None = None
    pods_ready_since: int = 0
    pods_ready_reason: str = ""
    requeue_count: int = 0
    requeue_at: int = 0
    # its Evicted condition while True (it stays so until quota is reserved again): Kueue's
    # reason (PodsReadyTimeout, AdmissionCheck, Preempted...) and when it turned True
    evicted_reason: str = ""
    evicted_at: int = 0

    def requeued_at(self, requeuing_timestamp: str) -> int:
        """When it was put back in its queue by an eviction that orders it anew there, as
        Kueue orders a queue (its GetQueueOrderTimestamp; docs/pods-ready.md): the time of its
        eviction by an admission check, or by waitForPodsReady's timeout when
        ``requeuingStrategy.timestamp`` (``requeuing_timestamp``) is ``Eviction``; 0 otherwise
        (it is ordered by its creation, ``Creation`` keeping its place of before)."""
        timed = self.evicted_reason == "PodsReadyTimeout" and requeuing_timestamp == "Eviction"
        return self.evicted_at if timed or self.evicted_reason == "AdmissionCheck" else 0


@dataclass(frozen=True)
class PodGroupSetEntry:
    """One role declared by the ``kueue.x-k8s.io/pod-group-sets`` annotation."""

    name: str
    count: int
    template: Mapping[str, object] | None  # a pod template; None: the annotated pod's own spec


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    created: int
    phase: str
    deleting: bool
    scheduling_gates: tuple[str, ...]
    owner_kinds: tuple[str, ...]  # "group/Kind" of controlling owners
    priority: int | None
    priority_class_name: str | None
    requests: Resources
    node_labels: tuple[NodeLabelRequirement, ...]
    node_selector: Mapping[str, str]
    tolerations: tuple[Toleration, ...]
    role_hash: str
    source: str = field(default="", compare=False, repr=False)  # where it was read, for messages only
    finalizer: bool = False  # holds the finalizer kueue.x-k8s.io/managed (so it is still tracked)
    ended: int = 0  # when a terminated pod stopped running (seconds since the epoch), 0 if unknown
    scheduled: bool = False  # spec.nodeName is set: a kubelet will see it end
    node_name: str = ""  # spec.nodeName: the node it is bound to (placement counts its requests there)
    controller_uid: str = ""  # metadata.uid of its controlling owner, if any (a PodGroup's occupiedBy)
    topology: TopologyRequest | None = None  # its topology annotation (kueue.x-k8s.io/podset-*-topology)
    needs: NodeNeeds = NodeNeeds()  # node selection, host ports, pod anti-affinity (placement.py)
    ready: bool = False  # its Ready condition is True (waitForPodsReady: podsready.py)


@dataclass(frozen=True)
class PodGroup:
    """A coscheduling ``PodGroup`` (scheduling.x-k8s.io/v1alpha1): ``min_member`` pods that are
    placed together or not at all (docs/podgroups.md)."""

    namespace: str
    name: str
    uid: str
    created: int
    min_member: int
    min_resources: Resources
    schedule_timeout: int | None  # spec.scheduleTimeoutSeconds
    labels: Mapping[str, str]
    phase: str  # status.phase as recorded ("" if never written)
    schedule_start: int  # status.scheduleStartTime, seconds since the epoch (0 if unset)
    requeues: int = 0  # annotation clueue.dev/requeues: how often the group was released
    backoff_until: int = 0  # annotation clueue.dev/backoff-until: held until then (epoch seconds; 0: not held)


@dataclass(frozen=True)
class MultiKueueCluster:
    """A ``kueue.x-k8s.io`` MultiKueueCluster: a worker cluster of MultiKueue (docs/dispatch.md)."""

    name: str
    active: bool  # its Active condition is True: the manager is connected to it
    labels: Mapping[str, str] = field(default_factory=dict)  # metadata.labels, for dispatch policies


@dataclass(frozen=True)
class Rejected:
    """An object clueue could not use, left out of a snapshot read from a live cluster.

    Its kind, names and labels are what could be read of it ("" where even they could not).
    """

    kind: str
    api_version: str
    namespace: str  # "" for cluster-scoped objects
    name: str
    uid: str
    source: str
    field: str  # the field at fault ("" for the whole object)
    message: str
    labels: Mapping[str, str] = field(default_factory=dict)
    queue_name: str = ""  # spec.queueName, for a Workload
    # It may hold quota, how much is unknown: a Workload with a status.admission, or a queued
    # Pod that runs or may run (no admission gate, not terminated)
    holds_quota: bool = False
    admitted_in: str = ""  # the ClusterQueue its admission names, if readable

    def to_dict(self) -> dict[str, str]:
        """As a plan lists it (docs/plan-format.md)."""
        return {"kind": self.kind, "apiVersion": self.api_version, "namespace": self.namespace, "name": self.name,
                "uid": self.uid, "source": self.source, "field": self.field, "message": self.message}
