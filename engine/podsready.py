"""Kueue's ``waitForPodsReady`` (docs/pods-ready.md): an admitted workload whose pods are not
all ready in time is evicted and requeued with exponential back-off, up to a limit, then
deactivated; with ``blockAdmission`` nothing new is admitted while one is not ready.

Pure: the time ``now`` comes from the adapter, and :func:`wait_for_pods_ready` says when the
next cycle is due (a timeout or a back-off ending) so that a controller wakes then by itself:
neither is a change of the cluster.

When a workload's pods are ready:

- made of pods (plain pods, pod groups): every admitted pod that has not succeeded is Ready;
- a Workload object of another integration: its ``PodsReady`` condition is True (written by
  the integration, as Kueue's job controllers do).

clueue records that state on the Workloads it makes for pods as Kueue's pod integration does, in
a ``PodsReady`` condition (:func:`pods_ready_condition`, written by apply); a Workload of another
integration has it from that integration's controller.

The timeout counts from its ``QuotaReserved`` condition's time (once its admission checks are
Ready: before that its pods are gated); a ``PodsReady=False`` condition with Kueue's reason
``WaitForRecovery`` counts ``recoveryTimeout`` from that condition's time instead (pods that
were ready are not timed at all without ``recoveryTimeout``, as in Kueue).

Back-off is ``backoffBaseSeconds * 2^(count-1)`` capped at ``backoffMaxSeconds``, where
``count`` is the new ``status.requeueState.count``. Kueue adds a random jitter; clueue adds none,
so that a plan is a function of its inputs.
"""

from __future__ import annotations

from dataclasses import replace

from .config import WaitForPodsReady
from .durations import format_duration
from .memo import Changes
from .objects import KueueWorkload
from .podgroups import rfc3339
from .reasons import Reason, make_reason
from .snapshot import Snapshot
from .workloads import Workload, Workloads

__all__ = ["wait_for_pods_ready", "backoff_seconds", "pods_ready", "pods_ready_condition"]

#: Kueue's reason on a ``PodsReady=False`` condition of pods that were ready and are no longer.
RECOVERY_REASON = "WaitForRecovery"
#: Kueue's other reasons of ``PodsReady``: False before the pods were first ready, True once
#: they are, True again once pods that were no longer ready are.
START_REASON, STARTED_REASON, RECOVERED_REASON = "WaitForStart", "Started", "Recovered"
NOT_READY_MESSAGE = "Not all of the workload's pods are ready yet"
READY_MESSAGE = "All of the workload's pods are ready"
RECOVERY_MESSAGE = "Pods of the workload that were ready are no longer; waiting for them to recover"


def backoff_seconds(settings: WaitForPodsReady, count: int) -> int:
    """Seconds a workload requeued for the ``count``-th time waits (no jitter).

    >>> backoff_seconds(WaitForPodsReady(), 1), backoff_seconds(WaitForPodsReady(), 3), backoff_seconds(WaitForPodsReady(), 9)
    (60, 240, 3600)
    """
    return min(settings.backoff_base_seconds * 2 ** max(count - 1, 0), settings.backoff_max_seconds)


def pods_ready(w: Workload, obj: KueueWorkload | None) -> bool:
    """Whether ``w``'s pods are ready (see the module docstring): for pods, by the pods
    themselves (the ``PodsReady`` condition is clueue's own record of them, maybe from before)."""
    if w.origin == "workload":
        return obj is not None and bool(obj.pods_ready)
    needed = sum(w.admitted_count(ps.name) for ps in w.pod_sets)
    ready = sum(1 for pods in w.pods.values() for p in pods if p.ready and p.phase == "Running" and not p.deleting)
    return ready >= needed


