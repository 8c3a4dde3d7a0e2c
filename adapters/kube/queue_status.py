"""Writing ClusterQueue and LocalQueue status as Kueue writes it (engine/queues.py computes it).

A queue's status is written only when it differs from the one recorded, ignoring the time of
its ``Active`` condition (which moves only when the condition's status does): a cycle that
changes nothing writes no status. Fields clueue does not compute (the deprecated ``flavors``,
...) are kept as they are. A LocalQueue's admitted usage is written under both of its names,
``flavorUsage`` (v1beta1) and ``flavorsUsage`` (v1beta2): see engine/queues.py.

**Fair sharing** (docs/queue-status.md): with Kueue's fair sharing on, a ClusterQueue's and a
Cohort's ``status.fairSharing.weightedShare`` is the share the policy compares
(engine/fairsharing.py), in Kueue's unit; with it off, their ``fairSharing`` is removed, as
Kueue does. With admission fair sharing on, each LocalQueue's
``status.fairSharing.admissionFairSharingStatus`` (``consumedResources``, ``lastUpdate``) is
sampled every ``usageSamplingInterval`` at the plan's time, and at once with the entry penalty
of the workloads the plan admits there (engine/admission_usage.py), beside
``weightedShare: 0`` (Kueue computes no share for a LocalQueue); between samples it is left as it is.

Every write is fenced by the decider lease, as apply.py's are, and retried from a fresh read
on a conflict.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Callable

from kubernetes import client

from clueue.engine import Plan, Snapshot
from clueue.engine.admission_usage import ConsumedUsage, admitted_requests, admitted_usage, consumed_updates
from clueue.engine.facts import Node
from clueue.engine.fairsharing import held_quota, status_shares
from clueue.engine.podgroups import rfc3339
from clueue.engine.quantity import format_quantity, parse_quantity
from clueue.engine.queues import Condition, QueueStatuses, queue_statuses

from .apply import MANAGER, _conditions, written_versions
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


#: How a queue's ``status.fairSharing`` changes, given the one recorded ({} if none): the new
#: one, or None to remove it.
FairChange = Callable[[dict[str, Any]], "dict[str, Any] | None"]


def _wanted(old: dict[str, Any], fields: dict[str, Any], active: Condition | None,
            fair: FairChange | None) -> dict[str, Any] | None:
    """The status with ``fields``, the ``Active`` condition (if any) and ``fair`` (if any)
    applied; None if it is so already."""
    new = {**old, **fields}
    if active is not None:
        new["conditions"] = _conditions(list(old.get("conditions") or []),
                                        [(active.type, active.status, active.reason, active.message)])
    if fair is not None:
        sharing = fair(dict(old.get("fairSharing") or {}))
        if sharing is None:
            new.pop("fairSharing", None)
        else:
            new["fairSharing"] = sharing
    return None if _canonical(new) == _canonical(old) else new


def _share(value: int | None) -> FairChange:
    """A ClusterQueue's or Cohort's fairSharing with ``weightedShare`` ``value`` (None: fair
    sharing is off, and Kueue removes the field)."""
    return lambda old: None if value is None else {**old, "weightedShare": value}


def _consumed(update: ConsumedUsage | None) -> FairChange | None:
    """A LocalQueue's fairSharing with the consumed usage sampled now (None: left as it is)."""
    if update is None:
        return None
    consumed = {"consumedResources": {r: format_quantity(q) for r, q in sorted(update.resources.items())},
                "lastUpdate": rfc3339(update.last_update)}
    return lambda old: {**old, "weightedShare": old.get("weightedShare", 0), "admissionFairSharingStatus": consumed}


def _fair_sharing(snapshot: Snapshot, plan: Plan, statuses: QueueStatuses
                  ) -> tuple[dict[Node, int] | None, dict[str, ConsumedUsage]]:
    """Every ClusterQueue's and Cohort's weightedShare as the plan leaves them (None: fair
    sharing is off), and the LocalQueues' consumed usage due at the plan's time."""
    settings = snapshot.kueue_settings
    shares = None
    if settings.fair_sharing is not None:
        shares = status_shares(snapshot, {name: held_quota(cq.flavors_reservation)
                                          for name, cq in statuses.cluster_queues.items()})
    consumed = {} if plan.decided_at is None else consumed_updates(snapshot, admitted_usage(statuses), plan.decided_at,
                                                                    admitted_requests(plan))
    return shares, consumed


