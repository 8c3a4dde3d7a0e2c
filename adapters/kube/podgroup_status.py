"""Writing what a plan decided about coscheduling PodGroups: its ``podGroups[]`` entries
(docs/plan-format.md; engine/podgroups.py decides them in the cycle). Nothing is decided here.

After a cycle: each PodGroup's ``status`` (phase, running, succeeded, failed,
``scheduleStartTime``, ``occupiedBy``) is written as its entry says, when it differs from the
recorded one; a group whose entry has a ``release`` is released (its requeue count and back-off
recorded in the annotations ``clueue.dev/requeues`` and ``clueue.dev/backoff-until``, its gang's
Workload and its live pods deleted, each pod only if it still has the uid the plan names); a
group whose entry ends its back-off loses the back-off annotation, which lets its gang be
admitted again. Every write is fenced by the decider lease and retried from a fresh read on a
conflict. A cluster without the PodGroup CRD has no PodGroups in its snapshot, so its plans have
no entries: nothing is written.
"""

from __future__ import annotations

from typing import Any, Callable

from kubernetes import client

from clueue.engine import Plan, Snapshot
from clueue.engine.snapshot import BACKOFF_ANNOTATION, REQUEUES_ANNOTATION

from .apply import MANAGER
from .kinds import KUEUE_GROUP, POD_GROUP_VERSION, SCHEDULING_GROUP
from .queue_status import _Writer
from .retry import missing_is_none, update_with_retry

__all__ = ["write_podgroup_status"]

_PLURAL = "podgroups"
_STATUS_FIELDS = ("phase", "running", "succeeded", "failed", "scheduleStartTime", "occupiedBy")


