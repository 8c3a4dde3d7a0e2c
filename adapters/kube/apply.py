"""Applying a plan to a cluster, exactly and safely.

Order, and what it guarantees:

1. **Workloads.** Every workload of the plan gets a ``kueue.x-k8s.io`` Workload object (created
   for pods and pod groups that lack one) whose status records the decision: the admission and
   ``QuotaReserved``/``Admitted`` conditions for admitted ones, ``QuotaReserved=False`` with the
   reasons' messages for the others; each admitted pod set's ``resourceUsage`` is its requests
   times its count, as Kueue writes it. Under waitForPodsReady a Workload made for pods also
   gets its ``PodsReady`` condition (the entry's ``pods_ready``), when its status or reason changes. A group of pods that cannot make a Workload yet
   (``WorkloadEntry.has_workload_object``: incomplete, or its pods disagree on their count) gets
   none, KEP-976's rule, and a Warning Event on each pod when it cannot be built as it is (once
   per pod and reasons: ``warned``). A Workload made for pods matches them: while it holds no
   admission, one whose pod sets (names, counts, requests) differ from its pods' is deleted (only
   the version read) and created anew, since Kueue's Workloads do not change their pod sets;
   one that holds an admission is left as it is, with a warning. Either way every pod gets an
   owner reference on it (so replacement pods are adopted). An admitted pod group's succeeded
   pods are written in ``status.reclaimablePods``.
2. **Pods.** The admission gate is removed and the chosen flavors' node labels added to the node
   selector, on the exact pod the plan decided on (same uid), and only once the Workload's
   admission is recorded and names the flavors the plan's does: as the API server returned the
   Workload to step 1 of the same apply (the answer to its status write, or its read when the
   status was in place already), else read again before its first pod is ungated (never taken
   from a cache or from the plan); a plan whose flavors differ from the recorded ones (one decided
   before another decider recorded its admission) leaves the pods gated, with an error, for the
   next cycle to ungate as recorded. A failure between 1 and 2 leaves an admitted Workload with
   gated pods, which the next cycle ungates; never an ungated pod without a recorded admission,
   nor with another flavor's node selector than the recorded one.
   Each pod ungated records the uid of the Workload it runs under (``clueue.dev/workload-uid``):
   if that Workload is deleted, the engine ends the group (engine/workloads.py).
3. **Excess pods.** The finalizer is removed and the pod deleted, by uid; so are the live pods
   of a group whose Workload was deleted. ``finish`` marks the Workload of finished pods
   ``Finished=True`` (reason ``Succeeded``, or ``Failed`` for a failed single pod, as Kueue
   writes it), which releases its quota, before ``finalize-pod`` removes the finalizer of its
   pods (a pod finished, replaced, or deleted while waiting).
4. **Preemption**, in the same pass as 2 and 3, in the plan's order. Step 1 leaves a victim's
   Workload as it is (it still holds its admission); here, if it still holds
   ``status.admission``, it loses it and gets ``Evicted=True`` (reason ``Preempted``, or the
   stop's), ``QuotaReserved=False`` (``Pending``) and ``Admitted=False`` (``NoReservation``), and
   for a preemption ``Preempted=True`` with Kueue's variant (``InClusterQueue``,
   ``InCohortReclamation``, ``InCohortReclaimWhileBorrowing``); when it is admitted again, step
   1 turns ``Evicted`` and ``Preempted`` to False. Then its pods, if it is made of plain pods, are deleted as excess pods
   are: preemption removes all pods of a group. A victim that lost its admission meanwhile, or
   whose Workload is gone, is skipped; its pods are still deleted (by uid), since live ungated
   pods count as admitted and would keep holding the quota. The preemptor is never admitted by
   the plan that evicts: its entry only records why it waits. So the eviction releases the
   quota before any later cycle can admit the preemptor, and a failure halfway leaves a victim
   that still holds quota, which the next cycle preempts again.

Every write derives the change from the object as last known, and writes with its
resourceVersion; on a conflict it reads again and derives the change anew. The object known is
the one read, or the answer to the previous write of it (a status written on the Workload just
created), or a controller's cached copy (``cached``): a stale copy costs one conflict, never a
wrong write. A Workload missing from that cache is created without being read first, if the
snapshot held none either (below). A change
already in place is skipped, so applying the same plan twice writes nothing the second time, and
neither does a second cycle on an unchanged cluster: a pending Workload's
``QuotaReserved=False`` condition carries a digest of its reasons' codes and data
(``[clueue:<digest>]`` at the end of the message) and is rewritten only when they change, not
when only their wording does, nor when all that changed is whom it waited behind
(``WaitsBehind`` names workloads admitted in the cycle that decided; the next cycle sees them
admitted before). Events are recorded on Workloads and pods when something changes; a
controller's Event limit (``events``) drops the Normal ones beyond its rate (counted), never a
Warning, so Events do not spend the write budget decisions need. A controller
also paces those pending writes (``pending_writes``, pacing.py): the ones its limit holds back
are left for a later cycle; no decision is ever held back.

**A decision never outlives what it decided about.** A plan is decided from a snapshot
(``basis``); by the time of a write, what it decided about may be gone, or replaced by a new
object of the same name (new uid). Every write is therefore conditional on the object decided
about, and fails closed: skipped and reported (``skipped``, or ``errors`` for a pod left gated),
for the next cycle to decide from the cluster as it is then; nothing is made anew from an old
decision, nor written onto another object:

- *Workload status* (admission, pending reasons, eviction, finish, admission checks,
  nomination, deactivation, owner references): only onto the Workload of the uid the snapshot
  held, or onto the one this apply made because it held none; the update carries the
  resourceVersion it read and, on a conflict, is derived anew only from that same Workload. One
  deleted since is not made again; one of another uid is left as it is. So an admission is
  only ever recorded on the exact Workload it was decided for.
- *Workload creation*: only for pods the snapshot held with no Workload of that name (or whose
  Workload this apply itself deleted, as read, to replace it), none of whose live pods records
  the uid of a Workload it ran under (``clueue.dev/workload-uid``: that Workload was deleted, so
  their group ended), and, with a controller's cache, only while every pod decided about is
  still there with the same uid. A Workload made meanwhile by someone else (the create's 409)
  is not written on; one that a retried create of this apply made, its answer lost, is told
  from it by :func:`_as_made` (owned by exactly the pods decided about, no status yet).
- *Workload deletion* (a mismatched or unbuildable one, a released PodGroup's):
  preconditions on the uid (and resourceVersion) of the one decided about.
- *Pods*: ungated, unfinalized and deleted only by the uid the plan names (an update checks it,
  a delete carries it as a precondition), and ungated only under the Workload decided about,
  as its admission is recorded (by uid), and not when a controller's cache already shows that
  Workload deleted or replaced: the pod stays gated. Deleted after its pods were ungated, an
  admitted Workload has ended its group (engine/workloads.py): its pods, which record its uid,
  are deleted by the next cycle.
- *PodGroup status and release*: only onto the PodGroup of the uid the snapshot held
  (podgroup_status.py).

**Concurrent writes.** The writes of one workload (its Workload and status, then its pods, its
eviction) form a chain, kept in the order above; chains of different workloads depend on
nothing of each other and run on a pool of threads (``workers``), step 1 of every chain before
steps 2-4 of any. Before any step 1, what gives quota back is written: ``finish`` (a Workload
Finished) and the status of Workloads admitted before the plan (their succeeded pods'
``reclaimablePods``). The cycle may admit into that quota; written first, a stop in between never
leaves the recorded admissions over a quota (the succeeded pods no longer use it either way). A stop (the server gone, the lease lost) lets no further chain start; a
controller's shutdown (``should_stop``) starts no further workload but lets each one started
finish, so none is left half written. Events come after every write, off their path.

**Concurrent deciders.** resourceVersion guards one object, not a decision that spans many (two
admissions into one flavor). Deciders therefore take turns under the decider lease (lease.py,
decide.py): each reads the cluster only once it holds the lease, so no decision rests on a
snapshot older than another decider's writes, and every write here is first fenced by
``fence`` (a decider that can no longer show it holds the lease stops, with ``stopped`` set).
Re-checking each admission against the usage recorded right before writing it is not done: the
API server has no transaction over several objects, so such a check narrows the race without
closing it, at the cost of reading every Workload of the quota tree per admission. What the
lease cannot prevent (a status written by hand, or by another controller) is reported instead:
quota held beyond a quota tree's is a warning (engine/overcommit.py), never evicted silently,
and the recorded-admission check above keeps pods on their recorded flavor.
"""

from __future__ import annotations

import contextvars
import copy
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Mapping, TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from clueue.engine import Document, Plan, Snapshot, WorkloadEntry
from clueue.engine.plan import UNBUILT_CODES
from clueue.engine.objects import Rejected
from clueue.engine.preemption import RULES
from clueue.engine.quantity import format_quantity
from clueue.engine.queues import assignment_usage
from clueue.engine.kueue_api import ADMISSION_GATE as GATE, POD_FINALIZER as FINALIZER
from clueue.engine.workloads import WORKLOAD_UID_ANNOTATION

from .consistency import admission_difference, missing_owners, pod_set_difference, reasons_digest, tag_of, tagged
from .kinds import KUEUE_GROUP, kueue_version
from .lease import LeaseLost
from .pacing import PendingWriteLimiter
from .errors import ClusterUnavailable, recorded
from .events import event_body, involved_object
from .retry import call, counting_retries, missing_is_none, update_with_retry

__all__ = ["ApplyResult", "SentWarnings", "apply_plan", "desired_status", "GATE", "FINALIZER", "MANAGER", "WORKERS"]

