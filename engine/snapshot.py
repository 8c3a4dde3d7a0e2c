"""The snapshot: every object of one cluster state, validated and typed, immutable.

:func:`build_snapshot` turns raw documents (already read from files or the API by an adapter)
into a :class:`Snapshot`. A malformed object raises :class:`SnapshotError` naming the file,
the object and the field; an unknown kind is skipped with a notice.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import abc
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import Any, Iterable, Mapping

from .errors import SnapshotError
from .fields import AT_PATH, INT32_LIMIT, Document, Fields
from .memo import Changes, Memo
from .quota import cohort_cycles
from .objects import (
    Admission, AdmissionCheck, MultiKueueCluster, CheckRule, CheckState, ClusterQueue, Cohort, FlavorQuotas, KueueWorkload, LabelSelector, LocalQueue,
    Namespace, Node, NodeLabelRequirement, Pod, PodGroup, PodSetAdmission, PodSetSpec, PriorityClass,
    NodeNeeds, NodeSelectorRequirement, NodeSelectorTerm, PodAffinityTerm,
    Rejected, Requirement, ResourceFlavor, ResourceGroup, ResourceQuota, Taint, Toleration, Topology,
    TopologyRequest, WorkloadPriorityClass, STOP_POLICIES, CHECK_STATES, PodSetUpdate,
)
from .kueueconfig import KUEUE_CONFIG_MAP, KueueSettings, parse_kueue_config_map
from .kueue_api import (
    ADMISSION_GATE, HOSTNAME_LABEL, KUEUE_GROUP, KUEUE_PREFIX, POD_FINALIZER, SCHEDULING_GROUP, SCHEDULING_VERSIONS,
    ROLE_HASH_ANNOTATION, SLICE_SIZE_ANNOTATION, SLICE_TOPOLOGY_ANNOTATION, TOPOLOGY_MODES, topology_annotation,
)

# Document is re-exported: it is what build_snapshot reads (Fields and INT32_LIMIT live in fields.py).
__all__ = ["Document", "Snapshot", "REQUEUES_ANNOTATION", "BACKOFF_ANNOTATION", "build_snapshot", "WorkerView",
           "parse_selector", "PodShape", "parse_pod_shape", "parse_topology_request"]

# Kept on a PodGroup by clueue: its status schema has no room for them (unknown fields are pruned).
REQUEUES_ANNOTATION = "clueue.dev/requeues"
BACKOFF_ANNOTATION = "clueue.dev/backoff-until"




@dataclass(frozen=True)
class Snapshot:
    """An immutable, typed cluster state. Objects are keyed by name (``namespace/name``)."""

    namespaces: Mapping[str, Namespace] = field(default_factory=dict)
    nodes: Mapping[str, Node] = field(default_factory=dict)
    priority_classes: Mapping[str, PriorityClass] = field(default_factory=dict)
    workload_priority_classes: Mapping[str, WorkloadPriorityClass] = field(default_factory=dict)
    flavors: Mapping[str, ResourceFlavor] = field(default_factory=dict)
    cluster_queues: Mapping[str, ClusterQueue] = field(default_factory=dict)
    cohorts: Mapping[str, Cohort] = field(default_factory=dict)
    local_queues: Mapping[str, LocalQueue] = field(default_factory=dict)
    workloads: Mapping[str, KueueWorkload] = field(default_factory=dict)
    pods: Mapping[str, Pod] = field(default_factory=dict)
    pod_groups: Mapping[str, PodGroup] = field(default_factory=dict)
    topologies: Mapping[str, Topology] = field(default_factory=dict)
    admission_checks: Mapping[str, AdmissionCheck] = field(default_factory=dict)
    multikueue_configs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # name -> spec.clusters
    multikueue_clusters: Mapping[str, MultiKueueCluster] = field(default_factory=dict)
    # what the manager knows of each worker cluster's own objects (docs/dispatch.md), by name
    workers: Mapping[str, WorkerView] = field(default_factory=dict)
    # Kueue's Configuration, by ConfigMap (only kueue-system/kueue-manager-config holds any: kueueconfig.py)
    kueue_configs: Mapping[str, KueueSettings] = field(default_factory=dict)
    notices: tuple[str, ...] = ()
    rejected: tuple[Rejected, ...] = ()  # malformed objects left out (lenient snapshots only)

    def configuration(self) -> tuple[Mapping[str, Any], ...]:
        """Every object except workloads and pods: what queues, quotas and priorities are."""
        return (self.namespaces, self.nodes, self.priority_classes, self.workload_priority_classes,
                self.flavors, self.cluster_queues, self.cohorts, self.local_queues, self.topologies,
                self.admission_checks, self.kueue_configs)

    @property
    def kueue_settings(self) -> KueueSettings:
        """The fair sharing sections of Kueue's Configuration in the snapshot (none if absent)."""
        return self.kueue_configs.get(KUEUE_CONFIG_MAP, KueueSettings())

    def digest(self, memo: Memo | None = None) -> str:
        """A stable digest of the snapshot's content, for decision logs and plans.

        The sum of one hash per object: independent of order, so that with a ``memo`` (memo.py)
        a cycle hashes only the objects that changed since the last one.
        """
        memo = memo or Memo(remember=False)
        total = 0
        for kind in _DIGESTED:
            hashes, changes = memo.track("digest/" + kind, getattr(self, kind), _Hashes)
            total += hashes.update(changes)
        total += sum(map(_object_hash, self.rejected))  # they decide their workloads' reasons too
        return "sha256:" + hashlib.sha256(str(total).encode()).hexdigest()[:16]


class _Hashes:
    """The hash of each object of one kind, by key, and their sum."""

    def __init__(self) -> None:
        self.by_key: dict[str, int] = {}
        self.total = 0

    def update(self, changes: Changes[str, object]) -> int:
        """Bring the hashes up to date; returns their sum."""
        for key in changes.gone:
            self.total -= self.by_key.pop(key)
        for key, obj in changes.new.items():
            self.by_key[key] = h = _object_hash(obj)
            self.total += h
        return self.total


def _object_hash(obj: object) -> int:
    # The repr names the object's type and every field, its name and namespace among them.
    return int.from_bytes(hashlib.sha256(repr(obj).encode()).digest()[:16], "big")


