"""MultiKueue's names (labels, controller and dispatcher names) and the small API layer every
part of it uses: kueue.x-k8s.io objects as plain dicts, conditions, Events.

Calls made here are single attempts: a worker that does not answer is retried by the next
pass of the MultiKueue loop (runner.py), never by waiting inside one, so that one unreachable
worker cannot hold up the others.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any, Callable

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from clueue.engine.kueue_api import (  # the engine ties a worker's pods to their copy by PREBUILT_LABEL
    MULTIKUEUE_CONTROLLER as CONTROLLER_NAME, MULTIKUEUE_ORIGIN_LABEL as ORIGIN_LABEL,
    MULTIKUEUE_ORIGIN_UID_ANNOTATION as ORIGIN_UID_ANNOTATION, PREBUILT_LABEL,
)

from ..kube.events import event_body, involved_object
from ..kube.kinds import KUEUE_GROUP, kueue_version
from ..kube.pacing import PendingWriteLimiter
from ..kube.retry import update_with_retry

__all__ = ["CONTROLLER_NAME", "ORIGIN_LABEL", "ORIGIN_UID_ANNOTATION", "PREBUILT_LABEL", "KueueObjects", "condition", "is_true", "with_condition", "setting_condition", "now",
           "key_of", "EventRecorder",
           "COMPONENT"]

log = logging.getLogger("clueue.multikueue")

COMPONENT = "clueue-multikueue"  # the reportingComponent of its Events


def now() -> str:
    """The current time as Kubernetes writes it (RFC 3339, seconds, UTC)."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def key_of(body: dict[str, Any]) -> str:
    """``namespace/name`` of a namespaced object (``name`` of a cluster-scoped one)."""
    meta = body.get("metadata") or {}
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta.get("name"))