MANAGER = "clueue"
WORKERS = 16  # workloads applied at once: enough to keep an API server busy; GIL-bound beyond
_MESSAGE_LIMIT = 32 * 1024  # condition messages are capped by the API at 32 KiB
T = TypeVar("T")


@dataclass
class ApplyResult:
    """What an apply did: each entry is ``"<verb> <Kind> <namespace/name>"``."""

    writes: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what needs a person, though nothing failed
    retries: int = 0  # requests sent again after a conflict, throttling or a transient failure
    stopped: bool = False  # the API server became unavailable: the rest of the plan was not applied
    # (kind, "ns/name" or name, resourceVersion) of each object written, "" for one deleted at once:
    # a controller's cache waits until it holds these before its next cycle reads it.
    written: list[tuple[str, str, str]] = field(default_factory=list)
    # the Workloads as each status write of a workload's entry returned them: a controller's
    # cache takes them at once, rather than waiting for its watch to bring them back
    answers: list[dict[str, Any]] = field(default_factory=list)
    # pending or inadmissible status writes the pending-write limit left for a later cycle
    deferred: list[str] = field(default_factory=list)
    events_dropped: int = 0  # Normal Events the Event limit (``events``) left unsent

    def summary(self) -> str:
        done = (f"{len(self.writes)} written, {len(self.skipped)} already in place, {len(self.errors)} failed, "
                f"{self.retries} {'retry' if self.retries == 1 else 'retries'}")
        if self.deferred:
            done += f", {len(self.deferred)} pending status writes deferred"
        if self.events_dropped:
            done += f", {self.events_dropped} Events over the Event limit not sent"
        return f"{done}; stopped before the end: run apply again to finish" if self.stopped else done


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _conditions(old: list[dict[str, Any]], wanted: list[tuple[str, str, str, str]]) -> list[dict[str, Any]]:
    """Conditions with ``wanted`` (type, status, reason, message) set; a condition's
    lastTransitionTime only moves when its status changes."""
    by_type = {c.get("type"): c for c in old}
    for kind, status, reason, message in wanted:
        previous = by_type.get(kind, {})
        since = previous.get("lastTransitionTime") if previous.get("status") == status else None
        by_type[kind] = {"type": kind, "status": status, "reason": reason, "message": message[:_MESSAGE_LIMIT],
                         "lastTransitionTime": since or _now()}
    return [by_type[k] for k in sorted(by_type)]


def desired_status(entry: WorkloadEntry, status: dict[str, Any], version: str = "v1beta1") -> dict[str, Any] | None:
    """The status a Workload should have for ``entry`` of a plan, given its ``status`` now; None
    if it has it already (or only an eviction, not this entry, may change it). Pure: it reads
    nothing and writes nothing, so a controller can ask it of its cached Workloads. ``version``
    is the Kueue API version the Workload is written in (the shape of a topologyAssignment)."""
    message = "; ".join(r.message for r in entry.reasons)
    if status.get("admission"):
        # admitted already: only an eviction (not part of this plan) may undo it; the quota
        # of its succeeded pods is released (reclaimablePods, for pods made into a Workload);
        # while its quota is only reserved, its admission checks follow its ClusterQueue's
        if entry.state != "admitted":
            return None
        out = dict(status)
        if entry.phase == "QuotaReserved":
            out.update(_synced_checks(status, entry))
        if entry.origin != "workload":
            reclaimable = [{"name": name, "count": count} for name, count in entry.reclaimable]
            if _reclaimable(status.get("reclaimablePods")) != _reclaimable(reclaimable):
                out["reclaimablePods"] = reclaimable
        ready = _pods_ready(entry, status)
        if ready:
            out["conditions"] = _conditions(status.get("conditions", []), ready)
        return None if out == status else out
    if entry.state == "admitted":
        admission = {"clusterQueue": entry.cluster_queue, "podSetAssignments": [
            {"name": a.name, "count": a.count, "flavors": dict(a.flavors),
             "resourceUsage": {r: format_quantity(q) for r, q in sorted(assignment_usage(entry, a).items())},
             **({"topologyAssignment": a.topology.to_dict(version)} if a.topology is not None else {})}
            for a in entry.admission]}
        # With admission checks only the quota is reserved: Admitted once they are all Ready.
        admitted = ("Admitted", "True", "Admitted", message) if entry.phase == "Admitted" else \
            ("Admitted", "False", "UnsatisfiedAdmissionChecks", "The workload has not all checks ready")
        wanted = [("QuotaReserved", "True", "QuotaReserved", message), admitted, *_pods_ready(entry, status)]
        for kind in ("Evicted", "Preempted"):  # admitted again after an eviction, as Kueue records it
            was: dict[str, Any] = next((c for c in status.get("conditions", []) if c.get("type") == kind), {})
            if was.get("status") == "True":
                wanted.append((kind, "False", "QuotaReserved", f"Previously: {was.get('message', '')}"))
        requeued: dict[str, Any] = next((c for c in status.get("conditions", []) if c.get("type") == "Requeued"), {})
        if requeued.get("status") == "False":  # queued again and admitted: its back-off is over
            wanted.append(("Requeued", "True", "BackoffFinished", "The workload was requeued and admitted"))
        conditions = _conditions(status.get("conditions", []), wanted)
        return {**{k: v for k, v in status.items() if k != "admissionChecks"}, "admission": admission,
                "conditions": conditions, **_synced_checks(status, entry)}
    reason = _waiting_reason(entry)
    digest = reasons_digest(entry.reasons)
    old = next((c for c in status.get("conditions", []) if c.get("type") == "QuotaReserved"), {})
    wanted = _pods_ready(entry, status)
    if (old.get("status"), old.get("reason"), tag_of(old.get("message", ""))) != ("False", reason, digest):
        wanted.append(("QuotaReserved", "False", reason, tagged(message, digest, _MESSAGE_LIMIT)))
    # else the same reasons with the same data: a changed rendering alone is no news
    return {**status, "conditions": _conditions(status.get("conditions", []), wanted)} if wanted else None