def write_podgroup_status(api: client.ApiClient, plan: Plan, *, version: str = "v1beta1",
                          fence: Callable[[], None] | None = None, dry_run: bool = False,
                          errors: list[str] | None = None, written: list[tuple[str, str, str]] | None = None,
                          basis: Snapshot | None = None) -> list[str]:
    """Write what ``plan``'s ``podGroups[]`` say: releases first, then the ends of back-offs,
    then statuses. Returns the writes done (``status PodGroup NS/NAME``, ``release PodGroup
    NS/NAME``, ``delete Pod NS/NAME``, ``delete Workload NS/NAME``, ``backoff-over PodGroup
    NS/NAME``); ``version`` is the served kueue.x-k8s.io version. ``errors`` and ``written`` as
    in :func:`~.queue_status.write_queue_status`. When the next schedule timeout or back-off
    ends is the plan's ``wake_at``. With ``basis``, the snapshot the plan was decided from, each
    write lands only on the object it held (same uid): a PodGroup or Workload deleted and made
    anew since is left as it is.

    Raises:
        ApiRefused, ClusterUnavailable: a request failed (without ``errors``).
        LeaseLost: ``fence`` found the decider lease lost (without ``errors``).
    """
    if not plan.pod_groups:
        return []
    custom = client.CustomObjectsApi(api)
    core = client.CoreV1Api(api)
    dry = {"dry_run": "All"} if dry_run else {}
    writer = _GroupWriter(api, fence or (lambda: None), errors)

    def read(ns: str, name: str) -> Callable[[], Any]:
        seen = basis.pod_groups.get(f"{ns}/{name}") if basis is not None else None

        def decided_about() -> Any:  # another PodGroup of that name is taken for none: nothing written on it
            obj = custom.get_namespaced_custom_object(SCHEDULING_GROUP, POD_GROUP_VERSION, ns, _PLURAL, name)
            return None if seen is not None and seen.uid and (obj.get("metadata") or {}).get("uid") != seen.uid else obj
        return decided_about

    def annotate(ns: str, name: str, values: dict[str, str | None]) -> Callable[[dict[str, Any]], Any]:
        def change(obj: dict[str, Any]) -> dict[str, Any] | None:
            meta = dict(obj.get("metadata") or {})
            old = dict(meta.get("annotations") or {})
            new = {k: v for k, v in {**old, **values}.items() if v is not None}
            return None if new == old else {**obj, "metadata": {**meta, "annotations": new}}
        return change

    with writer.batch(written):
        for entry in plan.pod_groups:
            r = entry.release
            if r is None:
                continue
            ns, name = entry.name.split("/", 1)
            # the back-off first: should the deletes fail half-way, the group is still held
            writer.update(f"release PodGroup {entry.name}", read(ns, name),
                          annotate(ns, name, {REQUEUES_ANNOTATION: str(r.requeues),
                                              BACKOFF_ANNOTATION: str(r.backoff_until)}),
                          lambda obj, ns=ns, name=name: custom.replace_namespaced_custom_object(
                              SCHEDULING_GROUP, POD_GROUP_VERSION, ns, _PLURAL, name, obj,
                              field_manager=MANAGER, **dry))
            if r.workload:  # its quota back: the pods recreated queue anew (apply makes a new Workload)
                wl_ns, wl_name = r.workload.split("/", 1)
                held = basis.workloads.get(r.workload) if basis is not None else None
                # the Workload decided about, by uid: a new one of that name (made since) is not released
                only = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=held.uid)) \
                    if held is not None and held.uid else None
                writer.delete(f"Workload {r.workload}", lambda ns=wl_ns, name=wl_name, only=only:
                              custom.delete_namespaced_custom_object(KUEUE_GROUP, version, ns, "workloads", name,
                                                                     body=only, **dry))
            for pod, uid in r.pods:
                writer.delete(f"Pod {ns}/{pod}", lambda ns=ns, pod=pod, uid=uid: core.delete_namespaced_pod(
                    pod, ns, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid)), **dry))
        for entry in plan.pod_groups:
            if entry.end_backoff:
                ns, name = entry.name.split("/", 1)
                writer.update(f"backoff-over PodGroup {entry.name}", read(ns, name),
                              annotate(ns, name, {BACKOFF_ANNOTATION: None}),
                              lambda obj, ns=ns, name=name: custom.replace_namespaced_custom_object(
                                  SCHEDULING_GROUP, POD_GROUP_VERSION, ns, _PLURAL, name, obj, field_manager=MANAGER,
                                  **dry))
        for entry in plan.pod_groups:
            wanted = dict(entry.status)

            def change(obj: dict[str, Any], wanted: dict[str, Any] = wanted) -> dict[str, Any] | None:
                old = dict(obj.get("status") or {})
                new = {**{k: v for k, v in old.items() if k not in _STATUS_FIELDS}, **wanted}
                return None if new == old else {**obj, "status": new}

            ns, name = entry.name.split("/", 1)
            writer.update(f"status PodGroup {entry.name}", read(ns, name), change,
                          lambda obj, ns=ns, name=name: custom.replace_namespaced_custom_object_status(
                              SCHEDULING_GROUP, POD_GROUP_VERSION, ns, _PLURAL, name, obj,
                              field_manager=MANAGER, **dry))
    return writer.writes


class _GroupWriter(_Writer):
    """queue_status's writer (fenced, errors recorded or raised), for any change and deletes."""

    def update(self, label: str, read: Callable[[], Any], change: Callable[[Any], Any],
               replace: Callable[[Any], Any]) -> None:
        def attempt() -> None:
            if update_with_retry(lambda: missing_is_none(read), change,
                                 lambda obj: self._kept(self._fenced(lambda: replace(obj)))):
                self.writes.append(label)
        self._guarded(f"writing {label}", attempt)

    def delete(self, label: str, delete: Callable[[], Any]) -> None:
        def attempt() -> None:
            gone = missing_is_none(lambda: self._fenced(delete))
            if gone is not None:
                kind, key = label.split(" ", 1)
                self._kept(gone, (kind, key))
                self.writes.append(f"delete {label}")
        self._guarded(f"deleting {label}", attempt)
