"""Kueue's API names clueue reads and writes: groups, labels, annotations, gates, finalizers,
controller names. Each is spelled here once; every engine, adapter and bench module imports it.

These are Kueue's (and Kubernetes') public contract, not clueue's choices: a user's Pods,
Workloads and AdmissionChecks carry them. clueue's own annotations (``clueue.dev/...``) live
beside the code that owns them.

The policies spell one of them too: ``policies/topology.lp`` compares topology levels with
:data:`HOSTNAME_LABEL` as a string literal (``"kubernetes.io/hostname"``); a unit test
(tests/unit/test_kueue_api.py) checks that the two agree.

>>> ADMISSION_GATE
'kueue.x-k8s.io/admission'
>>> topology_annotation("required")
'kueue.x-k8s.io/podset-required-topology'
"""

from __future__ import annotations

__all__ = [
    "KUEUE_GROUP", "KUEUE_PREFIX", "SCHEDULING_GROUP", "SCHEDULING_VERSIONS",
    "ADMISSION_GATE", "POD_FINALIZER", "MANAGED_LABEL", "QUEUE_LABEL", "PRIORITY_CLASS_LABEL",
    "GROUP_LABEL", "ROLE_LABEL", "TOTAL_ANNOTATION", "SETS_ANNOTATION", "RETRIABLE_ANNOTATION",
    "ROLE_HASH_ANNOTATION", "PREBUILT_LABEL", "JOB_UID_LABEL", "PODSET_LABEL", "POD_GROUP_LABEL",
    "HOSTNAME_LABEL", "TOPOLOGY_MODES", "topology_annotation", "SLICE_TOPOLOGY_ANNOTATION",
    "SLICE_SIZE_ANNOTATION", "MULTIKUEUE_CONTROLLER", "MULTIKUEUE_ORIGIN_LABEL",
    "MULTIKUEUE_ORIGIN_UID_ANNOTATION", "DISPATCHER_ALL_AT_ONCE", "DISPATCHER_INCREMENTAL",
]

# --- API groups ------------------------------------------------------------------------------
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_PREFIX = KUEUE_GROUP + "/"  # of Kueue's labels, annotations, gates and finalizers
SCHEDULING_GROUP = "scheduling.x-k8s.io"  # the coscheduling plugin's PodGroup
SCHEDULING_VERSIONS = ("v1alpha1",)

# --- Pods Kueue manages ----------------------------------------------------------------------
#: The scheduling gate the webhook puts on a queued Pod; removing it is admitting the Pod.
ADMISSION_GATE = KUEUE_PREFIX + "admission"
#: The finalizer the webhook puts on a queued Pod; removed once the Pod is done with.
POD_FINALIZER = KUEUE_PREFIX + "managed"
#: The label the webhook sets on every Pod it gates (Kueue uses the finalizer's key for it too).
MANAGED_LABEL = KUEUE_PREFIX + "managed"
QUEUE_LABEL = KUEUE_PREFIX + "queue-name"  # the LocalQueue of a Pod (or PodGroup)
PRIORITY_CLASS_LABEL = KUEUE_PREFIX + "priority-class"  # a WorkloadPriorityClass

# --- Kueue's plain pod groups (KEP-976) ------------------------------------------------------
GROUP_LABEL = KUEUE_PREFIX + "pod-group-name"
ROLE_LABEL = KUEUE_PREFIX + "pod-group-role"
TOTAL_ANNOTATION = KUEUE_PREFIX + "pod-group-total-count"
SETS_ANNOTATION = KUEUE_PREFIX + "pod-group-sets"
RETRIABLE_ANNOTATION = KUEUE_PREFIX + "retriable-in-group"
#: Where a grouped pod keeps its role once clueue has ungated it (ungating changes the hashed spec).
ROLE_HASH_ANNOTATION = KUEUE_PREFIX + "role-hash"

# --- Workloads made by others -----------------------------------------------------------------
#: On pods whose Workload exists already, made by someone else (MultiKueue's manager makes the
#: copy a worker admits, then the pods, labelled with its name): no other Workload is made for them.
PREBUILT_LABEL = KUEUE_PREFIX + "prebuilt-workload-name"
JOB_UID_LABEL = KUEUE_PREFIX + "job-uid"  # on a Workload Kueue made for a Job: the Job's uid
PODSET_LABEL = KUEUE_PREFIX + "podset"  # on the pods Kueue's job integrations make: their pod set

# --- The coscheduling plugin ------------------------------------------------------------------
POD_GROUP_LABEL = SCHEDULING_GROUP + "/pod-group"  # a Pod's PodGroup

# --- Topology-aware scheduling (docs/placement.md) ----------------------------------------------
#: The node label naming a node's host: the lowest Topology level (one node per domain), and
#: what an ungated pod is pinned to its node with.
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: The modes of a pod set's topology annotation (:func:`topology_annotation`).
TOPOLOGY_MODES = ("required", "preferred", "unconstrained")
SLICE_TOPOLOGY_ANNOTATION = KUEUE_PREFIX + "podset-slice-required-topology"
SLICE_SIZE_ANNOTATION = KUEUE_PREFIX + "podset-slice-size"


def topology_annotation(mode: str) -> str:
    """The pod set annotation asking for topology ``mode`` (one of :data:`TOPOLOGY_MODES`)."""
    return f"{KUEUE_PREFIX}podset-{mode}-topology"


# --- MultiKueue (docs/multikueue.md) ----------------------------------------------------------
#: The ``spec.controllerName`` of Kueue's MultiKueue admission checks.
MULTIKUEUE_CONTROLLER = KUEUE_PREFIX + "multikueue"
MULTIKUEUE_ORIGIN_LABEL = KUEUE_PREFIX + "multikueue-origin"  # on every remote copy: which manager made it
MULTIKUEUE_ORIGIN_UID_ANNOTATION = KUEUE_PREFIX + "multikueue-origin-uid"  # the manager Workload's uid
#: The dispatchers Kueue builds in (engine/config.py adds clueue's own).
DISPATCHER_ALL_AT_ONCE = KUEUE_PREFIX + "multikueue-dispatcher-all-at-once"
DISPATCHER_INCREMENTAL = KUEUE_PREFIX + "multikueue-dispatcher-incremental"
