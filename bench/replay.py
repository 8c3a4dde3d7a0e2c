"""Virtual-time replay: a scenario's arrivals and run times, decided cycle by cycle.

The replay runs the engine as a controller would. Workloads arrive at their
``clueue.dev/bench-arrival-ms``. Whenever something changed since the last cycle (an arrival or
a finish) and pending work exists, a decision cycle runs over the current state: the pending
workloads plus the running ones, which carry their admission (flavors and counts) and so hold
quota. All cycles run in one engine :class:`~clueue.engine.Session`, as in a controller, so each
reuses what the previous one derived from unchanged objects. By default the next cycle starts
as soon as the last one's decision is applied, as Kueue's scheduler loop runs its next cycle
once the last one ends; ``min_interval_ms`` makes cycles start at most that often, as a
controller that batches its events would. A workload admitted by a cycle starts when the cycle's
decision is available and finishes ``clueue.dev/bench-runtime-ms`` later, freeing its quota.

Latency: with ``latency="measured"`` (the default) a cycle's decision becomes available after
the cycle's own measured wall time, so a slow engine delays admissions and lengthens the run,
as it would in a cluster; with ``"zero"`` decisions are instantaneous and the replay measures
the decisions alone (and takes as long in real time as all cycles together); with ``"<N>ms"``
every decision takes N ms, which shows how the outcome depends on the engine's speed.

Reported: the makespan (from time 0 to the last finish), the physical limit (CPU-seconds of all
work divided by the total CPU quota: no schedule can finish earlier), average quota utilization
over the makespan, and time to admission (admission minus arrival) per workload class, beside
Kueue's thresholds for its performance test (whole run 425 s; average admission large 23 s,
medium 90 s, small 260 s) and the issue's targets (makespan within 1.3x the physical limit,
admission times at least 5x below Kueue's thresholds).
"""

from __future__ import annotations

import heapq
import math
import statistics
import time
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Callable, Iterable, Mapping, Sequence

from clueue.engine import Config, Policy, Session, Snapshot, load_policy
from clueue.engine.objects import Admission, KueueWorkload, PodSetAdmission

from .cycle import spread
from .scenarios import ARRIVAL_ANNOTATION, CLASS_LABEL, RUNTIME_ANNOTATION, Scenario

__all__ = ["KUEUE_THRESHOLDS", "Job", "replay", "combine_runs", "latency_ms", "jobs_of", "physical_limit_seconds"]

#: Kueue's performance test thresholds: whole run, and average time to admission per class (seconds).
KUEUE_THRESHOLDS: Mapping[str, float] = {"run": 425.0, "large": 23.0, "medium": 90.0, "small": 260.0}
MAKESPAN_FACTOR = 1.3  # the target: makespan within 1.3x the physical limit
ADMISSION_FACTOR = 5.0  # the target: admission times at least 5x below Kueue's thresholds
RESOURCE = "cpu"

Progress = Callable[[int, int], None]  # (finished workloads, all workloads)
Observer = Callable[[float, Mapping[str, KueueWorkload], Iterable[str]], None]  # (ms, running, pending)


@dataclass(frozen=True)
class Job:
    """What the replay knows of one workload besides its object."""

    key: str
    cls: str
    arrival_ms: int
    runtime_ms: int
    cpu: Fraction  # total CPU request over its pod sets


