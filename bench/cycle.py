"""The cycle benchmark: one decision cycle over a scenario's whole backlog, repeated.

For each repeat it times :func:`clueue.engine.run_cycle` from the outside (``wall``: what a
caller waits for, including the plan's digests) and records the phases the engine reports
(compile, ground, solve, explain, total). Beside the engine's plan it puts the greedy reference
(:mod:`clueue.bench.greedy`) and the upper bound (:mod:`clueue.bench.bound`), and flags a
DEFECT when the engine's admitted set is worse than greedy's in rank order.

Memory: ``peakRssMB`` is the high-water mark of the whole process's resident memory while the
cycles run (reset after the scenario is loaded, where the kernel allows it), so it includes
the interpreter, the loaded snapshot and clingo's native memory. ``lifetimePeakRssMB`` also
covers generating and loading the scenario.
"""

from __future__ import annotations

import gc
import os
import resource
import statistics
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Iterable, Mapping, Sequence

from clueue.engine import Config, Plan, Policy, Snapshot, load_policy, run_cycle
from clueue.engine.workloads import Workload, build_workloads

from .bound import gap, upper_bound
from .greedy import compare_in_rank_order, greedy_admit
from .greedy_placement import greedy_place, plan_placement
from .model import workload_resources
from .scenarios import Scenario

__all__ = ["CycleTargets", "TARGETS", "cycle_benchmark", "admitted_by_plan", "resources_of",
           "current_rss_mb", "peak_rss_mb", "reset_peak_rss", "spread"]

Progress = Callable[[str], None]
PHASES = ("compile", "ground", "solve", "explain", "total", "wall")
#: The primary resource: gaps and "above greedy" are judged on it.
PRIMARY = "cpu"


@dataclass(frozen=True)
class CycleTargets:
    """The issue's targets for one scenario; ``None`` means no target of that kind."""

    wall_seconds: float | None = None
    peak_rss_mb: float | None = None
    above_greedy: bool = False  # admitted resources strictly above greedy's
    max_gap: float | None = None  # at most this far below the upper bound
    placement: bool = False  # gangs admitted at least greedy placement's, GPUs stranded fewer (or none)


TARGETS: Mapping[str, CycleTargets] = {
    "baseline": CycleTargets(wall_seconds=1.0, peak_rss_mb=300.0),
    "large-scale": CycleTargets(wall_seconds=5.0),
    "flavors": CycleTargets(above_greedy=True, max_gap=0.02),
    "gangs": CycleTargets(above_greedy=True, max_gap=0.02),
    "fragmentation": CycleTargets(above_greedy=True, max_gap=0.02),
    "placement": CycleTargets(wall_seconds=2.0, placement=True),
}


# --------------------------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------------------------

def current_rss_mb() -> float:
    """Resident memory of this process now, in MB (10^6 bytes)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6
    except OSError:
        return peak_rss_mb()


def peak_rss_mb() -> float:
    """High-water mark of this process's resident memory, in MB."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6  # KiB on Linux


def reset_peak_rss() -> bool:
    """Reset the high-water mark to the current resident size (Linux >= 4.0); False if not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


# --------------------------------------------------------------------------------------------
# Reading a plan
# --------------------------------------------------------------------------------------------

def admitted_by_plan(plan: Plan, workloads: Mapping[str, Workload]) -> set[str]:
    """Workloads the plan admits in this cycle (already admitted ones are not counted)."""
    return {e.name for e in plan.workloads
            if e.state == "admitted" and e.name in workloads and workloads[e.name].admission is None}


def resources_of(keys: Iterable[str], workloads: Mapping[str, Workload]) -> dict[str, Fraction]:
    """Total requests per resource name of the given workloads."""
    out: dict[str, Fraction] = {}
    for k in keys:
        for r, v in workload_resources(workloads[k].pod_sets).items():
            out[r] = out.get(r, Fraction(0)) + v
    return out


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, min and max of the values (0 for none).

    >>> spread([3.0, 1.0, 2.0])
    {'median': 2.0, 'min': 1.0, 'max': 3.0}
    """
    if not values:
        return {"median": 0.0, "min": 0.0, "max": 0.0}
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _amounts(values: Mapping[str, Fraction]) -> dict[str, float]:
    return {r: float(v) for r, v in sorted(values.items())}


