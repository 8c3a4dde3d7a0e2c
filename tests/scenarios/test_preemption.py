"""Preemption a user can trust (docs/preemption.md): the victims each rule picks, and what the
plan says about each victim. One decision cycle per test; the brute-force minimality check over
random clusters is in test_preemption_minimal.py, the eviction of a whole pod group against a
real API server in tests/e2e/test_preemption.py."""

from __future__ import annotations

from tests.builders import cluster_queue, flavor, group, local_queue, resource_group, run, workload

WITHIN = {"withinClusterQueue": "LowerPriority"}
RECLAIM = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}


def victims(plan):
    return {a.target for a in plan.actions if a.kind == "preempt"}


def preempted(plan, name):
    return next(r for r in plan.workload(name).reasons if r.code == "Preempted")


def test_a_lower_priority_workload_is_not_evicted_for_nothing():
    # Taking victims in eviction order would evict low (1 cpu) and then mid (4 cpu); mid alone
    # makes room, so low stays (Kueue adds back the victims it does not need).
    plan = run(flavor("f"), cluster_queue("cq", {"f": {"cpu": 5}}, preemption=WITHIN), local_queue("cq"),
               workload("low", cpu="1", priority=0, admitted_in=("cq", "f")),
               workload("mid", cpu="4", priority=50, admitted_in=("cq", "f")),
               workload("high", cpu="4", priority=100, minute=1))
    assert victims(plan) == {"default/mid"}
    assert plan.workload("default/low").state == "admitted"


def test_of_equal_victims_the_newest_goes():
    plan = run(flavor("f"), cluster_queue("cq", {"f": {"cpu": 2}}, preemption=WITHIN), local_queue("cq"),
               workload("old", cpu="1", priority=0, minute=0, admitted_in=("cq", "f")),
               workload("new", cpu="1", priority=0, minute=5, admitted_in=("cq", "f")),
               workload("high", cpu="1", priority=100, minute=9))
    assert victims(plan) == {"default/new"}


def _cohort(a_preemption, b_nominal=0, a_flavors=None, b_flavors=None):
    return [cluster_queue("a", a_flavors or {"f": {"cpu": 4}}, cohort="co", preemption=a_preemption),
            cluster_queue("b", b_flavors or {"f": {"cpu": b_nominal}}, cohort="co"),
            local_queue("a"), local_queue("b", name="qb")]


def test_borrowed_quota_is_taken_back_before_the_queues_own_work_is_evicted():
    # a's own low (priority 0) could go, but b borrows 2 cpu of a's quota: that is taken back
    # first, whatever its priority (reclaimWithinCohort: Any), as Kueue orders its candidates.
    plan = run(flavor("f"), _cohort(RECLAIM),
               workload("low", cpu="2", priority=0, admitted_in=("a", "f")),
               workload("borrower", queue="qb", cpu="2", priority=50, admitted_in=("b", "f")),
               workload("high", cpu="2", priority=100, minute=5))
    assert victims(plan) == {"default/borrower"}
    reason = preempted(plan, "default/borrower")
    assert reason.details["preemptions"] == [{"preemptor": "default/high", "clusterQueue": "a",
                                              "rule": "InCohortReclamation", "needs": {"f": {"cpu": "2"}},
                                              "shares": None}]
    assert reason.details["held"] == {"f": {"cpu": "2"}}
    assert "default/high of ClusterQueue a by InCohortReclamation, asking cpu 2 in f; it held cpu 2 in f" \
        in reason.message


def test_a_flavor_where_preemption_only_reclaims_is_preferred():
    # In f1 a would evict its own low; in f2 it only takes back what b borrows: f2, though later.
    plan = run(flavor("f1"), flavor("f2"),
               _cohort(RECLAIM, a_flavors={"f1": {"cpu": 4}, "f2": {"cpu": 4}}, b_flavors={"f1": {"cpu": 0}, "f2": {"cpu": 0}}),
               workload("low", cpu="4", priority=0, admitted_in=("a", "f1")),
               workload("borrower", queue="qb", cpu="4", priority=50, admitted_in=("b", "f2")),
               workload("high", cpu="4", priority=100, minute=5))
    assert victims(plan) == {"default/borrower"}
    assert preempted(plan, "default/borrower").details["preemptions"][0]["needs"] == {"f2": {"cpu": "4"}}


