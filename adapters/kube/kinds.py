"""The kinds clueue reads from the API, and how to list and watch each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kubernetes import client

from clueue.engine.kueueconfig import KUEUE_CONFIG_MAP
from clueue.engine.kueue_api import KUEUE_GROUP, SCHEDULING_GROUP, SCHEDULING_VERSIONS

from .errors import api_errors
from .retry import call

__all__ = ["Kind", "KINDS", "KUEUE_GROUP", "SCHEDULING_GROUP", "POD_GROUP_VERSION", "kueue_version",
           "served_kinds"]

POD_GROUP_VERSION = SCHEDULING_VERSIONS[0]  # the coscheduling plugin's PodGroup


@dataclass(frozen=True)
class Kind:
    kind: str
    api_version: str  # for core kinds; kueue kinds use the served version found by discovery
    plural: str
    namespaced: bool
    custom: bool  # a custom resource (of ``group``)
    group: str = KUEUE_GROUP  # a custom resource's API group
    # a custom resource of another group than kueue.x-k8s.io: the one version clueue reads
    fixed_version: str = ""
    # read only where the served version lists it (Kueue before v0.14 served Topology as v1alpha1 only)
    optional: bool = False
    # "namespace/name": the one object of the kind clueue reads, listed and watched by a field
    # selector (RBAC grants that name only); it may be absent, its namespace too
    only: str = ""

    def version(self, kueue: str) -> str:
        """The version a custom resource is read in, ``kueue`` being kueue.x-k8s.io's served one."""
        return self.fixed_version or kueue

    def document_api_version(self, kueue: str) -> str:
        """The ``apiVersion`` its documents carry."""
        return f"{self.group}/{self.version(kueue)}" if self.custom else self.api_version

    def list_call(self, api: client.ApiClient, version: str) -> tuple[Callable[..., Any], dict[str, Any]]:
        """The list function (also used for watching) and its fixed arguments; ``version`` is
        kueue.x-k8s.io's served version."""
        if self.custom:
            return client.CustomObjectsApi(api).list_cluster_custom_object, {
                "group": self.group, "version": self.version(version), "plural": self.plural}
        core = client.CoreV1Api(api)
        if self.only:
            namespace, _, name = self.only.partition("/")
            one: dict[str, Callable[..., Any]] = {"ConfigMap": core.list_namespaced_config_map}
            return one[self.kind], {"namespace": namespace, "field_selector": f"metadata.name={name}"}
        calls: dict[str, Callable[..., Any]] = {
            "Namespace": core.list_namespace, "Pod": core.list_pod_for_all_namespaces, "Node": core.list_node,
            "PriorityClass": client.SchedulingV1Api(api).list_priority_class,
        }
        return calls[self.kind], {}


KINDS: tuple[Kind, ...] = (
    Kind("Namespace", "v1", "namespaces", False, False),
    Kind("Node", "v1", "nodes", False, False),
    Kind("PriorityClass", "scheduling.k8s.io/v1", "priorityclasses", False, False),
    Kind("Pod", "v1", "pods", True, False),
    Kind("ResourceFlavor", "", "resourceflavors", False, True),
    Kind("ClusterQueue", "", "clusterqueues", False, True),
    Kind("Cohort", "", "cohorts", False, True),
    Kind("LocalQueue", "", "localqueues", True, True),
    Kind("WorkloadPriorityClass", "", "workloadpriorityclasses", False, True),
    Kind("Workload", "", "workloads", True, True),
    Kind("AdmissionCheck", "", "admissionchecks", False, True),
    # MultiKueue's workers and their configs: which workloads are dispatched, and where (docs/dispatch.md)
    Kind("MultiKueueConfig", "", "multikueueconfigs", False, True, optional=True),
    Kind("MultiKueueCluster", "", "multikueueclusters", False, True, optional=True),
    Kind("PodGroup", "", "podgroups", True, True, SCHEDULING_GROUP, POD_GROUP_VERSION),
    Kind("Topology", "", "topologies", False, True, optional=True),
    # Kueue's Configuration, whose fairSharing, admissionFairSharing and waitForPodsReady clueue
    # decides by (engine/kueueconfig.py): that one ConfigMap, not every ConfigMap of the cluster
    Kind("ConfigMap", "v1", "configmaps", True, False, only=KUEUE_CONFIG_MAP),
)


def served_kinds(api: client.ApiClient | None, kueue: str | None) -> list[Kind]:
    """The kinds of :data:`KINDS` the cluster serves, ``kueue`` being kueue.x-k8s.io's served
    version (None: not installed). A kind of another group (PodGroup) is read only where its
    group serves the version clueue reads: a cluster without the coscheduling CRD still works.
    An optional kind (Topology) is read only where ``kueue`` serves it. Without an ``api`` (a
    cache fed events by hand) nothing is discovered and those are left out.

    Raises:
        ClusterUnavailable, ApiRefused: the API server could not be asked (errors.py).
    """
    others = {k.group for k in KINDS if k.custom and k.group != KUEUE_GROUP}
    served: dict[str, set[str]] = {}
    if others and api is not None:
        with api_errors(api, "discovering the API groups"):
            groups = call(client.ApisApi(api).get_api_versions).groups
        served = {g.name: {v.version for v in g.versions or ()} for g in groups if g.name in others}
    listed: set[str] = set()
    if kueue and api is not None and any(k.optional for k in KINDS):
        with api_errors(api, f"discovering the resources of {KUEUE_GROUP}/{kueue}"):
            found = call(lambda: client.CustomObjectsApi(api).get_api_resources(KUEUE_GROUP, kueue))
        listed = {r.name for r in found.resources or ()}
    return [k for k in KINDS if not k.custom or (
        bool(kueue and (not k.optional or k.plural in listed)) if k.group == KUEUE_GROUP
        else k.fixed_version in served.get(k.group, ()))]


def kueue_version(api: client.ApiClient) -> str | None:
    """The preferred served version of kueue.x-k8s.io, or None if the group is not installed.

    Raises:
        ClusterUnavailable, ApiRefused: the API server could not be asked (errors.py).
    """
    with api_errors(api, "discovering the API groups"):
        groups = call(client.ApisApi(api).get_api_versions).groups
    for group in groups:
        if group.name == KUEUE_GROUP:
            return str(group.preferred_version.version)
    return None