# --------------------------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------------------------

def cycle_benchmark(scenario: Scenario, *, repeat: int = 3, time_budget: float = 10.0,
                    policy: Policy | None = None, snapshot: Snapshot | None = None,
                    progress: Progress | None = None) -> dict[str, Any]:
    """Run ``repeat`` decision cycles over the whole backlog of ``scenario`` and compare.

    Returns a JSON-ready dict: ``timings`` (median/min/max seconds per phase), memory,
    ``clueue`` (admitted count and resources, optimality, solver statistics), ``greedy``,
    ``bound`` and ``gap``, ``rankOrder`` (clueue versus greedy), ``defect`` and ``targets``.
    """
    note = progress or (lambda _: None)
    lifetime_before = peak_rss_mb()
    t = time.monotonic()
    snap = snapshot if snapshot is not None else scenario.snapshot()
    load_seconds = time.monotonic() - t
    pol = policy if policy is not None else load_policy()
    config = Config(time_budget=time_budget)
    gc.collect()
    rss_loaded = current_rss_mb()
    peak_reset = reset_peak_rss()

    timings: dict[str, list[float]] = {p: [] for p in PHASES}
    solver: dict[str, Any] = {}
    admitted_sets: list[frozenset[str]] = []
    built = {w.key: w for w in build_workloads(snap, config).workloads}
    plan: Plan | None = None
    for i in range(repeat):
        note(f"cycle {i + 1}/{repeat}")
        start = time.monotonic()
        plan = run_cycle(snap, pol, config)
        len(plan.workloads)  # spell out every entry, as `clueue plan` does, within the time measured
        wall = time.monotonic() - start
        info = plan.solver.to_dict()
        for p in ("compile", "ground", "solve", "explain", "total"):
            timings[p].append(float(info.get(f"{p}Seconds", 0.0)))
        timings["wall"].append(wall)
        solver = info
        admitted_sets.append(frozenset(admitted_by_plan(plan, built)))
    peak = peak_rss_mb()
    assert plan is not None

    note("greedy reference")
    t = time.monotonic()
    greedy = greedy_admit(snap, list(built.values()))
    greedy_seconds = time.monotonic() - t
    note("upper bound")
    t = time.monotonic()
    bound = upper_bound(snap, list(built.values()))
    bound_seconds = time.monotonic() - t

    ours = admitted_sets[-1]
    ours_res = resources_of(ours, built)
    greedy_res = resources_of(set(greedy.admitted), built)
    comparison = compare_in_rank_order(greedy.ranked, set(ours), set(greedy.admitted))
    summary = plan.summary()
    result: dict[str, Any] = {
        "scenario": scenario.name,
        "shape": scenario.summary(),
        "repeat": repeat,
        "timeBudgetSeconds": time_budget,
        "policyDigest": plan.policy_digest,
        "loadSeconds": round(load_seconds, 4),
        "pending": sum(1 for w in built.values() if w.admission is None and not w.finished),
        "timings": {p: {k: round(v, 4) for k, v in spread(vs).items()} for p, vs in timings.items()},
        "memory": {"rssAfterLoadMB": round(rss_loaded, 1), "peakRssMB": round(peak, 1),
                   "peakReset": peak_reset, "lifetimePeakRssMB": round(max(peak, lifetime_before, peak_rss_mb()), 1)},
        "clueue": {"admitted": len(ours), "resources": _amounts(ours_res), "states": summary,
                   "optimal": bool(solver.get("optimal")), "budgetExhausted": bool(solver.get("budgetExhausted")),
                   "deterministic": len(set(admitted_sets)) == 1, "solver": solver},
        "greedy": {"admitted": len(greedy.admitted), "resources": _amounts(greedy_res),
                   "seconds": round(greedy_seconds, 4)},
        "bound": {**bound.to_dict(), "seconds": round(bound_seconds, 4)},
        "gap": {"clueue": {r: round(gap(ours_res.get(r, Fraction(0)), b), 4) for r, b in bound.resources.items()},
                "greedy": {r: round(gap(greedy_res.get(r, Fraction(0)), b), 4) for r, b in bound.resources.items()}},
        "rankOrder": {"verdict": comparison.verdict, "firstDifference": comparison.first_difference,
                      "position": comparison.position},
        "defect": comparison.verdict == "worse",
    }
    if snap.nodes:
        # With Nodes, the reference is greedy per-pod first fit on the nodes (quota-only greedy
        # would admit what no node holds): admissions are compared in rank order with it.
        placed = greedy_place(snap, built.values())
        ranked = compare_in_rank_order(greedy.ranked, set(ours), set(placed.admitted))
        result["placement"] = {"clueue": plan_placement(snap, plan, built).to_dict(), "greedy": placed.to_dict()}
        result["rankOrder"] = {"verdict": ranked.verdict, "firstDifference": ranked.first_difference,
                               "position": ranked.position, "reference": "greedy placement"}
        result["defect"] = ranked.verdict == "worse"
    result["targets"] = evaluate_targets(scenario.name, result)
    return result