def condition(body: dict[str, Any], type_: str) -> dict[str, Any] | None:
    """The status condition of ``type_``, if the object has one."""
    for c in (body.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return dict(c)
    return None


def is_true(body: dict[str, Any], type_: str) -> bool:
    c = condition(body, type_)
    return c is not None and c.get("status") == "True"


def with_condition(conditions: list[dict[str, Any]], type_: str, status: str, reason: str, message: str,
                   generation: int | None = None) -> list[dict[str, Any]] | None:
    """``conditions`` with ``type_`` set as given; None when it already is (status, reason and
    message). ``lastTransitionTime`` moves only when the status does.

    >>> with_condition([], "Active", "True", "Active", "Connected")[0]["reason"]
    'Active'
    """
    old = next((c for c in conditions if c.get("type") == type_), None)
    if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == (status, reason, message):
        return None
    new = {"type": type_, "status": status, "reason": reason, "message": message[:32768],
           "lastTransitionTime": old["lastTransitionTime"] if old is not None and old.get("status") == status
           else now()}
    if generation is not None:
        new["observedGeneration"] = generation
    return [c for c in conditions if c.get("type") != type_] + [new]


def setting_condition(type_: str, status: str, reason: str, message: str, generation: int | None = None
                      ) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    """A change for :meth:`KueueObjects.update_status` that sets one status condition."""
    def change(current: dict[str, Any]) -> dict[str, Any] | None:
        status_ = dict(current.get("status") or {})
        conditions = with_condition(list(status_.get("conditions") or []), type_, status, reason, message, generation)
        return None if conditions is None else {**current, "status": {**status_, "conditions": conditions}}
    return change


class KueueObjects:
    """kueue.x-k8s.io objects of one cluster, as dicts, in the version the cluster prefers.

    ``retried``: writes to this cluster retry conflicts from a fresh read (the manager, where
    the decision loop writes the same Workloads); a worker's calls are single attempts.
    """

    def __init__(self, api: client.ApiClient, version: str | None = None) -> None:
        self.api = api
        self.custom = client.CustomObjectsApi(api)
        found = version or kueue_version(api)
        if not found:
            raise ApiException(status=404, reason=f"{KUEUE_GROUP} is not served (its CRDs are not installed)")
        self.version = found

    def list(self, plural: str, *, label_selector: str = "") -> list[dict[str, Any]]:
        listed = self.custom.list_cluster_custom_object(KUEUE_GROUP, self.version, plural,
                                                        label_selector=label_selector)
        return list(listed.get("items") or [])

    def get(self, plural: str, name: str, namespace: str = "", *, version: str = "") -> dict[str, Any] | None:
        """The object, or None when there is none (HTTP 404). ``version``: read in that one."""
        try:
            if namespace:
                return dict(self.custom.get_namespaced_custom_object(KUEUE_GROUP, version or self.version, namespace,
                                                                     plural, name))
            return dict(self.custom.get_cluster_custom_object(KUEUE_GROUP, version or self.version, plural, name))
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def create(self, plural: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        body = {**body, "apiVersion": f"{KUEUE_GROUP}/{self.version}"}
        return dict(self.custom.create_namespaced_custom_object(KUEUE_GROUP, self.version, namespace, plural, body))

    def delete(self, plural: str, namespace: str, name: str, *, uid: str = "") -> bool:
        """Delete it (only that uid, when given); False when it was gone already."""
        options = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid) if uid else None,
                                         propagation_policy="Background")
        try:
            self.custom.delete_namespaced_custom_object(KUEUE_GROUP, self.version, namespace, plural, name,
                                                        body=options)
            return True
        except ApiException as e:
            if e.status in (404, 409):  # gone, or another object of that name now (uid precondition)
                return False
            raise

    def replace(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        """Write a namespaced object's spec and metadata (with its resourceVersion: a conflict raises)."""
        meta = body["metadata"]
        return dict(self.custom.replace_namespaced_custom_object(KUEUE_GROUP, self.version, meta["namespace"], plural,
                                                                 meta["name"], body))

    def update_status(self, plural: str, body: dict[str, Any],
                      change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> bool:
        """Write ``change(object)``'s status (None: nothing to change) with the object's
        resourceVersion, starting from ``body``; a conflict reads it again and derives the
        change anew. False when nothing was written (unchanged, or gone)."""
        meta = body.get("metadata") or {}
        namespace, name = meta.get("namespace", ""), meta["name"]
        first = [body]

        def read() -> dict[str, Any] | None:
            return first.pop() if first else self.get(plural, name, namespace)

        def write(changed: dict[str, Any]) -> Any:
            if namespace:
                return self.custom.replace_namespaced_custom_object_status(KUEUE_GROUP, self.version, namespace,
                                                                           plural, name, changed)
            return self.custom.replace_cluster_custom_object_status(KUEUE_GROUP, self.version, plural, name, changed)

        return update_with_retry(read, change, write)


class EventRecorder:
    """Events on kueue.x-k8s.io objects of one cluster (the manager), sent at once.

    An Event is news, not state: one that cannot be sent is logged and dropped. Each (object,
    reason, message) is sent once while it holds, so a pass repeating itself does not repeat
    its Events; :meth:`forget` lets an object's next Event of the same text through again.
    Normal Events beyond ``limit`` (the controller's pace for routine Events: 20 a second,
    bursts of 200) are dropped, so that a burst of dispatches spends its writes on dispatching;
    Warning Events are always sent.
    """

    def __init__(self, api: client.ApiClient, version: str, *, limit: PendingWriteLimiter | None = None) -> None:
        self.core = client.CoreV1Api(api)
        self.version = version
        self.limit = limit if limit is not None else PendingWriteLimiter(rate=20, burst=200)
        self.dropped = 0
        self._sent: dict[str, set[tuple[str, str]]] = {}

    def record(self, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        meta = obj.get("metadata") or {}
        key = f"{obj.get('kind')}/{key_of(obj)}"
        if (reason, message) in self._sent.get(key, set()):
            return
        self._sent.setdefault(key, set()).add((reason, message))
        if type_ != "Warning" and not self.limit.take():
            self.dropped += 1
            return
        involved = involved_object(str(obj.get("kind")), f"{KUEUE_GROUP}/{self.version}", meta.get("namespace") or "",
                                   str(meta.get("name")), meta.get("uid") or "", meta.get("resourceVersion") or "")
        body = event_body(involved, type_, reason, message, COMPONENT)
        try:
            self.core.create_namespaced_event(body["metadata"]["namespace"], body)
        except ApiException as e:
            log.info("event %s on %s not sent: %s", reason, key, e.reason)

    def forget(self, obj: dict[str, Any]) -> None:
        self._sent.pop(f"{obj.get('kind')}/{key_of(obj)}", None)

    def keep_only(self, kind: str, keys: set[str]) -> None:
        """Forget what was sent about objects of ``kind`` other than ``keys`` (gone ones)."""
        self._sent = {k: v for k, v in self._sent.items() if not k.startswith(f"{kind}/") or
                      k[len(kind) + 1:] in keys}
