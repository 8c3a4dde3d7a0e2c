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

import threading
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .api import ORIGIN_LABEL, PREBUILT_LABEL

__all__ = ["is_made_of_pods", "PodMirror", "remote_pod"]

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
    """Creates a Workload's pods in its worker and copies their status back to the manager.

    A pass lists this origin's pods once per worker (:meth:`begin_pass`, then lazily); a
    manager pod is read only to create its copy, or when its copy's resourceVersion changed
    since its status was last copied, so a steady workload costs no request per pass.
    """

    def __init__(self, manager: client.ApiClient, origin: str) -> None:
        self.manager = manager
        self.core = client.CoreV1Api(manager)
        self.origin = origin
        self._listed: dict[str, dict[str, dict[str, Any]]] = {}  # this pass: worker -> "ns/name" -> pod
        self._copied: dict[tuple[str, str], str] = {}  # (worker, "ns/name") -> remote resourceVersion copied
        self._seen: set[tuple[str, str]] = set()
        self._lock = threading.Lock()  # a pass reconciles Workloads on several threads

    def begin_pass(self) -> None:
        """A new pass: list the workers' pods again when needed; forget pods not seen since."""
        self._listed = {}
        self._copied = {k: v for k, v in self._copied.items() if k in self._seen}
        self._seen = set()

    def _remote(self, worker: str, api: client.ApiClient) -> dict[str, dict[str, Any]]:
        with self._lock:
            if worker not in self._listed:
                listed = client.CoreV1Api(api).list_pod_for_all_namespaces(
                    label_selector=f"{ORIGIN_LABEL}={self.origin}")
                self._listed[worker] = {f"{p.metadata.namespace}/{p.metadata.name}":
                                        dict(api.sanitize_for_serialization(p)) for p in listed.items}
            return self._listed[worker]

    def _local(self, namespace: str, owner: dict[str, Any]) -> dict[str, Any] | None:
        """The manager pod an owner reference names, if it still exists (same uid)."""
        try:
            pod = dict(self.manager.sanitize_for_serialization(self.core.read_namespaced_pod(owner["name"], namespace)))
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return pod if pod["metadata"].get("uid") == owner.get("uid") else None

    def sync(self, worker: str, api: client.ApiClient, workload: dict[str, Any]) -> int:
        """Create the Workload's missing pods in ``worker`` (``api``), copy the others' status
        back; how many were created."""
        namespace, name = workload["metadata"]["namespace"], workload["metadata"]["name"]
        remote = self._remote(worker, api)
        created = 0
        for owner in workload["metadata"].get("ownerReferences") or ():
            if owner.get("kind") != "Pod":
                continue
            key = f"{namespace}/{owner['name']}"
            self._seen.add((worker, key))
            theirs = remote.get(key)
            version = str((theirs or {}).get("metadata", {}).get("resourceVersion", ""))
            if theirs is not None and self._copied.get((worker, key)) == version:
                continue  # its status is copied as it is
            pod = self._local(namespace, owner)
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                continue
            if theirs is None:
                client.CoreV1Api(api).create_namespaced_pod(namespace, remote_pod(pod, name, self.origin))
                created += 1
                continue
            status = _mirrored_status(pod, theirs)
            if status != (pod.get("status") or {}):
                try:
                    self.core.replace_namespaced_pod_status(owner["name"], namespace, {**pod, "status": status})
                except ApiException as e:
                    if e.status not in (404, 409):  # gone, or changed meanwhile: the next pass copies again
                        raise
                    continue
            self._copied[(worker, key)] = version
        return created

    def delete(self, api: client.ApiClient, namespace: str, workload_name: str) -> int:
        """Delete this origin's pods of the Workload in the worker ``api`` reaches; how many
        there were."""
        remote_core = client.CoreV1Api(api)
        selector = f"{ORIGIN_LABEL}={self.origin},{PREBUILT_LABEL}={workload_name}"
        pods = remote_core.list_namespaced_pod(namespace, label_selector=selector).items
        for pod in pods:
            try:
                remote_core.delete_namespaced_pod(pod.metadata.name, namespace)
            except ApiException as e:
                if e.status != 404:
                    raise
        return len(pods)
