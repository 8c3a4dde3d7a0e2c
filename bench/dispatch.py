"""The dispatch benchmark: MultiKueue's dispatchers compared in a simulation (docs/benchmarks.md).

A manager and 10 worker clusters of uneven capacity, some of it taken by work already running,
in one-second ticks of virtual time. Each tick:

1. the workloads that arrived join the manager's queue; the manager reserves its global quota
   (the workers' quotas summed) first come first served, as Kueue's BestEffortFIFO would;
2. the dispatcher under test (clueue's :func:`~clueue.engine.dispatch.run_dispatch`: Optimized,
   AllAtOnce or Incremental) nominates workers for every workload holding quota without a worker
   yet, from the workers as they were at the start of the tick; a copy is created in each newly
   nominated worker and removed from each worker no longer nominated;
3. each worker admits as Kueue does: its copies in creation order, each that fits its free
   quota (first fit); the first worker to admit a workload wins, the other copies are removed
   (two admitting the same one in one tick: the first by name wins, the other gives it back);
4. workloads run for their runtime, then give their quota back to the worker and the manager.

Figures per dispatcher: remote copies created per admitted workload, time from arrival to
admission in a worker (mean, p50, p95; ticks are seconds), and how often a workload was admitted
in a worker other than the first it was nominated to.
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable

from clueue.engine import Config, Document, Snapshot, build_snapshot, load_policy
from clueue.engine.config import ALL_AT_ONCE, INCREMENTAL, OPTIMIZED, MultiKueue
from clueue.engine.kueue_api import KUEUE_GROUP
from clueue.engine.dispatch import DispatchTarget, run_dispatch
from clueue.engine.objects import MultiKueueCluster, PodSetSpec
from clueue.engine.snapshot import WorkerView
from clueue.engine.workloads import Workload

__all__ = ["DISPATCHERS", "WORKER_QUOTAS", "WORKLOADS", "dispatch_benchmark", "simulate", "render_dispatch"]

#: The worker clusters' cpu quotas: uneven, 10 of them.
WORKER_QUOTAS = (16, 24, 32, 48, 64, 64, 96, 128, 160, 200)
#: What runs in each worker when the simulation starts (cpu), for the first 120 s.
INITIAL_LOAD = (8, 0, 24, 0, 48, 16, 0, 96, 40, 0)
DISPATCHERS = {"Optimized": OPTIMIZED, "AllAtOnce": ALL_AT_ONCE, "Incremental": INCREMENTAL}
_SIZES = (1, 2, 4, 8, 16, 32)  # cpu a workload asks (one pod)
_NS, _QUEUE, _CQ = "team", "main", "team"
_TARGETS = {"copiesPerAdmitted": 1.2}
#: Workloads of the scenario at scale 1, arriving over ``SPAN`` seconds: about the workers'
#: capacity (a mean of 10.5 cpu for 165 s each, against 832 cpu in all).
WORKLOADS = 2000
SPAN = 4000


@dataclass
class _Job:
    name: str
    cpu: int
    arrival: int
    runtime: int
    reserved_at: int | None = None
    copies: set[str] = field(default_factory=set)
    first: str | None = None  # the first worker it was nominated to
    admitted_in: str | None = None
    admitted_at: int | None = None
    nominated: tuple[str, ...] = ()

    def workload(self) -> Workload:
        return Workload(_NS, self.name, _QUEUE, 0, self.arrival, (PodSetSpec("main", 1, {"cpu": Fraction(self.cpu)}),),
                        "workload")


def _jobs(n: int, seed: int, span: int) -> list[_Job]:
    rng = random.Random(seed)
    jobs = [_Job(f"w{i:05d}", rng.choice(_SIZES), rng.randrange(span), rng.randrange(30, 300)) for i in range(n)]
    return sorted(jobs, key=lambda j: (j.arrival, j.name))


def _worker_view(name: str, quota: int, used: int) -> WorkerView:
    """A worker's objects as the manager reads them: its ClusterQueue, the LocalQueue of the
    workloads' name, and what its admitted workloads hold (one Workload standing for them all)."""
    kueue = f"{KUEUE_GROUP}/v1beta1"
    objs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": _NS}},
        {"apiVersion": kueue, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        {"apiVersion": kueue, "kind": "ClusterQueue", "metadata": {"name": _CQ}, "spec": {
            "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "default", "resources": [{"name": "cpu", "nominalQuota": quota}]}]}]}},
        {"apiVersion": kueue, "kind": "LocalQueue", "metadata": {"name": _QUEUE, "namespace": _NS},
         "spec": {"clusterQueue": _CQ}}]
    if used:
        objs.append({"apiVersion": kueue, "kind": "Workload", "metadata": {"name": "running", "namespace": _NS},
                     "spec": {"queueName": _QUEUE, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                         "containers": [{"name": "c", "resources": {"requests": {"cpu": used}}}]}}}]},
                     "status": {"admission": {"clusterQueue": _CQ, "podSetAssignments": [
                         {"name": "main", "count": 1, "flavors": {"cpu": "default"}}]}}})
    return WorkerView(name, build_snapshot([Document(f"{name}#{i}", o) for i, o in enumerate(objs)]), 0)


