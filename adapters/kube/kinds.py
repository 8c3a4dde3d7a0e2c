"""The kinds clueue reads from the API, and how to list and watch each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kubernetes import client

from .errors import api_errors
from .retry import call

__all__ = ["Kind", "KINDS", "KUEUE_GROUP", "kueue_version"]

KUEUE_GROUP = "kueue.x-k8s.io"


@dataclass(frozen=True)
class Kind:
    kind: str
    api_version: str  # for core kinds; kueue kinds use the served version found by discovery
    plural: str
    namespaced: bool
    custom: bool  # a kueue.x-k8s.io custom resource

    def list_call(self, api: client.ApiClient, version: str) -> tuple[Callable[..., Any], dict[str, Any]]:
        """The list function (also used for watching) and its fixed arguments."""
        if self.custom:
            return client.CustomObjectsApi(api).list_cluster_custom_object, {
                "group": KUEUE_GROUP, "version": version, "plural": self.plural}
        core = client.CoreV1Api(api)
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
)


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
