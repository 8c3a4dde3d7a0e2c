"""Reasons that hold as counterfactuals (issue 24): a workload is inadmissible only when no flavor
can ever hold it, and a resource group none of whose flavors can ever hold it says so; a shortfall
counts what workloads ranked after it took as given back, and what those ahead of it in line
would take of added quota first."""

from __future__ import annotations

from tests.builders import cluster_queue, codes, flavor, group, local_queue, pod, resource_group, run, states, workload


def _two_groups() -> list:
    groups = [resource_group({"small": {"cpu": 4}, "big": {"cpu": 16}}), resource_group({"g": {"nvidia.com/gpu": 2}})]
    return [flavor("small"), flavor("big"), flavor("g"), cluster_queue("cq", groups=groups), local_queue("cq")]


def test_one_flavor_too_big_while_another_can_hold_it_is_pending() -> None:
    """8 cpu never fit in flavor small (4), but flavor big (16) can hold them once it is free."""
    plan = run(_two_groups(), workload("held", cpu="10", admitted_in=("cq", "big")), pod("p", cpu=8, minute=5))
    assert states(plan)["default/pod-p"] == "pending"
    assert "ExceedsCapacity" in codes(plan, "default/pod-p") and "NeverFits" not in codes(plan, "default/pod-p")


def test_a_resource_group_no_flavor_can_hold_never_fits() -> None:
    """4 GPUs never fit in flavor g (2), whatever the cpu group could hold: NeverFits, inadmissible."""
    plan = run(_two_groups(), pod("p", cpu=1, gpu=4))
    assert states(plan)["default/pod-p"] == "inadmissible"
    assert "NeverFits" in codes(plan, "default/pod-p")


def _short(plan, name: str) -> dict:
    [r] = [r for r in plan.workload(name).reasons if r.code == "InsufficientQuota"]
    return r.details


def _two_teams(*workloads: dict) -> list:
    return [flavor("f"), cluster_queue("a", {"f": {"cpu": 4}}, cohort="c"), local_queue("a", name="a"),
            cluster_queue("b", {"f": {"cpu": 4}}, cohort="c"), local_queue("b", name="b"), *workloads]


def test_what_workloads_ranked_after_it_took_is_given_back() -> None:
    """big (6 cpu, first in line) does not fit beside old; small, ranked after it, borrows the 2
    cpu left. Had big fit, small would not have had them: 2 free, so 2 short (not 4)."""
    plan = run(_two_teams(workload("old", queue="b", cpu="2", admitted_in=("b", "f")),
                          workload("big", queue="a", cpu="8", priority=10, minute=1),
                          workload("small", queue="b", cpu="2", minute=2)))
    assert states(plan)["default/small"] == "admitted"
    short = _short(plan, "default/big")
    assert (short["unusedNominal"], short["borrowable"], short["short"]) == ("4", "2", "2")


def test_a_workload_behind_others_in_line_says_its_position() -> None:
    """first (2 cpu) and second (3 cpu) both wait in a full tree; quota added to b goes to first,
    ranked before it, first: 3 more admit first only, 5 more both. So second is 5 short, number
    2 in line (checked the way a user would: raise b by 5, re-plan; by 4, it stays out)."""
    objs = _two_teams(workload("x", queue="a", cpu="4", admitted_in=("a", "f")),
                      workload("y", queue="b", cpu="4", admitted_in=("b", "f")),
                      workload("first", queue="a", cpu="2", priority=10, minute=1),
                      workload("second", queue="b", cpu="3", minute=2))
    plan = run(objs)
    assert _short(plan, "default/first")["short"] == "2" and "position" not in _short(plan, "default/first")
    second = _short(plan, "default/second")
    assert (second["short"], second["position"], second["ahead"]) == ("5", 2, ["default/first"])
    assert "so it is 5 short, as number 2 in line in its quota tree: added quota admits default/first" in \
        next(r.message for r in plan.workload("default/second").reasons if r.code == "InsufficientQuota")
    for add, admitted in ((5, True), (4, False)):
        raised = [o if o["kind"] != "ClusterQueue" or o["metadata"]["name"] != "b"
                  else cluster_queue("b", {"f": {"cpu": 4 + add}}, cohort="c") for o in objs]
        assert (states(run(raised))["default/second"] == "admitted") is admitted


def _gang_queues() -> list:
    return [flavor("f"), cluster_queue("a", {"f": {"cpu": 4}}, cohort="co"),
            cluster_queue("b", {"f": {"cpu": 4}}, cohort="co"), local_queue("a")]


def test_an_incomplete_group_that_could_never_fit_once_complete_says_so() -> None:
    """Two of ten pods of 1 cpu are there: complete, the group asks 10 cpu of a quota tree of 8."""
    plan = run(_gang_queues(), group("g", 2, total=10))
    entry = plan.workload("default/g")
    assert entry.state == "inadmissible" and codes(plan, "default/g") == ["GroupIncomplete", "GroupNeverFits"]
    never = entry.reasons[1]
    assert (never.details["need"], never.details["quota"], never.details["resource"]) == ("10", "8", "cpu")
    assert "once complete, its 10 pods need at least 10 cpu" in never.message


def test_an_incomplete_group_the_tree_could_hold_once_complete_only_waits_for_its_pods() -> None:
    """Complete, 8 pods of 1 cpu fit the cohort's 8 by borrowing: it is only incomplete."""
    plan = run(_gang_queues(), group("g", 2, total=8))
    assert states(plan)["default/g"] == "pending" and codes(plan, "default/g") == ["GroupIncomplete"]