def _pods_ready(entry: WorkloadEntry, status: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """The entry's ``PodsReady`` condition (waitForPodsReady, engine/podsready.py) if the status
    does not have it with that status and reason (as Kueue compares it: a message alone is no
    change); else none."""
    if entry.pods_ready is None:
        return []
    recorded = next((c for c in status.get("conditions", []) if c.get("type") == "PodsReady"), {})
    if (recorded.get("status"), recorded.get("reason")) == entry.pods_ready[:2]:
        return []
    return [("PodsReady", *entry.pods_ready)]


def _synced_checks(status: dict[str, Any], entry: WorkloadEntry) -> dict[str, Any]:
    """``status.admissionChecks`` as Kueue keeps it for a quota reservation: one state per check
    the entry's ClusterQueue requires, sorted by name; a state recorded already (whoever wrote
    it: the check's controller) is kept as it is, a missing one added ``Pending``, one no longer
    required dropped. Empty (the field left out) without checks."""
    recorded = {c.get("name"): c for c in status.get("admissionChecks") or [] if isinstance(c, dict)}
    checks = [recorded.get(c.name) or {"name": c.name, "state": "Pending", "message": "", "lastTransitionTime": _now()}
              for c in sorted(entry.admission_checks, key=lambda c: c.name)]
    return {"admissionChecks": checks} if checks else {}


def _waiting_reason(entry: WorkloadEntry | None) -> str:
    """Kueue's reason on the ``QuotaReserved=False`` condition of a workload that waits (also
    right after an eviction released its quota)."""
    return "Inadmissible" if entry is not None and entry.state == "inadmissible" else "Pending"


class SentWarnings:
    """The Warning Events already recorded (on pods about their group, whose Workload cannot be
    built; on objects left out as malformed), kept by a controller from apply to apply: each
    object is told a reason once, not every cycle. Bounded: beyond ``limit`` objects the oldest
    are forgotten (and told again if need be)."""

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self._told: dict[str, str] = {}  # pod uid -> digest of the reasons it was told
        self._lock = threading.Lock()

    def first(self, uid: str, digest: str) -> bool:
        """True if object ``uid`` has not been told these reasons yet (and remember it now)."""
        with self._lock:
            if self._told.get(uid) == digest:
                return False
            self._told.pop(uid, None)
            self._told[uid] = digest
            while len(self._told) > self.limit:
                self._told.pop(next(iter(self._told)))
            return True


class _Applier:
    """The writes of one plan. :meth:`fork` gives each workload's chain its own applier: its
    own result and its own view of what its Workload records, over the same clients."""

    def __init__(self, api: client.ApiClient, plan: Plan, dry_run: bool, fence: Callable[[], None],
                 pending_writes: PendingWriteLimiter | None = None,
                 cached: Callable[[str, str], Document | None] | None = None,
                 events: PendingWriteLimiter | None = None, warned: SentWarnings | None = None,
                 basis: Snapshot | None = None) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.version = kueue_version(api)
        self.plan = plan
        self.dry = {"dry_run": "All"} if dry_run else {}
        self.result = ApplyResult()
        self.fence = fence
        self.entries: dict[str, WorkloadEntry] = {}
        self.recorded: dict[str, Any] = {}  # workload -> its status.admission, as the API server last told
        self.uids: dict[str, str] = {}  # workload -> the uid of the Workload that admission is recorded on
        self.checks: dict[str, dict[str, str]] = {}  # workload -> its admission checks' states, as last read
        self.admitted: dict[str, bool] = {}  # workload -> whether it was recorded Admitted=True, as last read
        self.basis = basis  # the snapshot the plan was decided from: what each write must still find
        self.about: dict[str, str] = {}  # workload -> uid of the Workload this chain made in its place ("": none)
        self.pending_writes = pending_writes
        self.cached = cached
        self.event_limit = events
        self.warned = warned if warned is not None else SentWarnings()
        self.events: list[Callable[[], str]] = []  # Events to send once the chain's writes are done
        # Pacing in rank order across chains: wait for the paced writes ranked before, then let the next go.
        self.await_turn: Callable[[], None] = lambda: None
        self.end_turn: Callable[[], None] = lambda: None

    def fork(self, *, keep: bool = False) -> _Applier:
        """An applier for one workload's chain: the same clients, a result and Events of its own,
        and its own records of what its Workload holds (``keep``: these records, for its next step)."""
        twin = copy.copy(self)
        twin.result, twin.events = ApplyResult(), []
        if not keep:
            twin.entries, twin.recorded, twin.uids, twin.checks, twin.admitted = {}, {}, {}, {}, {}
            twin.about = {}
        return twin

    def _first(self, kind: str, key: str) -> Any:
        """The cached object to try a change on first (the write's resourceVersion guards it;
        a conflict reads the object anew); None without a cache or when it holds none."""
        doc = self.cached(kind, key) if self.cached is not None else None
        return copy.deepcopy(dict(doc.body)) if doc is not None else None

    def _about(self, workload: str) -> str | None:
        """The uid of the Workload the plan decided about ``workload`` on, which every write of it
        must find: the one the snapshot it was decided from held ("" if it held none), or the one
        this chain made in its place. None without that snapshot (a plan applied on its own, or an
        object without a uid): the Workload as apply finds it is taken for it."""
        if workload in self.about:
            return self.about[workload]
        if self.basis is None:
            return None
        obj = self.basis.workloads.get(workload)
        return "" if obj is None else (obj.uid or None)

    def _gone_or_replaced(self, workload: str, uid: str) -> str:
        """Why Workload ``workload`` of ``uid`` is, as a controller's cache already shows, no longer
        there to run pods under ("" if the cache does not show that): deleted (only known for one
        the snapshot held, the cache being at least as new as it; one made by this apply may just
        not have come back yet), being deleted, or replaced by another of the same name (not the
        one the snapshot held, which this apply may have replaced itself, unseen by the cache yet)."""
        if self.cached is None or not uid:
            return ""
        seen = self.basis.workloads.get(workload) if self.basis is not None else None
        doc = self.cached("Workload", workload)
        if doc is None:
            return f"{workload} was deleted" if seen is not None and seen.uid == uid else ""
        meta = dict(doc.body).get("metadata") or {}
        if meta.get("uid") == uid:
            return f"{workload} is being deleted" if meta.get("deletionTimestamp") else ""
        return "" if seen is not None and meta.get("uid") == seen.uid else \
            f"{workload} was replaced by another Workload of that name"

    def _fenced(self, write: Callable[[], T], deleting: tuple[str, str] | None = None) -> T:
        """A write, sent only while the decider lease is surely held (lease.py): checked again
        before each retry, which may come seconds later. The object it returns is recorded in
        ``written``; a delete (``deleting``: kind and key) that returns none is recorded as ""."""
        def fenced() -> T:
            self.fence()
            return write()
        done = call(fenced)
        if not self.dry:
            self.result.written.extend(written_versions(done, deleting))
        return done

    # -- Workloads -------------------------------------------------------------------------
    def _get_workload(self, ns: str, name: str) -> dict[str, Any] | None:
        return missing_is_none(lambda: self.custom.get_namespaced_custom_object(
            KUEUE_GROUP, self.version, ns, "workloads", name))

    def _update_workload_status(self, reading: _Reading, key: str,
                                change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> bool:
        """Write ``change`` of the Workload ``key`` ("ns/name") as ``reading`` offers it to its
        status, fenced, from a fresh read again on a conflict (:func:`~.retry.update_with_retry`);
        whether it wrote."""
        ns, name = key.split("/", 1)
        return update_with_retry(reading, change, lambda obj: reading.wrote(self._fenced(
            lambda: self.custom.replace_namespaced_custom_object_status(
                KUEUE_GROUP, self.version, ns, "workloads", name, obj, field_manager=MANAGER, **self.dry))))

    def _new_workload(self, entry: WorkloadEntry) -> dict[str, Any]:
        ns, name = entry.name.split("/", 1)
        pod_sets = [{"name": p.name, "count": p.count, "template": {"spec": {"containers": [
            {"name": "main", "resources": {"requests": dict(p.requests)}}]}}} for p in entry.pod_sets]
        # Owned by its pods (none of them the controller): it goes away with the last of them.
        owners = [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid} for pod, uid in entry.pods if uid]
        metadata: dict[str, Any] = {"name": name, "namespace": ns, "labels": {"clueue.dev/origin": entry.origin}}
        if owners:
            metadata["ownerReferences"] = owners
        return {"apiVersion": f"{KUEUE_GROUP}/{self.version}", "kind": "Workload", "metadata": metadata,
                "spec": {"queueName": entry.queue, "priority": entry.priority, "podSets": pod_sets}}

    def workload(self, entry: WorkloadEntry) -> None:
        ns, name = entry.name.split("/", 1)
        label = f"Workload {entry.name}"
        self.entries[entry.name] = entry
        if not entry.has_workload_object:
            self._unbuilt(entry)
            return
        first = self._first("Workload", entry.name)
        # Not in a controller's cache (which holds its own writes): created without reading first;
        # a Workload made meanwhile after all is found by the create's conflict.
        assumed_absent = first is None and self.cached is not None and entry.origin != "workload"
        existing = first if first is not None or assumed_absent else self._get_workload(ns, name)
        fresh = first is None and not assumed_absent  # whether the API server itself said so
        about = self._about(entry.name)
        if existing is not None and about is not None and _uid(existing) != about:
            # Not the Workload decided about: what it records was never decided, so nothing is written on it.
            self.result.skipped.append(f"status {label}: {_REPLACED if about else _MADE_MEANWHILE}")
            return
        if existing is not None and entry.origin != "workload":
            existing = self._consistent(entry, existing)
        start = existing
        if existing is None:
            if entry.origin == "workload":
                self.result.skipped.append(f"missing {label}")
                return
            if self._about(entry.name):  # decided on a Workload since deleted: never made anew from that decision
                self.result.skipped.append(f"status {label}: {_DELETED}")
                return
            ended = self._not_to_make(entry)
            if ended:
                self.result.skipped.append(f"create {label}: {ended}")
                return
            try:
                start = self._fenced(lambda: self.custom.create_namespaced_custom_object(
                    KUEUE_GROUP, self.version, ns, "workloads", self._new_workload(entry), field_manager=MANAGER,
                    **self.dry))
                self.result.writes.append(f"create {label}")
            except ApiException as e:
                if e.status != 409:  # 409: created meanwhile (its status is handled below), or still being deleted
                    raise
                start = self._get_workload(ns, name)
                if ((start or {}).get("metadata") or {}).get("deletionTimestamp"):
                    self.result.skipped.append(f"create {label}: the one it replaces is still being deleted")
                    return
                if about is not None and not _as_made(entry, start):  # not this create's, its answer lost
                    self.result.skipped.append(f"create {label}: {_MADE_MEANWHILE}")
                    return
                if (assumed_absent or about is not None) and start is not None:  # made to match its pods now
                    start = existing = self._consistent(entry, start)
                    if start is None:
                        self.result.skipped.append(f"create {label}: it was made meanwhile; replaced next cycle")
                        return
            fresh = True
            self.about[entry.name] = _uid(start)  # the decision goes on the Workload just made, and only there
            if self.dry:  # a dry-run create leaves nothing to write the status on
                self._dry_recorded(entry)
                return

        # Restating why an existing Workload waits is paced (pacing.py); anything else is a decision.
        paced = self.pending_writes if existing is not None and entry.state in _WAITING else None
        granted: list[bool] = []  # whether the limiter let this write go, asked once

        def change(obj: dict[str, Any]) -> dict[str, Any] | None:
            wanted = desired_status(entry, obj.get("status") or {}, self.version or "v1beta1")
            if wanted is not None and paced is not None:
                if not granted:
                    self.await_turn()  # the tokens go to the higher-ranked ones first
                    granted.append(paced.take())
                    self.end_turn()
                if not granted[0]:
                    return None
            return None if wanted is None else {**obj, "status": wanted}

        # The object just created, or read, is the first attempt: no read before the write.
        reading = _Reading(lambda: self._get_workload(ns, name), start, fresh, uid=self._about(entry.name))
        wrote = self._update_workload_status(reading, entry.name, change)
        if reading.fresh and reading.last is not None:  # what its pods are ungated by (no read again)
            self._record(entry.name, reading.last)
        if wrote and self.dry:
            self._dry_recorded(entry)
        if granted and not granted[0]:
            self.result.deferred.append(f"status {label}")
            return
        if wrote:
            self.result.writes.append(f"status {label}")
            if not self.dry and isinstance(reading.last, dict):
                self.result.answers.append(reading.last)
            self._status_events(entry, start, reading.last)
        else:
            self.result.skipped.append(f"status {label}{reading.why}")

    def _not_to_make(self, entry: WorkloadEntry) -> str:
        """Why no Workload may be made for the pods of ``entry`` now ("" if one may): a Workload is
        made only for pods that never ran under one (none of them records a Workload's uid,
        ``clueue.dev/workload-uid``: theirs was deleted, so their group ended, engine/workloads.py),
        and only while the pods decided about are all still there (as a controller's cache shows
        them: same name, same uid), never for pods deleted or replaced since the snapshot."""
        ns = entry.name.split("/", 1)[0]
        for pod, uid in entry.pods:
            seen = self.basis.pods.get(f"{ns}/{pod}") if self.basis is not None else None
            ran = seen.annotations.get(WORKLOAD_UID_ANNOTATION, "") if seen is not None else ""
            if ran and seen is not None and seen.phase not in ("Succeeded", "Failed") and not seen.deleting:
                return f"its pod {pod} ran under Workload uid {ran}, which is gone: its group ended"
            if self.cached is None:
                continue
            now = self.cached("Pod", f"{ns}/{pod}")
            if now is None or (uid and _uid(dict(now.body)) != uid):
                return f"its pod {pod} was deleted or replaced since the plan was decided; the next cycle decides"
        return ""

    def _unbuilt(self, entry: WorkloadEntry) -> None:
        """A group of pods whose Workload cannot be built yet (KEP-976: not before the pods its
        count declares are all there, never from pods that disagree on it): no Workload is
        created; one made for it earlier that holds no admission is deleted when the group cannot
        be built as it is (not when it is merely incomplete: its pods may be terminating after an
        eviction, and the Workload waits for their replacements), and the group is told on each
        of its pods by a Warning Event, once per pod and reasons (``warned``)."""
        ns, name = entry.name.split("/", 1)
        problems = [r for r in entry.reasons if r.code in UNBUILT_CODES and r.code != "GroupIncomplete"]
        first = self._first("Workload", entry.name)
        existing = first if first is not None or self.cached is not None else self._get_workload(ns, name)
        labels = ((existing or {}).get("metadata") or {}).get("labels") or {}
        about = self._about(entry.name)
        if existing is not None and about is not None and _uid(existing) != about:
            existing = None  # made or replaced since the snapshot: not the one decided about
        # A group merely incomplete keeps its Workload (KEP-976): its pods may be terminating
        # after an eviction or a drain, and the Workload waits for their replacements.
        if problems and existing is not None and labels.get("clueue.dev/origin") == entry.origin \
                and not (existing.get("status") or {}).get("admission"):
            self._delete_workload(entry, existing, "its group cannot make a Workload as it is")
        else:
            self.result.skipped.append(f"create Workload {entry.name}: its group cannot make one yet")
        if not problems:
            return  # an incomplete group waits for its pods: nothing is wrong
        digest = reasons_digest(problems)
        message = "; ".join(r.message for r in problems)
        for pod, uid in entry.pods:
            if self.warned.first(uid or f"{ns}/{pod}", digest):
                self.event("Pod", "v1", ns, pod, "Warning", "ErrWorkloadCompose",
                           f"no Workload is made for group {name}: {message}", uid=uid)

    def _delete_workload(self, entry: WorkloadEntry, obj: dict[str, Any], why: str) -> bool:
        """Delete Workload ``obj`` of ``entry``, only as read (its uid and resourceVersion): True
        if it is gone; one changed meanwhile is left for the next cycle."""
        ns, name = entry.name.split("/", 1)
        label = f"Workload {entry.name}"
        meta = obj["metadata"]
        options = client.V1DeleteOptions(preconditions=client.V1Preconditions(
            uid=meta.get("uid"), resource_version=meta.get("resourceVersion")))
        try:
            self._fenced(lambda: self.custom.delete_namespaced_custom_object(
                KUEUE_GROUP, self.version, ns, "workloads", name, body=options, **self.dry),
                deleting=("Workload", entry.name))
        except ApiException as e:
            if e.status == 409:
                self.result.skipped.append(f"delete {label}: it changed meanwhile")
                return False
            if e.status != 404:
                raise
        self.result.writes.append(f"delete {label}: {why}")
        return True

    def _record(self, workload: str, obj: dict[str, Any]) -> None:
        """What Workload ``obj``, as the API server just returned it, records for its pods."""
        self.recorded[workload] = (obj.get("status") or {}).get("admission")
        self.uids[workload] = (obj.get("metadata") or {}).get("uid") or ""
        self.checks[workload] = _check_states(obj.get("status") or {})
        self.admitted[workload] = any(c.get("type") == "Admitted" and c.get("status") == "True"
                                      for c in (obj.get("status") or {}).get("conditions") or [])

    def _held_back(self, workload: str) -> str:
        """Why the pods of ``workload`` wait for its admission checks, as its Workload was last
        read ("" if they need not): one of the checks its plan entry names (all it records,
        without an entry) is not Ready, or, with checks, it is not recorded Admitted yet."""
        states = self.checks.get(workload, {})
        entry = self.entries.get(workload)
        names = [c.name for c in entry.admission_checks] if entry is not None else list(states)
        unready = sorted(n for n in names if states.get(n) != "Ready")
        if unready:
            return f"admission checks {', '.join(unready)} of {workload} are not Ready"
        return f"{workload} is not recorded Admitted" if names and not self.admitted.get(workload) else ""

    def complete(self, target: str, checks: list[str]) -> None:
        """Record ``Admitted=True`` on a Workload whose quota is reserved once every admission
        check in ``checks`` is Ready (``complete-admission``), as the API server has it now: one
        evicted meanwhile, or whose checks changed, is left for the next cycle."""
        ns, name = target.split("/", 1)
        label = f"Workload {target}"

        def change(obj: dict[str, Any]) -> dict[str, Any] | None:
            status = obj.get("status") or {}
            states = _check_states(status)
            if not status.get("admission") or any(states.get(c) != "Ready" for c in checks):
                return None
            if any(c.get("type") == "Admitted" and c.get("status") == "True" for c in status.get("conditions", [])):
                return None
            conditions = _conditions(status.get("conditions", []),
                                     [("Admitted", "True", "Admitted", "The workload is admitted")])
            return {**obj, "status": {**status, "conditions": conditions}}

        reading = self._reading("Workload", target)
        wrote = self._update_workload_status(reading, target, change)
        if reading.fresh and reading.last is not None:  # what its pods are ungated by (no read again)
            self._record(target, reading.last)
        if wrote:
            self.result.writes.append(f"admit {label}: every admission check is Ready")
            self.event("Workload", f"{KUEUE_GROUP}/{self.version}", ns, name, "Normal", "Admitted",
                       f"admission checks Ready: {', '.join(checks)}", of=reading.last)
        else:
            self.result.skipped.append(f"admit {label}{reading.why}")

    def nominate(self, target: str, clusters: list[str], dispatcher: str) -> None:
        """Set a dispatched Workload's ``status.nominatedClusterNames`` (a ``nominate`` action,
        docs/dispatch.md), as the API server has it now: one a worker has admitted
        (``status.clusterName`` set) is left alone. (Its admission is not checked: the cached
        object may predate this plan's own reservation; the MultiKueue adapter copies only what
        holds quota.)"""
        ns, name = target.split("/", 1)

        def change(obj: dict[str, Any]) -> dict[str, Any] | None:
            status = obj.get("status") or {}
            if status.get("clusterName") or status.get("nominatedClusterNames") == clusters:
                return None
            return {**obj, "status": {**status, "nominatedClusterNames": clusters}}

        reading = self._reading("Workload", target)
        if self._update_workload_status(reading, target, change):
            self.result.writes.append(f"nominate Workload {target}: {', '.join(clusters)}")
            self.event("Workload", f"{KUEUE_GROUP}/{self.version}", ns, name, "Normal", "Nominated",
                       f"nominated worker clusters {', '.join(clusters)} ({dispatcher.rpartition('/')[2]})",
                       of=reading.last)
        else:
            self.result.skipped.append(f"nominate Workload {target}{reading.why}")

    def finish(self, target: str, finished: dict[str, Any]) -> None:
        """Mark the Workload of finished pods ``Finished`` (a ``finish`` action, with the plan's
        ``Finished`` reason), as Kueue's pod integration does: reason ``Succeeded``, or ``Failed``
        for a failed single pod. That releases its quota. One already Finished, or gone, is left."""
        ns, name = target.split("/", 1)
        label = f"Workload {target}"
        details = finished.get("details") or {}
        reason = "Failed" if details.get("outcome") == "Failed" else "Succeeded"
        message = (f"Pods succeeded: {details['succeeded']}/{details['total']}." if "total" in details
                   else str(finished.get("message", "finished")))

        def change(obj: dict[str, Any]) -> dict[str, Any] | None:
            status = obj.get("status") or {}
            if any(c.get("type") == "Finished" and c.get("status") == "True" for c in status.get("conditions", [])):
                return None
            conditions = _conditions(status.get("conditions", []), [("Finished", "True", reason, message)])
            return {**obj, "status": {**status, "conditions": conditions}}

        reading = self._reading("Workload", target)
        if self._update_workload_status(reading, target, change):
            self.result.writes.append(f"finish {label}")
            self.event("Workload", f"{KUEUE_GROUP}/{self.version}", ns, name, "Normal", "Finished", message,
                       of=reading.last)
        else:
            self.result.skipped.append(f"finish {label}{reading.why}")

    def _dry_recorded(self, entry: WorkloadEntry) -> None:
        """In a dry run nothing is recorded: the ungates go on as if the plan's admission were."""
        if entry.state == "admitted":
            self.recorded[entry.name] = {"podSetAssignments": [
                {"name": a.name, "flavors": dict(a.flavors)} for a in entry.admission]}
            self.checks[entry.name] = {c.name: c.state for c in entry.admission_checks}
            self.admitted[entry.name] = entry.phase == "Admitted"

    def _consistent(self, entry: WorkloadEntry, obj: dict[str, Any]) -> dict[str, Any] | None:
        """The Workload of pods ``obj``, made to match them: deleted (None returned, so that it is
        created anew) if its pod sets differ and it holds no admission; else given an owner
        reference for each of its pods that lacks one."""
        ns, name = entry.name.split("/", 1)
        label = f"Workload {entry.name}"
        if any(r.code == "InvalidObject" for r in entry.reasons):
            return obj  # some of its pods cannot be read: what they make is unknown
        difference = pod_set_difference(obj, entry)
        if difference and not (obj.get("status") or {}).get("admission"):
            # Only the version read: one admitted or changed meanwhile is left for the next cycle.
            if not self._delete_workload(entry, obj, f"{difference}; replaced"):
                return obj
            self.about[entry.name] = ""  # gone by this decision: the one made next in its place is decided about
            return None
        if difference:
            self.result.warnings.append(f"{label} holds an admission but {difference}; it is left as it is "
                                        "while admitted (Kueue's Workloads do not change their pod sets)")

        def own(current: dict[str, Any]) -> dict[str, Any] | None:
            owners = missing_owners(current, entry)
            if not owners:
                return None
            meta = current["metadata"]
            return {**current, "metadata": {**meta, "ownerReferences": (meta.get("ownerReferences") or []) + owners}}

        reading = _Reading(lambda: self._get_workload(ns, name), obj, uid=self._about(entry.name))
        if update_with_retry(reading, own, lambda changed: reading.wrote(self._fenced(
                lambda: self.custom.replace_namespaced_custom_object(
                    KUEUE_GROUP, self.version, ns, "workloads", name, changed, field_manager=MANAGER, **self.dry)))):
            self.result.writes.append(f"own {label}: owner references added for its pods")
        return reading.last or obj  # as last read or written: the status write's first attempt

    # -- Pods ------------------------------------------------------------------------------
    def _reading(self, kind: str, key: str) -> _Reading:
        """The read of an update of ``kind`` ``key`` ("ns/name"): the cached object first, if any."""
        ns, name = key.split("/", 1)
        read = self._get_pod if kind == "Pod" else self._get_workload
        # A pod's writes check its uid themselves (the plan's action names it); a Workload's, the snapshot's.
        return _Reading(lambda: read(ns, name), self._first(kind, key), uid=None if kind == "Pod" else self._about(key))

    # Pods are read and written as plain JSON, as Workloads are: no typed model to build per pod.
    def _get_pod(self, ns: str, name: str) -> dict[str, Any] | None:
        return missing_is_none(lambda: _json(self.core.read_namespaced_pod(name, ns, _preload_content=False)))

    def _put_pod(self, ns: str, name: str, pod: dict[str, Any]) -> dict[str, Any]:
        body = {**pod, "apiVersion": "v1", "kind": "Pod"}
        return self._fenced(lambda: _json(self.core.replace_namespaced_pod(
            name, ns, body, field_manager=MANAGER, _preload_content=False, **self.dry)))

    def ungate(self, target: str, workload: str, uid: str, selector: dict[str, str],
               annotations: dict[str, str], labels: dict[str, str] | None = None,
               tolerations: list[dict[str, Any]] | None = None,
               match_fields: list[dict[str, Any]] | None = None) -> None:
        """Remove the admission gate of a pod, adding ``selector`` to its node selector, the
        ``match_fields`` pinning it to its Node to every term of its required node affinity
        (:func:`_pinned_affinity`), and the ``annotations``, ``labels`` and ``tolerations`` its
        admission checks ask for; only once its Workload records the admission and every
        admission check Ready."""
        ns, name = target.split("/", 1)
        if workload not in self.recorded:  # not told by this chain's status write: read, not taken from the plan
            wl_ns, wl_name = workload.split("/", 1)
            self._record(workload, self._get_workload(wl_ns, wl_name) or {})
        about = self._about(workload)
        if about is not None and not self.dry and self.uids.get(workload) != about:
            self.result.errors.append(f"ungate Pod {target}: {workload} is not the Workload decided about "
                                      "(deleted or replaced since); left gated, for the next cycle to decide")
            return
        if not self.recorded[workload]:
            self.result.errors.append(f"ungate Pod {target}: admission of {workload} is not recorded; left gated")
            return
        gone = self._gone_or_replaced(workload, self.uids.get(workload, ""))
        if gone:  # its admission was recorded, but the Workload is no longer there to run the pod under
            self.result.errors.append(f"ungate Pod {target}: {gone}; left gated, for the next cycle to decide")
            return
        held_back = self._held_back(workload)
        if held_back:  # a check's controller changed its mind since the snapshot: the next cycle decides
            self.result.errors.append(f"ungate Pod {target}: {held_back}; left gated")
            return
        entry = self.entries.get(workload)
        differs = admission_difference(self.recorded[workload], entry) if entry else ""
        if differs:  # the node selector would be another flavor's than the one it holds quota in
            self.result.errors.append(f"ungate Pod {target}: {differs}; left gated, for the next cycle to "
                                      "ungate as recorded")
            return

        def change(pod: dict[str, Any]) -> dict[str, Any] | None:
            meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
            gates = spec.get("schedulingGates") or []
            if (uid and meta.get("uid") != uid) or not any(g.get("name") == GATE for g in gates):
                return None  # replaced by another pod of that name, or ungated already
            merged = dict(spec.get("nodeSelector") or {})
            clash = {k: v for k, v in selector.items() if k in merged and merged[k] != v}
            if clash:
                raise ValueError(f"its nodeSelector already sets {clash} differently from the admitted flavor")
            merged.update(selector)
            # The Workload it runs under, by uid: should that Workload be deleted, its group has
            # ended (engine/workloads.py, _ended); a new Workload of that name is another one.
            recorded = {WORKLOAD_UID_ANNOTATION: self.uids[workload]} if self.uids.get(workload) else {}
            spec = {k: v for k, v in spec.items() if k != "schedulingGates"}
            if [g for g in gates if g.get("name") != GATE]:
                spec["schedulingGates"] = [g for g in gates if g.get("name") != GATE]
            if merged:
                spec["nodeSelector"] = merged
            if match_fields:
                spec["affinity"] = _pinned_affinity(spec.get("affinity"), match_fields)
            added = [t for t in tolerations or [] if t not in (spec.get("tolerations") or [])]
            if added:
                spec["tolerations"] = list(spec.get("tolerations") or []) + added
            meta = {**meta, "annotations": {**(meta.get("annotations") or {}), **annotations, **recorded}}
            if labels:
                meta["labels"] = {**(meta.get("labels") or {}), **labels}
            return {**pod, "metadata": meta, "spec": spec}

        try:
            wrote = update_with_retry(self._reading("Pod", target), change, lambda pod: self._put_pod(ns, name, pod))
        except ValueError as e:
            self.result.errors.append(f"ungate Pod {target}: {e}")
            return
        if wrote:
            self.result.writes.append(f"ungate Pod {target}")
            self.event("Pod", "v1", ns, name, "Normal", "Admitted", f"admitted with workload {workload}; scheduling gate removed",
                       uid=uid)
        else:
            self.result.skipped.append(f"ungate Pod {target}")

    def preempt(self, target: str, pods: list[tuple[str, str]], code: str, message: str,
                variant: tuple[str, str] = ("InClusterQueue", ""), details: Mapping[str, Any] | None = None) -> None:
        """Evict an admitted workload: its admission released with Kueue's Evicted reason for
        ``code`` (the plan's reason: a preemption, a drained queue, a deactivation), its pods
        deleted. A preemption also sets ``Preempted=True`` with Kueue's ``variant`` (its reason
        and who preempts, :func:`_preemption_variant`); either way ``QuotaReserved=False``
        (``Pending``) and ``Admitted=False`` (``NoReservation``), as Kueue writes an eviction.
        A waitForPodsReady timeout (engine/podsready.py) records ``status.requeueState`` from the
        reason's ``details`` and ``Requeued=False`` until its back-off ends, or deactivates it."""
        ns, name = target.split("/", 1)
        label = f"Workload {target}"
        why = _EVICTED_BY.get(code, "Preempted")

        def evict(obj: dict[str, Any]) -> dict[str, Any] | None:
            status = obj.get("status") or {}
            if not status.get("admission"):
                return None  # lost its admission meanwhile: nothing to release
            entry = self.entries.get(target)  # tagged as a pending status is, so the next apply leaves it
            pending = tagged(message, reasons_digest(entry.reasons), _MESSAGE_LIMIT) if entry else message
            wanted = [("Evicted", "True", why, message), ("QuotaReserved", "False", _waiting_reason(entry), pending),
                      ("Admitted", "False", "NoReservation", "The workload has no reservation")]
            if why == "Preempted":
                reason, preemptors = variant
                wanted.append(("Preempted", "True", reason, f"Preempted to accommodate a workload ({preemptors}) "
                                                            f"due to {_PREEMPTION_WHY[reason]}"))
            if code in _CHECK_EVICTIONS:  # requeued at once after a retry; a rejection deactivates
                wanted.append(("Requeued", "True", why, message) if code == "AdmissionCheckRetry"
                              else ("Requeued", "False", why, message))
            if code in _PODS_READY_EVICTIONS:  # requeued once its back-off ends, or deactivated
                wanted.append(("Requeued", "False", why, message))
            if entry is not None:  # no longer admitted: its pods wait to start again (waitForPodsReady)
                wanted += _pods_ready(entry, status)
            conditions = _conditions(status.get("conditions", []), wanted)
            kept = {k: v for k, v in status.items() if k != "admission"}
            if code == "PodsReadyTimeout" and details:
                kept["requeueState"] = {"count": details["count"], "requeueAt": details["requeueAt"]}
            if kept.get("admissionChecks"):
                kept["admissionChecks"] = _reset_checks(kept["admissionChecks"])
            return {**obj, "status": {**kept, "conditions": conditions}}

        if code in ("AdmissionCheckRejected", "RequeuingLimitExceeded"):
            self._deactivate(target)
        reading = self._reading("Workload", target)
        wrote = self._update_workload_status(reading, target, evict)
        self.recorded[target] = None
        if wrote:
            self.result.writes.append(f"preempt {label}")
            self.event("Workload", f"{KUEUE_GROUP}/{self.version}", ns, name, "Normal", why, message, of=reading.last)
        else:
            self.result.skipped.append(f"preempt {label}{reading.why}")
        for pod, uid in pods:
            self.delete(f"{ns}/{pod}", target, uid, message, reason=why)

    def _deactivate(self, target: str) -> None:
        """Set ``spec.active: false`` on a Workload an admission check rejected, or requeued
        ``backoffLimitCount`` times, as Kueue does: it is not queued again until someone sets it active."""
        ns, name = target.split("/", 1)

        def deactivate(obj: dict[str, Any]) -> dict[str, Any] | None:
            if (obj.get("spec") or {}).get("active") is False:
                return None
            return {**obj, "spec": {**(obj.get("spec") or {}), "active": False}}

        if update_with_retry(self._reading("Workload", target), deactivate, lambda obj: self._fenced(
                lambda: self.custom.replace_namespaced_custom_object(
                    KUEUE_GROUP, self.version, ns, "workloads", name, obj, field_manager=MANAGER, **self.dry))):
            self.result.writes.append(f"deactivate Workload {target}")

    def _unfinalize(self, ns: str, name: str, uid: str) -> bool:
        """Remove the finalizer ``kueue.x-k8s.io/managed`` from pod ``ns/name`` if it is the pod
        of ``uid``; True if that was written."""
        def unfinalize(pod: dict[str, Any]) -> dict[str, Any] | None:
            meta = pod.get("metadata") or {}
            if (uid and meta.get("uid") != uid) or FINALIZER not in (meta.get("finalizers") or []):
                return None
            meta = {k: v for k, v in meta.items() if k != "finalizers"}
            if [f for f in pod["metadata"]["finalizers"] if f != FINALIZER]:
                meta["finalizers"] = [f for f in pod["metadata"]["finalizers"] if f != FINALIZER]
            return {**pod, "metadata": meta}

        return update_with_retry(self._reading("Pod", f"{ns}/{name}"), unfinalize,
                                 lambda pod: self._put_pod(ns, name, pod))

    def finalize(self, target: str, uid: str) -> None:
        """Remove a pod's finalizer: clueue no longer needs to see it end (finalize-pod)."""
        ns, name = target.split("/", 1)
        if self._unfinalize(ns, name, uid):
            self.result.writes.append(f"finalize Pod {target}")
        else:
            self.result.skipped.append(f"finalize Pod {target}")

    def delete(self, target: str, workload: str, uid: str, message: str, *, reason: str = "ExcessPodDeleted") -> None:
        ns, name = target.split("/", 1)
        self._unfinalize(ns, name, uid)
        options = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid) if uid else None)
        try:
            self._fenced(lambda: self.core.delete_namespaced_pod(name, ns, body=options, **self.dry),
                         deleting=("Pod", target))
        except ApiException as e:
            if e.status in (404, 409):  # gone already, or a new pod reuses the name
                self.result.skipped.append(f"delete Pod {target}")
                return
            raise
        self.result.writes.append(f"delete Pod {target}")
        wl_ns, wl_name = workload.split("/", 1)
        self.event("Workload", f"{KUEUE_GROUP}/{self.version}", wl_ns, wl_name, "Normal", reason,
                   f"deleted pod {name}: {message}")

    # -- Events ----------------------------------------------------------------------------
    def _status_events(self, entry: WorkloadEntry, before: Mapping[str, Any] | None,
                       after: Mapping[str, Any] | None) -> None:
        """The Events of a Workload status just written for ``entry`` (``before``: as it was
        read): as Kueue's scheduler records an admission, ``QuotaReserved`` when its quota is
        reserved and ``Admitted`` when it is admitted (both at once without admission checks);
        ``Pending`` or ``Inadmissible`` (a Warning) with the reasons when why it waits changed.
        A status rewritten for an admitted workload (its reclaimable pods, PodsReady) is no news."""
        ns, name = entry.name.split("/", 1)
        why = "; ".join(r.message for r in entry.reasons)
        api_version = f"{KUEUE_GROUP}/{self.version}"
        if entry.state != "admitted":
            kind, reason = ("Warning", "Inadmissible") if entry.state == "inadmissible" else ("Normal", "Pending")
            self.event("Workload", api_version, ns, name, kind, reason, why, of=after)
            return
        status = (before or {}).get("status") or {}
        if not status.get("admission"):
            self.event("Workload", api_version, ns, name, "Normal", "QuotaReserved",
                       f"Quota reserved in ClusterQueue {entry.cluster_queue}" + (f": {why}" if why else ""), of=after)
        was_admitted = any(c.get("type") == "Admitted" and c.get("status") == "True"
                           for c in status.get("conditions") or [])
        if entry.phase == "Admitted" and not (status.get("admission") and was_admitted):
            self.event("Workload", api_version, ns, name, "Normal", "Admitted",
                       f"Admitted by ClusterQueue {entry.cluster_queue}", of=after)

    def rejected(self, obj: Rejected) -> None:
        """A Warning Event on an object the snapshot left out as malformed, once while the same
        fault lasts (a controller keeps what it told across cycles). A Workload's own plan entry
        records why (InvalidObject); any other kind is told by this Event alone."""
        where = f"{obj.field}: " if obj.field else ""
        message = f"clueue cannot use it and leaves it out: {where}{obj.message}"
        if self.warned.first(obj.uid or f"{obj.kind} {obj.namespace}/{obj.name}", message):
            self.event(obj.kind, obj.api_version, obj.namespace, obj.name, "Warning", "InvalidObject", message,
                       uid=obj.uid)

    def event(self, kind: str, api_version: str, ns: str, name: str, type_: str, reason: str, message: str,
              *, uid: str = "", of: Mapping[str, Any] | None = None) -> None:
        """Record an Event on an object; ``ns`` is "" for a cluster-scoped one, whose Events live
        in ``default`` (as the kubelet's Events on Nodes do), where ``kubectl describe`` finds them.
        ``of`` is the object as last read or written (its uid and resourceVersion go into the
        reference, events.py); without it or ``uid``, a Workload's or Pod's uid is looked up when
        the Event is sent, since ``kubectl describe`` matches Events by uid.
        It is sent by :meth:`send_events`, once the chain's writes are done: off their path.
        A Normal Event beyond the Event limit (``events`` of :func:`apply_plan`) is dropped and
        counted in ``events_dropped``; a Warning Event is always sent."""
        if self.dry:
            return
        if type_ != "Warning" and self.event_limit is not None and not self.event_limit.take():
            self.result.events_dropped += 1  # routine news beyond the Event budget: counted, not sent
            return
        meta = (of or {}).get("metadata") or {}
        uid = uid or meta.get("uid") or ""
        version = (meta.get("resourceVersion") or "") if meta.get("uid") == uid else ""

        def send() -> str:
            known = uid or self._uid_of(kind, ns, name)
            body = event_body(involved_object(kind, api_version, ns, name, known, version), type_, reason, message,
                              MANAGER)
            try:
                _json(self.core.create_namespaced_event(body["metadata"]["namespace"], body, _preload_content=False))
            except ApiException as e:  # an event is a courtesy: never fail an apply over one
                return f"event {reason} on {kind} {ns}/{name}: {e.reason}"
            return ""
        self.events.append(send)

    def _uid_of(self, kind: str, ns: str, name: str) -> str:
        """The uid of the Workload or Pod an Event is about, as this chain knows it, else as
        cached or read now ("" if it is gone, or of another kind)."""
        key = f"{ns}/{name}"
        if kind == "Workload" and self.uids.get(key):
            return self.uids[key]
        if kind not in ("Workload", "Pod"):
            return ""
        doc = self.cached(kind, key) if self.cached is not None else None
        if doc is not None:
            return str((doc.body.get("metadata") or {}).get("uid") or "")
        try:
            obj = self._get_workload(ns, name) if kind == "Workload" else self._get_pod(ns, name)
        except ApiException:
            return ""
        return str(((obj or {}).get("metadata") or {}).get("uid") or "")

    def send_events(self) -> list[str]:
        """Send the Events recorded so far; the warnings of those the API server refused."""
        sent, self.events = self.events, []
        return [w for w in (send() for send in sent) if w]


