"""Writing ClusterQueue and LocalQueue status as Kueue writes it (engine/queues.py computes it).

A queue's status is written only when it differs from the one recorded, ignoring the time of
its ``Active`` condition (which moves only when the condition's status does): a cycle that
changes nothing writes no status. Fields clueue does not compute (``fairSharing``, ...) are
kept as they are. A LocalQueue's admitted usage is written under both of its names,
``flavorUsage`` (v1beta1) and ``flavorsUsage`` (v1beta2): see engine/queues.py.

Every write is fenced by the decider lease, as apply.py's are, and retried from a fresh read
on a conflict.
"""

from __future__ import annotations

from typing import Any, Callable

from kubernetes import client

from clueue.engine import Plan, Snapshot
from clueue.engine.quantity import format_quantity, parse_quantity
from clueue.engine.queues import queue_statuses

from .apply import MANAGER, _conditions
from .kinds import KUEUE_GROUP
from .errors import ClusterUnavailable, api_errors, recorded
from .lease import LeaseLost
from .retry import call, missing_is_none, update_with_retry

__all__ = ["write_queue_status"]


def _canonical(value: Any) -> Any:
    """``value`` for comparison: quantities in one spelling, condition times left out."""
    if isinstance(value, dict):
        return {k: (_quantity(v) if k in ("total", "borrowed") else _canonical(v))
                for k, v in value.items() if k not in ("lastTransitionTime", "observedGeneration")}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def _quantity(value: Any) -> Any:
    try:
        return format_quantity(parse_quantity(value))
    except ValueError:
        return value


def _wanted(old: dict[str, Any], fields: dict[str, Any], active: Any) -> dict[str, Any] | None:
    """The status with ``fields`` and the ``Active`` condition set; None if it is so already."""
    conditions = _conditions(list(old.get("conditions") or []),
                             [(active.type, active.status, active.reason, active.message)])
    new = {**old, **fields, "conditions": conditions}
    return None if _canonical(new) == _canonical(old) else new


def write_queue_status(api: client.ApiClient, snapshot: Snapshot, plan: Plan, *, version: str,
                       fence: Callable[[], None] | None = None, dry_run: bool = False,
                       errors: list[str] | None = None) -> list[str]:
    """Write the status of every ClusterQueue and LocalQueue of ``snapshot`` that differs from
    what ``plan`` leaves (see the module docstring); ``version`` is the served kueue.x-k8s.io
    version. Returns the writes done (``status ClusterQueue NAME``, ``status LocalQueue NS/NAME``).

    With ``errors``, a write the API server refuses is recorded there and the others go on, and
    an unavailable server or a lost lease (``fence``) is recorded there and ends the writing, as
    :func:`~.apply.apply_plan` does; without, they are raised.

    Raises:
        ApiRefused, ClusterUnavailable: a request failed (without ``errors``).
        LeaseLost: ``fence`` found the decider lease lost (without ``errors``).
    """
    custom = client.CustomObjectsApi(api)
    dry = {"dry_run": "All"} if dry_run else {}
    writer = _Writer(api, fence or (lambda: None), errors)
    statuses = queue_statuses(snapshot, plan)
    try:
        for name, cq in statuses.cluster_queues.items():
            writer.write(f"ClusterQueue {name}", cq.to_dict(), cq.active,
                         lambda n=name: custom.get_cluster_custom_object(KUEUE_GROUP, version, "clusterqueues", n),
                         lambda obj, n=name: custom.replace_cluster_custom_object_status(
                             KUEUE_GROUP, version, "clusterqueues", n, obj, field_manager=MANAGER, **dry))
        for key, lq in statuses.local_queues.items():
            writer.write(f"LocalQueue {key}", lq.to_dict(), lq.active,
                         lambda q=lq: custom.get_namespaced_custom_object(
                             KUEUE_GROUP, version, q.namespace, "localqueues", q.name),
                         lambda obj, q=lq: custom.replace_namespaced_custom_object_status(
                             KUEUE_GROUP, version, q.namespace, "localqueues", q.name, obj, field_manager=MANAGER,
                             **dry))
    except (ClusterUnavailable, LeaseLost) as e:
        if errors is None:
            raise
        errors.append(str(e))
    return writer.writes


class _Writer:
    """Reads a queue, derives its status, writes it fenced; records what it wrote."""

    def __init__(self, api: client.ApiClient, fence: Callable[[], None], errors: list[str] | None) -> None:
        self.api, self.fence, self.errors = api, fence, errors
        self.writes: list[str] = []

    def _fenced(self, write: Callable[[], Any]) -> Any:
        def once() -> Any:
            self.fence()  # before each try: a retry may come seconds later
            return write()
        return call(once)

    def write(self, label: str, fields: dict[str, Any], active: Any,
              read: Callable[[], Any], replace: Callable[[Any], Any]) -> None:
        def change(obj: dict[str, Any]) -> dict[str, Any] | None:
            wanted = _wanted(obj.get("status") or {}, fields, active)
            return None if wanted is None else {**obj, "status": wanted}

        def attempt() -> None:
            if update_with_retry(lambda: missing_is_none(read), change, lambda obj: self._fenced(lambda: replace(obj))):
                self.writes.append(f"status {label}")

        if self.errors is None:
            with api_errors(self.api, f"writing the status of {label}"):
                attempt()
        else:
            with recorded(self.errors, self.api, f"writing the status of {label}"):
                attempt()
