"""The plain-pods lifecycle as one decision cycle sees it: which pods lose their finalizer
(``finalize-pod``), a deleted Workload ending its group, Finished, and reclaimable pods.

The same lifecycle against a real API server, cycle after cycle: tests/e2e/test_plain_pods_live.py.
"""

from __future__ import annotations

from typing import Any

from clueue.engine.snapshot import role_hash
from tests.builders import cluster_queue, flavor, group, local_queue, pod, run, states, workload

QUEUE = [flavor("default"), cluster_queue("cq", {"default": {"cpu": 4}}), local_queue("cq")]
FINALIZER = "kueue.x-k8s.io/managed"
UID = "clueue.dev/workload-uid"


def tracked(p: dict[str, Any], uid: str | None = None, *, ran_under: str | None = None,
            deleting: bool = False) -> dict[str, Any]:
    """``p`` as the webhook and apply leave it: the finalizer, a uid; ``ran_under``: the uid of
    the Workload it was ungated for."""
    meta = p["metadata"]
    meta["finalizers"] = [FINALIZER]
    meta["uid"] = uid or f"uid-{meta['name']}"
    if ran_under:
        meta["annotations"][UID] = ran_under
    if deleting:
        meta["deletionTimestamp"] = "2026-11-21T09:00:00Z"
    return p


def record(name: str, pods: list[dict[str, Any]], uid: str = "wl-1", **kw: Any) -> dict[str, Any]:
    """The Workload object of ``pods``, owned by them, admitted in ``cq``."""
    obj = workload(name, admitted_in=("cq", "default"), **kw)
    obj["metadata"]["uid"] = uid
    obj["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": p["metadata"]["name"],
                                          "uid": p["metadata"]["uid"]} for p in pods]
    return obj


def admitted_group(name: str, pods: list[dict[str, Any]], uid: str = "wl-1", **kw: Any) -> dict[str, Any]:
    """The admitted Workload of a group, its pod set named by the pods' role hash."""
    role = role_hash(pods[0])
    obj = record(name, pods, uid, count=kw.pop("count", len(pods)), **kw)
    obj["spec"]["podSets"][0]["name"] = role
    obj["status"]["admission"]["podSetAssignments"][0]["name"] = role
    return obj


def actions(plan, kind: str) -> dict[str, str]:
    """Pod -> the reason code of each action of ``kind``."""
    return {a.target: a.details["reason"]["code"] for a in plan.actions if a.kind == kind}


def test_a_finished_single_pod_is_finalized_and_its_workload_finished():
    done = tracked(pod("solo", gated=False, phase="Failed"), ran_under="wl-1")
    plan = run(QUEUE, done, record("pod-solo", [done]))
    assert actions(plan, "finalize-pod") == {"default/solo": "WorkloadFinished"}
    entry = plan.workload("default/pod-solo")
    assert entry.state == "finished"
    assert dict(entry.reasons[0].details) == {"outcome": "Failed", "succeeded": 0, "total": 1}
    assert [(a.target, a.details["reason"]["details"]["outcome"]) for a in plan.actions if a.kind == "finish"] == \
        [("default/pod-solo", "Failed")]
    finished = record("pod-solo", [done])
    finished["status"]["conditions"] = [{"type": "Finished", "status": "True"}]
    assert not [a for a in run(QUEUE, done, finished).actions if a.kind == "finish"]  # done already


def test_a_pod_without_the_finalizer_gets_no_action():
    plan = run(QUEUE, pod("solo", gated=False, phase="Succeeded"))
    assert actions(plan, "finalize-pod") == {}


def test_a_finished_group_finalizes_all_its_terminated_pods():
    pods = [tracked(p, ran_under="wl-1") for p in group("g", 2, gated=False, phase="Succeeded")]
    pods.append(tracked(pod("g-old", group="g", total=2, gated=False, phase="Failed"), ran_under="wl-1"))
    plan = run(QUEUE, pods, admitted_group("g", pods[:2]))
    assert actions(plan, "finalize-pod") == {"default/g-0": "WorkloadFinished", "default/g-1": "WorkloadFinished",
                                             "default/g-old": "WorkloadFinished"}
    assert dict(plan.workload("default/g").reasons[0].details) == {"outcome": "Succeeded", "succeeded": 2, "total": 2}


