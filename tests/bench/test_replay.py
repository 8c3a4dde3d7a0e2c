"""The virtual-time replay on tiny scenarios whose schedule is known by hand."""

from __future__ import annotations

import pytest

from clueue.bench.replay import combine_runs, replay
from clueue.bench.scenarios import Scenario, generate, workload_object
from tests.builders import cluster_queue, flavor, local_queue


def scenario(cpu_quota, jobs, preemption=None):
    """One ClusterQueue with ``cpu_quota`` CPUs; jobs are (name, cpu, arrival ms, runtime ms, priority)."""
    config = (flavor("f"), cluster_queue("cq", {"f": {"cpu": cpu_quota}}, preemption=preemption),
              local_queue("cq", name="lq"))
    workloads = tuple(workload_object("default", name, cls=f"c{cpu}", priority=prio, arrival_ms=at, runtime_ms=run,
                                      pod_sets=[("main", 1, {"cpu": cpu})]) for name, cpu, at, run, prio in jobs)
    return Scenario("tiny", 0, "hand-checked", config, workloads)


def test_three_jobs_one_after_another():
    # Each job takes the whole quota for 1 s: they run 0-1, 1-2, 2-3 s.
    r = replay(scenario(2, [(f"w{i}", 2, 0, 1000, 0) for i in range(3)]), latency="zero")
    assert r["makespanSeconds"] == 3.0
    assert r["physicalLimitSeconds"] == 3.0 and r["makespanOverLimit"] == 1.0
    assert r["utilization"] == 1.0
    assert r["admissionSeconds"] == {"c2": {"average": 1.0, "max": 2.0, "count": 3}}
    assert r["cycles"] == 3 and r["finished"] == 3 and r["neverAdmitted"] == 0


def test_a_late_arrival_waits_for_quota_to_be_freed():
    # w1 runs 0-500 ms; w2 arrives at 200 ms, does not fit, and is admitted when w1 finishes.
    r = replay(scenario(1, [("w1", 1, 0, 500, 0), ("w2", 1, 200, 500, 0)]), latency="zero")
    assert r["makespanSeconds"] == 1.0
    assert r["admissionSeconds"]["c1"] == {"average": 0.15, "max": 0.3, "count": 2}
    assert r["utilization"] == 1.0
    assert r["cycles"] == 3  # at 0 (admits w1), at 200 (w2 waits), at 500 (admits w2)


def test_cycles_are_at_least_the_interval_apart():
    # Arrivals every 10 ms: with a 100 ms interval the second cycle sees the rest at once.
    jobs = [(f"w{i}", 1, 10 * i, 1000, 0) for i in range(5)]
    r = replay(scenario(10, jobs), latency="zero", min_interval_ms=100)
    assert r["cycles"] == 2
    assert r["admissionSeconds"]["c1"]["max"] == pytest.approx(0.09)
    assert r["makespanSeconds"] == pytest.approx(1.1)


def test_without_an_interval_every_arrival_gets_its_own_cycle():
    # Back-to-back cycles with instant decisions: each arrival is admitted the moment it comes.
    jobs = [(f"w{i}", 1, 10 * i, 1000, 0) for i in range(5)]
    r = replay(scenario(10, jobs), latency="zero", min_interval_ms=0)
    assert r["cycles"] == 5
    assert r["admissionSeconds"]["c1"]["max"] == 0.0
    assert r["makespanSeconds"] == pytest.approx(1.04)


def test_priority_decides_who_goes_first():
    r = replay(scenario(1, [("low", 1, 0, 1000, 0), ("high", 1, 0, 1000, 10)]), latency="zero")
    assert r["makespanSeconds"] == 2.0
    assert r["admissionSeconds"]["c1"]["max"] == 1.0