def evaluate_targets(name: str, r: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets for scenario ``name``, each with the measured value and whether it is met."""
    out: list[dict[str, Any]] = [{
        "name": "never worse than greedy in rank order", "target": "not worse",
        "value": r["rankOrder"]["verdict"], "met": not r["defect"]}]
    t = TARGETS.get(name, CycleTargets())
    if t.wall_seconds is not None:
        v = r["timings"]["wall"]["median"]
        out.append({"name": "cycle wall time (median)", "target": f"<= {t.wall_seconds:g} s",
                    "value": f"{v:.3f} s", "met": v <= t.wall_seconds})
    if t.peak_rss_mb is not None:
        v = r["memory"]["peakRssMB"]
        out.append({"name": "peak memory (process)", "target": f"<= {t.peak_rss_mb:g} MB",
                    "value": f"{v:.0f} MB", "met": v <= t.peak_rss_mb})
    ours = r["clueue"]["resources"].get(PRIMARY, 0.0)
    theirs = r["greedy"]["resources"].get(PRIMARY, 0.0)
    if t.above_greedy:
        out.append({"name": f"admitted {PRIMARY} above greedy", "target": f"> {theirs:g}",
                    "value": f"{ours:g}", "met": ours > theirs})
    if t.max_gap is not None:
        g = r["gap"]["clueue"].get(PRIMARY, 0.0)
        out.append({"name": f"gap to upper bound ({PRIMARY})", "target": f"<= {t.max_gap:.0%}",
                    "value": f"{g:.2%}", "met": g <= t.max_gap})
    if t.placement and "placement" in r:
        ours, theirs = r["placement"]["clueue"], r["placement"]["greedy"]
        out.append({"name": "gangs admitted, at least greedy placement's", "target": f">= {theirs['gangsAdmitted']}",
                    "value": str(ours["gangsAdmitted"]), "met": ours["gangsAdmitted"] >= theirs["gangsAdmitted"]})
        # fewer than greedy, or none at all when greedy strands none either (nothing is lower)
        out.append({"name": "GPUs stranded, fewer than greedy placement's (or none)",
                    "target": f"< {theirs['gpusStranded']}" if theirs["gpusStranded"] else "0",
                    "value": str(ours["gpusStranded"]),
                    "met": ours["gpusStranded"] < theirs["gpusStranded"] or ours["gpusStranded"] == 0})
    return out
