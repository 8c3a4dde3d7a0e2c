"""A preemptor ends up borrowing only where Kueue's classic preemption lets it
(docs/preemption.md, "Borrowing after preemption"): with possible victims in other queues of
its cohort and its queue under its nominal quota, Kueue looks first for victims with which it
fits that nominal quota, and only then takes its own queue's workloads while borrowing; with
borrowWithinCohort, or with no possible victim elsewhere, it may borrow at once. One cycle per
test; each expectation is what Kueue's candidate order gives (worked out in the comments)."""

from __future__ import annotations

from tests.builders import cluster_queue, flavor, local_queue, run, workload

RECLAIM = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}


def victims(plan) -> set[str]:
    return {a.target for a in plan.actions if a.kind == "preempt"}


def _cohort(preemption, *, b_borrows: bool = True):
    """a (4 cpu) holds low1 (2) and low2 (1, newer); b (2 cpu) holds 3 (borrows 1) or 2; c (2 cpu)
    holds nothing. high (4 cpu, priority 5) of a does not fit the 2 or 3 cpu left."""
    b = [workload("b1", queue="qb", cpu="2", priority=10, minute=1, admitted_in=("b", "f"))]
    if b_borrows:
        b.append(workload("b2", queue="qb", cpu="1", priority=10, minute=2, admitted_in=("b", "f")))
    return [flavor("f"),
            cluster_queue("a", {"f": {"cpu": 4}}, cohort="co", preemption=preemption),
            cluster_queue("b", {"f": {"cpu": 2}}, cohort="co"), cluster_queue("c", {"f": {"cpu": 2}}, cohort="co"),
            local_queue("a", name="qa"), local_queue("b", name="qb"), local_queue("c", name="qc"),
            workload("low1", queue="qa", cpu="2", priority=0, minute=0, admitted_in=("a", "f")),
            workload("low2", queue="qa", cpu="1", priority=0, minute=10, admitted_in=("a", "f")),
            *b, workload("high", queue="qa", cpu="4", priority=5, minute=20)]


def test_a_preemptor_that_may_reclaim_fits_its_nominal_quota_rather_than_borrow():
    # Kueue, without borrowing first: b2 (b borrows), low2, low1 go until high fits a's 4 cpu
    # (a holds 0 + 4); b2 is then added back (high still fits), low2 is not (a would hold 5).
    # Evicting low1 alone would do, but high would borrow 1 cpu of c's: not while it may reclaim.
    plan = run(_cohort(RECLAIM))
    assert victims(plan) == {"default/low1", "default/low2"}


def test_borrow_within_cohort_lets_it_borrow_after_evicting_its_own():
    # With borrowWithinCohort Kueue tries borrowing first: low2 then low1 go, low2 comes back.
    preemption = {**RECLAIM, "borrowWithinCohort": {"policy": "LowerPriority"}}
    assert victims(run(_cohort(preemption))) == {"default/low1"}


def test_with_no_victim_elsewhere_it_borrows_after_evicting_its_own():
    # b holds only its nominal quota: every candidate is of a, and Kueue lets high borrow: 3 cpu
    # are free, and low2, the newest, frees the fourth (a then holds 2 + 4, over its 4).
    assert victims(run(_cohort(RECLAIM, b_borrows=False))) == {"default/low2"}
