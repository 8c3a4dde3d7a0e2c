"""One decider's turn: take the lease, read the cluster, decide, write, give the lease back.

This is what ``clueue apply`` runs, and what the controller runs each cycle: the snapshot is
read only once the decider lease is held (lease.py), so it holds every write of the previous
decider, and every write is fenced by the lease (apply.py). A dry run writes nothing and takes
no lease. Quota that admitted workloads hold beyond their quota tree's, from before the lease
or from outside clueue, is reported as a warning (engine/overcommit.py), never evicted here.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from kubernetes import client

from clueue.engine import Config, Document, Plan, Policy, Snapshot, WorkloadEntry
from clueue.engine.fairsharing import with_settings
from clueue.engine.guard import guarded_cycle
from clueue.engine.memo import Memo
from clueue.engine.overcommit import over_quota
from clueue.engine.workloads import build_workloads

from .apply import WORKERS, ApplyResult, SentWarnings, apply_plan, desired_status
from .consistency import missing_owners, pod_set_difference
from .errors import api_errors
from .kinds import KUEUE_GROUP, kueue_version
from .lease import LEASE_NAME, DeciderLease
from .pacing import PendingWriteLimiter
from .read import read_cluster
from .queue_status import write_queue_status
from .podgroup_status import write_podgroup_status

__all__ = ["decide_and_apply", "Decided", "LEASE_TIMEOUT_S", "informational", "unsettled"]

LEASE_TIMEOUT_S = 60.0  # how long apply waits for another decider: a cycle and its writes, and some


@dataclass(frozen=True)
class Decided:
    """What one turn decided and what applying it did."""

    plan: Plan | None  # None: nothing was decided (kueue.x-k8s.io is not installed)
    applied: ApplyResult
    # when the next PodGroup schedule timeout or back-off, or waitForPodsReady timeout or
    # back-off, ends (epoch seconds; None: none, or nothing was written): not a change of the
    # cluster, so a controller must cycle then itself
    next_due: int | None = None


def decide_and_apply(api: client.ApiClient, policy: Policy, config: Config = Config(), *, dry_run: bool = False,
                     lease_namespace: str | None = None, lease_timeout: float = LEASE_TIMEOUT_S,
                     decide: Callable[[Snapshot], Plan] | None = None, read: Callable[[], Snapshot] | None = None,
                     lease: DeciderLease | None = None, memo: Memo | None = None,
                     pending_writes: PendingWriteLimiter | None = None,
                     cached: Callable[[str, str], Document | None] | None = None, workers: int = WORKERS,
                     should_stop: Callable[[], bool] | None = None, events: PendingWriteLimiter | None = None,
                     warned: SentWarnings | None = None,
                     later: Callable[[Snapshot, Plan, tuple[WorkloadEntry, ...], bool], None] | None = None,
                     event_sink: Callable[[list[Callable[[], str]]], None] | None = None) -> Decided:
    """Hold the decider lease (``lease_namespace``, default the configuration's controller
    namespace) while reading the cluster (``read``, default :func:`read_cluster`), deciding
    (``decide``, default a guarded cycle of ``policy`` and ``config``) and applying the plan.

    A controller passes the ``lease`` it holds for as long as it leads (taken and renewed by
    it, and given back at its end): it is used as the fence and neither taken nor released
    here; its ``read`` is then a snapshot of its cache, which holds every write made before the
    lease was taken (:meth:`ClusterCache.resync <.cache.ClusterCache.resync>`). A ``memo`` kept
    across its calls makes the over-quota check cost what changed (engine/memo.py), and one
    ``pending_writes`` limiter paces the rewrites of pending Workloads' conditions across its
    cycles (pacing.py; those held back are in ``ApplyResult.deferred``). With ``cached`` (the
    cache's lookup by kind and key, current as of the controller's own writes), the Workloads
    that the cache shows exactly as the plan wants them are not read again by apply: a cycle over
    a backlog of thousands costs the reads of what changed, not one read per Workload; and
    apply tries its updates on the cached objects first rather than reading them.
    ``workers``, ``should_stop``, ``events`` (a limit on routine Events) and ``warned`` (the
    Warnings already sent) are :func:`~.apply.apply_plan`'s. The plan is applied against the
    snapshot it was decided from (``basis``): a write whose object was deleted or replaced since
    is skipped, never sent to another object nor made anew (docs/concurrency.md).

    ``later`` (a controller's background writer, adapters/controller/writer.py) takes what only
    informs: the status of waiting Workloads that exist already and match their pods
    (:func:`informational`), and the queue status (the last argument True; not with admission
    fair sharing, whose LocalQueue status the next cycle reads); they are handed to it with the
    snapshot and plan rather than written here, so the turn ends with its last decision
    written. So do the Events, with ``event_sink`` (:func:`~.apply.apply_plan`).

    Raises:
        LeaseHeld: another decider held the lease for ``lease_timeout`` seconds.
        AdapterError: the lease's namespace does not exist; the cluster cannot be read.
        ClueueError: the cycle failed (see :func:`~clueue.engine.guard.guarded_cycle`).
    """
    run = decide or (lambda snapshot: guarded_cycle(snapshot, policy, config, now=int(time.time())))
    namespace = lease_namespace or config.controller_namespace
    version = kueue_version(api)
    if version is None:  # before the lease: a cluster without Workloads has nothing to decide
        return Decided(None, ApplyResult(errors=[f"{KUEUE_GROUP} is not installed: Workloads cannot be written; "
                                                 "nothing applied"]))
    with contextlib.ExitStack() as held:
        if not dry_run and lease is None:
            with api_errors(api, f"taking Lease {namespace}/{LEASE_NAME}"):
                lease = held.enter_context(DeciderLease(api, namespace).acquire(lease_timeout))
        snapshot = (read or (lambda: read_cluster(api)))()
        plan = run(snapshot)
        now, waiting = (plan, ()) if later is None or cached is None or dry_run else informational(plan, cached)
        applied = apply_plan(api, unsettled(now, cached) if cached else now, dry_run=dry_run,
                             fence=lease.fence if lease and not dry_run else None, pending_writes=pending_writes,
                             workers=workers, should_stop=should_stop, cached=cached, events=events, warned=warned,
                             event_sink=event_sink, basis=snapshot)  # every write conditional on what this snapshot held
        settled = with_settings(snapshot, config)
        # With admission fair sharing the LocalQueues' status holds the usage the next cycle orders
        # them by (docs/queue-status.md): then it is a decision's state, written here.
        queues_later = later is not None and settled.kueue_settings.admission_fair_sharing is None
        if not dry_run and not applied.stopped and later is not None:
            later(settled, plan, waiting, queues_later)
        if not dry_run and not applied.stopped and not queues_later:  # queue status as Kueue writes it
            applied.writes += write_queue_status(api, settled, plan, version=version,
                                                 fence=lease.fence if lease else None, errors=applied.errors,
                                                 written=applied.written)
        if not dry_run and not applied.stopped:  # PodGroup phases are decisions (InQueue holds): written here
            applied.writes += write_podgroup_status(api, plan, version=version, errors=applied.errors,
                                                    fence=lease.fence if lease else None,
                                                    written=applied.written, basis=snapshot)  # podgroup_status.py
    if memo is not None:
        memo.start(snapshot.configuration())
    applied.warnings += [f.message() for f in over_quota(snapshot, build_workloads(snapshot, config, memo).workloads)]
    # a waitForPodsReady or PodGroup timeout or back-off ends then (engine/podsready.py, podgroups.py)
    return Decided(plan, applied, plan.wake_at if not dry_run else None)


def informational(plan: Plan, cached: Callable[[str, str], Document | None]) -> tuple[Plan, tuple[WorkloadEntry, ...]]:
    """``plan`` without the entries whose writes only say why a workload waits, and those
    entries: waiting (pending or inadmissible), named by no action, with a Workload object the
    cache holds (not being deleted) that matches its pods and owners. What remains decides
    (admissions, evictions, finishing) or makes a Workload its pods need."""
    acted = {a.workload for a in plan.actions} | {a.target for a in plan.actions}

    def informs(entry: WorkloadEntry) -> bool:
        if entry.state not in ("pending", "inadmissible") or entry.name in acted or not entry.has_workload_object:
            return False
        return _cached_match(entry, cached) is not None

    waiting = tuple(entry for entry in plan.workloads if informs(entry))
    if not waiting:
        return plan, ()
    names = {entry.name for entry in waiting}
    return replace(plan, workloads=tuple(e for e in plan.workloads if e.name not in names)), waiting


def unsettled(plan: Plan, cached: Callable[[str, str], Document | None]) -> Plan:
    """``plan`` without the workload entries apply would write nothing for, as far as the cached
    Workloads show: no action names them, their Workload exists (not being deleted), matches its
    pods and owners, and holds the status the plan wants. Apply would read each of them only to
    skip it. When in doubt an entry is kept: apply then reads it and decides itself."""
    acted = {a.workload for a in plan.actions} | {a.target for a in plan.actions}

    def settled(entry: WorkloadEntry) -> bool:
        if entry.name in acted or entry.state == "finished":
            return False
        body = _cached_match(entry, cached)
        # apply's own judgement of whether the status it would write differs
        return body is not None and desired_status(entry, dict(body.get("status") or {})) is None

    kept = tuple(entry for entry in plan.workloads if not settled(entry))
    return plan if len(kept) == len(plan.workloads) else replace(plan, workloads=kept)


def _cached_match(entry: WorkloadEntry, cached: Callable[[str, str], Document | None]) -> dict[str, Any] | None:
    """The body of the cached Workload of ``entry`` when it exists, is not being deleted and (for
    a workload of pods) matches its pods and owners; None otherwise."""
    doc = cached("Workload", entry.name)
    if doc is None:
        return None
    body = dict(doc.body)
    if (body.get("metadata") or {}).get("deletionTimestamp"):
        return None
    if entry.origin != "workload" and (pod_set_difference(body, entry) or missing_owners(body, entry)):
        return None
    return body
