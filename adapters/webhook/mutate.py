"""What the Pod webhook decides: which Pods are gated (mutating) and which changes are refused
(validating). Pure functions of an AdmissionReview request and the Config: no client, no HTTP.

The rule of "subject to queueing" is the engine's (``engine/workloads.py``, KEP-976 "Pods subject
to queueing"): a queue-name label, a controlling owner that no other integration manages, a
namespace the Config's namespace selector selects and a pod the pod selector selects. So is the
rule for the Pods of a coscheduling PodGroup without a queue name, which clueue gang-schedules
unless ``podGroups.gangScheduleWithoutQueue`` is off (docs/podgroups.md): the PodGroup label,
the same owners and namespaces, and a pod ``podGroups.podSelector`` selects. The webhook must
agree with them exactly: a Pod gated here that the engine does not queue would stay gated
forever, and a queued Pod left ungated would run without an admission.

>>> from clueue.engine.config import Config
>>> review = {"operation": "CREATE", "namespace": "team-a",
...           "object": {"metadata": {"name": "p", "labels": {"kueue.x-k8s.io/queue-name": "q"}}, "spec": {}}}
>>> [op["path"] for op in mutate(review, Config(), {})]
['/metadata/labels/kueue.x-k8s.io~1managed', '/metadata/finalizers', '/spec/schedulingGates']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from clueue.engine.config import Config
from clueue.engine.kueue_api import (
    ADMISSION_GATE as GATE,
    GROUP_LABEL,
    MANAGED_LABEL,
    POD_FINALIZER as FINALIZER,
    POD_GROUP_LABEL,
    QUEUE_LABEL,
    RETRIABLE_ANNOTATION,
    ROLE_HASH_ANNOTATION,
    SETS_ANNOTATION,
    TOTAL_ANNOTATION,
)
from clueue.engine.snapshot import role_hash

__all__ = ["MANAGED_LABEL", "NAME_LABEL", "subject_to_queueing", "gang_scheduled_without_queue", "owner_kinds", "mutate",
           "validate", "pointer"]

#: The label Kubernetes keeps on every Namespace: its name, so selectors can name namespaces.
NAME_LABEL = "kubernetes.io/metadata.name"

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

NamespaceLabels = Mapping[str, str] | Callable[[str], Mapping[str, str]]


def pointer(*parts: str) -> str:
    """A JSON pointer (RFC 6901) to ``parts``: ``~`` and ``/`` inside a part are escaped.

    >>> pointer("metadata", "labels", "kueue.x-k8s.io/managed")
    '/metadata/labels/kueue.x-k8s.io~1managed'
    """
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = pod.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _map(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def owner_kinds(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """``group/Kind`` of the Pod's controlling owners, as the engine's snapshot reads them."""
    kinds = []
    for o in _meta(pod).get("ownerReferences") or []:
        if isinstance(o, Mapping) and o.get("controller") is True:
            group = str(o.get("apiVersion") or "").rpartition("/")[0]
            kinds.append(f"{group}/{o.get('kind')}")
    return tuple(kinds)


def subject_to_queueing(pod: Mapping[str, Any], namespace: str, namespace_labels: Mapping[str, str],
                        config: Config) -> bool:
    """Whether clueue queues ``pod`` (KEP-976 "Pods subject to queueing"), in the engine's order.

    ``namespace_labels`` are the labels of the Pod's Namespace; its name label is added as the
    apiserver does, so the default selector (kube-system and the controller's namespace
    excluded) holds even for labels read from an older object.
    """
    labels = _map(_meta(pod).get("labels"))
    if QUEUE_LABEL not in labels:
        return False
    if any(config.owner_is_managed(o) for o in owner_kinds(pod)):
        return False  # another integration (a batch/Job, a JobSet...) queues its owner
    if not config.effective_namespace_selector().matches({**namespace_labels, NAME_LABEL: namespace}):
        return False
    return config.pod_selector.matches(labels)


def gang_scheduled_without_queue(pod: Mapping[str, Any], namespace: str, namespace_labels: Mapping[str, str],
                                 config: Config) -> bool:
    """Whether clueue gang-schedules ``pod``, of a coscheduling PodGroup and without a queue
    name (docs/podgroups.md), in the engine's order: ``podGroups.gangScheduleWithoutQueue`` on,
    the label ``scheduling.x-k8s.io/pod-group``, a controlling owner no other integration
    manages, a namespace the namespace selector selects, a pod ``podGroups.podSelector`` selects."""
    labels = _map(_meta(pod).get("labels"))
    if not config.pod_groups.gang_schedule_without_queue or QUEUE_LABEL in labels or not labels.get(POD_GROUP_LABEL):
        return False
    if any(config.owner_is_managed(o) for o in owner_kinds(pod)):
        return False
    if not config.effective_namespace_selector().matches({**namespace_labels, NAME_LABEL: namespace}):
        return False
    return config.pod_groups.pod_selector.matches(labels)


def _namespace_of(request: Mapping[str, Any], pod: Mapping[str, Any]) -> str:
    # On CREATE the Pod's own metadata.namespace may be empty: the request names the namespace.
    return str(request.get("namespace") or _meta(pod).get("namespace") or "")


def mutate(request: Mapping[str, Any], config: Config, namespace_labels: NamespaceLabels) -> list[dict[str, Any]]:
    """The JSONPatch that gates the Pod of a CREATE ``request`` if it is subject to queueing, or
    of a PodGroup clueue gang-schedules without a queue (:func:`gang_scheduled_without_queue`).

    Adds the scheduling gate ``kueue.x-k8s.io/admission``, the label
    ``kueue.x-k8s.io/managed: "true"``, the finalizer ``kueue.x-k8s.io/managed`` and, for a
    member of a pod group, the ``kueue.x-k8s.io/role-hash`` annotation computed by the engine's
    :func:`~clueue.engine.snapshot.role_hash`. Existing gates, labels and finalizers are kept.

    Parameters:
        request: the ``request`` of an AdmissionReview (``operation``, ``namespace``, ``object``).
        config: which Pods are queued.
        namespace_labels: the labels of the request's namespace, or a lookup by namespace name
            (called only for a Pod with a queue name or a PodGroup label).

    Returns:
        the patch operations; empty when the Pod is left as it is.
    """
    pod = request.get("object")
    if request.get("operation") != "CREATE" or not isinstance(pod, Mapping):
        return []
    meta = _meta(pod)
    labels = _map(meta.get("labels"))
    if QUEUE_LABEL not in labels and not labels.get(POD_GROUP_LABEL):
        return []  # no lookup of the namespace for the Pods clueue never queues
    namespace = _namespace_of(request, pod)
    ns_labels = namespace_labels(namespace) if callable(namespace_labels) else namespace_labels
    if not (subject_to_queueing(pod, namespace, ns_labels, config)
            or gang_scheduled_without_queue(pod, namespace, ns_labels, config)):
        return []
    patch: list[dict[str, Any]] = []
    if isinstance(meta.get("labels"), Mapping):
        patch.append({"op": "add", "path": pointer("metadata", "labels", MANAGED_LABEL), "value": "true"})
    else:
        patch.append({"op": "add", "path": pointer("metadata", "labels"), "value": {MANAGED_LABEL: "true"}})
    if labels.get(GROUP_LABEL):
        # The role is hashed from the Pod as created: ungating later adds node selectors, which
        # would change the hash; kueue.x-k8s.io/ labels are not hashed, so the label added here is not.
        hashed = role_hash(pod)
        if isinstance(meta.get("annotations"), Mapping):
            patch.append({"op": "add", "path": pointer("metadata", "annotations", ROLE_HASH_ANNOTATION),
                          "value": hashed})
        else:
            patch.append({"op": "add", "path": pointer("metadata", "annotations"),
                          "value": {ROLE_HASH_ANNOTATION: hashed}})
    finalizers = meta.get("finalizers")
    if not isinstance(finalizers, list) or not finalizers:
        patch.append({"op": "add", "path": pointer("metadata", "finalizers"), "value": [FINALIZER]})
    elif FINALIZER not in finalizers:
        patch.append({"op": "add", "path": pointer("metadata", "finalizers", "-"), "value": FINALIZER})
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    gates = spec.get("schedulingGates")
    if not isinstance(gates, list) or not gates:
        patch.append({"op": "add", "path": pointer("spec", "schedulingGates"), "value": [{"name": GATE}]})
    elif not any(isinstance(g, Mapping) and g.get("name") == GATE for g in gates):
        patch.append({"op": "add", "path": pointer("spec", "schedulingGates", "-"), "value": {"name": GATE}})
    return patch


def _gated(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    return any(isinstance(g, Mapping) and g.get("name") == GATE for g in spec.get("schedulingGates") or [])


def _group_metadata(labels: Mapping[str, str], annotations: Mapping[str, str]) -> list[str]:
    """What is wrong with a Pod's group label and annotations (as Kueue's pod webhook checks)."""
    group = labels.get(GROUP_LABEL, "")
    field = f"metadata.annotations[{TOTAL_ANNOTATION}]"
    if not group:
        if TOTAL_ANNOTATION in annotations:
            return [f"metadata.labels[{GROUP_LABEL}]: Required: both the '{TOTAL_ANNOTATION}' annotation and the "
                    f"'{GROUP_LABEL}' label should be set"]
        return []
    problems = []
    if len(group) > 253 or not _DNS_SUBDOMAIN.match(group):
        problems.append(f"metadata.labels[{GROUP_LABEL}]: Invalid value {group!r}: it names the group's Workload, "
                        "so it must be a lowercase RFC 1123 subdomain (a-z, 0-9, '-', '.') of at most 253 characters")
    if TOTAL_ANNOTATION not in annotations:
        # Unlike Kueue, no count is required: the workers of a driver (KEP-976 story 3) carry
        # only their role, the driver's pod-group-sets annotation counts them.
        return problems
    total = annotations[TOTAL_ANNOTATION]
    if not re.fullmatch(r"[0-9]+", total) or int(total) < 1:
        problems.append(f"{field}: Invalid value {total!r}: the number of Pods in group {group!r} must be a "
                        "whole number of at least 1")
    return problems


#: Labels and annotations of a managed Pod that name its queue and its group: changing one would
#: move the Pod to another workload behind the controller's back.
_IMMUTABLE = (("labels", QUEUE_LABEL), ("labels", GROUP_LABEL), ("labels", POD_GROUP_LABEL),
              ("annotations", TOTAL_ANNOTATION), ("annotations", SETS_ANNOTATION))


def validate(request: Mapping[str, Any]) -> list[str]:
    """Why the Pod change of ``request`` is refused; empty when it is allowed.

    CREATE of a managed Pod (one the mutating webhook gated, or labelled ``managed`` by its
    author): a ``pod-group-total-count`` annotation needs the group label and is a whole number
    of at least 1; the group name is a valid Workload name.
    UPDATE of a managed Pod (the old Pod has ``kueue.x-k8s.io/managed: "true"``): its queue-name,
    pod-group-name and ``scheduling.x-k8s.io/pod-group`` labels and its pod-group-total-count and pod-group-sets annotations are
    immutable, its role-hash annotation may be recorded once but not changed or removed, its
    managed label stays ``"true"``, ``retriable-in-group: "false"`` stays, and the admission
    gate is never added back.
    """
    pod = request.get("object")
    if not isinstance(pod, Mapping):
        return []
    labels, annotations = _map(_meta(pod).get("labels")), _map(_meta(pod).get("annotations"))
    problems: list[str] = []
    if MANAGED_LABEL in labels and labels[MANAGED_LABEL] != "true":
        problems.append(f"metadata.labels[{MANAGED_LABEL}]: Forbidden: the managed label's value can only be 'true'")
    operation = request.get("operation")
    if operation == "CREATE":
        if labels.get(MANAGED_LABEL) == "true":
            problems += _group_metadata(labels, annotations)
        return problems
    old = request.get("oldObject")
    if operation != "UPDATE" or not isinstance(old, Mapping):
        return problems
    old_labels, old_annotations = _map(_meta(old).get("labels")), _map(_meta(old).get("annotations"))
    if old_labels.get(MANAGED_LABEL) != "true":
        return problems
    was_now = {"labels": (old_labels, labels), "annotations": (old_annotations, annotations)}
    for where, key in _IMMUTABLE:
        before, after = (m.get(key) for m in was_now[where])
        if before != after:
            problems.append(f"metadata.{where}[{key}]: Forbidden: field is immutable on a Pod managed by clueue "
                            f"(was {_shown(before)}, now {_shown(after)}); delete the Pod and create a new one instead")
    before_hash, after_hash = old_annotations.get(ROLE_HASH_ANNOTATION), annotations.get(ROLE_HASH_ANNOTATION)
    if before_hash is not None and before_hash != after_hash:
        problems.append(f"metadata.annotations[{ROLE_HASH_ANNOTATION}]: Forbidden: the Pod's role in its group "
                        f"cannot change once recorded (was {_shown(before_hash)}, now {_shown(after_hash)})")
    if MANAGED_LABEL not in labels:
        problems.append(f"metadata.labels[{MANAGED_LABEL}]: Forbidden: cannot be removed from a Pod managed by clueue")
    if old_annotations.get(RETRIABLE_ANNOTATION) == "false" and annotations.get(RETRIABLE_ANNOTATION) != "false":
        problems.append(f"metadata.annotations[{RETRIABLE_ANNOTATION}]: Forbidden: an unretriable pod group can't "
                        "be converted to retriable")
    if _gated(pod) and not _gated(old):
        problems.append(f"spec.schedulingGates: Forbidden: the gate {GATE!r} is removed by clueue when the Pod is "
                        "admitted and cannot be added back")
    return problems


def _shown(value: str | None) -> str:
    return "absent" if value is None else repr(value)
