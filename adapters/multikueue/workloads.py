"""The MultiKueue workload controller: copies of a manager Workload in worker clusters, the
first admission wins, status comes back.

A manager Workload is MultiKueue's when one of its ``status.admissionChecks`` names a
MultiKueue AdmissionCheck (checks.py). Each pass (:meth:`WorkloadController.sync`) lists the
manager's Workloads and, in every worker that answers, the copies labelled with this manager's
origin, and brings each such Workload one step further (:meth:`WorkloadController.reconcile`):

1. **Not (or no longer) holding quota, finished, evicted, being deleted, its check Rejected or
   Retry**: every copy is deleted; unless finished, ``clusterName`` is cleared too (the
   workload goes back to pending and is dispatched anew once its check is Pending again).
2. **Check Pending, a copy admitted** (``Admitted=True`` in a worker): the copy admitted first
   (the earliest ``Admitted`` transition, then the worker's name) wins. Every other copy is
   deleted first; only once all deletions succeeded is ``status.clusterName`` set (and
   ``nominatedClusterNames`` cleared) and the check made Ready ("The workload was admitted on
   "<worker>""). A copy the pass cannot delete (its worker stopped answering) keeps the check
   Pending until the next pass.
3. **Check Pending, none admitted**: copies are created in the nominated workers
   (``status.nominatedClusterNames``; empty with the AllAtOnce dispatcher: all clusters of the
   check's MultiKueueConfig) and deleted from the others. A copy has the manager Workload's
   namespace, name, labels (queue name), annotations and spec, the label
   ``kueue.x-k8s.io/multikueue-origin: <origin>`` and the annotation
   ``kueue.x-k8s.io/multikueue-origin-uid``. A worker that rejects its copy (an admission check
   Rejected there, deactivated, finished unadmitted) or deletes a copy it was given is not tried
   again for this Workload; once every nominated worker did, the check becomes Retry.
4. **Check Ready**: copies outside ``clusterName`` are duplicates (a worker that came back) and
   are deleted. A Workload of plain pods gets its pods created in the winner now, after
   every other copy is gone (pods.py), and their status copied back. The winner's
   ``PodsReady`` condition is copied to the manager, and its ``Finished`` too, which finishes
   the Workload in the manager. If the winner's copy is gone or evicted there, or the winner
   has not answered for ``workerLostTimeout``, the check becomes Retry.

Copies of a Workload deleted in the manager are deleted at the next pass; copies no pass knew
about (made before a restart, or while their worker was out of reach) by the garbage collector
(gc.py). Events (reason ``MultiKueue``, Kueue's) tell each step on the manager Workload.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Mapping

from kubernetes.client.exceptions import ApiException

from .api import (ORIGIN_LABEL, ORIGIN_UID_ANNOTATION, EventRecorder, KueueObjects, condition, is_true,
                  key_of, now, with_condition)
from .clusters import WorkerRegistry
from .pods import PodMirror, is_made_of_pods
from clueue.engine.config import ALL_AT_ONCE, MultiKueue as Settings

__all__ = ["WorkloadController", "Copies", "WORKERS", "rejection", "remote_copy"]

log = logging.getLogger("clueue.multikueue")

Copies = dict[str, dict[str, dict[str, Any]]]  # worker -> "namespace/name" -> its copy
WORKERS = 16  # Workloads reconciled at once in a pass: each is a few round trips, mostly waiting
_REASON = "MultiKueue"  # Kueue's Event reason for every MultiKueue step
_COPIED_BACK = ("PodsReady",)  # conditions of the winner's copy shown on the manager Workload
_KEEP = object()  # _set_check: leave clusterName as it is
_PRIORITY = ("priority", "priorityClassName", "priorityClassSource", "priorityClassRef")  # kept in step on copies


def rejection(copy: dict[str, Any]) -> str:
    """Why a worker rejected its (unadmitted) copy; "" if it did not."""
    for state in (copy.get("status") or {}).get("admissionChecks") or ():
        if state.get("state") == "Rejected":
            return f"admission check {state.get('name')} rejected it: {state.get('message', '')}"
    if (copy.get("spec") or {}).get("active") is False:
        return "it was deactivated"
    finished = condition(copy, "Finished")
    if finished is not None and finished.get("status") == "True":
        return f"it finished there unadmitted ({finished.get('reason')}: {finished.get('message', '')})"
    return ""


def remote_copy(workload: dict[str, Any], origin: str) -> dict[str, Any]:
    """The copy of a manager Workload that a worker gets (no status, no owners, no server fields)."""
    meta = workload.get("metadata") or {}
    return {"kind": "Workload",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                         "labels": {**(meta.get("labels") or {}), ORIGIN_LABEL: origin},
                         "annotations": {**(meta.get("annotations") or {}), ORIGIN_UID_ANNOTATION: meta.get("uid", "")}},
            "spec": dict(workload.get("spec") or {})}


@dataclass
class _Tried:
    """The workers a pending Workload's copies were created in, and those that refused them."""

    created: set[str] = field(default_factory=set)
    refused: dict[str, str] = field(default_factory=dict)  # worker -> why


