"""Fair sharing, translated from Kueue's documentation (concepts/preemption.md "Fair Sharing",
concepts/admission_fair_sharing.md): weights, weight 0, hierarchical cohorts, each preemption
strategy with the victims it allows, the switch in Kueue's own ConfigMap, and admission fair
sharing between the LocalQueues of one ClusterQueue. One decision cycle per test."""

from __future__ import annotations

from typing import Any

import pytest

from clueue.engine import SnapshotError
from clueue.engine.config import FairSharing
from tests.builders import cluster_queue, cohort, flavor, local_queue, run, workload

RECLAIM = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
FIRST, INITIAL = "LessThanOrEqualToFinalShare", "LessThanInitialShare"


def cq(name: str, nominal: int, *, weight: str | None = None, parent: str = "co", **kw: Any) -> dict[str, Any]:
    o = cluster_queue(name, {"f": {"cpu": nominal}}, cohort=parent, preemption=RECLAIM, **kw)
    if weight is not None:
        o["spec"]["fairSharing"] = {"weight": weight}
    return o


def kueue_config(text: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
            "data": {"controller_manager_config.yaml": text}}


def held(name: str, queue: str, cq_name: str, cpu: str, **kw: Any) -> dict[str, Any]:
    return workload(name, queue=queue, cpu=cpu, admitted_in=(cq_name, "f"), **kw)


def victims(plan) -> set[str]:
    return {a.target for a in plan.actions if a.kind == "preempt"}


def cohort_ab(b_weight: str | None = None) -> list[dict[str, Any]]:
    """a and b hold 3 cpu each of a cohort of 12 (c lends 6): what each can borrow is 12."""
    return [flavor("f"), cq("a", 3), cq("b", 3, weight=b_weight), cq("c", 6),
            local_queue("a", "qa"), local_queue("b", "qb"), local_queue("c", "qc")]


def b_borrows(*sizes: str) -> list[dict[str, Any]]:
    """a holds its 3 cpu; b holds the rest of the cohort (9 cpu: it borrows 6) in ``sizes``."""
    return [held("a0", "qa", "a", "3")] + [held(f"b{i}", "qb", "b", s, minute=i) for i, s in enumerate(sizes)]


def test_a_borrowing_queue_takes_from_one_that_borrows_more():
    # a asks 3 more: it would borrow 3 of 12 (share 0.25); b borrows 6 (0.5) and keeps 3 (0.25)
    # once a 3 cpu workload of it goes: 0.25 <= 0.25, LessThanOrEqualToFinalShare allows it.
    # Without fair sharing a borrowing preemptor does not reclaim.
    objs = [*cohort_ab(), *b_borrows("3", "3", "3"), workload("want", queue="qa", cpu="3", minute=9)]
    assert victims(run(*objs, fair_sharing=FairSharing())) == {"default/b2"}
    assert victims(run(*objs)) == set()


def test_a_heavier_weight_keeps_what_it_borrows():
    # b of weight 2 borrowing 6 of 12 has share 0.25, 0.125 after losing 3: neither strategy
    # lets a (0.25 after admission) take from it.
    objs = [*cohort_ab(b_weight="2"), *b_borrows("3", "3", "3"), workload("want", queue="qa", cpu="3", minute=9)]
    plan = run(*objs, fair_sharing=FairSharing())
    assert victims(plan) == set()
    assert plan.workload("default/want").state == "pending"


def test_weight_zero_borrows_only_what_nobody_else_wants():
    # b has weight 0: borrowing, its share is above any other, so a takes from it even when
    # b would keep less than a's share (0.25 <= infinite).
    objs = [*cohort_ab(b_weight="0"), *b_borrows("3", "6"), workload("want", queue="qa", cpu="3", minute=9)]
    assert victims(run(*objs, fair_sharing=FairSharing(True, (FIRST,)))) == {"default/b0"}


@pytest.mark.parametrize("strategies, expected", [
    ((FIRST,), set()),
    ((INITIAL,), {"default/b1"}),
    ((FIRST, INITIAL), {"default/b1"}),  # nothing by the first, so the second
])
def test_each_strategy_allows_its_own_victims(strategies, expected):
    # a needs 3 cpu: it would borrow 3 of 12 (share 0.25); b borrows 6 (0.5) in a 4 and a 5 cpu
    # workload. Losing either leaves b below 0.25, so LessThanOrEqualToFinalShare allows
    # neither; LessThanInitialShare allows both (0.25 < 0.5), and the lower priority goes.
    objs = [*cohort_ab(), held("a0", "qa", "a", "3"), held("b0", "qb", "b", "4", minute=0, priority=5),
            held("b1", "qb", "b", "5", minute=1, priority=0), workload("want", queue="qa", cpu="3", minute=9)]
    assert victims(run(*objs, fair_sharing=FairSharing(True, strategies))) == expected


def test_final_share_prefers_the_victim_that_leaves_the_share_highest():
    # a needs 3: b's 3 cpu workload leaves b at 0.25 (>= a's 0.25), its 6 cpu one at 0:
    # the small one goes, whatever its priority or age.
    objs = [*cohort_ab(), held("a0", "qa", "a", "3"), held("b0", "qb", "b", "3", minute=0, priority=5),
            held("b1", "qb", "b", "6", minute=1, priority=0), workload("want", queue="qa", cpu="3", minute=9)]
    assert victims(run(*objs, fair_sharing=FairSharing(True, (FIRST,)))) == {"default/b0"}