def wait_for_pods_ready(built: Workloads, snapshot: Snapshot, now: int | None) -> tuple[Workloads, int | None]:
    """``built`` with the evictions, back-offs and admission blocks of waitForPodsReady (the
    section in effect: ``snapshot.kueue_settings``), and when the next cycle is due for it
    (epoch seconds; ``None``: never). Without the section, or without a time, ``built`` itself.

    The workloads it returns are all marked changed (``changes.base`` None): their holds depend
    on the time, which the memo of a Session does not see.
    """
    settings = snapshot.kueue_settings.wait_for_pods_ready
    if settings is None or now is None:
        return built, None
    by_key = dict(built.by_key)
    due: list[int] = []
    unready: list[str] = []
    for key, w in built.by_key.items():
        obj = snapshot.workloads.get(key)
        if w.finished or obj is None:
            continue
        if w.admission is not None and obj.admission is not None:
            if w.evict is not None or (w.checks and not w.confirmed) or pods_ready(w, obj):
                continue
            # pods that were ready are timed by recoveryTimeout only (none: not at all), from when
            # they stopped being ready: now, if clueue records that with this cycle (pods_ready_condition)
            recovering = obj.pods_ready is True or obj.pods_ready_reason == RECOVERY_REASON
            if recovering and settings.recovery_timeout_seconds is None:
                unready.append(key)
                continue
            since, limit = (obj.pods_ready_since if obj.pods_ready is False else now, settings.recovery_timeout_seconds) \
                if recovering else (obj.reserved_at, settings.timeout_seconds)
            if not since:
                continue
            assert limit is not None
            ends = since + int(limit)
            if now >= ends:
                by_key[key] = replace(w, evict=_timed_out(settings, obj, limit, now, recovering))
            else:
                unready.append(key)
                due.append(ends)
        elif w.admission is None and obj.requeue_at > now and obj.active:
            by_key[key] = replace(w, held=w.held + (make_reason(
                "RequeueBackoff", requeues=obj.requeue_count, until=rfc3339(obj.requeue_at)),))
            due.append(obj.requeue_at)
    if settings.block_admission and unready:
        block = make_reason("WaitingForPodsReady", workloads=sorted(unready)[:3], count=len(unready))
        for key, w in by_key.items():
            if w.admission is None and not w.finished and not w.held:
                by_key[key] = replace(w, held=(block,))
    changes = Changes(by_key, frozenset(), None, built.changes.head)
    return Workloads(by_key, built.actions, built.notices, changes), min(due, default=None)


def pods_ready_condition(w: Workload, obj: KueueWorkload | None, admitted: bool) -> tuple[str, str, str] | None:
    """The ``PodsReady`` condition (status, reason, message) clueue records on the Workload it
    makes for pods (plain pods, pod groups) under waitForPodsReady, with Kueue's reasons:
    ``Started`` (True) once all its pods are ready, ``WaitForStart`` (False) until then and while
    it is not admitted (``admitted``: it holds its admission after the cycle), ``WaitForRecovery``
    (False) when pods that were ready are no longer, ``Recovered`` (True) once they are again.
    None for a Workload of another integration (its controller records it) or a finished one."""
    if w.origin == "workload" or w.finished:
        return None
    if not admitted or w.admission is None:  # not admitted, or only now: its pods are gated
        return ("False", START_REASON, NOT_READY_MESSAGE)
    was_ready, reason = (obj.pods_ready, obj.pods_ready_reason) if obj is not None else (None, "")
    if pods_ready(w, obj):
        return ("True", RECOVERED_REASON if reason in (RECOVERY_REASON, RECOVERED_REASON) else STARTED_REASON,
                READY_MESSAGE)
    if was_ready is True or reason == RECOVERY_REASON:
        return ("False", RECOVERY_REASON, RECOVERY_MESSAGE)
    return ("False", START_REASON, NOT_READY_MESSAGE)


def _timed_out(settings: WaitForPodsReady, obj: KueueWorkload, limit: float, now: int, recovering: bool) -> Reason:
    """The eviction of a workload whose pods were not ready within ``limit`` seconds: requeued
    with back-off, or deactivated once it was requeued ``backoffLimitCount`` times."""
    count = obj.requeue_count + 1
    details = dict(timeout=format_duration(limit), recovery=recovering, count=count)
    if settings.backoff_limit_count is not None and count > settings.backoff_limit_count:
        return make_reason("RequeuingLimitExceeded", **details, limit=settings.backoff_limit_count)
    return make_reason("PodsReadyTimeout", **details, limit=settings.backoff_limit_count,
                       requeueAt=rfc3339(now + backoff_seconds(settings, count)))