def test_a_failed_pod_is_finalized_once_its_owned_replacement_exists():
    running = [tracked(pod(f"g-{i}", group="g", total=2, gated=False, phase="Running"), ran_under="wl-1")
               for i in range(2)]
    failed = tracked(pod("g-x", group="g", total=2, gated=False, phase="Failed"), ran_under="wl-1")
    # g-1 replaces g-x, but the Workload does not own it yet: g-x stays tracked
    plan = run(QUEUE, running, failed, admitted_group("g", [running[0], failed], count=2))
    assert actions(plan, "finalize-pod") == {}
    plan = run(QUEUE, running, failed, admitted_group("g", [*running, failed], count=2))
    assert actions(plan, "finalize-pod") == {"default/g-x": "PodReplaced"}


def test_the_pod_that_failed_first_is_the_one_replaced():
    # 3 pods: one runs, two failed, one replacement came: it replaces the one that failed first
    alive = tracked(pod("g-0", group="g", total=3, gated=False, phase="Running"), ran_under="wl-1")
    first = tracked(pod("g-a", group="g", total=3, gated=False, phase="Failed", minute=1), ran_under="wl-1")
    second = tracked(pod("g-b", group="g", total=3, gated=False, phase="Failed", minute=2), ran_under="wl-1")
    new = tracked(pod("g-new", group="g", total=3, gated=False, phase="Running", minute=3), ran_under="wl-1")
    plan = run(QUEUE, alive, first, second, new, admitted_group("g", [alive, first, second, new], count=3))
    assert actions(plan, "finalize-pod") == {"default/g-a": "PodReplaced"}
    # when the kubelet recorded when they stopped, that decides: g-b stopped first
    for p, minute in ((first, 50), (second, 40)):
        p["status"]["conditions"] = [{"type": "Ready", "status": "False", "lastTransitionTime": f"2026-11-21T08:{minute}:00Z"}]
    plan = run(QUEUE, alive, first, second, new, admitted_group("g", [alive, first, second, new], count=3))
    assert actions(plan, "finalize-pod") == {"default/g-b": "PodReplaced"}


def test_a_gated_pod_being_deleted_is_finalized_and_not_admitted():
    plan = run(QUEUE, tracked(pod("solo"), deleting=True))
    assert actions(plan, "finalize-pod") == {"default/solo": "PodDeleting"}
    assert states(plan) == {}
    pods = [tracked(p) for p in group("g", 2)] + [tracked(pod("g-2", group="g", total=2), deleting=True)]
    plan = run(QUEUE, pods)
    assert actions(plan, "finalize-pod") == {"default/g-2": "PodDeleting"}


def test_a_running_pod_being_deleted_keeps_its_finalizer_until_it_ends():
    running = [tracked(pod(f"g-{i}", group="g", total=2, gated=False, phase="Running"), ran_under="wl-1")
               for i in range(2)]
    running[1]["metadata"]["deletionTimestamp"] = "2026-11-21T09:00:00Z"
    running[1]["spec"]["nodeName"] = "node-1"  # its kubelet will see it end
    plan = run(QUEUE, running, admitted_group("g", running))
    assert actions(plan, "finalize-pod") == {}
    del running[1]["spec"]["nodeName"]  # no kubelet ever will: it would hang
    plan = run(QUEUE, running, admitted_group("g", running))
    assert actions(plan, "finalize-pod") == {"default/g-1": "PodDeleting"}


def test_a_deleted_workload_ends_its_group():
    pods = [tracked(pod("g-0", group="g", total=3, gated=False, phase="Running"), ran_under="wl-1"),
            tracked(pod("g-1", group="g", total=3, gated=False, phase="Succeeded"), ran_under="wl-1"),
            tracked(pod("g-2", group="g", total=3, minute=5))]  # a replacement, still gated
    plan = run(QUEUE, pods)  # its Workload wl-1 is gone
    assert actions(plan, "delete-pod") == {"default/g-0": "WorkloadDeleted", "default/g-2": "WorkloadDeleted"}
    assert actions(plan, "finalize-pod") == {"default/g-1": "WorkloadDeleted"}
    assert states(plan) == {}  # no Workload is made for it again
    # another Workload of that name (same name, another uid) is not the one it ran under
    plan = run(QUEUE, pods, admitted_group("g", pods, uid="wl-2", count=3))
    assert set(actions(plan, "delete-pod")) == {"default/g-0", "default/g-2"}


