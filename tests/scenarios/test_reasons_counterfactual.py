"""Reasons that hold as counterfactuals (issue 24): a workload is inadmissible only when no flavor
can ever hold it, and a resource group none of whose flavors can ever hold it says so."""

from __future__ import annotations

from tests.builders import cluster_queue, codes, flavor, local_queue, pod, resource_group, run, states, workload


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
