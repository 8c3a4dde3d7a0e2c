"""Of equally good victims, the most recently admitted goes (docs/preemption.md): as Kueue orders
its preemption candidates, by the time each one's quota was reserved (its ``QuotaReserved``
condition), not by its creation, which differs for a workload created long before it was
admitted or admitted again after an eviction. Without the condition its creation stands in.

Each test: one ClusterQueue of 2 cpu (withinClusterQueue: LowerPriority) holding two admitted
workloads of 1 cpu and priority 0, and a pending one of priority 100 asking 1 cpu: exactly one
of the two goes.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import cluster_queue, flavor, local_queue, pod, run, ts, workload

WITHIN = {"withinClusterQueue": "LowerPriority"}


def cluster() -> list[dict[str, Any]]:
    return [flavor("f"), cluster_queue("cq", {"f": {"cpu": 2}}, preemption=WITHIN), local_queue("cq")]


def admitted(name: str, created: int, reserved: int | None) -> dict[str, Any]:
    """An admitted Workload created at minute ``created`` whose quota was reserved at minute
    ``reserved`` (None: no QuotaReserved condition)."""
    o = workload(name, cpu="1", priority=0, minute=created, admitted_in=("cq", "f"))
    if reserved is not None:
        o["status"]["conditions"] = [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "lastTransitionTime": ts(reserved)}]
    return o


def victims(*objs: Any) -> set[str]:
    plan = run(*cluster(), *objs, workload("high", cpu="1", priority=100, minute=59))
    return {a.target for a in plan.actions if a.kind == "preempt"}


@pytest.mark.parametrize("old_reserved, young_reserved, goes", [
    (50, 20, "old"),     # created first, admitted last (e.g. evicted and admitted again): it goes
    (5, 20, "young"),    # admitted in creation order: the younger goes
    (None, None, "young"),  # no condition on either: their creation orders them
])
def test_the_most_recently_admitted_of_equal_victims_goes(old_reserved, young_reserved, goes):
    assert victims(admitted("old", 0, old_reserved), admitted("young", 10, young_reserved)) == {f"default/{goes}"}


def test_the_workloads_made_for_pods_are_ordered_by_their_quota_reservation_too():
    # Pod a was created first but its Workload's quota was reserved last: a goes.
    objs = []
    for name, created, reserved in (("a", 0, 50), ("b", 10, 20)):
        p = pod(name, cpu="1", minute=created, gated=False, phase="Running")
        p["metadata"]["uid"] = f"uid-{name}"
        w = admitted(f"pod-{name}", created, reserved)
        w["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": f"uid-{name}"}]
        objs += [p, w]
    assert victims(*objs) == {"default/pod-a"}