def apply_plan(api: client.ApiClient, plan: Plan, *, dry_run: bool = False,
               fence: Callable[[], None] | None = None,
               pending_writes: PendingWriteLimiter | None = None, workers: int = WORKERS,
               should_stop: Callable[[], bool] | None = None,
               cached: Callable[[str, str], Document | None] | None = None,
               events: PendingWriteLimiter | None = None, warned: SentWarnings | None = None,
               basis: Snapshot | None = None,
               event_sink: Callable[[list[Callable[[], str]]], None] | None = None) -> ApplyResult:
    """Apply one cycle's plan; see the module docstring for the order and the guarantees.

    Each workload's writes form a chain, sent in order (its Workload and status, then its pods'
    ungates, deletions and finalizer removals, its eviction); the chains of different workloads
    are independent and run on ``workers`` threads at once, every chain's Workload step before
    any chain's pod step (the module docstring's order). Results are listed in the chains'
    order, step by step, as a serial apply (``workers=1``) lists them; Events are sent after
    every write, on the same threads.

    With ``dry_run`` every write is sent with ``dryRun=All``: the API server validates it and
    nothing changes.

    A request the API server refuses is recorded in ``errors`` and the apply goes on with the
    next object; when the server becomes unavailable (after the retries of retry.py), the apply
    starts no further chain, with ``stopped`` set and what was written so far in ``writes``.

    ``fence`` is called before every write (:meth:`DeciderLease.fence <.lease.DeciderLease.fence>`);
    when it raises :class:`~.lease.LeaseLost` the apply stops in the same way.

    ``should_stop`` (a controller's stop flag) is asked before each chain starts, never inside
    one: once it says so, the chains in flight finish and no further one starts (``stopped``
    set), so no workload is left half written by a shutdown.

    ``pending_writes`` (pacing.py), kept by a controller from cycle to cycle, paces the status
    writes of existing pending and inadmissible Workloads, highest-ranked first; those it holds
    back are listed in ``deferred`` and written by a later cycle. Without it nothing is paced.

    ``cached`` (a controller's cache lookup by kind and key) gives the object each update tries
    first, instead of reading it: a conflict (its resourceVersion is old) reads it and derives
    the change anew. A Workload it does not hold is created without reading first.

    ``events`` (a :class:`~.pacing.PendingWriteLimiter` a controller keeps) limits the Normal
    Events sent (Admitted, Pending, pod deletions...): those beyond it are dropped and counted
    in ``events_dropped``, so Events never take the API server's write budget from decisions.
    Warning Events are always sent. Without it every Event is sent. ``warned``, kept by a
    controller, tells each pod of a group whose Workload cannot be built why only once.
    ``event_sink`` (a controller's background writer) is handed the Events to send instead of
    sending them here, so the apply ends with its last write (their refusals are then its to log).

    ``basis`` is the snapshot the plan was decided from (:func:`~.decide.decide_and_apply`
    always passes it): every write of a Workload lands only on the Workload that snapshot held
    (same uid), or on one this apply made because it held none, and a Workload is made only for
    pods it held that never ran under one (the module docstring's "A decision never outlives
    what it decided about"). Without it (a plan applied on its own) the Workloads apply finds
    are taken for the ones decided about.

    Raises:
        ClusterUnavailable, ApiRefused: the API server could not be asked what it serves.
    """
    applier = _Applier(api, plan, dry_run, fence or (lambda: None), pending_writes, cached, events, warned, basis)
    result = applier.result
    if applier.version is None:
        result.errors.append(f"{KUEUE_GROUP} is not installed: Workloads cannot be written; nothing applied")
        return result
    for obj in plan.rejected:
        if obj.kind != "Workload" and obj.name:
            applier.rejected(obj)
    chains = _chains(plan, pending_writes is not None)
    # no more threads than the client keeps connections: beyond, each request would open its own
    workers = min(workers, getattr(api.configuration, "connection_pool_maxsize", workers) or workers)
    halted: list[str] = []  # why the apply stopped, first cause first
    halting = threading.Lock()
    turns = [threading.Event() for _ in chains]

    def guarded(own: _Applier, starts: bool, write: Callable[[], None]) -> _Applier:
        """``write``, unless the apply halted, or it ``starts`` a workload and should stop."""
        try:
            if halted or (starts and should_stop is not None and should_stop()):
                own.result.stopped = True  # not started: left whole for the next apply
            else:
                write()
        except (ClusterUnavailable, LeaseLost) as e:  # the writes so far stay valid (see the order above)
            with halting:
                halted.append(str(e))
        return own

    def release(chain: _Chain) -> _Applier:
        """Before step 1 of any chain: what gives quota back (a Workload finished, the succeeded
        pods of one admitted before), so that a stop before the admissions that reuse that quota
        never leaves more admitted than the quota holds."""
        own = applier.fork()
        if chain.holding:
            assert chain.entry is not None
            entry = chain.entry
            guarded(own, False, lambda: _write_workload(own, entry))
        return guarded(own, False, lambda: _act(own, chain.releases))

    def workload(index: int, chain: _Chain) -> _Applier:
        """Step 1 of a chain: its Workload and status."""
        own = applier.fork()
        if chain.turn is not None:  # paced: the token goes to the one ranked before first
            previous = next((i for i in range(index - 1, -1, -1) if chains[i].turn is not None), None)
            own.await_turn = (lambda: turns[previous].wait()) if previous is not None else (lambda: None)
            own.end_turn = turns[index].set
        entry = None if chain.holding else chain.entry  # a holder's was written with the releases
        try:
            return own if entry is None else guarded(own, True, lambda: _write_workload(own, entry))
        finally:
            turns[index].set()

    def actions(chain: _Chain, first: _Applier) -> _Applier:
        """Steps 2-4 of a chain: a workload whose step 1 ran has them run too, whatever should_stop says."""
        own = first.fork(keep=True)
        if first.result.stopped:
            own.result.stopped = True
            return own
        return guarded(own, chain.entry is None, lambda: _act(own, chain.actions))

    with counting_retries() as tally:
        # What gives quota back first, then steps 1 of every chain, then steps 2-4: no admission is
        # recorded before the quota it reuses is released, every Workload of the plan is written
        # before any pod, as a serial apply does, and each workload's own order holds.
        releasing = [chain for chain in chains if chain.releasing]
        if workers <= 1 or len(chains) <= 1:
            zeros = [release(chain) for chain in releasing]
            firsts = [workload(i, chain) for i, chain in enumerate(chains)]
            done = [actions(chain, first) for chain, first in zip(chains, firsts)]
            warned = [] if event_sink is not None else \
                [own.send_events() for own in zeros + firsts + done + [applier] if not halted]
        else:
            with ThreadPoolExecutor(min(workers, len(chains)), thread_name_prefix="clueue-apply") as pool:
                def each(fn: Callable[..., _Applier], *args: Any) -> list[_Applier]:
                    # each in a copy of this context: retries are counted on this apply's tallies
                    futures = [pool.submit(contextvars.copy_context().run, fn, *a) for a in zip(*args)]
                    return [f.result() for f in futures]
                zeros = each(release, releasing)
                firsts = each(workload, range(len(chains)), chains)
                done = each(actions, chains, firsts)
                # the Events after every write: none waits behind one (a server gone would refuse them)
                warned = [] if event_sink is not None else \
                    [f.result() for f in [pool.submit(own.send_events)
                                          for own in zeros + firsts + done + [applier] if not halted]]
    if event_sink is not None and not halted:
        event_sink([send for own in zeros + firsts + done + [applier] for send in own.events])
        for own in zeros + firsts + done + [applier]:
            own.events = []
    for own, warnings in zip(zeros + firsts + done + [applier], warned):
        own.result.warnings += warnings
    for own in zeros + firsts + done:
        _merge(result, own.result)
    if halted:
        result.errors.append(halted[0])  # one cause, said once: the chains in flight met the same
        result.stopped = True
    elif result.stopped:
        result.warnings.append(f"stopping: {sum(1 for own in done if own.result.stopped)} workloads' writes "
                               "left whole for the next apply")
    result.retries = tally.retries
    return result