@dataclass(frozen=True)
class WorkerView:
    """One worker cluster of MultiKueue as the manager last read it (docs/dispatch.md): its own
    queues, quotas, workloads and nodes, as last heard from at ``observed_at`` (epoch seconds;
    a controller's watch-fed view) or ``age`` seconds before any cycle (a snapshot from files).
    Which workers exist and whether they are Active is told by the manager's MultiKueueCluster
    objects.

    The view holds the time it was observed, not its age at a cycle: the age changes every
    second, so a view holding it would change the snapshot's digest (and a decision log's
    record of it) every cycle while nothing changed. The cycle's ``now`` gives the age
    (:meth:`age_at`)."""

    name: str
    snapshot: Snapshot
    age: int = 0  # seconds since it was read, when no observed_at tells it
    observed_at: float | None = None  # epoch seconds the worker was last heard from

    def age_at(self, now: int | None) -> int:
        """Seconds since the view was observed, at ``now`` (epoch seconds); ``age`` when the
        view has no observation time or no ``now`` is given.

        >>> WorkerView("w1", Snapshot(), observed_at=1000.5).age_at(1030)
        29
        """
        if self.observed_at is None or now is None:
            return self.age
        return max(0, int(now - self.observed_at))


_DIGESTED = ("namespaces", "nodes", "priority_classes", "workload_priority_classes", "flavors",
             "cluster_queues", "cohorts", "local_queues", "workloads", "pods", "pod_groups", "topologies",
             "admission_checks", "multikueue_configs", "multikueue_clusters", "workers", "kueue_configs")




# --------------------------------------------------------------------------------------------
# Shared pieces of several kinds
# --------------------------------------------------------------------------------------------

def parse_selector(f: Fields, path: str, value: Any = AT_PATH) -> LabelSelector | None:
    raw = f.get(path) if value is AT_PATH else value
    if raw is None:
        return None
    f.typed(path, raw, abc.Mapping, "a label selector")
    exprs = []
    for p, e in f.objects(f"{path}.matchExpressions", raw.get("matchExpressions")):
        op = e.get("operator")
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise f.fail(f"{p}.operator", f"expected In, NotIn, Exists or DoesNotExist, got {op!r}")
        key = f.string(f"{p}.key", "", e.get("key")) or ""
        exprs.append(Requirement(key, op, f.strings(f"{p}.values", e.get("values"))))
    labels = f.string_map(f"{path}.matchLabels", raw.get("matchLabels"))
    return LabelSelector(tuple(sorted(labels.items())), tuple(exprs))


def _taints(f: Fields, path: str, value: Any) -> tuple[Taint, ...]:
    out = []
    for p, t in f.objects(path, value):
        if not t.get("key") or t.get("effect") not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise f.fail(p, "a taint needs a key and an effect of NoSchedule, PreferNoSchedule or NoExecute")
        out.append(Taint(f.string(f"{p}.key", value=t["key"]) or "", f.string(f"{p}.value", "", t.get("value")) or "",
                         t["effect"]))
    return tuple(out)


def _tolerations(f: Fields, path: str, value: Any) -> tuple[Toleration, ...]:
    out = []
    for p, t in f.objects(path, value):
        op = t.get("operator") or "Equal"
        if op not in ("Equal", "Exists"):
            raise f.fail(f"{p}.operator", f"expected Equal or Exists, got {op!r}")
        text = {k: f.string(f"{p}.{k}", "", t.get(k)) or "" for k in ("key", "value", "effect")}
        out.append(Toleration(text["key"], op, text["value"], text["effect"]))
    return tuple(out)


@dataclass(frozen=True)
class PodShape:
    """What admission needs from a pod spec: per-pod requests, node label asks and tolerations."""

    requests: Mapping[str, Fraction]
    node_selector: Mapping[str, str]
    node_labels: tuple[NodeLabelRequirement, ...]
    tolerations: tuple[Toleration, ...]
    needs: NodeNeeds = NodeNeeds()  # for placement on nodes (docs/placement.md)


def parse_pod_shape(f: Fields, path: str, spec: Any) -> PodShape:
    """Read a pod spec's effective requests, node label requirements and tolerations.

    The effective request follows Kubernetes: the sum over containers (and sidecar init
    containers), at least the largest regular init container, plus the pod overhead. A
    container's limit stands in for a missing request, as the API server defaults it.
    """
    spec = f.typed(path, spec if spec is not None else {}, abc.Mapping, "a pod spec")

    def container_requests(p: str, c: Mapping[str, Any]) -> dict[str, Fraction]:
        res = f.mapping(f"{p}.resources", c.get("resources"))
        req = f.resources(f"{p}.resources.requests", res.get("requests"))
        for k, v in f.resources(f"{p}.resources.limits", res.get("limits")).items():
            req.setdefault(k, v)
        return req

    total: dict[str, Fraction] = {}
    for p, c in f.objects(f"{path}.containers", spec.get("containers")):
        for k, v in container_requests(p, c).items():
            total[k] = total.get(k, Fraction(0)) + v
    sidecars: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for p, c in f.objects(f"{path}.initContainers", spec.get("initContainers")):
        req = container_requests(p, c)
        if c.get("restartPolicy") == "Always":
            for k, v in req.items():
                sidecars[k] = sidecars.get(k, Fraction(0)) + v
        else:
            for k, v in req.items():  # a regular init container runs beside the sidecars before it
                init_peak[k] = max(init_peak.get(k, Fraction(0)), v + sidecars.get(k, Fraction(0)))
    for k, v in sidecars.items():
        total[k] = total.get(k, Fraction(0)) + v
    for k, v in init_peak.items():
        total[k] = max(total.get(k, Fraction(0)), v)
    for k, v in f.resources(f"{path}.overhead", spec.get("overhead")).items():
        total[k] = total.get(k, Fraction(0)) + v

    selector = f.string_map(f"{path}.nodeSelector", spec.get("nodeSelector"))
    asks = {k: (v,) for k, v in selector.items()}
    affinity = spec.get("affinity")
    if affinity is not None:
        for key, values in _required_node_labels(f, f"{path}.affinity", affinity).items():
            asks[key] = tuple(v for v in values if v in asks[key]) if key in asks else values
    return PodShape(
        requests={k: v for k, v in sorted(total.items()) if v > 0},
        node_selector=selector,
        node_labels=tuple(NodeLabelRequirement(k, v) for k, v in sorted(asks.items())),
        tolerations=_tolerations(f, f"{path}.tolerations", spec.get("tolerations")),
        needs=_node_needs(f, path, spec, selector),
    )


_NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _node_requirements(f: Fields, path: str, value: Any, *, fields: bool) -> tuple[NodeSelectorRequirement, ...]:
    """The ``matchExpressions`` (or with ``fields``, ``matchFields``) of a node selector term,
    validated as the API server does, and Gt/Lt values as the integers kube-scheduler needs."""
    out = []
    for p, e in f.objects(path, value):
        key = f.string(f"{p}.key", "", e.get("key")) or ""
        op = e.get("operator")
        values = f.strings(f"{p}.values", e.get("values"))
        allowed = ("In", "NotIn") if fields else _NODE_OPERATORS
        if op not in allowed:
            raise f.fail(f"{p}.operator", f"expected {', '.join(allowed[:-1])} or {allowed[-1]}, got {op!r}")
        if fields and key != "metadata.name":
            raise f.fail(f"{p}.key", f"matchFields supports only metadata.name, got {key!r}")
        if fields and len(values) != 1:
            raise f.fail(f"{p}.values", f"matchFields with {op} takes exactly one node name")
        if op in ("In", "NotIn") and not values:
            raise f.fail(f"{p}.values", f"{op} needs at least one value")
        if op in ("Exists", "DoesNotExist") and values:
            raise f.fail(f"{p}.values", f"{op} takes no values")
        if op in ("Gt", "Lt"):
            if len(values) != 1 or not values[0].lstrip("+-").isdigit():
                raise f.fail(f"{p}.values", f"{op} takes exactly one integer value, got {list(values)!r}")
        out.append(NodeSelectorRequirement(key, op, values))
    return tuple(out)


def _pod_affinity_terms(f: Fields, path: str, value: Any) -> tuple[PodAffinityTerm, ...]:
    out = []
    for p, t in f.objects(path, value):
        key = f.string(f"{p}.topologyKey", "", t.get("topologyKey")) or ""
        if not key:
            raise f.fail(f"{p}.topologyKey", "a pod affinity term needs a topologyKey")
        out.append(PodAffinityTerm(parse_selector(f, f"{p}.labelSelector", t.get("labelSelector")),
                                   tuple(sorted(f.strings(f"{p}.namespaces", t.get("namespaces")))),
                                   parse_selector(f, f"{p}.namespaceSelector", t.get("namespaceSelector")), key))
    return tuple(out)


def _node_needs(f: Fields, path: str, spec: Mapping[str, Any], selector: Mapping[str, str]) -> NodeNeeds:
    """What a pod spec at ``path`` asks of its node for placement (objects.NodeNeeds): node
    selector, required node affinity, host ports (of containers and sidecar init containers)
    and required pod anti-affinity and affinity."""
    affinity = f.mapping(f"{path}.affinity", spec.get("affinity"))
    required = f.mapping(f"{path}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
                         f.mapping(f"{path}.affinity.nodeAffinity", affinity.get("nodeAffinity"))
                         .get("requiredDuringSchedulingIgnoredDuringExecution"))
    terms = None
    if required:
        at = f"{path}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        terms = tuple(NodeSelectorTerm(_node_requirements(f, f"{p}.matchExpressions", t.get("matchExpressions"),
                                                          fields=False),
                                       _node_requirements(f, f"{p}.matchFields", t.get("matchFields"), fields=True))
                      for p, t in f.objects(at, required.get("nodeSelectorTerms")))
    ports = set()
    containers = [*f.objects(f"{path}.containers", spec.get("containers")),
                  *((p, c) for p, c in f.objects(f"{path}.initContainers", spec.get("initContainers"))
                    if c.get("restartPolicy") == "Always")]
    for p, c in containers:
        for pp, port in f.objects(f"{p}.ports", c.get("ports")):
            number = f.integer(f"{pp}.hostPort", 0, port.get("hostPort")) or 0
            if number > 0:
                ports.add((f.string(f"{pp}.protocol", "TCP", port.get("protocol")) or "TCP", number))
    kinds = {}
    for kind in ("podAntiAffinity", "podAffinity"):
        required = f.mapping(f"{path}.affinity.{kind}", affinity.get(kind)).get(
            "requiredDuringSchedulingIgnoredDuringExecution")
        kinds[kind] = _pod_affinity_terms(f, f"{path}.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution",
                                          required)
    return NodeNeeds(tuple(sorted(selector.items())), terms, tuple(sorted(ports)), kinds["podAntiAffinity"],
                     affinity=kinds["podAffinity"])


def parse_topology_request(f: Fields, path: str, annotations: Mapping[str, str]) -> TopologyRequest | None:
    """A pod set's topology annotation (Kueue's ``kueue.x-k8s.io/podset-<mode>-topology``), read
    from the ``annotations`` at ``path`` (a pod's, or a pod template's); None if it has none.
    The modes exclude each other; ``unconstrained`` takes ``"true"`` or ``"false"``, the others
    the node label of a level. Slices (``podset-slice-required-topology`` and ``podset-slice-size``)
    go with ``required`` or ``preferred``, as Kueue validates them."""
    found = [(mode, annotations[topology_annotation(mode)]) for mode in TOPOLOGY_MODES
             if topology_annotation(mode) in annotations]
    slices = SLICE_TOPOLOGY_ANNOTATION
    if not found:
        if slices in annotations:
            raise f.fail(f"{path}[{slices}]", f"needs {topology_annotation('required')} or "
                         f"{topology_annotation('preferred')} beside it")
        return None
    if len(found) > 1:
        raise f.fail(path, "only one of " + ", ".join(topology_annotation(m) for m, _ in found)
                     + " may be set")
    mode, value = found[0]
    where = f"{path}[{topology_annotation(mode)}]"
    if mode == "unconstrained":
        if value not in ("true", "false"):
            raise f.fail(where, f"expected \"true\" or \"false\", got {value!r}")
        return TopologyRequest(mode) if value == "true" else None
    if not value:
        raise f.fail(where, "expected the node label of a topology level (e.g. cloud.provider.com/topology-rack)")
    if slices not in annotations:
        return TopologyRequest(mode, value)
    size_key = SLICE_SIZE_ANNOTATION
    size = annotations.get(size_key, "")
    if not annotations[slices]:
        raise f.fail(f"{path}[{slices}]", "expected the node label of a topology level")
    if not size.isdigit() or not 1 <= int(size) < INT32_LIMIT:
        raise f.fail(f"{path}[{size_key}]", f"expected a positive integer beside {slices}, got {size!r}")
    return TopologyRequest(mode, value, annotations[slices], int(size))