def test_a_higher_priority_arrival_preempts_and_the_victim_runs_again_later():
    # low runs from 0; high arrives at 300 ms and preempts it; high runs 300-800 ms, then low
    # starts over, 800-1800 ms. Its time to admission is that of its last admission, as in Kueue.
    jobs = [("low", 2, 0, 1000, 0), ("high", 2, 300, 500, 10)]
    r = replay(scenario(2, jobs, {"withinClusterQueue": "LowerPriority"}), latency="zero", min_interval_ms=0)
    assert r["evictions"] == {"c2": 1}
    assert r["makespanSeconds"] == 1.8
    assert r["admissionSeconds"]["c2"] == {"average": 0.4, "max": 0.8, "count": 2}
    assert r["finished"] == 2
    # Without preemption high waits for low instead.
    r = replay(scenario(2, jobs), latency="zero", min_interval_ms=0)
    assert r["evictions"] == {} and r["makespanSeconds"] == 1.5


def test_a_higher_priority_arrival_that_fits_evicts_nothing():
    # low holds 1 of 4 CPU from 0 to 1000 ms; high and mid (2 CPU each) arrive at 300 ms. high
    # fits and runs 300-800 ms; mid waits for it and runs 800-1300 ms. (Evicting low would let
    # both in at 300 ms, but a workload preempts only when it does not fit.)
    jobs = [("low", 1, 0, 1000, 0), ("high", 2, 300, 500, 10), ("mid", 2, 300, 500, 5)]
    r = replay(scenario(4, jobs, {"withinClusterQueue": "LowerPriority"}), latency="zero", min_interval_ms=0)
    assert r["evictions"] == {}
    assert r["makespanSeconds"] == 1.3
    assert r["admissionSeconds"]["c2"] == {"average": 0.25, "max": 0.5, "count": 2}


def two_teams(jobs, preemption=None):
    """ClusterQueues a and b of 2 CPUs each in one cohort; jobs are (queue, name, cpu, arrival ms,
    runtime ms), all of priority 0."""
    config = (flavor("f"), *(cluster_queue(q, {"f": {"cpu": 2}}, cohort="co", preemption=preemption) for q in "ab"),
              *(local_queue(q, name=f"l{q}") for q in "ab"))
    workloads = tuple(workload_object("default", name, cls=f"c{cpu}", priority=0, arrival_ms=at, runtime_ms=run,
                                      pod_sets=[("main", 1, {"cpu": cpu})], queue=f"l{q}")
                      for q, name, cpu, at, run in jobs)
    return Scenario("teams", 0, "hand-checked", config, workloads)


def test_a_queue_reclaims_its_nominal_quota_from_one_that_borrows():
    # b1 and b2 take the cohort's 4 CPUs from 0 and 1000 ms, b borrowing a's 2. a1 arrives at
    # 1500 ms and reclaims them: the newest, b2, is evicted; a1 runs 1500-2000 ms, and b2
    # starts over on a's quota once a1 is done, 2000-5000 ms.
    jobs = [("b", "b1", 2, 0, 3000), ("b", "b2", 2, 1000, 3000), ("a", "a1", 2, 1500, 500)]
    r = replay(two_teams(jobs, {"reclaimWithinCohort": "Any"}), latency="zero", min_interval_ms=0)
    assert r["evictions"] == {"c2": 1}
    assert r["makespanSeconds"] == 5.0
    assert r["admissionSeconds"]["c2"] == {"average": pytest.approx(1 / 3, abs=1e-3), "max": 1.0, "count": 3}
    # Without reclaiming a1 waits for b1: 3000-3500 ms.
    r = replay(two_teams(jobs), latency="zero", min_interval_ms=0)
    assert r["evictions"] == {} and r["makespanSeconds"] == 4.0


def test_work_that_can_never_fit_is_reported_not_waited_for():
    r = replay(scenario(1, [("w", 1, 0, 100, 0), ("huge", 4, 0, 100, 0)]), latency="zero")
    assert r["neverAdmitted"] == 1 and r["finished"] == 1
    assert not next(t for t in r["targets"] if t["name"] == "makespan")["met"]