@dataclass
class _Chain:
    """One workload's writes, in order: its Workload entry, then the plan's actions on it."""

    name: str
    entry: WorkloadEntry | None = None
    actions: list[Any] = field(default_factory=list)
    turn: bool | None = None  # True: its status write is paced, in the chains' order
    releases: list[Any] = field(default_factory=list)  # its ``finish``: quota given back, before any admission
    holding: bool = False  # admitted before this plan: its status write can only give quota back

    @property
    def releasing(self) -> bool:
        return bool(self.releases) or self.holding


def _chains(plan: Plan, paced: bool) -> list[_Chain]:
    """The plan as chains, one per workload: decisions first, in the plan's order; with pacing,
    the chains whose status only restates why a workload waits last, highest-ranked first."""
    chains: dict[str, _Chain] = {}
    entries = [e for e in plan.workloads if e.state != "finished"]
    if paced:  # a stable sort
        entries.sort(key=lambda e: (True, e.rank is None, e.rank or 0) if e.state in _WAITING else (False, False, 0))
    for entry in entries:
        chains.setdefault(entry.name, _Chain(entry.name)).entry = entry
        if paced and entry.state in _WAITING:
            chains[entry.name].turn = True
    admitting = {a.target for a in plan.actions if a.kind == "admit"}
    for chain in chains.values():
        chain.holding = chain.entry is not None and chain.entry.state == "admitted" and chain.name not in admitting
    for action in plan.actions:
        key = action.workload or action.target
        chain = chains.setdefault(key, _Chain(key))
        (chain.releases if action.kind == "finish" else chain.actions).append(action)
    ordered = list(chains.values())
    return [c for c in ordered if not c.turn] + [c for c in ordered if c.turn]


