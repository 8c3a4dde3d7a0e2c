"""Live benchmark, part (b): a generated scenario's Workloads through the API at their arrival times.

The scenario's objects (:mod:`clueue.bench.scenarios`) are created with every cluster-wide and
namespace name prefixed by the run's tag, so that a run never touches objects it did not make.
Its configuration is created first; then, from time 0, each Workload is created at its
``clueue.dev/bench-arrival-ms`` from a pool of client threads. A watch on the run's Workloads
sees each one admitted (condition ``Admitted=True``); ``clueue.dev/bench-runtime-ms`` later the
same client pool marks it ``Finished=True`` through the status subresource, as a job's
controller would, which releases its quota. Admitted-and-then-not (an eviction) cancels the
pending finish; it is counted, and the workload runs again once readmitted.

The figures use the replay's own definitions (:mod:`clueue.bench.replay`): the physical limit
(:func:`~clueue.bench.replay.physical_limit_seconds` over :func:`~clueue.bench.replay.jobs_of`)
and time to admission (last admission minus arrival, here minus when the create was sent).
"""

from __future__ import annotations

import copy
import functools
import heapq
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from fractions import Fraction
from typing import Any, Callable

from clueue.engine.kueue_api import KUEUE_GROUP

from .live_kube import REQUEST_TIMEOUT, Event, LiveApi, Watcher, answer, brief, json_patch_status
from .live_pods import RUN_LABEL
from .replay import jobs_of, physical_limit_seconds, total_quota
from .scenarios import Scenario

__all__ = ["live_objects", "create_config", "run_workloads"]

Say = Callable[[str], None]
_PLURALS = {"ResourceFlavor": "resourceflavors", "Cohort": "cohorts", "ClusterQueue": "clusterqueues",
            "LocalQueue": "localqueues", "Workload": "workloads"}


