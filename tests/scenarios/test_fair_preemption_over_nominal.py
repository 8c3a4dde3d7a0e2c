"""Fair sharing preempts across queues even over nominal (docs/fair-sharing.md): a preemptor
whose request takes its ClusterQueue over its nominal quota may take both its own queue's
lower-priority work and workloads of a ClusterQueue whose share is higher, as Kueue's fair
preemption does: it visits the candidates' queues from the highest share down, its own queue
among them, so its own lower-priority workloads go first while its queue's share is as high,
and the strategies then compare the preemptor's share without them. One cycle per test; the
expected victims are Kueue's, worked out in the comments."""

from __future__ import annotations

from clueue.engine.config import FairSharing
from tests.builders import cluster_queue, flavor, local_queue, run, workload

RECLAIM = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
FINAL, INITIAL = "LessThanOrEqualToFinalShare", "LessThanInitialShare"


def victims(plan) -> set[str]:
    return {a.target for a in plan.actions if a.kind == "preempt"}


def _cohort(b_weight: str | None = None):
    """a (2 cpu) holds low (2, priority 0); b (2 cpu) holds b0, b1, b2 (2 each: it borrows 4); c
    (4 cpu) holds nothing. The cohort's 8 cpu are used. high (4 cpu, priority 100) of a would
    take a to 6: it borrows 4 of the 8 lendable (share 0.5), as b does (0.5)."""
    b = cluster_queue("b", {"f": {"cpu": 2}}, cohort="co", preemption=RECLAIM)
    if b_weight is not None:
        b["spec"]["fairSharing"] = {"weight": b_weight}
    return [flavor("f"), cluster_queue("a", {"f": {"cpu": 2}}, cohort="co", preemption=RECLAIM), b,
            cluster_queue("c", {"f": {"cpu": 4}}, cohort="co", preemption=RECLAIM),
            local_queue("a", "qa"), local_queue("b", "qb"), local_queue("c", "qc"),
            workload("low", queue="qa", cpu="2", priority=0, admitted_in=("a", "f")),
            *[workload(f"b{i}", queue="qb", cpu="2", priority=0, minute=i, admitted_in=("b", "f")) for i in range(3)],
            workload("high", queue="qa", cpu="4", priority=100, minute=9)]


def test_own_lower_priority_work_goes_first_then_a_queue_whose_share_is_higher():
    # a's share (0.5) is not below b's: Kueue takes low first (a: 0.25 with high), then b's
    # newest, b2: 0.25 <= b's 0.25 once b2 is gone. Before, clueue compared 0.5 and took nothing.
    plan = run(_cohort(), fair_sharing=FairSharing())
    assert victims(plan) == {"default/low", "default/b2"}
    assert plan.workload("default/high").state == "pending"
    rules = {r.details["preemptions"][0]["rule"] for v in victims(plan)
             for r in plan.workload(v).reasons if r.code == "Preempted"}
    assert rules == {"InClusterQueue", "InCohortFairSharing"}
    [taken] = [r for r in plan.workload("default/b2").reasons if r.code == "Preempted"]
    # The shares its entry states are those compared: a's side with high admitted and low gone.
    assert taken.details["preemptions"][0]["shares"] == {"preemptorNode": 'cq("a")', "victimNode": 'cq("b")',
                                                         "preemptor": "0.25", "before": "0.5", "after": "0.25"}


def test_less_than_initial_share_alone_allows_it_too():
    # 0.25 < b's 0.5 before b2 goes.
    assert victims(run(_cohort(), fair_sharing=FairSharing(True, (INITIAL,)))) == {"default/low", "default/b2"}


def test_a_queue_whose_share_stays_lower_keeps_its_workloads():
    # b of weight 4 borrowing 4 of 8 has share 0.125, below a's 0.25 even once low is gone, and
    # 0.0625 once one workload goes: neither strategy lets high take from b, and low alone
    # leaves it 2 cpu short.
    plan = run(_cohort(b_weight="4"), fair_sharing=FairSharing())
    assert victims(plan) == set()
    assert plan.workload("default/high").state == "pending"