def _write_workload(applier: _Applier, entry: WorkloadEntry) -> None:
    """Step 1 of a chain; a refused write is an error.

    Raises:
        ClusterUnavailable, LeaseLost: stop: nothing more may be written.
    """
    with recorded(applier.result.errors, applier.api, f"writing Workload {entry.name}"):
        applier.workload(entry)


def _act(applier: _Applier, actions: list[Any]) -> None:
    """Steps 2-4 of a chain, in the plan's order; a refused write is an error and the chain goes on.

    Raises:
        ClusterUnavailable, LeaseLost: stop: nothing more may be written.
    """
    for action in actions:
        details = dict(action.details)
        with recorded(applier.result.errors, applier.api, f"{_DOING.get(action.kind, action.kind)} {action.target}"):
            if action.kind == "ungate":
                applier.ungate(action.target, action.workload, details.get("uid", ""),
                               details.get("nodeSelector", {}), details.get("annotations", {}),
                               details.get("labels", {}), details.get("tolerations", []),
                               details.get("matchFields", []))
            elif action.kind == "complete-admission":
                applier.complete(action.target, list(details.get("admissionChecks", [])))
            elif action.kind == "nominate":
                applier.nominate(action.target, list(details["clusterNames"]), str(details.get("dispatcher", "")))
            elif action.kind == "finish":
                applier.finish(action.target, details["reason"])
            elif action.kind == "finalize-pod":
                applier.finalize(action.target, details.get("uid", ""))
            elif action.kind == "delete-pod":
                applier.delete(action.target, action.workload, details.get("uid", ""),
                               details["reason"]["message"])
            elif action.kind == "preempt":
                applier.preempt(action.target, [(p["name"], p.get("uid", "")) for p in details.get("pods", [])],
                                details["reason"]["code"], details["reason"]["message"],
                                _preemption_variant(applier.plan, details), details["reason"].get("details"))