class WorkloadController:
    """The protocol; ``metrics`` (the controller's) gets dispatched, admitted and lost per worker."""

    def __init__(self, manager: KueueObjects, registry: WorkerRegistry, settings: Settings,
                 events: EventRecorder, metrics: Any = None) -> None:
        self.manager = manager
        self.registry = registry
        self.settings = settings
        self.events = events
        self.metrics = metrics
        self.known: set[str] = set()  # MultiKueue Workloads of the last pass (their copies follow a deletion)
        self.tried: dict[str, _Tried] = {}  # by manager Workload uid, while pending
        self.pods = PodMirror(manager.api, settings.origin)

    # -- a pass --------------------------------------------------------------------------------
    def list_copies(self) -> Copies:
        """This origin's copies in every worker that answers (a worker that fails is left out:
        nothing is created there, nor concluded from it, this pass)."""
        copies: Copies = {}
        for name, worker in self.registry.active().items():
            try:
                listed = worker.list("workloads", label_selector=f"{ORIGIN_LABEL}={self.settings.origin}")
            except Exception as e:  # noqa: BLE001 - out of reach since its probe: the next pass sees it
                log.info("listing the copies in worker %s failed: %s", name, e)
                continue
            copies[name] = {key_of(c): c for c in listed}
        return copies

    def sync(self, workloads: Mapping[str, dict[str, Any]], copies: Copies,
             clusters_of: Mapping[str, tuple[str, ...]]) -> None:
        """One pass over the manager's ``workloads`` (by key) and the workers' ``copies``;
        ``clusters_of`` gives each valid MultiKueue check's clusters."""
        self.pods.begin_pass()
        found = {key: (w, c) for key, w in sorted(workloads.items()) if (c := _multikueue_check(w, clusters_of))}
        ours = set(found)

        def one(key: str) -> None:
            workload, (check, clusters) = found[key]
            try:
                self.reconcile(workload, check, clusters, copies)
            except Exception as e:  # noqa: BLE001 - one Workload's failure is retried next pass
                log.warning("multikueue: workload %s: %s", key, e)

        # Workloads are independent of each other: their round trips overlap (as apply's chains do).
        with ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="multikueue") as pool:
            list(pool.map(one, sorted(found)))
        for worker, held in copies.items():  # deleted in the manager since the last pass
            for key, copy in list(held.items()):
                if key in self.known and key not in workloads:
                    self.delete_copy(worker, copy, None, "its Workload was deleted in the manager")
        self.known = ours
        self.events.keep_only("Workload", ours)
        live = {str((w.get("metadata") or {}).get("uid")) for k, w in workloads.items() if k in ours}
        self.tried = {uid: t for uid, t in self.tried.items() if uid in live}

    def reconcile(self, workload: dict[str, Any], check: dict[str, Any], clusters: tuple[str, ...],
                  copies: Copies) -> None:
        """Bring one MultiKueue Workload one step further (see the module docstring)."""
        meta = workload["metadata"]
        key, uid, state = key_of(workload), str(meta.get("uid")), str(check.get("state"))
        mine: dict[str, dict[str, Any]] = {}
        for worker, held in copies.items():
            copy = held.get(key)
            if copy is None:
                continue
            if ((copy.get("metadata") or {}).get("annotations") or {}).get(ORIGIN_UID_ANNOTATION) != uid:
                self.delete_copy(worker, copy, None, "a copy of an earlier Workload of that name")
            else:
                mine[worker] = copy
        status = workload.get("status") or {}
        done = (is_true(workload, "Finished") or meta.get("deletionTimestamp") or not is_true(workload, "QuotaReserved")
                or is_true(workload, "Evicted") or state in ("Rejected", "Retry"))
        if done:
            self.tried.pop(uid, None)
            for worker, copy in mine.items():
                self.delete_copy(worker, copy, workload, f"the workload is {_what_ended(workload, state)}")
            requeued = state == "Retry" or is_true(workload, "Evicted") or not is_true(workload, "QuotaReserved")
            if requeued and status.get("clusterName") and not is_true(workload, "Finished"):
                # As Kueue: an evicted workload has run nowhere yet; the dispatcher nominates anew.
                self._set_check(workload, check, state, str(check.get("message", "")), cluster=None)
            return
        for worker, copy in mine.items():
            self._follow_priority(worker, copy, workload)
        if state == "Ready":
            self._follow(workload, check, mine, copies)
        else:
            self._dispatch(workload, check, clusters, mine, copies)

    # -- Pending: dispatch, and the first admission wins ------------------------------------------
    def _dispatch(self, workload: dict[str, Any], check: dict[str, Any], clusters: tuple[str, ...],
                  mine: dict[str, dict[str, Any]], copies: Copies) -> None:
        uid = str(workload["metadata"].get("uid"))
        tried = self.tried.setdefault(uid, _Tried())
        admitted = sorted((_admitted_at(c), w) for w, c in mine.items() if is_true(c, "Admitted") and not rejection(c))
        if admitted:
            self._win(workload, check, admitted[0][1], mine)
            return
        status = workload.get("status") or {}
        nominated = list(status.get("nominatedClusterNames") or ())
        if not nominated and self.settings.dispatcher_name == ALL_AT_ONCE:
            nominated = list(clusters)
        nominated = [n for n in nominated if n in clusters]
        for worker, copy in mine.items():
            why = rejection(copy)
            if why:
                tried.refused[worker] = why
                self.delete_copy(worker, copy, workload, f"worker {worker} rejected the workload: {why}")
            elif worker not in nominated and self.delete_copy(worker, copy, workload,
                                                              f"worker {worker} is no longer nominated"):
                tried.created.discard(worker)  # gone by our hand: nominated again, it gets a new copy
        for worker in tried.created - set(mine) - set(tried.refused):
            if worker in copies:  # it answers and the copy we made is gone: the worker deleted it
                tried.refused[worker] = "it deleted the copy"
                tried.created.discard(worker)
                self.events.record(workload, "Warning", _REASON, f"worker {worker} deleted its copy of the workload")
        for worker in nominated:
            if worker in copies and worker not in mine and worker not in tried.refused:
                self._create(worker, workload, tried)
        if nominated and all(n in tried.refused for n in nominated):
            refused = "; ".join(f"{w}: {tried.refused[w]}" for w in nominated)
            self.tried.pop(uid, None)
            self._set_check(workload, check, "Retry", f"Every nominated worker refused the workload ({refused})")

    def _win(self, workload: dict[str, Any], check: dict[str, Any], winner: str,
             mine: dict[str, dict[str, Any]]) -> None:
        for worker, copy in mine.items():
            if worker != winner and not self.delete_copy(worker, copy, workload, f"admitted on {winner} first"):
                return  # not deleted everywhere yet: no winner before every other copy is gone
        message = f'The workload was admitted on "{winner}"'
        if self._set_check(workload, check, "Ready", message, cluster=winner):
            self.tried.pop(str(workload["metadata"].get("uid")), None)
            self.events.record(workload, "Normal", _REASON, message)
            if self.metrics is not None:
                self.metrics.multikueue_admitted.labels(winner).inc()

    def _create(self, worker: str, workload: dict[str, Any], tried: _Tried) -> None:
        objects = self.registry.active().get(worker)
        if objects is None:
            return
        source = workload
        if objects.version != self.manager.version:  # the worker's version of it, from the manager
            source = self.manager.get("workloads", workload["metadata"]["name"], workload["metadata"]["namespace"],
                                      version=objects.version) or workload
        namespace = workload["metadata"]["namespace"]
        try:
            objects.create("workloads", namespace, remote_copy(source, self.settings.origin))
        except ApiException as e:
            if e.status == 409:  # ours from the previous pass (not listed yet), or someone else's
                there = objects.get("workloads", workload["metadata"]["name"], namespace) or {}
                if ((there.get("metadata") or {}).get("labels") or {}).get(ORIGIN_LABEL) == self.settings.origin:
                    tried.created.add(worker)
                    return
                tried.refused[worker] = "a Workload of that name, not this manager's copy, exists there"
                self.events.record(workload, "Warning", _REASON, f"cannot dispatch the workload to worker {worker}: "
                                   f"{tried.refused[worker]}")
                return
            why = f"namespace {namespace} does not exist there" if e.status == 404 else f"HTTP {e.status} {e.reason}"
            self.events.record(workload, "Warning", _REASON, f"cannot dispatch the workload to worker {worker}: {why}")
            return
        tried.created.add(worker)
        self.events.record(workload, "Normal", _REASON, f"dispatched the workload to worker {worker}")
        if self.metrics is not None:
            self.metrics.multikueue_dispatched.labels(worker).inc()

    # -- Ready: follow the winner ---------------------------------------------------------------
    def _follow(self, workload: dict[str, Any], check: dict[str, Any], mine: dict[str, dict[str, Any]],
                copies: Copies) -> None:
        winner = str((workload.get("status") or {}).get("clusterName") or "")
        for worker, copy in mine.items():
            if worker != winner:
                self.delete_copy(worker, copy, workload, f"a duplicate: the workload runs on {winner}")
        if winner not in copies:  # out of reach: lost after workerLostTimeout
            if winner not in self.registry.workers:
                self._set_check(workload, check, "Retry", f'Admitting remote lost: no MultiKueueCluster "{winner}"',
                                cluster=None)
                return
            lost = self.registry.out_of_reach_for(winner, time.time())
            if lost >= self.settings.worker_lost_timeout:
                self._set_check(workload, check, "Retry", f'Admitting remote lost: worker "{winner}" has not '
                                f"answered for {lost:.0f} s (workerLostTimeout)", cluster=None)
                if self.metrics is not None:
                    self.metrics.multikueue_lost.labels(winner).inc()
            return
        copy = mine.get(winner)
        if copy is None:
            self._set_check(workload, check, "Retry", "Admitting remote no longer exists", cluster=None)
            return
        objects = self.registry.active().get(winner)
        if objects is not None and is_made_of_pods(workload) and (is_true(copy, "Admitted") or
                                                                   is_true(copy, "Finished")):
            created = self.pods.sync(winner, objects.api, workload)  # only now: every other copy is gone
            if created:
                self.events.record(workload, "Normal", _REASON, f"created the workload's pods in worker {winner}")
        finished = condition(copy, "Finished")
        if finished is not None and finished.get("status") == "True":
            self._copy_back(workload, copy, ("Finished", *_COPIED_BACK))
            self.events.record(workload, "Normal", _REASON, f"the workload finished on worker {winner}: "
                               f"{finished.get('reason')}")
            return
        if is_true(copy, "Evicted") or not is_true(copy, "Admitted"):
            evicted = condition(copy, "Evicted") or {}
            self._set_check(workload, check, "Retry", f'Workload evicted on worker cluster: "{winner}", resetting for '
                            f"re-admission ({evicted.get('reason', 'not admitted')})", cluster=None)
            return
        self._copy_back(workload, copy, _COPIED_BACK)

    # -- writes ----------------------------------------------------------------------------------
    def _follow_priority(self, worker: str, copy: dict[str, Any], workload: dict[str, Any]) -> None:
        """A priority changed in the manager is changed in the copy too (as Kueue does), the
        only change of spec a copy follows."""
        spec, theirs = workload.get("spec") or {}, copy.get("spec") or {}
        if all(spec.get(f) == theirs.get(f) for f in _PRIORITY):
            return
        objects = self.registry.active().get(worker)
        if objects is None or objects.version != self.manager.version:
            return  # the field names may differ between versions: left to a copy made anew
        changed = {k: v for k, v in theirs.items() if k not in _PRIORITY}
        changed.update({f: spec[f] for f in _PRIORITY if f in spec})
        try:
            copy.update(objects.replace("workloads", {**copy, "spec": changed}))
        except Exception as e:  # noqa: BLE001 - a conflict or an outage: the next pass tries again
            log.info("updating the priority of the copy of %s in worker %s failed: %s", key_of(copy), worker, e)

    def delete_copy(self, worker: str, copy: dict[str, Any], workload: dict[str, Any] | None, why: str) -> bool:
        """Delete a copy (that uid only), and its pods first; True once it is gone. ``workload``
        (None: none in the manager) gets an Event saying ``why``."""
        objects = self.registry.active().get(worker)
        if objects is None:
            return False
        meta = copy["metadata"]
        try:
            if workload is None or is_made_of_pods(workload):  # its pods first: none outlives its copy
                self.pods.delete(objects.api, meta["namespace"], meta["name"])
            objects.delete("workloads", meta["namespace"], meta["name"], uid=meta.get("uid", ""))
        except Exception as e:  # noqa: BLE001 - tried again next pass
            log.info("deleting the copy of %s in worker %s failed: %s", key_of(copy), worker, e)
            return False
        log.info("deleted the copy of %s in worker %s: %s", key_of(copy), worker, why)
        if workload is not None:
            self.events.record(workload, "Normal", _REASON, f"removed the copy from worker {worker}: {why}")
        return True

    def _set_check(self, workload: dict[str, Any], check: dict[str, Any], state: str, message: str, *,
                   cluster: Any = _KEEP) -> bool:
        """Write the MultiKueue check's state (from the state read, else nothing) and
        ``clusterName`` (a name: set, and ``nominatedClusterNames`` cleared; None: cleared)."""
        name, was, uid = check.get("name"), check.get("state"), workload["metadata"].get("uid")

        def change(current: dict[str, Any]) -> dict[str, Any] | None:
            if current["metadata"].get("uid") != uid:
                return None
            status = dict(current.get("status") or {})
            checks = [dict(c) for c in status.get("admissionChecks") or ()]
            mine = next((c for c in checks if c.get("name") == name), None)
            if mine is None or mine.get("state") != was:
                return None  # changed meanwhile (the engine): decided again next pass
            if (mine.get("state"), mine.get("message")) != (state, message):
                if mine.get("state") != state:
                    mine["lastTransitionTime"] = now()
                mine["state"], mine["message"] = state, message[:32768]
            if cluster is not _KEEP:
                status.pop("clusterName", None)
                if cluster is not None:
                    status["clusterName"] = cluster
                    status.pop("nominatedClusterNames", None)
            status["admissionChecks"] = checks
            if status == (current.get("status") or {}):
                return None
            return {**current, "status": status}

        written = self.manager.update_status("workloads", workload, change)
        if written and state != "Ready":
            self.events.forget(workload)
            self.events.record(workload, "Warning" if state == "Retry" else "Normal", _REASON, message)
        return written

    def _copy_back(self, workload: dict[str, Any], copy: dict[str, Any], types: tuple[str, ...]) -> None:
        """Copy the winner's conditions of ``types`` (those it has) to the manager Workload."""
        remote = [c for c in (condition(copy, t) for t in types) if c is not None]

        def change(current: dict[str, Any]) -> dict[str, Any] | None:
            status = dict(current.get("status") or {})
            conditions = list(status.get("conditions") or ())
            for c in remote:
                conditions = with_condition(conditions, c["type"], c["status"], c.get("reason") or c["type"],
                                            c.get("message", "")) or conditions
            return None if conditions == list(status.get("conditions") or ()) else \
                {**current, "status": {**status, "conditions": conditions}}

        if remote:
            self.manager.update_status("workloads", workload, change)


def _multikueue_check(workload: dict[str, Any], clusters_of: Mapping[str, tuple[str, ...]]
                      ) -> tuple[dict[str, Any], tuple[str, ...]] | None:
    """The Workload's MultiKueue admission check state and its clusters, if it has one."""
    for state in (workload.get("status") or {}).get("admissionChecks") or ():
        if state.get("name") in clusters_of:
            return dict(state), clusters_of[state["name"]]
    return None


def _admitted_at(copy: dict[str, Any]) -> str:
    return str((condition(copy, "Admitted") or {}).get("lastTransitionTime", ""))


def _what_ended(workload: dict[str, Any], state: str) -> str:
    if is_true(workload, "Finished"):
        return "finished"
    if (workload.get("metadata") or {}).get("deletionTimestamp"):
        return "being deleted"
    if state in ("Rejected", "Retry"):
        return f"{state.lower()} by the admission check"
    return "evicted" if is_true(workload, "Evicted") else "not holding quota"