def test_a_workload_being_deleted_ends_its_group_too():
    running = tracked(pod("solo", gated=False, phase="Running"), ran_under="wl-1")
    obj = record("pod-solo", [running])
    obj["metadata"]["deletionTimestamp"] = "2026-11-21T09:00:00Z"
    plan = run(QUEUE, running, obj)
    assert actions(plan, "delete-pod") == {"default/solo": "WorkloadDeleted"}


def test_a_group_whose_workload_is_not_made_yet_is_not_ended():
    pods = [tracked(p) for p in group("g", 2)]
    plan = run(QUEUE, pods)
    assert actions(plan, "delete-pod") == {} and states(plan) == {"default/g": "admitted"}


def test_succeeded_pods_of_an_admitted_group_are_reclaimable():
    pods = [tracked(pod("g-0", group="g", total=3, gated=False, phase="Succeeded"), ran_under="wl-1")] + [
        tracked(pod(f"g-{i}", group="g", total=3, gated=False, phase="Running"), ran_under="wl-1") for i in (1, 2)]
    obj = admitted_group("g", pods, count=3)
    plan = run(QUEUE, pods, obj, pod("next", cpu=2, minute=9))
    entry = plan.workload("default/g")
    role = obj["spec"]["podSets"][0]["name"]
    assert entry.reclaimable == ((role, 1),)
    assert entry.to_dict()["reclaimablePods"] == [{"name": role, "count": 1}]
    assert states(plan)["default/pod-next"] == "admitted"  # 3 of 4 cpu held less the succeeded one


def test_a_workload_objects_reclaimable_pods_release_quota():
    obj = workload("job", cpu="1", count=4, admitted_in=("cq", "default"))
    assert states(run(QUEUE, obj, pod("next", cpu=2)))["default/pod-next"] == "pending"
    obj["status"]["reclaimablePods"] = [{"name": "main", "count": 2}]
    assert states(run(QUEUE, obj, pod("next", cpu=2)))["default/pod-next"] == "admitted"


def test_a_finished_workload_object_releases_its_quota():
    obj = workload("job", cpu="4", admitted_in=("cq", "default"))
    assert states(run(QUEUE, obj, pod("next", cpu=4)))["default/pod-next"] == "pending"
    obj["status"]["conditions"] = [{"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done",
                                    "lastTransitionTime": "2026-11-21T09:00:00Z"}]
    plan = run(QUEUE, obj, pod("next", cpu=4))
    assert states(plan) == {"default/job": "finished", "default/pod-next": "admitted"}
    assert plan.workload("default/job").reasons[0].message == "its Workload is Finished"
    assert not [a for a in plan.actions if a.kind == "finish"]  # someone else's to finish


def test_an_evicted_pod_being_deleted_holds_quota_only_while_it_runs():
    # Issue 34: an evicted pod still Pending (scheduled, its deletion pending) kept its quota, so
    # the next workload read "0 free" while the ClusterQueue's status showed it free. As Kueue
    # counts a pod active only while Running, a deleted pod's quota is free once it does not run.
    def leaving(phase: str) -> dict[str, Any]:
        p = tracked(pod("old", cpu="4", gated=False, phase=phase), ran_under="wl-1", deleting=True)
        p["spec"]["nodeName"] = "node-1"
        return p

    evicted = workload("pod-old", cpu="4")  # owned by its pod; its admission released by the eviction
    evicted["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "old", "uid": "uid-old"}]
    plan = run(QUEUE, leaving("Pending"), evicted, tracked(pod("next", cpu="4", minute=1)))
    assert states(plan) == {"default/pod-next": "admitted"}  # the one leaving is not queued again either
    assert actions(plan, "finalize-pod") == {}  # its kubelet ends it
    plan = run(QUEUE, leaving("Running"), evicted, tracked(pod("next", cpu="4", minute=1)))
    assert states(plan)["default/pod-next"] == "pending"  # still running: its quota is still held
