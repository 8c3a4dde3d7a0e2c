"""What a cycle tells apply so that the Workload objects say what Kueue's would: no Workload for
a group of pods that cannot make one yet (KEP-976, "Groups of Pods created beforehand"), no
Finished for a group never admitted, and the facts behind Kueue's ``Preempted`` reasons.

Against a real API server: tests/e2e/test_adapter.py, tests/e2e/test_preemption.py.
"""

from __future__ import annotations

from clueue.adapters.kube.apply import _preemption_variant
from clueue.engine.queues import pending_positions
from tests.builders import cluster_queue, flavor, group, local_queue, pod, run, workload
from tests.scenarios.test_pod_lifecycle import QUEUE, admitted_group, tracked


def test_an_incomplete_group_has_no_workload_object_and_waits_in_no_queue():
    plan = run(QUEUE, group("g", 2, total=3), pod("solo"), workload("big", cpu="9"))
    entry = plan.workload("default/g")
    assert [r.code for r in entry.reasons] == ["GroupIncomplete"] and not entry.has_workload_object
    assert plan.workload("default/big").has_workload_object and plan.workload("default/pod-solo").has_workload_object
    assert set(pending_positions(plan)) == {"default/big"}  # Kueue has no Workload to queue for g


def test_pods_that_disagree_on_their_count_have_no_workload_object():
    plan = run(QUEUE, pod("m-0", group="m", total=2), pod("m-1", group="m", total=3))
    entry = plan.workload("default/m")
    assert [r.code for r in entry.reasons] == ["GroupCountMismatch"] and not entry.has_workload_object
    assert pending_positions(plan) == {}


def test_a_complete_group_has_its_workload_object():
    plan = run(QUEUE, group("g", 3))
    assert plan.workload("default/g").state == "admitted" and plan.workload("default/g").has_workload_object


def test_a_group_never_admitted_is_not_finished_though_its_pods_succeeded():
    # Unreachable with a kubelet (gated pods do not run), yet the seed ties Finished to the
    # admitted count: no finish action for a Workload that never held an admission.
    pods = [tracked(p) for p in group("g", 2, phase="Succeeded")]
    waiting = workload("g", count=2)
    plan = run(QUEUE, pods, waiting)
    assert not [a for a in plan.actions if a.kind == "finish"]
    admitted = [tracked(p, ran_under="wl-1") for p in group("g", 2, gated=False, phase="Succeeded")]
    plan = run(QUEUE, admitted, admitted_group("g", admitted))
    assert [a.target for a in plan.actions if a.kind == "finish"] == ["default/g"]


def _preempt(plan):
    (action,) = [a for a in plan.actions if a.kind == "preempt"]
    return _preemption_variant(plan, dict(action.details))


def test_a_preemption_in_the_victims_cluster_queue_is_in_cluster_queue():
    cq = cluster_queue("cq", {"f": {"cpu": 2}}, preemption={"withinClusterQueue": "LowerPriority"})
    plan = run(flavor("f"), cq, local_queue("cq"), workload("low", cpu="2", priority=1, admitted_in=("cq", "f")),
               workload("high", cpu="2", priority=100))
    assert _preempt(plan) == ("InClusterQueue", "default/high")


def _cohort(preemption, ask):
    a = cluster_queue("a", {"f": {"cpu": 4}}, cohort="c", preemption=preemption)
    b = cluster_queue("b", {"f": {"cpu": 4}}, cohort="c")
    return run(flavor("f"), a, b, local_queue("a", name="qa"), local_queue("b", name="qb"),
               workload("lender", queue="qb", cpu="8", priority=1, admitted_in=("b", "f")),
               workload("back", queue="qa", cpu=ask, priority=100))


def test_taking_back_nominal_quota_is_in_cohort_reclamation():
    plan = _cohort({"reclaimWithinCohort": "Any"}, "4")
    assert _preempt(plan) == ("InCohortReclamation", "default/back")


def test_reclaiming_while_borrowing_is_in_cohort_reclaim_while_borrowing():
    plan = _cohort({"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority"}}, "6")
    assert _preempt(plan) == ("InCohortReclaimWhileBorrowing", "default/back")
