"""Capacity held for a lender that cannot reclaim (policies/holds.lp, docs/preemption.md), after
Kueue's scheduler tests "capacity (not) blocked when lending clusterqueue (can / not guaranteed
to) reclaim": ClusterQueue a (2 cpu) holds a1 (1 cpu) and waits with a2 (2 gpu), which fits
nowhere and has nothing it may preempt; b (0 cpu) waits with b1 (1 cpu), which could borrow the
gpu a has free. One decision cycle per test."""

from __future__ import annotations

import pytest

from tests.builders import cluster_queue, flavor, local_queue, run, workload


def _cohort(reclaim: str | None, *, b1_priority: int = 0, a2_cpu: str = "2"):
    a_preemption = {"reclaimWithinCohort": reclaim} if reclaim else None
    return [flavor("f"),
            cluster_queue("a", {"f": {"cpu": 2}}, cohort="root", preemption=a_preemption),
            cluster_queue("b", {"f": {"cpu": 0}}, cohort="root"),
            local_queue("a", name="qa"), local_queue("b", name="qb"),
            workload("a1", queue="qa", cpu="1", admitted_in=("a", "f")),
            workload("a2", queue="qa", cpu=a2_cpu, minute=1),
            workload("b1", queue="qb", cpu="1", priority=b1_priority, minute=2)]


@pytest.fixture
def hold_for_never(tmp_path):
    """The policy file that turns on holds for Never lenders (docs/preemption.md)."""
    f = tmp_path / "hold-for-never.lp"
    f.write_text("% Never lenders hold their free nominal quota, as Kueue does.\nhold_for_never.\n")
    return [str(f)]


def test_a_lower_priority_lender_keeps_its_free_nominal_quota():
    plan = run(_cohort("LowerPriority"))
    assert plan.workload("default/a2").state == "pending"
    assert plan.workload("default/b1").state == "pending"
    # The held workload's entry names the hold, the holder and the numbers.
    [held] = [r for r in plan.workload("default/b1").reasons if r.code == "HeldForLender"]
    assert held.details == {"clusterQueue": "b", "flavor": "f", "resource": "cpu", "need": "1", "holderQueue": "a",
                            "holder": "default/a2", "held": "1", "free": "0"}
    assert "ClusterQueue a keeps 1 of its nominal quota for its head default/a2" in held.message


@pytest.mark.parametrize("reclaim", ["Never", None])
def test_a_never_lender_keeps_it_where_a_policy_file_says_so(reclaim, hold_for_never):
    # None: no spec.preemption, whose reclaimWithinCohort is Never.
    assert run(_cohort(reclaim)).workload("default/b1").state == "admitted"  # the default lends
    plan = run(_cohort(reclaim), policy=hold_for_never)
    assert plan.workload("default/a2").state == "pending"
    assert plan.workload("default/b1").state == "pending"


def test_a_lender_that_can_reclaim_lends_its_free_quota():
    plan = run(_cohort("Any"))
    assert plan.workload("default/b1").state == "admitted"


def test_a_head_that_would_borrow_holds_only_against_borrowers_ranked_after_it():
    # a2 (priority 0) would take a over its nominal quota: it is among the borrowers, and b1 of
    # priority 100 is considered before it, as Kueue orders them.
    plan = run(_cohort("LowerPriority", b1_priority=100))
    assert plan.workload("default/b1").state == "admitted"


def test_a_head_within_nominal_holds_against_every_borrower(hold_for_never):
    # a2 (1 cpu) fits a's nominal quota beside a1: Kueue considers it before every borrower,
    # whatever their priority, and keeps the cpu for it; b1 (priority 100) ranks first here.
    plan = run(_cohort("Never", b1_priority=100, a2_cpu="1"), policy=hold_for_never)
    assert plan.workload("default/b1").state == "pending"
    assert plan.workload("default/a2").state == "admitted"
    # b1 ranks first: in its turn a2 was waiting and held the cpu, which its entry says.
    [held] = [r for r in plan.workload("default/b1").reasons if r.code == "HeldForLender"]
    assert (held.details["holder"], held.details["held"], held.details["free"], held.details["need"]) == \
        ("default/a2", "1", "0", "1")