def test_measured_latency_delays_admission():
    r = replay(scenario(2, [("w", 1, 0, 1000, 0)]), latency="measured")
    assert r["cycles"] == 1 and r["makespanSeconds"] > 1.0
    assert r["admissionSeconds"]["c1"]["average"] > 0


def test_baseline_targets_are_reported():
    r = replay(generate("baseline", seed=0, scale=0.01), latency="zero")
    names = [t["name"] for t in r["targets"]]
    assert names == ["makespan", "whole run (Kueue threshold)", "average admission large",
                     "average admission medium", "average admission small"]
    assert r["finished"] == r["workloads"] == 180


def test_a_fixed_latency_delays_every_decision_by_as_much():
    # Decisions land 300 ms after each cycle starts: w1 runs 300-800 ms; w2 (arrived at 200 ms,
    # seen by the cycle at 300 ms) does not fit then, and the cycle at 800 ms admits it at 1100 ms.
    r = replay(scenario(1, [("w1", 1, 0, 500, 0), ("w2", 1, 200, 500, 0)]), latency="300ms", min_interval_ms=0)
    assert r["latency"] == "300ms"
    assert r["makespanSeconds"] == 1.6
    assert r["admissionSeconds"]["c1"] == {"average": 0.6, "max": 0.9, "count": 2}


def test_several_runs_are_judged_on_their_medians():
    # The late-arrival schedule at three decision latencies (by hand: 0 ms: w1 waits 0, w2 0.3 s,
    # ends at 1.0 s; 100 ms: 0.1 and 0.5 s, ends at 1.2 s; 300 ms: 0.3 and 0.9 s, ends at 1.6 s).
    jobs = [("w1", 1, 0, 500, 0), ("w2", 1, 200, 500, 0)]
    runs = [replay(scenario(1, jobs), latency=latency, min_interval_ms=0) for latency in ("zero", "100ms", "300ms")]
    r = combine_runs(runs)
    assert r["runs"] == 3 and len(r["perRun"]) == 3
    assert r["makespanSeconds"] == 1.2 and r["makespanOverLimit"] == 1.2
    assert r["admissionSeconds"]["c1"] == {"average": 0.3, "max": 0.9, "count": 2}
    assert r["spread"]["admissionSeconds"]["c1"] == {"median": 0.3, "min": 0.15, "max": 0.6}
    assert r["spread"]["makespanOverLimit"] == {"median": 1.2, "min": 1.0, "max": 1.6}
    # The slowest run alone misses the makespan target (1.6 s > 1.3 s); the median meets it.
    assert not next(t for t in runs[2]["targets"] if t["name"] == "makespan")["met"]
    makespan = next(t for t in r["targets"] if t["name"] == "makespan")
    assert makespan["met"] and makespan["value"] == "1.2 s (median of 3 runs)"


def test_combined_runs_report_the_worst_run_s_never_admitted():
    fits = replay(scenario(4, [("w", 1, 0, 100, 0), ("huge", 4, 0, 100, 0)]), latency="zero")
    never = replay(scenario(1, [("w", 1, 0, 100, 0), ("huge", 4, 0, 100, 0)]), latency="zero")
    r = combine_runs([fits, fits, never])
    assert r["neverAdmitted"] == 1
    assert not next(t for t in r["targets"] if t["name"] == "makespan")["met"]


def test_one_run_is_reported_as_it_is():
    run = replay(scenario(1, [("w1", 1, 0, 500, 0)]), latency="zero")
    assert combine_runs([run]) == {**run, "runs": 1}


@pytest.mark.parametrize("latency", ["sometimes", "-5ms", "5s", "nanms", "ms"])
def test_unknown_latency_is_refused(latency):
    with pytest.raises(ValueError):
        replay(scenario(1, []), latency=latency)