def _required_node_labels(f: Fields, path: str, affinity: Any) -> dict[str, tuple[str, ...]]:
    """Node label values a required node affinity asks for (``In`` expressions of its one term)."""
    node = f.mapping(path, affinity)
    for part in ("nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"):
        path = f"{path}.{part}"
        node = f.mapping(path, node.get(part))
    terms = f.objects(f"{path}.nodeSelectorTerms", node.get("nodeSelectorTerms"))
    asks: dict[str, tuple[str, ...]] = {}
    if len(terms) == 1:  # several terms are alternatives (OR): no single label is required
        term_path, term = terms[0]
        for p, e in f.objects(f"{term_path}.matchExpressions", term.get("matchExpressions")):
            values = f.strings(f"{p}.values", e.get("values"))
            key = f.string(f"{p}.key", "", e.get("key")) or ""
            if e.get("operator") == "In":
                asks[key] = tuple(v for v in values if v in asks[key]) if key in asks else values
    return asks


def role_hash(body: Mapping[str, Any]) -> str:
    """The pod's role: a hash of the fields relevant to admission and scheduling (KEP-976)."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}

    def containers(key: str) -> list[Any]:
        return [{"image": c.get("image"), "requests": (c.get("resources") or {}).get("requests"),
                 "ports": c.get("ports")} for c in spec.get(key) or [] if isinstance(c, abc.Mapping)]

    shape = {
        "labels": {k: v for k, v in (meta.get("labels") or {}).items() if not k.startswith(KUEUE_PREFIX)},
        "initContainers": containers("initContainers"),
        "containers": containers("containers"),
        **{k: spec.get(k) for k in ("nodeSelector", "affinity", "tolerations", "runtimeClassName",
                                    "priority", "preemptionPolicy", "topologySpreadConstraints",
                                    "overhead", "resourceClaims")},
    }
    return hashlib.sha256(json.dumps(shape, sort_keys=True, default=str).encode()).hexdigest()[:8]


# --------------------------------------------------------------------------------------------
# One parser per kind
# --------------------------------------------------------------------------------------------

def _pod(f: Fields) -> Pod:
    shape = parse_pod_shape(f, "spec", f.get("spec"))
    owners = []
    controller_uid = ""
    for p, o in f.objects("metadata.ownerReferences", f.meta.get("ownerReferences")):
        if f.flag(f"{p}.controller", value=o.get("controller")):
            group = (f.string(f"{p}.apiVersion", "", o.get("apiVersion")) or "").rpartition("/")[0]
            owners.append(f"{group}/{f.string(f'{p}.kind', value=o.get('kind'))}")
            controller_uid = f.string(f"{p}.uid", "", o.get("uid")) or ""
    gates = tuple(f.string(f"{p}.name", "", g.get("name")) or "" for p, g in f.objects("spec.schedulingGates"))
    labels = f.string_map("metadata.labels", f.meta.get("labels"))
    annotations = f.string_map("metadata.annotations", f.meta.get("annotations"))
    try:
        role = annotations.get(ROLE_HASH_ANNOTATION) or role_hash(f.doc.body)
    except (TypeError, ValueError) as e:  # e.g. keys of different types, which JSON cannot sort
        raise f.fail("spec", f"cannot be hashed into a pod role: {e}") from None
    return Pod(
        namespace=f.namespace, name=f.name, uid=f.string("metadata.uid", "") or "",
        labels=labels, annotations=annotations, created=f.timestamp(),
        phase=f.string("status.phase", "Pending") or "Pending",
        deleting=f.meta.get("deletionTimestamp") is not None, scheduling_gates=gates,
        owner_kinds=tuple(owners), priority=f.integer("spec.priority"),
        priority_class_name=f.string("spec.priorityClassName"), requests=shape.requests,
        node_labels=shape.node_labels, node_selector=shape.node_selector,
        tolerations=shape.tolerations, role_hash=role, source=f.doc.source,
        topology=parse_topology_request(f, "metadata.annotations", annotations),
        needs=dataclasses.replace(shape.needs, labels=tuple(sorted(labels.items()))),
        finalizer=POD_FINALIZER in f.strings("metadata.finalizers", f.meta.get("finalizers")),
        ready=_ready(f),
        ended=_ended_at(f), scheduled=bool(f.string("spec.nodeName")), node_name=f.string("spec.nodeName", "") or "", controller_uid=controller_uid,
    )


def _ready(f: Fields) -> bool:
    """Whether the pod's ``Ready`` condition is True (waitForPodsReady: podsready.py); a
    condition that cannot be read counts as not ready rather than rejecting the pod."""
    conditions = f.get("status.conditions")
    return isinstance(conditions, list) and any(
        isinstance(c, abc.Mapping) and c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _ended_at(f: Fields) -> int:
    """When a terminated pod stopped running, as the kubelet records it: the time its
    ``ContainersReady`` (else ``Ready``) condition turned False; 0 if unknown or still running.
    Only an ordering hint (which failed pod a replacement stands for): a condition that cannot
    be read counts as unknown rather than rejecting the pod."""
    if f.string("status.phase", "Pending") not in ("Succeeded", "Failed"):
        return 0
    conditions = f.get("status.conditions")
    by_type = {c.get("type"): c for c in conditions if isinstance(c, abc.Mapping)} if isinstance(conditions, list) else {}
    for kind in ("ContainersReady", "Ready"):
        c = by_type.get(kind) or {}
        if c.get("status") == "False" and isinstance(c.get("lastTransitionTime"), (str, datetime)):
            try:
                return f.timestamp(f"status.conditions[{kind}].lastTransitionTime", c["lastTransitionTime"])
            except SnapshotError:
                return 0
    return 0


def _resource_groups(f: Fields) -> tuple[ResourceGroup, ...]:
    groups = []
    covered_anywhere: set[str] = set()
    for gp, g in f.objects("spec.resourceGroups"):
        covered = f.strings(f"{gp}.coveredResources", g.get("coveredResources"))
        for r in covered:
            if r in covered_anywhere:
                raise f.fail(f"{gp}.coveredResources", f"resource {r!r} is covered by more than one group")
            covered_anywhere.add(r)
        flavors = []
        for fp, fl in f.objects(f"{gp}.flavors", g.get("flavors")):
            if not isinstance(fl.get("name"), str):
                raise f.fail(f"{fp}.name", "the flavor name is required")
            # Kueue's CRD keys a group's flavors by name: one quota per flavor and resource.
            if any(other.flavor == fl["name"] for other in flavors):
                raise f.fail(f"{fp}.name", f"flavor {fl['name']!r} is listed twice in this resource group")
            quotas: dict[str, ResourceQuota] = {}
            for rp, r in f.objects(f"{fp}.resources", fl.get("resources")):
                name = r.get("name")
                if not isinstance(name, str) or name not in covered:
                    raise f.fail(f"{rp}.name", f"resource {name!r} is not in coveredResources {list(covered)}")
                if r.get("nominalQuota") is None:
                    raise f.fail(f"{rp}.nominalQuota", "a quantity is required")

                def limit(key: str) -> Fraction | None:
                    return None if r.get(key) is None else f.quantity(f"{rp}.{key}", r[key])

                quotas[name] = ResourceQuota(f.quantity(f"{rp}.nominalQuota", r["nominalQuota"]),
                                             limit("borrowingLimit"), limit("lendingLimit"))
            flavors.append(FlavorQuotas(fl["name"], quotas))
        groups.append(ResourceGroup(covered, tuple(flavors)))
    return tuple(groups)


def _fungibility(f: Fields, key: str, stop: str, default: str | None = None) -> str:
    value = f.string(f"spec.flavorFungibility.{key}") or default or stop
    if value == "MayStopSearch":
        return stop
    if value not in (stop, "TryNextFlavor"):
        raise f.fail(f"spec.flavorFungibility.{key}", f"expected {stop}, MayStopSearch or TryNextFlavor, got {value!r}")
    return value


def _cluster_queue(f: Fields) -> ClusterQueue:
    strategy = f.string("spec.queueingStrategy", "BestEffortFIFO")
    if strategy not in ("BestEffortFIFO", "StrictFIFO"):
        raise f.fail("spec.queueingStrategy", f"expected BestEffortFIFO or StrictFIFO, got {strategy!r}")
    reclaim = _choice(f, "spec.preemption.reclaimWithinCohort", ("Never", "LowerPriority", "Any"))
    borrow = _choice(f, "spec.preemption.borrowWithinCohort.policy", ("Never", "LowerPriority"))
    if borrow != "Never" and reclaim == "Never":
        # Kueue's API refuses it too: preempting in the cohort while borrowing builds on reclaiming.
        raise f.fail("spec.preemption.borrowWithinCohort.policy",
                     "LowerPriority needs spec.preemption.reclaimWithinCohort other than Never")
    return ClusterQueue(
        name=f.name,
        cohort=f.string("spec.cohortName") or f.string("spec.cohort"),
        resource_groups=_resource_groups(f),
        # Kueue: a nil namespaceSelector selects no namespace, an empty one selects all.
        namespace_selector=parse_selector(f, "spec.namespaceSelector"),
        queueing_strategy=strategy or "BestEffortFIFO",
        # Newer Kueue versions call Borrow and Preempt "MayStopSearch"; both load the same.
        when_can_borrow=_fungibility(f, "whenCanBorrow", "Borrow"),
        when_can_preempt=_fungibility(f, "whenCanPreempt", "Preempt", default="TryNextFlavor"),
        stop_policy=_choice(f, "spec.stopPolicy", STOP_POLICIES),
        within_cluster_queue=_choice(f, "spec.preemption.withinClusterQueue",
                                     ("Never", "LowerPriority", "LowerOrNewerEqualPriority")),
        reclaim_within_cohort=reclaim,
        borrow_within_cohort=borrow,
        borrow_max_priority=f.integer("spec.preemption.borrowWithinCohort.maxPriorityThreshold")
        if borrow != "Never" else None,
        admission_checks=_check_rules(f),
        fair_weight=_fair_weight(f),
        admission_scope=_admission_mode(f),
    )


#: Kueue's ``spec.admissionScope.admissionMode`` values of a ClusterQueue.
ADMISSION_MODES = ("UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing")


def _admission_mode(f: Fields) -> str:
    """``spec.admissionScope.admissionMode`` ("" when there is no admission scope)."""
    mode = f.string("spec.admissionScope.admissionMode", "") or ""
    if mode and mode not in ADMISSION_MODES:
        raise f.fail("spec.admissionScope.admissionMode", f"expected one of {', '.join(ADMISSION_MODES)}, got {mode!r}")
    return mode


def _fair_weight(f: Fields) -> Fraction:
    """``spec.fairSharing.weight``: a non-negative quantity, 1 if absent (Kueue's default)."""
    raw = f.get("spec.fairSharing.weight")
    return Fraction(1) if raw is None else f.quantity("spec.fairSharing.weight", raw)


def _check_rules(f: Fields) -> tuple[CheckRule, ...]:
    """A ClusterQueue's admission checks: v1beta1's ``spec.admissionChecks`` (names, for every
    flavor) or ``spec.admissionChecksStrategy.admissionChecks`` (name and ``onFlavors``; the
    only form in v1beta2). Kueue's API allows one of the two."""
    names = f.strings("spec.admissionChecks")
    strategy = f.objects("spec.admissionChecksStrategy.admissionChecks")
    if names and strategy:
        raise f.fail("spec.admissionChecksStrategy", "admissionChecks and admissionChecksStrategy are mutually exclusive")
    rules = [CheckRule(name) for name in names]
    for p, rule in strategy:
        name = f.string(f"{p}.name", None, rule.get("name"))
        if not name:
            raise f.fail(f"{p}.name", "the name of an AdmissionCheck is required")
        rules.append(CheckRule(name, f.strings(f"{p}.onFlavors", rule.get("onFlavors"))))
    return tuple(rules)


def _check_states(f: Fields) -> tuple[CheckState, ...]:
    """A Workload's ``status.admissionChecks``, by name."""
    out = []
    for p, c in f.objects("status.admissionChecks"):
        state = f.string(f"{p}.state", "Pending", c.get("state"))
        if state not in CHECK_STATES:
            raise f.fail(f"{p}.state", f"expected one of {', '.join(CHECK_STATES)}, got {state!r}")
        updates = []
        for u, update in f.objects(f"{p}.podSetUpdates", c.get("podSetUpdates")):
            updates.append(PodSetUpdate(
                name=f.string(f"{u}.name", "", update.get("name")) or "",
                labels=f.string_map(f"{u}.labels", update.get("labels")),
                annotations=f.string_map(f"{u}.annotations", update.get("annotations")),
                node_selector=f.string_map(f"{u}.nodeSelector", update.get("nodeSelector")),
                tolerations=tuple(dict(t) for _, t in f.objects(f"{u}.tolerations", update.get("tolerations")))))
        out.append(CheckState(f.string(f"{p}.name", "", c.get("name")) or "", str(state),
                              f.string(f"{p}.message", "", c.get("message")) or "", tuple(updates)))
    return tuple(sorted(out, key=lambda c: c.name))


def _admission_check(f: Fields) -> AdmissionCheck:
    controller = f.string("spec.controllerName")
    if not controller:
        raise f.fail("spec.controllerName", "the name of the controller that runs the check is required")
    params = f.mapping("spec.parameters")
    parameters = None
    if params:
        parameters = tuple(f.string(f"spec.parameters.{k}", "", params.get(k)) or ""
                           for k in ("apiGroup", "kind", "name"))
    active = any(c.get("type") == "Active" and c.get("status") == "True"
                 for c in f.items("status.conditions") if isinstance(c, abc.Mapping))
    return AdmissionCheck(f.name, controller, parameters, active)  # type: ignore[arg-type]


def _choice(f: Fields, path: str, allowed: tuple[str, ...]) -> str:
    """The value at ``path``, one of ``allowed`` (the first when unset)."""
    value = f.string(path) or allowed[0]
    if value not in allowed:
        raise f.fail(path, f"expected {', '.join(allowed[:-1])} or {allowed[-1]}, got {value!r}")
    return value


def _workload(f: Fields) -> KueueWorkload:
    pod_sets = []
    for p, ps in f.objects("spec.podSets"):
        count = f.count(f"{p}.count", 1, ps.get("count"))
        template = f.mapping(f"{p}.template", ps.get("template"))
        shape = parse_pod_shape(f, f"{p}.template.spec", template.get("spec"))
        meta = f.mapping(f"{p}.template.metadata", template.get("metadata"))
        own = f.string_map(f"{p}.template.metadata.labels", meta.get("labels"))
        annotations = f.string_map(f"{p}.template.metadata.annotations", meta.get("annotations"))
        pod_sets.append(PodSetSpec(f.string(f"{p}.name", "main", ps.get("name")) or "main", count, shape.requests,
                                   shape.node_labels, shape.tolerations,
                                   parse_topology_request(f, f"{p}.template.metadata.annotations", annotations),
                                   needs=dataclasses.replace(shape.needs, labels=tuple(sorted(own.items())))))
    if not pod_sets:
        raise f.fail("spec.podSets", "a Workload needs at least one pod set")
    admission = None
    adm = f.mapping("status.admission")
    if adm:
        psa = []
        for p, a in f.objects("status.admission.podSetAssignments", adm.get("podSetAssignments")):
            psa.append(PodSetAdmission(f.string(f"{p}.name", "", a.get("name")) or "",
                                       f.string_map(f"{p}.flavors", a.get("flavors")),
                                       f.count(f"{p}.count", -1, a.get("count"))))  # -1: the pod set's count
        admission = Admission(f.string("status.admission.clusterQueue", "", adm.get("clusterQueue")) or "", tuple(psa))
        # What an assignment of a pod set the spec lacks holds is unknown (its requests are the
        # spec's): rejected, so that its quota tree admits nothing new (QuotaUnknown) rather
        # than counting it as holding nothing and over-committing. Kueue's API refuses it too.
        names = [ps.name for ps in pod_sets]
        for i, a in enumerate(psa):
            if a.name not in names:
                raise f.fail(f"status.admission.podSetAssignments[{i}].name",
                             f"names pod set {a.name!r}, which spec.podSets does not have ({', '.join(names)}): "
                             "what the admission holds is unknown")
    # Only Finished=True and Admitted=True matter; other conditions are Kueue's own business,
    # whatever their shape.
    true = {c["type"] for c in f.items("status.conditions")
            if isinstance(c, abc.Mapping) and c.get("status") == "True" and isinstance(c.get("type"), str)}
    finished = "Finished" in true
    ref = f.mapping("spec.priorityClassRef")
    reclaimable = {}
    for p, r in f.objects("status.reclaimablePods"):
        reclaimable[f.string(f"{p}.name", "", r.get("name")) or ""] = f.count(f"{p}.count", 0, r.get("count"))
    pod_owners = [o for _, o in f.objects("metadata.ownerReferences", f.meta.get("ownerReferences"))
                  if o.get("kind") == "Pod" and o.get("apiVersion") == "v1"]
    return KueueWorkload(
        namespace=f.namespace, name=f.name, queue_name=f.string("spec.queueName", "") or "",
        priority=f.integer("spec.priority"),
        priority_class=f.string("spec.priorityClassName") or f.string("spec.priorityClassRef.name", value=ref.get("name")),
        pod_sets=tuple(pod_sets), admission=admission, finished=finished,
        created=f.timestamp(), reclaimable=reclaimable,
        owned_by_pods=bool(pod_owners),
        active=f.flag("spec.active", True),
        labels=f.string_map("metadata.labels", f.meta.get("labels") or {}),
        uid=f.string("metadata.uid", "") or "", deleting=f.meta.get("deletionTimestamp") is not None,
        owners=tuple(sorted(str(o.get("uid") or "") for o in pod_owners)),
        checks=_check_states(f), admitted="Admitted" in true,
        cluster_name=f.string("status.clusterName", "") or "",
        nominated_clusters=f.strings("status.nominatedClusterNames"),
        reserved_at=_true_since(f, "QuotaReserved"),
        **_pods_ready(f),
    )


def _pods_ready(f: Fields) -> dict[str, Any]:
    """The waitForPodsReady state of a Workload (podsready.py): its ``PodsReady`` condition,
    ``status.requeueState`` and its ``Evicted`` condition."""
    out: dict[str, Any] = {"requeue_count": f.count("status.requeueState.count", 0)}
    if f.get("status.requeueState.requeueAt") is not None:
        out["requeue_at"] = f.timestamp("status.requeueState.requeueAt")
    for p, c in f.objects("status.conditions"):
        if c.get("type") == "PodsReady":
            out.update(pods_ready=c.get("status") == "True", pods_ready_reason=str(c.get("reason") or ""),
                       pods_ready_since=f.timestamp(f"{p}.lastTransitionTime", c.get("lastTransitionTime")))
        if c.get("type") == "Evicted" and c.get("status") == "True":  # orders it when requeued (requeued_at)
            out.update(evicted_reason=str(c.get("reason") or ""),
                       evicted_at=f.timestamp(f"{p}.lastTransitionTime", c.get("lastTransitionTime")))
    return out


def _true_since(f: Fields, kind: str) -> int:
    """When condition ``kind`` turned True (its lastTransitionTime; 0 when it is not True)."""
    for p, c in f.objects("status.conditions"):
        if c.get("type") == kind and c.get("status") == "True":
            return f.timestamp(f"{p}.lastTransitionTime", c.get("lastTransitionTime"))
    return 0


def _multikueue_cluster(f: Fields) -> MultiKueueCluster:
    active = any(c.get("type") == "Active" and c.get("status") == "True" for _, c in f.objects("status.conditions"))
    return MultiKueueCluster(f.name, active, f.string_map("metadata.labels", f.meta.get("labels")))


def _cohort(f: Fields) -> Cohort:
    return Cohort(f.name, f.string("spec.parentName") or f.string("spec.parent"), _resource_groups(f), _fair_weight(f))


def _flavor(f: Fields) -> ResourceFlavor:
    return ResourceFlavor(f.name, f.string_map("spec.nodeLabels"), _taints(f, "spec.nodeTaints", f.get("spec.nodeTaints")),
                          f.string("spec.topologyName", "") or "")


def _topology(f: Fields) -> Topology:
    """A Topology's levels, validated as Kueue's API does: 1 to 16 distinct node labels, and
    ``kubernetes.io/hostname`` only as the lowest."""
    levels: list[str] = []
    for p, level in f.objects("spec.levels"):
        label = f.string(f"{p}.nodeLabel", "", level.get("nodeLabel")) or ""
        if not label:
            raise f.fail(f"{p}.nodeLabel", "the node label of the level is required")
        if label in levels:
            raise f.fail(f"{p}.nodeLabel", f"{label} is already level {levels.index(label)}: levels must be unique")
        levels.append(label)
    if not 1 <= len(levels) <= 16:
        raise f.fail("spec.levels", f"expected 1 to 16 levels, got {len(levels)}")
    if HOSTNAME_LABEL in levels[:-1]:
        raise f.fail(f"spec.levels[{levels.index(HOSTNAME_LABEL)}].nodeLabel",
                     f"{HOSTNAME_LABEL} can only be the lowest level")
    return Topology(f.name, tuple(levels))


def _local_queue(f: Fields) -> LocalQueue:
    cq = f.string("spec.clusterQueue")
    if not cq:
        raise f.fail("spec.clusterQueue", "the name of a ClusterQueue is required")
    usage = "status.fairSharing.admissionFairSharingStatus"
    return LocalQueue(f.namespace, f.name, cq, _choice(f, "spec.stopPolicy", STOP_POLICIES), _fair_weight(f),
                      f.resources(f"{usage}.consumedResources", f.get(f"{usage}.consumedResources")),
                      f.timestamp(f"{usage}.lastUpdate", f.get(f"{usage}.lastUpdate")))


def _value(f: Fields, path: str = "value") -> int:
    v = f.integer(path)
    if v is None:
        raise f.fail(path, "an integer value is required")
    return v


def _node(f: Fields) -> Node:
    return Node(f.name, f.string_map("metadata.labels", f.meta.get("labels")),
                f.resources("status.allocatable", f.get("status.allocatable")),
                _taints(f, "spec.taints", f.get("spec.taints")), f.flag("spec.unschedulable"))


def _annotated_int(f: Fields, key: str) -> int:
    """A non-negative integer kept in annotation ``key`` (0 if absent)."""
    raw = f.string_map("metadata.annotations", f.meta.get("annotations")).get(key)
    if raw is None:
        return 0
    if not raw.isdigit() or int(raw) >= 2**63:
        raise f.fail(f"metadata.annotations[{key}]", f"expected a non-negative integer, got {raw!r}")
    return int(raw)


def _pod_group(f: Fields) -> PodGroup:
    timeout = f.integer("spec.scheduleTimeoutSeconds")
    if timeout is not None and timeout < 0:
        raise f.fail("spec.scheduleTimeoutSeconds", f"expected a non-negative integer, got {timeout}")
    start = f.get("status.scheduleStartTime")
    return PodGroup(
        namespace=f.namespace, name=f.name, uid=f.string("metadata.uid", "") or "", created=f.timestamp(),
        min_member=f.count("spec.minMember", 0),
        min_resources=f.resources("spec.minResources", f.get("spec.minResources")),
        schedule_timeout=timeout, labels=f.string_map("metadata.labels", f.meta.get("labels")),
        phase=f.string("status.phase", "") or "",
        # the API server keeps a time it was given; an empty one (as Go writes a zero time) is unset
        schedule_start=f.timestamp("status.scheduleStartTime", start) if start else 0,
        requeues=_annotated_int(f, REQUEUES_ANNOTATION), backoff_until=_annotated_int(f, BACKOFF_ANNOTATION),
    )


# (apiVersion group, kind) -> (snapshot attribute, parser, namespaced key?)
_KINDS: dict[tuple[str, str], tuple[str, Any, bool]] = {
    ("", "Namespace"): ("namespaces", lambda f: Namespace(f.name, f.string_map("metadata.labels", f.meta.get("labels"))), False),
    ("", "Node"): ("nodes", _node, False),
    ("", "Pod"): ("pods", _pod, True),
    ("scheduling.k8s.io", "PriorityClass"): ("priority_classes", lambda f: PriorityClass(f.name, _value(f), f.flag("globalDefault")), False),
    (KUEUE_GROUP, "WorkloadPriorityClass"): ("workload_priority_classes", lambda f: WorkloadPriorityClass(f.name, _value(f)), False),
    (KUEUE_GROUP, "ResourceFlavor"): ("flavors", _flavor, False),
    (KUEUE_GROUP, "ClusterQueue"): ("cluster_queues", _cluster_queue, False),
    (KUEUE_GROUP, "Cohort"): ("cohorts", _cohort, False),
    (KUEUE_GROUP, "LocalQueue"): ("local_queues", _local_queue, True),
    (KUEUE_GROUP, "Workload"): ("workloads", _workload, True),
    (SCHEDULING_GROUP, "PodGroup"): ("pod_groups", _pod_group, True),
    (KUEUE_GROUP, "Topology"): ("topologies", _topology, False),
    (KUEUE_GROUP, "AdmissionCheck"): ("admission_checks", _admission_check, False),
    (KUEUE_GROUP, "MultiKueueConfig"): ("multikueue_configs", lambda f: f.strings("spec.clusters"), False),
    (KUEUE_GROUP, "MultiKueueCluster"): ("multikueue_clusters", _multikueue_cluster, False),
    ("", "ConfigMap"): ("kueue_configs", parse_kueue_config_map, True),
}
_KUEUE_VERSIONS = ("v1beta1", "v1beta2")
_TOPOLOGY_VERSIONS = ("v1alpha1", *_KUEUE_VERSIONS)  # Kueue served Topology as v1alpha1 before v0.14


def build_snapshot(documents: Iterable[Document], *, lenient: bool = False) -> Snapshot:
    """Validate and type every document; ``kind: List`` documents are unpacked.

    With ``lenient`` (objects read from a live cluster), a malformed object is left out and
    recorded in :attr:`Snapshot.rejected` instead: one object the API server accepted but
    clueue cannot use must not stop a controller from deciding on all the others.

    Raises:
        SnapshotError: the first malformed object, naming file, object and field; or two
            objects of the same kind and name, naming both files.
    """
    collected: dict[str, dict[str, Any]] = {attr: {} for attr, _, _ in _KINDS.values()}
    sources: dict[tuple[str, str], str] = {}  # (kind, key) -> where it was read, to name duplicates
    notices: list[str] = []
    rejected: list[Rejected] = []
    quota_docs: dict[tuple[str, str], Document] = {}  # to reject cohorts of a cycle, and their queues

    def add(doc: Document) -> None:
        body = doc.body
        if not isinstance(body, abc.Mapping):
            raise SnapshotError(f"expected a Kubernetes object, got {type(body).__name__}", source=doc.source)
        kind, api = body.get("kind"), body.get("apiVersion")
        if not isinstance(kind, str) or not isinstance(api, str):
            raise SnapshotError("apiVersion and kind are required", source=doc.source, field="kind")
        if kind.endswith("List") and isinstance(body.get("items"), list):
            for i, item in enumerate(body["items"]):
                read(Document(f"{doc.source}.items[{i}]", item))
            return
        group, _, version = api.rpartition("/")
        entry = _KINDS.get((group, kind))
        if entry is None:
            notices.append(f"{doc.source}: skipped {api} {kind}: not a kind clueue reads")
            return
        if group == KUEUE_GROUP and version not in (_TOPOLOGY_VERSIONS if kind == "Topology" else _KUEUE_VERSIONS):
            raise SnapshotError(f"unsupported version {api!r} (clueue reads v1beta1 and v1beta2)",
                                source=doc.source, obj=kind, field="apiVersion")
        if group == SCHEDULING_GROUP and version not in SCHEDULING_VERSIONS:
            raise SnapshotError(f"unsupported version {api!r} (clueue reads {SCHEDULING_GROUP}/v1alpha1)",
                                source=doc.source, obj=kind, field="apiVersion")
        attr, parse, namespaced = entry
        fields = Fields(doc, kind)
        key = f"{fields.namespace}/{fields.name}" if namespaced else fields.name
        first = sources.setdefault((kind, key), doc.source)
        if kind in ("Cohort", "ClusterQueue"):
            quota_docs[(kind, key)] = doc
        if first != doc.source:
            raise SnapshotError(f"{kind} {key} is also defined in {first}; remove one of them",
                                source=doc.source, obj=fields.ident)
        collected[attr][key] = parse(fields)

    def read(doc: Document) -> None:
        if not lenient:
            add(doc)
            return
        try:
            add(doc)
        except SnapshotError as e:
            rejected.append(_rejected(doc, e))

    for document in documents:
        read(document)
    if lenient:
        # Such a quota tree has no root, so none of its quota can be counted (quota.py).
        for kind, key, error in cohort_cycles(collected["cohorts"], collected["cluster_queues"]):
            del collected["cohorts" if kind == "Cohort" else "cluster_queues"][key]
            rejected.append(_rejected(quota_docs[(kind, key)], error))
    if not any(collected.values()) and not rejected:
        notices.append("the snapshot holds no objects clueue reads")
    return Snapshot(**{attr: dict(sorted(objs.items())) for attr, objs in collected.items()},
                    notices=tuple(notices), rejected=tuple(rejected))


def _rejected(doc: Document, error: SnapshotError) -> Rejected:
    """What can be told of a malformed object: its kind and name, as far as they are readable."""
    body = doc.body if isinstance(doc.body, abc.Mapping) else {}
    meta = body.get("metadata") if isinstance(body.get("metadata"), Mapping) else {}

    def text(value: Any) -> str:
        return value if isinstance(value, str) else ""

    labels = meta.get("labels") if isinstance(meta.get("labels"), Mapping) else {}

    def part(parent: Mapping[str, Any], key: str) -> Mapping[str, Any]:
        return parent.get(key) if isinstance(parent.get(key), Mapping) else {}

    spec, status = part(body, "spec"), part(body, "status")
    admission = status.get("admission") if body.get("kind") == "Workload" else None
    gates = spec.get("schedulingGates") if isinstance(spec.get("schedulingGates"), list) else []
    started = body.get("kind") == "Pod" and status.get("phase") not in ("Succeeded", "Failed") and not any(
        isinstance(g, Mapping) and g.get("name") == ADMISSION_GATE for g in gates)
    return Rejected(
        kind=text(body.get("kind")), api_version=text(body.get("apiVersion")), namespace=text(meta.get("namespace")),
        name=text(meta.get("name")), uid=text(meta.get("uid")), source=doc.source, field=error.field,
        message=error.detail,
        labels={k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)},
        queue_name=text(spec.get("queueName")), holds_quota=bool(admission) or started,
        admitted_in=text(admission.get("clusterQueue")) if isinstance(admission, Mapping) else "")