def write_queue_status(api: client.ApiClient, snapshot: Snapshot, plan: Plan, *, version: str,
                       fence: Callable[[], None] | None = None, dry_run: bool = False,
                       errors: list[str] | None = None, written: list[tuple[str, str, str]] | None = None
                       ) -> list[str]:
    """Write the status of every ClusterQueue, Cohort and LocalQueue of ``snapshot`` that differs
    from what ``plan`` leaves (see the module docstring); ``snapshot`` holds the fair sharing
    sections in effect (:func:`~clueue.engine.fairsharing.with_settings`); ``version`` is the
    served kueue.x-k8s.io version. Returns the writes done (``status ClusterQueue NAME``,
    ``status Cohort NAME``, ``status LocalQueue NS/NAME``).

    With ``errors``, a write the API server refuses is recorded there and the others go on, and
    an unavailable server or a lost lease (``fence``) is recorded there and ends the writing, as
    :func:`~.apply.apply_plan` does; without, they are raised. ``written`` gets (kind, key,
    resourceVersion) of each object written, as :attr:`~.apply.ApplyResult.written` (so that a
    controller's cache takes them for its own writes, not for changes to decide on).

    Raises:
        ApiRefused, ClusterUnavailable: a request failed (without ``errors``).
        LeaseLost: ``fence`` found the decider lease lost (without ``errors``).
    """
    custom = client.CustomObjectsApi(api)
    dry = {"dry_run": "All"} if dry_run else {}
    writer = _Writer(api, fence or (lambda: None), errors)
    statuses = queue_statuses(snapshot, plan)
    shares, consumed = _fair_sharing(snapshot, plan, statuses)
    with writer.batch(written):
        for name, cq in statuses.cluster_queues.items():
            writer.write(f"ClusterQueue {name}", cq.to_dict(), cq.active,
                         lambda n=name: custom.get_cluster_custom_object(KUEUE_GROUP, version, "clusterqueues", n),
                         lambda obj, n=name: custom.replace_cluster_custom_object_status(
                             KUEUE_GROUP, version, "clusterqueues", n, obj, field_manager=MANAGER, **dry),
                         _share(None if shares is None else shares.get(Node("cq", name), 0)))
        for name in sorted(snapshot.cohorts):
            writer.write(f"Cohort {name}", {}, None,
                         lambda n=name: custom.get_cluster_custom_object(KUEUE_GROUP, version, "cohorts", n),
                         lambda obj, n=name: custom.replace_cluster_custom_object_status(
                             KUEUE_GROUP, version, "cohorts", n, obj, field_manager=MANAGER, **dry),
                         _share(None if shares is None else shares.get(Node("cohort", name), 0)))
        for key, lq in statuses.local_queues.items():
            writer.write(f"LocalQueue {key}", lq.to_dict(), lq.active,
                         lambda q=lq: custom.get_namespaced_custom_object(
                             KUEUE_GROUP, version, q.namespace, "localqueues", q.name),
                         lambda obj, q=lq: custom.replace_namespaced_custom_object_status(
                             KUEUE_GROUP, version, q.namespace, "localqueues", q.name, obj, field_manager=MANAGER,
                             **dry),
                         _consumed(consumed.get(key)))
    return writer.writes


class _Writer:
    """Reads a queue, derives its status, writes it fenced; records what it wrote."""

    def __init__(self, api: client.ApiClient, fence: Callable[[], None], errors: list[str] | None) -> None:
        self.api, self.fence, self.errors = api, fence, errors
        self.writes: list[str] = []
        self.written: list[tuple[str, str, str]] = []  # (kind, key, resourceVersion or "" if deleted)

    def _fenced(self, write: Callable[[], Any]) -> Any:
        def once() -> Any:
            self.fence()  # before each try: a retry may come seconds later
            return write()
        return call(once)

    def _kept(self, obj: Any, deleting: tuple[str, str] | None = None) -> Any:
        """``obj``, a write's answer, with its version recorded in :attr:`written`."""
        self.written.extend(written_versions(obj, deleting))
        return obj

    def write(self, label: str, fields: dict[str, Any], active: Condition | None,
              read: Callable[[], Any], replace: Callable[[Any], Any], fair: FairChange | None = None) -> None:
        def change(obj: dict[str, Any]) -> dict[str, Any] | None:
            wanted = _wanted(obj.get("status") or {}, fields, active, fair)
            return None if wanted is None else {**obj, "status": wanted}

        def attempt() -> None:
            if update_with_retry(lambda: missing_is_none(read), change,
                                 lambda obj: self._kept(self._fenced(lambda: replace(obj)))):
                self.writes.append(f"status {label}")

        self._guarded(f"writing the status of {label}", attempt)

    def _guarded(self, doing: str, attempt: Callable[[], None]) -> None:
        """``attempt()``: a request the API server refuses is recorded in ``errors`` and the
        writing goes on (raised without ``errors``)."""
        if self.errors is None:
            with api_errors(self.api, doing):
                attempt()
        else:
            with recorded(self.errors, self.api, doing):
                attempt()

    @contextlib.contextmanager
    def batch(self, written: list[tuple[str, str, str]] | None) -> Iterator[None]:
        """Around all the writes: an unavailable server or a lost lease ends them, recorded in
        ``errors`` (raised without); then ``written`` gets what was written."""
        try:
            yield
        except (ClusterUnavailable, LeaseLost) as e:
            if self.errors is None:
                raise
            self.errors.append(str(e))
        if written is not None:
            written.extend(self.written)
