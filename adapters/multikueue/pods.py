"""Plain Pods and pod groups in MultiKueue: the pods of a Workload that won in a worker.

A manager Workload made for plain pods (owned by its Pods, KEP-976) is copied as any other
Workload; its pods are created in the winning worker only once the check is Ready, that is
after every other copy was deleted (workloads.py), so they never start in two clusters. Each
remote pod has the manager pod's name, namespace, labels, annotations and spec (its scheduling
gate too: the worker's admission lifts it for the admitted copy), plus the labels
``kueue.x-k8s.io/multikueue-origin: <origin>`` and ``kueue.x-k8s.io/prebuilt-workload-name:
<the Workload's name>``, by which the worker ties them to the copy. The remote pods' status is
copied to the manager pods as Kueue does (phase, conditions, container statuses), keeping the
manager pod's ``PodScheduled`` condition while it is gated and the remote one is not yet
scheduled. The manager pods stay gated: they run in the worker only.
"""

from __future__ import annotations

import logging
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .api import ORIGIN_LABEL, PREBUILT_LABEL

__all__ = ["is_made_of_pods", "PodMirror", "remote_pod"]

log = logging.getLogger("clueue.multikueue")

_SERVER_FIELDS = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "ownerReferences",
                  "deletionTimestamp", "deletionGracePeriodSeconds", "finalizers", "selfLink")


def is_made_of_pods(workload: dict[str, Any]) -> bool:
    """Whether the Workload was made for plain pods (its owners are Pods)."""
    return any(o.get("kind") == "Pod" and o.get("apiVersion") == "v1"
               for o in (workload.get("metadata") or {}).get("ownerReferences") or ())


def remote_pod(pod: dict[str, Any], workload_name: str, origin: str) -> dict[str, Any]:
    """The worker's copy of a manager pod (no status, no server-set fields, no node).

    >>> remote_pod({"metadata": {"name": "p", "uid": "u"}, "spec": {"nodeName": "n1"}}, "w", "o")["metadata"]
    {'name': 'p', 'labels': {'kueue.x-k8s.io/multikueue-origin': 'o', 'kueue.x-k8s.io/prebuilt-workload-name': 'w'}}
    """
    meta = {k: v for k, v in (pod.get("metadata") or {}).items() if k not in _SERVER_FIELDS}
    meta["labels"] = {**(meta.get("labels") or {}), ORIGIN_LABEL: origin, PREBUILT_LABEL: workload_name}
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _mirrored_status(local: dict[str, Any], remote: dict[str, Any]) -> dict[str, Any]:
    """The remote pod's status as the manager pod shows it (Kueue's rule for PodScheduled)."""
    status = dict(remote.get("status") or {})

    def scheduled(pod: dict[str, Any]) -> dict[str, Any] | None:
        return next((c for c in (pod.get("status") or {}).get("conditions") or () if c.get("type") == "PodScheduled"),
                    None)

    mine, theirs = scheduled(local), scheduled(remote)
    gated = bool((local.get("spec") or {}).get("schedulingGates"))
    if gated and mine is not None and (theirs is None or theirs.get("status") != "True"):
        status["conditions"] = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"] + [mine]
    return status


class PodMirror:
    """Creates a Workload's pods in its worker and copies their status back to the manager."""

    def __init__(self, manager: client.ApiClient, origin: str) -> None:
        self.manager = manager
        self.core = client.CoreV1Api(manager)
        self.origin = origin

    def _json(self, api: client.ApiClient, obj: Any) -> dict[str, Any]:
        return dict(api.sanitize_for_serialization(obj))

    def local_pods(self, workload: dict[str, Any]) -> list[dict[str, Any]]:
        """The manager pods that own the Workload (by name and uid) and still exist."""
        namespace = workload["metadata"]["namespace"]
        pods = []
        for owner in workload["metadata"].get("ownerReferences") or ():
            if owner.get("kind") != "Pod":
                continue
            try:
                pod = self._json(self.manager, self.core.read_namespaced_pod(owner["name"], namespace))
            except ApiException as e:
                if e.status == 404:
                    continue
                raise
            if pod["metadata"].get("uid") == owner.get("uid"):
                pods.append(pod)
        return pods

    def sync(self, worker: client.ApiClient, workload: dict[str, Any]) -> int:
        """Create the missing remote pods in ``worker``, copy the others' status back; how many
        were created."""
        remote_core = client.CoreV1Api(worker)
        created = 0
        for pod in self.local_pods(workload):
            meta = pod["metadata"]
            try:
                remote = self._json(worker, remote_core.read_namespaced_pod(meta["name"], meta["namespace"]))
            except ApiException as e:
                if e.status != 404:
                    raise
                if meta.get("deletionTimestamp"):
                    continue
                remote_core.create_namespaced_pod(meta["namespace"], remote_pod(pod, workload["metadata"]["name"],
                                                                                 self.origin))
                created += 1
                continue
            status = _mirrored_status(pod, remote)
            if status != (pod.get("status") or {}) and not meta.get("deletionTimestamp"):
                try:
                    self.core.replace_namespaced_pod_status(meta["name"], meta["namespace"], {**pod, "status": status})
                except ApiException as e:
                    if e.status not in (404, 409):  # gone, or changed meanwhile: the next pass copies again
                        raise
        return created

    def delete(self, worker: client.ApiClient, namespace: str, workload_name: str) -> int:
        """Delete this origin's pods of the Workload in ``worker``; how many there were."""
        remote_core = client.CoreV1Api(worker)
        selector = f"{ORIGIN_LABEL}={self.origin},{PREBUILT_LABEL}={workload_name}"
        pods = remote_core.list_namespaced_pod(namespace, label_selector=selector).items
        for pod in pods:
            try:
                remote_core.delete_namespaced_pod(pod.metadata.name, namespace)
            except ApiException as e:
                if e.status != 404:
                    raise
        return len(pods)