def _pinned_affinity(affinity: Any, match_fields: list[dict[str, Any]]) -> dict[str, Any]:
    """A gated pod's ``affinity`` with ``match_fields`` (the pin to its Node, docs/placement.md)
    added to each term of its required node affinity, or as its one term if it has none: the
    terms are ORed, so the pin must hold in each. A gated pod's required node affinity may only
    be extended so (Kubernetes' rule for pods with scheduling gates)."""
    affinity = dict(affinity or {})
    node = dict(affinity.get("nodeAffinity") or {})
    required = dict(node.get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = [dict(t) for t in required.get("nodeSelectorTerms") or []] or [{}]
    for term in terms:
        fields = list(term.get("matchFields") or [])
        term["matchFields"] = fields + [f for f in match_fields if f not in fields]
    required["nodeSelectorTerms"] = terms
    node["requiredDuringSchedulingIgnoredDuringExecution"] = required
    affinity["nodeAffinity"] = node
    return affinity


def _merge(into: ApplyResult, part: ApplyResult) -> None:
    """A chain's result added to the apply's."""
    for name in ("writes", "skipped", "errors", "warnings", "written", "deferred", "answers"):
        getattr(into, name).extend(getattr(part, name))
    into.events_dropped += part.events_dropped
    into.stopped = into.stopped or part.stopped


def _json(response: Any) -> Any:
    """The parsed body of a request sent with ``_preload_content=False`` (read whole: its
    connection goes back to the pool)."""
    return json.loads(response.data or b"null")


class _Reading:
    """The read of :func:`~.retry.update_with_retry` that offers a known object first (a
    cached one, or the answer to a write just made), then reads; it keeps the last object seen
    and whether the API server itself gave it (``fresh``), not a cache.

    With ``uid`` (the uid of the object the plan decided about; "": it decided on there being
    none), an object of another uid is taken for a missing one: a write derives its change only
    from the object decided about, never from one made in its place, which it leaves as it is
    (``why`` then says so, for the result)."""

    def __init__(self, read: Callable[[], Any], first: Any = None, fresh: bool = False,
                 uid: str | None = None) -> None:
        self._read, self._first, self.fresh, self.last = read, first, fresh, None
        self.uid = uid
        self.why = ""  # ": deleted since ..." or ": replaced since ..." once the object decided about is not found

    def __call__(self) -> Any:
        if self._first is not None:
            self.last, self._first = self._first, None
        else:
            self.last, self.fresh = self._read(), True
        if self.uid is not None and self.last is not None and _uid(self.last) != self.uid:
            self.why = f": {_REPLACED if self.uid else _MADE_MEANWHILE}"
            self.last = None
        elif self.uid and self.last is None:
            self.why = f": {_DELETED}"
        return self.last

    def wrote(self, obj: Any) -> Any:
        """The write's answer: the object as it now is."""
        self.last, self.fresh = obj, True
        return obj


def _as_made(entry: WorkloadEntry, obj: dict[str, Any] | None) -> bool:
    """Whether Workload ``obj``, found by a create of ``entry``'s that failed as existing, is the
    one that create made, its answer lost (a retry then finds it), as far as can be told: made
    for the pods of ``entry`` (its origin, owned by exactly their uids), recording no admission
    and no status at all yet. Anything else was made by someone else since the snapshot."""
    if obj is None or obj.get("status"):
        return False
    meta = obj.get("metadata") or {}
    owners = {o.get("uid") for o in meta.get("ownerReferences") or [] if o.get("kind") == "Pod"}
    return (meta.get("labels") or {}).get("clueue.dev/origin") == entry.origin and \
        bool(owners) and owners == {uid for _, uid in entry.pods if uid}


def _uid(obj: Any) -> str:
    """``metadata.uid`` of an object as the API server returns it ("" if none)."""
    return str(((obj or {}).get("metadata") or {}).get("uid") or "") if isinstance(obj, dict) else ""


# Why a write of a Workload was not sent: the object decided about is not the one found.
_DELETED = "deleted since the plan was decided; nothing made in its place, the next cycle decides"
_REPLACED = ("replaced by another Workload of that name since the plan was decided; left as it is, "
             "the next cycle decides")
_MADE_MEANWHILE = "made since the plan was decided, which saw none; left as it is, the next cycle decides"


def written_versions(obj: Any, deleting: tuple[str, str] | None = None) -> list[tuple[str, str, str]]:
    """(kind, key, resourceVersion) of an object a write returned; a delete that returned a
    Status (the object is gone at once) gives (kind, key, "")."""
    if isinstance(obj, dict):
        meta, kind = obj.get("metadata") or {}, obj.get("kind", "")
        name, ns, version = meta.get("name"), meta.get("namespace"), meta.get("resourceVersion")
    else:
        meta = getattr(obj, "metadata", None)
        kind = "Status" if isinstance(obj, client.V1Status) else "Pod"  # the only typed object apply writes
        name, ns, version = (getattr(meta, "name", None), getattr(meta, "namespace", None),
                             getattr(meta, "resource_version", None))
    if kind != "Status" and name and version:
        return [(kind, f"{ns}/{name}" if ns else str(name), str(version))]
    return [(deleting[0], deleting[1], "")] if deleting else []


def _preemption_variant(plan: Plan, details: dict[str, Any]) -> tuple[str, str]:
    """Kueue's reason on a victim's ``Preempted`` condition, from a ``preempt`` action's
    ``details``, and the preemptors' names: the rule the plan's reason names; for a plan made
    before reasons named it, ``InClusterQueue`` when a preemptor is of the
    victim's ClusterQueue; else ``InCohortReclaimWhileBorrowing`` when a preemptor's queue
    borrows once it is admitted (``borrowing`` of the action, from the cycle), else
    ``InCohortReclamation`` (it takes back its nominal quota)."""
    reason = details.get("reason") or {}
    victim_cq = (reason.get("details") or {}).get("clusterQueue")
    preemptors = [str(p) for p in (reason.get("details") or {}).get("preemptors") or []]
    queues = details.get("preemptorClusterQueues")
    if not isinstance(queues, dict):  # a plan made before the cycle recorded them: read them from its entries
        entries = {e.name: e for e in plan.workloads} if preemptors else {}
        queues = {p: entries[p].cluster_queue for p in preemptors if p in entries}
    rules = [str(p.get("rule")) for p in (reason.get("details") or {}).get("preemptions") or ()
             if isinstance(p, dict) and p.get("rule") in _PREEMPTION_WHY]
    if rules:  # the cycle named the rule (engine/preemption.py); the first preemptor's, as Kueue has one
        variant = rules[0]
    elif not preemptors or victim_cq in queues.values() or not queues:
        variant = "InClusterQueue"
    elif set(details.get("borrowing") or ()) & set(preemptors):
        variant = "InCohortReclaimWhileBorrowing"
    else:
        variant = "InCohortReclamation"
    return variant, ", ".join(preemptors)


# Kueue's words for each Preempted reason, in the condition's message.
_PREEMPTION_WHY = RULES

# The plan's reason for an eviction -> the reason Kueue writes on the Evicted condition.
_EVICTED_BY = {"Preempted": "Preempted", "ClusterQueueDrained": "ClusterQueueStopped",
               "LocalQueueDrained": "LocalQueueStopped", "Deactivated": "Deactivated",
               "AdmissionCheckRetry": "AdmissionCheck", "AdmissionCheckRejected": "DeactivatedDueToAdmissionCheck",
               "PodsReadyTimeout": "PodsReadyTimeout", "RequeuingLimitExceeded": "DeactivatedDueToRequeuingLimitExceeded"}

_DOING = {"ungate": "ungating Pod", "delete-pod": "deleting Pod", "finalize-pod": "removing the finalizer of Pod",
          "finish": "finishing Workload", "complete-admission": "admitting Workload",
          "preempt": "preempting Workload", "nominate": "nominating worker clusters of Workload"}

# Evictions an admission check calls for (engine/checks.py).
_CHECK_EVICTIONS = ("AdmissionCheckRetry", "AdmissionCheckRejected")
#: Evictions by waitForPodsReady (engine/podsready.py).
_PODS_READY_EVICTIONS = ("PodsReadyTimeout", "RequeuingLimitExceeded")

# Plan states whose Workload status only says why it waits: paced by a PendingWriteLimiter.
_WAITING = ("pending", "inadmissible")


def _check_states(status: dict[str, Any]) -> dict[str, str]:
    """``status.admissionChecks`` of a Workload: check name -> state."""
    return {str(c.get("name")): str(c.get("state")) for c in status.get("admissionChecks") or [] if isinstance(c, dict)}


def _reset_checks(checks: list[Any]) -> list[Any]:
    """The admission check states of an evicted Workload, as Kueue resets them: every one not
    Pending becomes Pending again, so that the next reservation waits for them anew."""
    out = []
    for c in checks:
        if isinstance(c, dict) and c.get("state") != "Pending":
            c = {**{k: v for k, v in c.items() if k != "podSetUpdates"}, "state": "Pending", "lastTransitionTime": _now(),
                 "message": f"Reset to Pending after eviction. Previously: {c.get('state')}"}
        out.append(c)
    return out


def _reclaimable(value: Any) -> dict[str, int]:
    """``status.reclaimablePods`` by pod set, without the ones of count 0."""
    return {str(r.get("name")): int(r.get("count") or 0) for r in value or [] if isinstance(r, dict) and r.get("count")}