def simulate(dispatcher: str, *, workloads: int = WORKLOADS, seed: int = 0, span: int = SPAN,
             time_budget: float = 2.0, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Run the simulation with ``dispatcher`` (a name of :data:`DISPATCHERS`); its figures."""
    names = [f"worker-{i:02d}" for i in range(len(WORKER_QUOTAS))]
    quota = dict(zip(names, WORKER_QUOTAS))
    background = dict(zip(names, INITIAL_LOAD))
    config = Config(multikueue=MultiKueue(dispatcher_name=DISPATCHERS[dispatcher]))
    policy = load_policy()
    clusters = {k: MultiKueueCluster(k, True) for k in names}
    jobs = _jobs(workloads, seed, span)
    arriving = list(reversed(jobs))
    queue: list[_Job] = []  # waiting for the manager's quota
    dispatching: list[_Job] = []
    running: list[tuple[int, _Job]] = []
    used = {k: background[k] for k in names}
    global_used = sum(used.values())
    global_quota = sum(WORKER_QUOTAS)
    in_worker: dict[str, list[_Job]] = {k: [] for k in names}  # copies, in creation order
    copies = duplicates = solve_seconds = 0
    t = 0
    while arriving or queue or dispatching:
        if t == 120:  # the work running at the start ends
            for k in names:
                used[k] -= background[k]
            global_used -= sum(background.values())
        for end, j in [r for r in running if r[0] <= t]:
            used[j.admitted_in or ""] -= j.cpu
            global_used -= j.cpu
        running = [r for r in running if r[0] > t]
        while arriving and arriving[-1].arrival <= t:
            queue.append(arriving.pop())
        # 1. the manager reserves global quota, first come first served (BestEffortFIFO)
        for j in list(queue):
            if global_used + j.cpu <= global_quota:
                global_used += j.cpu
                j.reserved_at = t
                queue.remove(j)
                dispatching.append(j)
        # 2. the dispatcher nominates, from the workers as they are at the start of the tick
        if dispatching:
            snapshot = Snapshot(multikueue_clusters=clusters,
                                workers={k: _worker_view(k, quota[k], used[k]) for k in names})
            targets = [DispatchTarget(j.workload(), _CQ, tuple(names), j.nominated, j.reserved_at or 0)
                       for j in dispatching]
            started = time.monotonic()
            result = run_dispatch(snapshot, targets, policy, config, now=t, budget=time_budget)
            solve_seconds += time.monotonic() - started
            chosen = {e.workload: e.nominated for e in result.entries}
            for j in dispatching:
                j.nominated = chosen.get(f"{_NS}/{j.name}", j.nominated)
                if j.first is None and j.nominated:
                    j.first = j.nominated[0]
                for k in set(j.nominated) - j.copies:
                    in_worker[k].append(j)
                    copies += 1
                for k in j.copies - set(j.nominated):
                    in_worker[k].remove(j)
                j.copies = set(j.nominated)
        # 3. each worker admits its copies that fit, in creation order; the first worker wins
        for k in names:
            for j in list(in_worker[k]):
                if j.admitted_in is not None and j.admitted_at == t:
                    duplicates += 1  # another worker admitted it this tick, first: this one gives it back
                    continue
                if used[k] + j.cpu <= quota[k]:
                    used[k] += j.cpu
                    j.admitted_in, j.admitted_at = k, t
                    running.append((t + j.runtime, j))
                    for other in j.copies:
                        in_worker[other].remove(j)
                    j.copies = set()
                    dispatching.remove(j)
        t += 1
        if progress is not None:
            progress(workloads - len(arriving) - len(queue) - len(dispatching), workloads)
    waits = sorted(j.admitted_at - j.arrival for j in jobs if j.admitted_at is not None)
    admitted = len(waits)
    return {
        "dispatcher": dispatcher, "workloads": workloads, "admitted": admitted,
        "copiesCreated": copies, "copiesPerAdmitted": round(copies / max(admitted, 1), 3),
        "admissionSeconds": {"mean": round(statistics.fmean(waits), 2), "p50": waits[len(waits) // 2],
                             "p95": waits[int(len(waits) * 0.95)]},
        "reservedToAdmissionMean": round(statistics.fmean(
            j.admitted_at - (j.reserved_at or 0) for j in jobs if j.admitted_at is not None), 2),
        "notFirstNominated": sum(1 for j in jobs if j.admitted_in and j.admitted_in != j.first),
        "duplicateAdmissions": duplicates, "virtualSeconds": t, "dispatchSeconds": round(solve_seconds, 2),
    }


def dispatch_benchmark(*, workloads: int = WORKLOADS, seed: int = 0, time_budget: float = 0.1,
                       progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """Every dispatcher on the same workloads; whether Optimized meets its targets: at most 1.2
    copies per admitted workload, and a mean time to admission no worse than AllAtOnce's."""
    runs = {}
    for name in DISPATCHERS:
        runs[name] = simulate(name, workloads=workloads, span=round(SPAN * workloads / WORKLOADS), seed=seed,
                              time_budget=time_budget,
                              progress=None if progress is None else lambda d, n, name=name: progress(name, d, n))
    best, all_at_once = runs["Optimized"], runs["AllAtOnce"]
    return {"scenario": "dispatch", "workers": list(WORKER_QUOTAS), "dispatchers": runs, "targets": {
        "copiesPerAdmitted": best["copiesPerAdmitted"] <= _TARGETS["copiesPerAdmitted"],
        "admissionNoWorseThanAllAtOnce": best["admissionSeconds"]["mean"] <= all_at_once["admissionSeconds"]["mean"]}}


def render_dispatch(result: dict[str, Any]) -> str:
    """The benchmark as a table, one row per dispatcher, then the targets."""
    rows = [f"dispatch: {len(result['workers'])} workers (cpu {', '.join(map(str, result['workers']))}), "
            f"{next(iter(result['dispatchers'].values()))['workloads']} workloads",
            f"{'dispatcher':<12} {'admitted':>8} {'copies':>7} {'per admitted':>12} {'wait mean':>9} {'p50':>5} "
            f"{'p95':>5} {'not first':>9} {'dispatch s':>10}"]
    for name, r in result["dispatchers"].items():
        wait = r["admissionSeconds"]
        rows.append(f"{name:<12} {r['admitted']:>8} {r['copiesCreated']:>7} {r['copiesPerAdmitted']:>12} "
                    f"{wait['mean']:>9} {wait['p50']:>5} {wait['p95']:>5} {r['notFirstNominated']:>9} "
                    f"{r['dispatchSeconds']:>10}")
    rows.append("targets: " + ", ".join(f"{k} {'met' if v else 'MISSED'}" for k, v in result["targets"].items()))
    return "\n".join(rows)