def jobs_of(scenario: Scenario, snapshot: Snapshot) -> dict[str, Job]:
    """Arrival, run time, class and CPU of every workload of the scenario."""
    out = {}
    for body in scenario.workloads:
        meta = body["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        kw = snapshot.workloads[key]
        cpu = sum((ps.requests.get(RESOURCE, Fraction(0)) * ps.count for ps in kw.pod_sets), Fraction(0))
        out[key] = Job(key, meta["labels"][CLASS_LABEL], int(meta["annotations"][ARRIVAL_ANNOTATION]),
                       int(meta["annotations"][RUNTIME_ANNOTATION]), cpu)
    return out


def total_quota(snapshot: Snapshot, resource: str = RESOURCE) -> Fraction:
    """Nominal quota of ``resource`` over every ClusterQueue, cohort and flavor."""
    total = Fraction(0)
    groups = [g for cq in snapshot.cluster_queues.values() for g in cq.resource_groups] + \
             [g for c in snapshot.cohorts.values() for g in c.resource_groups]
    for g in groups:
        for fq in g.flavors:
            q = fq.resources.get(resource)
            total += q.nominal if q else 0
    return total


def physical_limit_seconds(jobs: Mapping[str, Job], quota: Fraction) -> float:
    """CPU-seconds of all work divided by the total CPU quota.

    >>> physical_limit_seconds({"a": Job("a", "x", 0, 2000, Fraction(3))}, Fraction(2))
    3.0
    """
    work = sum((j.cpu * j.runtime_ms for j in jobs.values()), Fraction(0)) / 1000
    return float(work / quota) if quota else 0.0


def _admitted(kw: KueueWorkload, admit: Mapping[str, Any]) -> KueueWorkload:
    """The workload as it runs: with the admission of the plan's ``admit`` action."""
    return replace(kw, admission=Admission(admit["clusterQueue"], tuple(
        PodSetAdmission(a["name"], dict(a["flavors"]), a["count"]) for a in admit["podSets"])))


def latency_ms(latency: str) -> float | None:
    """A decision's latency in virtual ms, as ``replay`` takes it; None for ``measured``.

    Raises:
        ValueError: ``latency`` is not ``measured``, ``zero`` or ``<N>ms`` (N >= 0).
    """
    if latency == "measured":
        return None
    if latency == "zero":
        return 0.0
    if latency.endswith("ms"):
        try:
            value = float(latency[:-2])
        except ValueError:
            value = math.nan
        if value >= 0:  # refuses nan too
            return value
    raise ValueError(f"latency must be 'measured', 'zero' or a number of milliseconds like '20ms', got {latency!r}")


def replay(scenario: Scenario, *, time_budget: float = 10.0, latency: str = "measured",
           min_interval_ms: int = 0, policy: Policy | None = None, max_cycles: int = 100_000,
           progress: Progress | None = None, observe: Observer | None = None) -> dict[str, Any]:
    """Replay ``scenario`` in virtual time (see the module docstring); returns a JSON-ready dict.
    ``observe`` is called after each cycle's decision is applied, with the virtual time, the
    running workloads (with their admissions) and the pending ones (fairshare.py measures shares).

    Raises:
        ValueError: ``latency`` is not ``measured``, ``zero`` or ``<N>ms``.
    """
    fixed_ms = latency_ms(latency)
    session = Session(policy if policy is not None else load_policy(), Config(time_budget=time_budget))
    full = scenario.snapshot()
    jobs = jobs_of(scenario, full)
    quota = total_quota(full)
    objects: dict[str, KueueWorkload] = dict(full.workloads)
    arrivals = sorted(jobs.values(), key=lambda j: (j.arrival_ms, j.key))
    pending: set[str] = set()
    running: dict[str, KueueWorkload] = {}  # admitted, with their admission
    finishes: list[tuple[float, str]] = []  # heap of (finish ms, key)
    finish_of: dict[str, float] = {}  # running workload -> when it finishes
    evictions: dict[str, int] = {}  # per class
    admitted_at: dict[str, float] = {}
    finished_at: dict[str, float] = {}
    cycle_walls: list[float] = []
    budget_hits = 0
    used = Fraction(0)  # CPU of running workloads
    busy = Fraction(0)  # integral of used CPU over virtual ms
    last_t = 0.0
    nxt = 0
    t = 0.0
    changed = False
    cycles = 0
    real_start = time.monotonic()

    def advance(to: float) -> None:
        """Let virtual time run to ``to``: arrivals and finishes up to it happen."""
        nonlocal nxt, changed, used, busy, last_t
        while True:
            t_arrival = arrivals[nxt].arrival_ms if nxt < len(arrivals) else float("inf")
            t_finish = finishes[0][0] if finishes else float("inf")
            at = min(t_arrival, t_finish)
            if at > to:
                break
            busy += used * Fraction(at - last_t)
            last_t = at
            if t_finish <= t_arrival:
                _, key = heapq.heappop(finishes)
                if finish_of.get(key) != at:
                    continue  # preempted before it finished: it runs again later
                running.pop(key)
                used -= jobs[key].cpu
                finished_at[key] = at
            else:
                pending.add(arrivals[nxt].key)
                nxt += 1
            changed = True
        busy += used * Fraction(max(0.0, to - last_t))
        last_t = max(last_t, to)

    while cycles < max_cycles:
        advance(t)
        if not pending and nxt >= len(arrivals) and not running:
            break
        if not (pending and changed):
            upcoming = min(arrivals[nxt].arrival_ms if nxt < len(arrivals) else float("inf"),
                           finishes[0][0] if finishes else float("inf"))
            if upcoming == float("inf"):
                break  # what is pending can never be admitted: nothing will change any more
            t = upcoming
            continue
        changed = False
        snap = replace(full, workloads={k: running.get(k) or objects[k] for k in sorted(pending | set(running))})
        start = time.monotonic()
        plan = session.run(snap)
        wall = time.monotonic() - start
        cycles += 1
        cycle_walls.append(wall)
        budget_hits += bool(plan.solver.to_dict().get("budgetExhausted"))
        decided = t + (wall * 1000 if fixed_ms is None else fixed_ms)
        advance(decided)
        for action in plan.actions:
            key = action.workload
            if action.kind == "preempt" and key in running:
                running.pop(key)
                del finish_of[key]
                used -= jobs[key].cpu
                pending.add(key)
                evictions[jobs[key].cls] = evictions.get(jobs[key].cls, 0) + 1
                changed = True  # its quota is free: the next cycle admits whoever preempted it
            elif action.kind == "admit" and key in pending:
                pending.discard(key)
                running[key] = _admitted(objects[key], action.details)
                admitted_at[key] = decided  # as Kueue's test counts it: the last admission
                used += jobs[key].cpu
                finish_of[key] = decided + jobs[key].runtime_ms
                heapq.heappush(finishes, (finish_of[key], key))
        if observe:
            observe(decided, running, pending)
        if progress:
            progress(len(finished_at), len(jobs))
        t = max(decided, t + min_interval_ms)

    makespan_ms = max(finished_at.values(), default=0.0)
    waits: dict[str, list[float]] = {}
    for key, at in admitted_at.items():
        waits.setdefault(jobs[key].cls, []).append((at - jobs[key].arrival_ms) / 1000)
    physical = physical_limit_seconds(jobs, quota)
    makespan = makespan_ms / 1000
    result: dict[str, Any] = {
        "scenario": scenario.name,
        "latency": latency,
        "minIntervalMs": min_interval_ms,
        "timeBudgetSeconds": time_budget,
        "workloads": len(jobs),
        "finished": len(finished_at),
        "neverAdmitted": len(jobs) - len(admitted_at),
        "cycles": cycles,
        "cyclesOverBudget": budget_hits,
        "cycleWallSeconds": {k: round(v, 4) for k, v in spread(cycle_walls).items()},
        "engineSeconds": round(sum(cycle_walls), 3),
        "realSeconds": round(time.monotonic() - real_start, 3),
        "makespanSeconds": round(makespan, 3),
        "physicalLimitSeconds": round(physical, 3),
        "makespanOverLimit": round(makespan / physical, 3) if physical else None,
        "utilization": round(float(busy / (quota * Fraction(makespan_ms))), 4) if quota and makespan_ms else 0.0,
        "admissionSeconds": {c: {"average": round(statistics.fmean(v), 3), "max": round(max(v), 3), "count": len(v)}
                             for c, v in sorted(waits.items())},
        "evictions": dict(sorted(evictions.items())),
    }
    result["targets"] = _targets(result)
    return result


def combine_runs(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One replay entry for several runs of one scenario with the same settings.

    With measured latency a replay is not deterministic: the machine's speed decides when each
    decision lands, and in an overloaded queue a few milliseconds change who is admitted next,
    so a class's average admission varies by tens of percent from run to run. Every figure here
    is the median over the runs, and the targets are judged on those; but ``neverAdmitted`` is
    the worst run's, and ``cycleWallSeconds`` spans the cycles of all runs (the median of the
    runs' medians, the least minimum, the greatest maximum). ``spread`` gives median, min and
    max of the judged figures; ``perRun`` keeps each run as :func:`replay` returned it, but its
    targets. A single run is returned as it is, with ``runs: 1``.
    """
    first = runs[0]
    if len(runs) == 1:
        return {**first, "runs": 1}

    def median(values: Iterable[float | None]) -> float | None:
        present = [v for v in values if v is not None]  # makespanOverLimit is None without quota
        return round(statistics.median(present), 4) if present else None

    classes = sorted({c for r in runs for c in r["admissionSeconds"]})
    admission = {c: [r["admissionSeconds"][c] for r in runs if c in r["admissionSeconds"]] for c in classes}
    walls = [r["cycleWallSeconds"] for r in runs]
    result: dict[str, Any] = {
        **{k: first[k] for k in ("scenario", "latency", "minIntervalMs", "timeBudgetSeconds", "workloads")},
        "runs": len(runs),
        "finished": min(r["finished"] for r in runs),
        "neverAdmitted": max(r["neverAdmitted"] for r in runs),
        **{k: round(statistics.median(r[k] for r in runs)) for k in ("cycles", "cyclesOverBudget")},
        "cycleWallSeconds": {"median": median(w["median"] for w in walls),
                             "min": min(w["min"] for w in walls), "max": max(w["max"] for w in walls)},
        **{k: median(r[k] for r in runs) for k in ("engineSeconds", "realSeconds", "makespanSeconds",
                                                   "physicalLimitSeconds", "makespanOverLimit", "utilization")},
        "admissionSeconds": {c: {"average": round(statistics.median(a["average"] for a in v), 3),
                                 "max": max(a["max"] for a in v), "count": round(statistics.median(a["count"] for a in v))}
                             for c, v in admission.items()},
        "evictions": {c: round(statistics.median(r["evictions"].get(c, 0) for r in runs))
                      for c in sorted({c for r in runs for c in r["evictions"]})},
        "spread": {"makespanOverLimit": spread([r["makespanOverLimit"] for r in runs if r["makespanOverLimit"] is not None]),
                   "utilization": spread([r["utilization"] for r in runs]),
                   "admissionSeconds": {c: spread([a["average"] for a in v]) for c, v in admission.items()}},
        "perRun": [{k: v for k, v in r.items() if k != "targets"} for r in runs],
    }
    result["targets"] = _targets(result)
    return result


def _targets(r: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    of = f" (median of {r['runs']} runs)" if r.get("runs", 1) > 1 else ""
    if r["physicalLimitSeconds"]:
        limit = MAKESPAN_FACTOR * r["physicalLimitSeconds"]
        out.append({"name": "makespan", "target": f"<= {limit:.1f} s (1.3x physical limit)",
                    "value": f"{r['makespanSeconds']:.1f} s{of}", "met": r["makespanSeconds"] <= limit and r["neverAdmitted"] == 0})
    out.append({"name": "whole run (Kueue threshold)", "target": f"<= {KUEUE_THRESHOLDS['run']:g} s",
                "value": f"{r['makespanSeconds']:.1f} s{of}", "met": r["makespanSeconds"] <= KUEUE_THRESHOLDS["run"]})
    for cls in ("large", "medium", "small"):
        if cls in r["admissionSeconds"]:
            limit = KUEUE_THRESHOLDS[cls] / ADMISSION_FACTOR
            v = r["admissionSeconds"][cls]["average"]
            out.append({"name": f"average admission {cls}",
                        "target": f"<= {limit:.1f} s (Kueue {KUEUE_THRESHOLDS[cls]:g} s / 5)",
                        "value": f"{v:.2f} s{of}", "met": v <= limit})
    return out