def test_admission_favours_the_queue_with_the_lowest_share_after_admission():
    # 2 cpu are free. a already borrows 2; b does not. a's workload is older, but b's leaves
    # the lower share (b borrows 2 of 8 after, a would borrow 4): b's is admitted.
    objs = [flavor("f"), cq("a", 2), cq("b", 2), cq("c", 4),
            local_queue("a", "qa"), local_queue("b", "qb"), local_queue("c", "qc"),
            held("a0", "qa", "a", "4"), held("b0", "qb", "b", "2"),
            workload("a-next", queue="qa", cpu="2", minute=1), workload("b-next", queue="qb", cpu="2", minute=2)]
    plan = run(*objs, fair_sharing=FairSharing())
    assert plan.workload("default/b-next").state == "admitted"
    assert plan.workload("default/a-next").state == "pending"
    plain = run(*objs)
    assert plain.workload("default/a-next").state == "admitted"


def test_hierarchical_cohorts_compare_the_subtrees_under_the_common_cohort():
    # root holds two cohorts: left (a 3, b 0) and right (c 3, d 6). b holds 9 cpu: left
    # borrows 6 of 12 (share 0.5). c asks 6: c itself would borrow, but right would not
    # (6 of its 9), and the shares compared are those of left and right, the children of the
    # cohort c and b share: c takes one of b's workloads. Without fair sharing c, which
    # would borrow, reclaims nothing.
    objs = [flavor("f"), cohort("root"), cohort("left", "root"), cohort("right", "root"),
            cq("a", 3, parent="left"), cq("b", 0, parent="left"), cq("c", 3, parent="right"),
            cq("d", 6, parent="right"),
            local_queue("a", "qa"), local_queue("b", "qb"), local_queue("c", "qc"), local_queue("d", "qd"),
            held("b0", "qb", "b", "3", minute=0), held("b1", "qb", "b", "3", minute=1),
            held("b2", "qb", "b", "3", minute=2), workload("want", queue="qc", cpu="6", minute=9)]
    assert victims(run(*objs, fair_sharing=FairSharing())) == {"default/b2"}
    assert victims(run(*objs)) == set()


def test_the_switch_is_kueues_configmap_and_clueues_config_overrides_it():
    objs = [*cohort_ab(), *b_borrows("3", "3", "3"), workload("want", queue="qa", cpu="3", minute=9)]
    on = kueue_config("apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
                      "fairSharing:\n  enable: true\n  preemptionStrategies: [LessThanOrEqualToFinalShare]\n")
    assert victims(run(*objs, on)) == {"default/b2"}
    assert victims(run(*objs, on, fair_sharing=FairSharing(enabled=False))) == set()
    off = kueue_config("apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nfairSharing:\n  enable: false\n")
    assert victims(run(*objs, off)) == set()


def test_a_bad_strategy_list_names_the_configmap_and_field():
    bad = kueue_config("kind: Configuration\nfairSharing:\n"
                       "  preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]\n")
    with pytest.raises(SnapshotError, match="ConfigMap kueue-manager-config.*fairSharing.preemptionStrategies"):
        run(flavor("f"), bad)


def test_a_negative_weight_names_the_object_and_field():
    with pytest.raises(SnapshotError, match="ClusterQueue a.*spec.fairSharing.weight"):
        run(flavor("f"), cq("a", 3, weight="-1"))


def test_admission_fair_sharing_favours_the_local_queue_that_consumed_less():
    # One ClusterQueue, two teams; room for one workload. x's is older, but x consumed more
    # (weighted: cpu counts twice, and y's weight 2 halves its usage): y's goes first.
    shared = cluster_queue("shared", {"f": {"cpu": 2}})
    shared["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    x, y = local_queue("shared", "x"), local_queue("shared", "y")
    x["status"] = {"fairSharing": {"admissionFairSharingStatus": {"consumedResources": {"cpu": "10"}}}}
    y["status"] = {"fairSharing": {"admissionFairSharingStatus": {"consumedResources": {"cpu": "16"}}}}
    y["spec"]["fairSharing"] = {"weight": "2"}
    config = kueue_config("kind: Configuration\nadmissionFairSharing:\n  usageHalfLifeTime: 168h\n"
                          "  usageSamplingInterval: 5m\n  resourceWeights: {cpu: 2.0}\n")
    objs = [flavor("f"), shared, x, y, workload("from-x", queue="x", cpu="2", minute=0),
            workload("from-y", queue="y", cpu="2", minute=1)]
    plan = run(*objs, config)
    assert plan.workload("default/from-y").state == "admitted"
    assert plan.workload("default/from-x").state == "pending"
    assert run(*objs).workload("default/from-x").state == "admitted"  # without the section: age


def test_the_victims_entry_names_fair_sharing_and_the_shares_compared():
    objs = [*cohort_ab(), *b_borrows("3", "3", "3"), workload("want", queue="qa", cpu="3", minute=9)]
    plan = run(*objs, fair_sharing=FairSharing())
    reason = next(r for r in plan.workload("default/b2").reasons if r.code == "Preempted")
    (preemption,) = reason.details["preemptions"]
    assert preemption["rule"] == "InCohortFairSharing"
    assert preemption["shares"] == {"preemptorNode": 'cq("a")', "victimNode": 'cq("b")', "preemptor": "0.25",
                                    "before": "0.5", "after": "0.25"}
    assert "(share 0.5 -> 0.25)" in reason.message


def test_a_parent_cohort_named_only_by_its_child_is_a_root_of_the_tree():
    """Cohort co names parent org, of which no Cohort object exists (Kueue creates it implicitly):
    the shares are still computed, across co's subtree under org."""
    objs = [*cohort_ab(), cohort("co", parent="org"), *b_borrows("3", "3", "3"),
            workload("want", queue="qa", cpu="3", minute=9)]
    assert victims(run(*objs, fair_sharing=FairSharing())) == {"default/b2"}