def live_objects(scenario: Scenario, run: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The scenario's configuration and Workloads with names prefixed by ``run``, ready to create.

    Namespaces, flavors, cohorts and ClusterQueues get the prefix ``<run>-`` wherever they are
    named; Workloads lose their ``creationTimestamp`` (the server sets it) and get the run label.
    """
    def p(name: str) -> str:
        return f"{run}-{name}"

    config = []
    for obj in copy.deepcopy(scenario.config):
        meta, spec = obj["metadata"], obj.get("spec") or {}
        if obj["kind"] == "LocalQueue":
            meta["namespace"] = p(meta["namespace"])
            spec["clusterQueue"] = p(spec["clusterQueue"])
        else:
            meta["name"] = p(meta["name"])
        if spec.get("cohort"):
            spec["cohort"] = p(spec["cohort"])
        if spec.get("parentName"):
            spec["parentName"] = p(spec["parentName"])
        for group in spec.get("resourceGroups") or []:
            for flavor in group["flavors"]:
                flavor["name"] = p(flavor["name"])
        config.append(obj)
    workloads = []
    for obj in scenario.workloads:
        body = copy.deepcopy(obj)
        body["metadata"]["namespace"] = p(body["metadata"]["namespace"])
        body["metadata"].pop("creationTimestamp", None)
        body["metadata"]["labels"][RUN_LABEL] = run
        workloads.append(body)
    return config, workloads


def create_config(api: LiveApi, config: list[dict[str, Any]]) -> None:
    """Create the configuration objects in their order (namespaces before what lives in them)."""
    for obj in config:
        kind, meta = obj["kind"], obj["metadata"]
        if kind == "Namespace":
            answer(api.core.create_namespace(obj, _preload_content=False))
            continue
        group, version = obj["apiVersion"].split("/")
        if meta.get("namespace"):
            answer(api.objects.create_namespaced_custom_object(group, version, meta["namespace"], _PLURALS[kind], obj,
                                                               _preload_content=False))
        else:
            answer(api.objects.create_cluster_custom_object(group, version, _PLURALS[kind], obj, _preload_content=False))


def _condition(obj: dict[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


class _Run:
    """The state of one run: what was sent, seen admitted and finished, in seconds from time 0."""

    def __init__(self, api: LiveApi, scenario: Scenario, run: str, clients: int) -> None:
        self.api = api
        self.run = run
        snapshot = scenario.snapshot()
        # live key -> the scenario's job (arrival, run time, class, CPU)
        self.jobs = {f"{run}-{k}": j for k, j in jobs_of(scenario, snapshot).items()}
        self.quota = total_quota(snapshot)
        self.physical = physical_limit_seconds(self.jobs, self.quota)
        self.pool = ThreadPoolExecutor(clients, thread_name_prefix="clueue-bench-client")
        self.lock = threading.Condition()
        self.t0 = 0.0
        self.sent: dict[str, float] = {}
        self.lag: list[float] = []
        self.admitted: dict[str, float] = {}  # the last admission
        self.running: dict[str, float] = {}  # admitted and not finished: key -> its admission
        self.finished: dict[str, float] = {}
        self.evictions: dict[str, int] = {}
        self.errors: list[str] = []
        self.due: list[tuple[float, str, float]] = []  # heap of (finish at, key, the admission it ends)
        self.stopped = False

    # -- events from the watch --------------------------------------------------------------

    def seen(self, event: Event) -> None:
        meta = event.object["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        job = self.jobs.get(key)
        if job is None or key in self.finished or event.type == "DELETED":
            return
        admitted = _condition(event.object, "Admitted") and not _condition(event.object, "Finished")
        with self.lock:
            if admitted and key not in self.running:
                at = event.at - self.t0
                self.admitted[key] = self.running[key] = at
                heapq.heappush(self.due, (event.at + job.runtime_ms / 1000, key, at))
                self.lock.notify()
            elif not admitted and key in self.running and not _condition(event.object, "Finished"):
                del self.running[key]  # evicted: its pending finish is void
                self.evictions[job.cls] = self.evictions.get(job.cls, 0) + 1

    # -- the finisher -----------------------------------------------------------------------

    def finisher(self) -> None:
        """Mark each running workload Finished when its run time is over."""
        while True:
            with self.lock:
                while not self.stopped and (not self.due or self.due[0][0] > time.monotonic()):
                    self.lock.wait(timeout=max(0.0, self.due[0][0] - time.monotonic()) if self.due else 0.5)
                if self.stopped:
                    return
                _, key, admission = heapq.heappop(self.due)
                if self.running.get(key) != admission:
                    continue  # evicted since
            self.pool.submit(self._finish, key, admission)

    def _finish(self, key: str, admission: float) -> None:
        namespace, name = key.split("/")
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = [{"op": "add", "path": "/status/conditions/-", "value": {
            "type": "Finished", "status": "True", "reason": "Succeeded", "lastTransitionTime": now,
            "message": "clueue bench: ran its run time"}}]
        try:
            json_patch_status(self.api, KUEUE_GROUP, "v1beta1", namespace, "workloads", name, body)
        except Exception as e:  # noqa: BLE001 - counted and reported
            self.errors.append(f"finish {key}: {brief(e)}")
            return
        with self.lock:
            if self.running.get(key) == admission:
                del self.running[key]
                self.finished[key] = time.monotonic() - self.t0

    # -- creation ---------------------------------------------------------------------------

    def _create(self, body: dict[str, Any]) -> None:
        meta = body["metadata"]
        try:
            answer(self.api.objects.create_namespaced_custom_object(
                KUEUE_GROUP, "v1beta1", meta["namespace"], "workloads", body, _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT))
        except Exception as e:  # noqa: BLE001 - counted and reported
            self.errors.append(f"create {meta['namespace']}/{meta['name']}: {brief(e)}")

    def arrive(self, workloads: list[dict[str, Any]], say: Say) -> None:
        """Create each Workload at its arrival time (from this thread, writes from the pool)."""
        order = sorted(workloads, key=lambda b: self.jobs[f"{b['metadata']['namespace']}/{b['metadata']['name']}"].arrival_ms)
        for i, body in enumerate(order):
            key = f"{body['metadata']['namespace']}/{body['metadata']['name']}"
            at = self.t0 + self.jobs[key].arrival_ms / 1000
            wait = at - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            now = time.monotonic()
            self.sent[key] = now - self.t0
            self.lag.append(now - at)
            self.pool.submit(self._create, body)
            if i % 1000 == 999:
                say(f"{i + 1}/{len(order)} arrived, {len(self.admitted)} admitted, {len(self.finished)} finished")

    def report(self) -> dict[str, Any]:
        waits: dict[str, list[float]] = {}
        for key, at in self.admitted.items():
            waits.setdefault(self.jobs[key].cls, []).append(max(0.0, at - self.sent[key]))
        makespan = max(self.finished.values(), default=0.0)
        busy = sum((self.jobs[k].cpu * Fraction(self.finished[k] - self.admitted[k]) for k in self.finished), Fraction(0))
        return {
            "workloads": len(self.jobs), "created": len(self.sent), "admitted": len(self.admitted),
            "finished": len(self.finished), "neverAdmitted": len(self.jobs) - len(self.admitted),
            "makespanSeconds": round(makespan, 3), "physicalLimitSeconds": round(self.physical, 3),
            "makespanOverLimit": round(makespan / self.physical, 3) if self.physical and makespan else None,
            "utilization": round(float(busy / (self.quota * Fraction(makespan))), 4) if self.quota and makespan else 0.0,
            "admissionSeconds": {c: {"average": round(statistics.fmean(v), 3), "max": round(max(v), 3), "count": len(v)}
                                 for c, v in sorted(waits.items())},
            "evictions": dict(sorted(self.evictions.items())),
            "arrivalLagSeconds": {"max": round(max(self.lag, default=0.0), 3),
                                  "median": round(statistics.median(self.lag), 3) if self.lag else 0.0},
            "errors": self.errors[:5], "errorCount": len(self.errors),
        }


def run_workloads(api: LiveApi, scenario: Scenario, run: str, clients: int, timeout_s: float,
                  say: Say) -> dict[str, Any]:
    """Run ``scenario``'s Workloads live (see the module docstring); its configuration must exist."""
    state = _Run(api, scenario, run, clients)
    _, workloads = live_objects(scenario, run)
    watcher = Watcher(functools.partial(api.objects.list_cluster_custom_object, KUEUE_GROUP, "v1beta1", "workloads"),
                      state.seen, label_selector=f"{RUN_LABEL}={run}")
    watcher.start()
    finisher = threading.Thread(target=state.finisher, name="clueue-bench-finisher", daemon=True)
    state.t0 = time.monotonic()
    finisher.start()
    try:
        say(f"{len(workloads)} workloads arriving over {max(j.arrival_ms for j in state.jobs.values()) / 1000:.0f} s "
            f"(physical limit {state.physical:.1f} s)")
        state.arrive(workloads, say)
        deadline = state.t0 + timeout_s
        last = 0
        while len(state.finished) < len(workloads) and time.monotonic() < deadline:
            time.sleep(0.1)
            if len(state.finished) // 1000 > last:
                last = len(state.finished) // 1000
                say(f"{len(state.admitted)} admitted, {len(state.finished)} finished")
    finally:
        with state.lock:
            state.stopped = True
            state.lock.notify_all()
        finisher.join(timeout=10)
        state.pool.shutdown(wait=True, cancel_futures=True)  # interrupted: the creates not sent yet are dropped
        watcher.stop()
    result = state.report()
    result["watchErrors"] = watcher.errors[:5]
    result["timedOut"] = len(state.finished) < len(workloads)
    return result