def test_reclaim_counts_the_preemptors_own_victims_as_gone():
    # a (4 cpu) holds low (2); b (2 cpu) holds 4, borrowing 2. high asks a's whole nominal quota:
    # beside low it would not fit it, but low is its own victim, so it reclaims as well.
    plan = run(flavor("f"), _cohort(RECLAIM, b_nominal=2),
               workload("low", cpu="2", priority=0, admitted_in=("a", "f")),
               workload("borrower", queue="qb", cpu="4", priority=50, admitted_in=("b", "f")),
               workload("high", cpu="4", priority=100, minute=5))
    assert victims(plan) == {"default/low", "default/borrower"}
    rules = {v: preempted(plan, v).details["preemptions"][0]["rule"] for v in victims(plan)}
    assert rules == {"default/low": "InClusterQueue", "default/borrower": "InCohortReclamation"}


def test_reclaim_never_takes_a_workload_of_a_queue_within_its_nominal_quota():
    plan = run(flavor("f"), _cohort(RECLAIM, b_nominal=4),
               workload("mine", queue="qb", cpu="4", priority=0, admitted_in=("b", "f")),
               workload("low", cpu="4", priority=0, admitted_in=("a", "f")),
               workload("high", cpu="4", priority=100, minute=5))
    assert victims(plan) == {"default/low"}
    assert preempted(plan, "default/low").details["preemptions"][0]["rule"] == "InClusterQueue"


def test_borrow_within_cohort_names_its_rule():
    # a (2 cpu) asks 4, so it borrows; b (4 cpu) holds 6, borrowing 2: b1 alone makes room.
    preemption = {**RECLAIM, "borrowWithinCohort": {"policy": "LowerPriority"}}
    plan = run(flavor("f"), _cohort(preemption, b_nominal=4, a_flavors={"f": {"cpu": 2}}),
               workload("b1", queue="qb", cpu="4", priority=0, minute=1, admitted_in=("b", "f")),
               workload("b2", queue="qb", cpu="2", priority=0, minute=0, admitted_in=("b", "f")),
               workload("high", cpu="4", priority=100, minute=5))
    assert victims(plan) == {"default/b1"}
    assert preempted(plan, "default/b1").details["preemptions"][0]["rule"] == "InCohortReclaimWhileBorrowing"


def test_a_preempted_pod_group_is_evicted_whole():
    queue = [flavor("f"), cluster_queue("cq", {"f": {"cpu": 3}}, preemption=WITHIN), local_queue("cq")]
    gang = workload("gang", cpu="1", count=3, priority=0, admitted_in=("cq", "f"))
    gang["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": f"gang-{i}", "uid": f"u{i}"}
                                           for i in range(3)]
    pods = group("gang", 3, gated=False, priority_class=None)
    for p in pods:
        p["status"] = {"phase": "Running"}
    plan = run(queue, pods, workload("high", cpu="1", priority=100, minute=5))
    (action,) = [a for a in plan.actions if a.kind == "preempt"]
    assert sorted(p["name"] for p in action.details["pods"]) == ["gang-0", "gang-1", "gang-2"]


def _lender_and_borrower(reclaim):
    return [flavor("f"), cluster_queue("a", {"f": {"cpu": 4}}, cohort="co", preemption={"reclaimWithinCohort": reclaim}),
            cluster_queue("b", {"f": {"cpu": 4}}, cohort="co"), local_queue("a"), local_queue("b", name="qb"),
            workload("b-old", queue="qb", cpu="4", priority=0, admitted_in=("b", "f")),
            workload("b-next", queue="qb", cpu="2", priority=100, minute=1),
            workload("a-wait", cpu="4", priority=0, minute=2)]


def test_a_lender_that_could_not_take_its_quota_back_keeps_it_for_its_waiting_workload():
    # b-next (priority 100) ranks first and would borrow 2 cpu of a's quota; a reclaims only from
    # lower priorities, so it could never take them back from b-next while a-wait waits: held.
    plan = run(_lender_and_borrower("LowerPriority"))
    assert plan.workload("default/a-wait").state == "admitted"
    assert plan.workload("default/b-next").state == "pending"


def test_a_lender_that_can_reclaim_does_not_hold_its_quota():
    plan = run(_lender_and_borrower("Any"))
    assert plan.workload("default/b-next").state == "admitted"


def test_under_fair_sharing_a_preemption_across_queues_is_named_so():
    from clueue.engine.config import FairSharing
    plan = run(_cohort(RECLAIM), workload("borrower", queue="qb", cpu="2", priority=0, admitted_in=("b", "f")),
               workload("low", cpu="2", priority=0, admitted_in=("a", "f")), flavor("f"),
               workload("high", cpu="4", priority=100, minute=5), fair_sharing=FairSharing())
    rules = {v: preempted(plan, v).details["preemptions"][0]["rule"] for v in victims(plan)}
    assert rules.get("default/borrower") == "InCohortFairSharing"
    assert all(r == "InClusterQueue" for v, r in rules.items() if v != "default/borrower")
