"""The body of a core/v1 Event clueue records on an object, in one place.

``kubectl describe`` lists an object's Events by a field selector on ``involvedObject`` (its
name, namespace, kind and uid), so an Event without the object's uid is never shown there,
only in ``kubectl get events``. Every Event clueue sends is built here, with the reference
complete as client-go's recorder writes it (apiVersion, kind, namespace, name, uid and, when
known, resourceVersion).
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

__all__ = ["MESSAGE_LIMIT", "event_body", "involved_object"]

MESSAGE_LIMIT = 1024  # as Kueue truncates an Event's message (api.TruncateEventMessage)


def involved_object(kind: str, api_version: str, namespace: str, name: str, uid: str = "",
                    resource_version: str = "") -> dict[str, Any]:
    """The ``involvedObject`` reference of an Event; ``namespace`` is "" for a cluster-scoped
    object. Fields not known ("") are left out rather than written empty.

    >>> involved_object("Workload", "kueue.x-k8s.io/v1beta2", "ns", "w", "u-1")
    {'kind': 'Workload', 'apiVersion': 'kueue.x-k8s.io/v1beta2', 'name': 'w', 'namespace': 'ns', 'uid': 'u-1'}
    """
    ref: dict[str, Any] = {"kind": kind, "apiVersion": api_version, "name": name}
    for key, value in (("namespace", namespace), ("uid", uid), ("resourceVersion", resource_version)):
        if value:
            ref[key] = value
    return ref


def event_body(involved: dict[str, Any], type_: str, reason: str, message: str, component: str) -> dict[str, Any]:
    """A new Event about ``involved`` (see :func:`involved_object`), reported by ``component``.

    It lives in the object's namespace, or in ``default`` for a cluster-scoped object (as the
    kubelet's Events on Nodes do, where ``kubectl describe`` looks for them). Its name is the
    object's with a nanosecond suffix, as client-go's recorder names Events.
    """
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    home = involved.get("namespace") or "default"
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"namespace": home, "name": f"{involved['name']}.{time.time_ns():x}"},
            "involvedObject": involved, "reason": reason, "message": message[:MESSAGE_LIMIT], "type": type_,
            "count": 1, "firstTimestamp": stamp, "lastTimestamp": stamp, "reportingComponent": component,
            "source": {"component": component}}
