"""Plain pods and MultiKueue (docs/multikueue.md), one decision cycle each.

In the manager, a workload of a ClusterQueue with a MultiKueue check runs in the worker that
admitted its copy: once the check is Ready its Workload is admitted here, but its pods here
stay gated (KEP-693), are never evicted here as pods that run, and take no node. In a worker,
pods labelled ``kueue.x-k8s.io/prebuilt-workload-name`` belong to that existing Workload (the
copy): no other Workload is made for them; it is admitted and they are ungated (Kueue's pod
integration with a prebuilt Workload), or they wait with a reason that names what is wrong.
"""

from __future__ import annotations

from typing import Any

from tests.builders import KUEUE, cluster_queue, codes, flavor, local_queue, pod, run, states, ts, workload
from tests.scenarios.test_placement import node

MK = "kueue.x-k8s.io/multikueue"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
QUEUE = [flavor("default"), cluster_queue("cq", {"default": {"cpu": 4}}), local_queue("cq")]


def check(name: str, controller: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": name},
            "spec": {"controllerName": controller},
            "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Active", "message": "",
                                       "lastTransitionTime": ts(0)}]}}


def manager(*names: str) -> list[dict[str, Any]]:
    """The manager's queue: a ClusterQueue whose checks are ``names`` (``multikueue`` is MultiKueue's)."""
    cq = cluster_queue("cq", {"default": {"cpu": 4}})
    cq["spec"]["admissionChecks"] = list(names)
    return [flavor("default"), cq, local_queue("cq"), check("multikueue", MK), check("prov", "example.com/prov")]


def group_pods(phase: str | None = None, gated: bool = True, **kw: Any) -> list[dict[str, Any]]:
    pods = [pod(f"g-{i}", group="g", total=2, phase=phase, gated=gated, **kw) for i in range(2)]
    for i, p in enumerate(pods):
        p["metadata"]["uid"] = f"uid-{i}"
    return pods


def group_workload(checks: dict[str, str], *, cluster: str = "", admitted: bool = False,
                   pods: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The manager's Workload of group g, owned by its pods, its quota reserved with ``checks``."""
    pods = pods if pods is not None else group_pods()
    role = run(QUEUE, group_pods()).workload("default/g").admission[0].name  # the pod set its pods make
    w = workload("g", count=2, admitted_in=("cq", "default"))
    w["spec"]["podSets"][0]["name"] = role
    w["status"]["admission"]["podSetAssignments"][0]["name"] = role
    w["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": p["metadata"]["name"],
                                         "uid": p["metadata"]["uid"]} for p in pods]
    return with_status(w, checks, cluster=cluster, admitted=admitted)


def with_status(w: dict[str, Any], checks: dict[str, str], *, cluster: str = "", admitted: bool = False
                ) -> dict[str, Any]:
    status = w["status"]
    status["admissionChecks"] = [{"name": c, "state": s, "message": "", "lastTransitionTime": ts(1)}
                                 for c, s in checks.items()]
    status["conditions"] = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
                             "lastTransitionTime": ts(1)}]
    if admitted:
        status["conditions"].append({"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
                                     "lastTransitionTime": ts(2)})
    if cluster:
        status["clusterName"] = cluster
    return w


def kinds(plan, kind: str) -> list[str]:
    return sorted(a.target for a in plan.actions if a.kind == kind)


# -- the manager -----------------------------------------------------------------------------------

def test_manager_admits_a_multikueue_workload_but_keeps_its_pods_gated():
    plan = run(manager("multikueue"), group_pods(), group_workload({"multikueue": "Ready"}, cluster="worker1"))
    assert kinds(plan, "complete-admission") == ["default/g"]
    assert kinds(plan, "ungate") == [], "its pods run in worker1, not here"
    entry = plan.workload("default/g")
    assert entry.state == "admitted" and "RunsInWorker" in codes(plan, "default/g")
    assert "runs in worker worker1 (MultiKueue check multikueue)" in " ".join(r.message for r in entry.reasons)


def test_manager_pods_whose_status_is_copied_back_stay_gated_and_are_not_confused_with_running_ones():
    # MultiKueue copies the worker's pod phase onto the gated pods here: Running, then Succeeded.
    running = group_pods(phase="Running")
    plan = run(manager("multikueue"), running,
               group_workload({"multikueue": "Ready"}, cluster="worker1", admitted=True, pods=running))
    assert states(plan) == {"default/g": "admitted"}
    assert [a.kind for a in plan.actions] == [], "no ungate, no excess pod, no eviction"
    done = group_pods(phase="Succeeded")
    plan = run(manager("multikueue"), done,
               group_workload({"multikueue": "Ready"}, cluster="worker1", admitted=True, pods=done))
    assert states(plan) == {"default/g": "finished"}
    assert [a.kind for a in plan.actions] == ["finish"]


def test_manager_keeps_pods_gated_with_another_check_beside_multikueue():
    plan = run(manager("multikueue", "prov"), group_pods(),
               group_workload({"multikueue": "Ready", "prov": "Ready"}, cluster="worker2"))
    assert kinds(plan, "complete-admission") == ["default/g"] and kinds(plan, "ungate") == []
    # without the MultiKueue check the same Workload's pods are ungated here
    plan = run(manager("prov"), group_pods(), group_workload({"prov": "Ready"}))
    assert kinds(plan, "ungate") == ["default/g-0", "default/g-1"]
    assert "RunsInWorker" not in codes(plan, "default/g")


def test_manager_waits_for_the_multikueue_check_without_saying_where_it_runs():
    plan = run(manager("multikueue"), group_pods(), group_workload({"multikueue": "Pending"}))
    assert [a.kind for a in plan.actions] == []
    assert codes(plan, "default/g") == ["WaitingForAdmissionChecks"]


def test_manager_eviction_deletes_no_gated_pod():
    # the worker lost the workload: MultiKueue sets Retry; the manager evicts and requeues it,
    # and its pods here, gated (their phase copied Running), are left as they are
    running = group_pods(phase="Running")
    plan = run(manager("multikueue"), running, group_workload({"multikueue": "Retry"}, admitted=True, pods=running))
    (preempt,) = [a for a in plan.actions if a.kind == "preempt"]
    assert preempt.details["reason"]["code"] == "AdmissionCheckRetry" and preempt.details["pods"] == []
    assert kinds(plan, "delete-pod") == []


def test_manager_nodes_are_not_taken_by_pods_that_run_in_a_worker():
    # with Nodes, pods of an admitted workload still gated get nodes first; a MultiKueue one's
    # do not: the 2 CPU of the node are left to a pod of another ClusterQueue
    plain = [cluster_queue("plain", {"default": {"cpu": 4}}), local_queue("plain", name="plain")]
    plan = run(manager("multikueue"), plain, node("n1", cpu=2), group_pods(),
               group_workload({"multikueue": "Ready"}, cluster="worker1", admitted=True),
               pod("local", queue="plain", cpu=2, minute=5))
    assert kinds(plan, "ungate") == ["default/local"]
    assert "NodesUnfit" not in codes(plan, "default/g")


# -- a worker --------------------------------------------------------------------------------------

def prebuilt(name: str, workload_name: str, **kw: Any) -> dict[str, Any]:
    labels = {PREBUILT: workload_name, "kueue.x-k8s.io/multikueue-origin": "multikueue", **kw.pop("labels", {})}
    return pod(name, labels=labels, **kw)


def copy(name: str = "g", *, count: int = 2, admitted: bool = True, pod_sets: list[dict[str, Any]] | None = None,
         cpu: str = "1") -> dict[str, Any]:
    """MultiKueue's copy of a manager Workload, admitted here (by this worker's clueue) or not yet."""
    w = workload(name, count=count, cpu=cpu, pod_sets=pod_sets, admitted_in=("cq", "default") if admitted else None)
    w["metadata"]["labels"] = {"kueue.x-k8s.io/multikueue-origin": "multikueue"}
    return with_status(w, {}, admitted=True) if admitted else w


def test_worker_ungates_a_group_under_its_prebuilt_workload():
    pods = [prebuilt(f"g-{i}", "g", group="g", total=2) for i in range(2)]
    plan = run(QUEUE, pods, copy())
    assert states(plan) == {"default/g": "admitted"}, "no second Workload for the pods"
    assert kinds(plan, "ungate") == ["default/g-0", "default/g-1"]
    entry = plan.workload("default/g")
    assert entry.origin == "workload" and [name for name, _ in entry.pods] == ["g-0", "g-1"]


def test_worker_ungates_a_single_pod_under_its_prebuilt_workload():
    plan = run(QUEUE, prebuilt("solo", "pod-solo-1a2b"), copy("pod-solo-1a2b", count=1))
    assert states(plan) == {"default/pod-solo-1a2b": "admitted"}, "not pod-solo"
    assert kinds(plan, "ungate") == ["default/solo"]


def test_prebuilt_workload_not_admitted_yet_is_admitted_with_its_pods():
    plan = run(QUEUE, [prebuilt(f"g-{i}", "g", group="g", total=2) for i in range(2)], copy(admitted=False))
    assert kinds(plan, "admit") == ["default/g"] and kinds(plan, "ungate") == ["default/g-0", "default/g-1"]


def test_pods_arrive_one_by_one_and_are_ungated_as_they_come():
    plan = run(QUEUE, prebuilt("g-0", "g", group="g", total=2), copy())
    assert kinds(plan, "ungate") == ["default/g-0"] and states(plan) == {"default/g": "admitted"}


def test_missing_prebuilt_workload_keeps_the_pods_gated_with_a_reason():
    plan = run(QUEUE, [prebuilt(f"g-{i}", "g", group="g", total=2) for i in range(2)])
    assert [a.kind for a in plan.actions] == []
    entry = plan.workload("default/g")
    assert entry.state == "pending" and codes(plan, "default/g") == ["PrebuiltWorkloadNotFound"]
    assert entry.reasons[0].message == ("pods g-0, g-1 name Workload default/g (kueue.x-k8s.io/prebuilt-workload-name), "
                                        "which does not exist; they stay gated until it does")


def test_a_pod_in_excess_of_its_pod_set_stays_gated_and_is_named():
    pods = [prebuilt(f"g-{i}", "g", group="g", total=3, minute=i) for i in range(3)]
    plan = run(QUEUE, pods, copy())
    assert kinds(plan, "ungate") == ["default/g-0", "default/g-1"], "the youngest is the one in excess"
    (why,) = [r for r in plan.workload("default/g").reasons if r.code == "PrebuiltWorkloadMismatch"]
    assert why.details["pod"] == "default/g-2" and why.details["field"] == "spec.podSets[0].count (pod set main)"
    assert kinds(plan, "delete-pod") == [], "the pods are not clueue's to delete"


def test_a_pod_asking_other_resources_than_its_pod_set_stays_gated_and_is_named():
    plan = run(QUEUE, prebuilt("g-0", "g", group="g", total=2, cpu="2"),
               prebuilt("g-1", "g", group="g", total=2), copy())
    assert kinds(plan, "ungate") == ["default/g-1"]
    (why,) = [r for r in plan.workload("default/g").reasons if r.code == "PrebuiltWorkloadMismatch"]
    assert why.message == ("pod default/g-0 does not match the Workload default/g it names (prebuilt-workload-name): "
                           "spec.podSets[0].template (pod set main): the pod requests cpu 2, a pod of the pod set "
                           "cpu 1; it stays gated")


def test_a_pod_of_no_pod_set_holds_back_a_workload_not_admitted_yet():
    sets = [{"name": n, "count": 1, "template": {"spec": {"containers": [
        {"name": "main", "resources": {"requests": {"cpu": "1"}}}]}}} for n in ("driver", "worker")]
    plan = run(QUEUE, prebuilt("g-0", "g", group="g", total=2), copy(pod_sets=sets, admitted=False))
    assert [a.kind for a in plan.actions] == []
    entry = plan.workload("default/g")
    assert entry.state == "inadmissible" and codes(plan, "default/g") == ["PrebuiltWorkloadMismatch"]
    assert entry.reasons[0].details["field"] == "metadata.annotations[kueue.x-k8s.io/role-hash]"
    assert "names none of the pod sets driver, worker" in entry.reasons[0].message


def test_prebuilt_pods_finished_finish_their_workload():
    pods = [prebuilt(f"g-{i}", "g", group="g", total=2, gated=False, phase="Succeeded") for i in range(2)]
    plan = run(QUEUE, pods, copy())
    assert states(plan) == {"default/g": "finished"}
    (finish,) = [a for a in plan.actions if a.kind == "finish"]
    assert finish.target == "default/g" and finish.details["reason"]["details"]["outcome"] == "Succeeded"
    failed = run(QUEUE, prebuilt("solo", "w", gated=False, phase="Failed"), copy("w", count=1))
    assert [a.details["reason"]["details"]["outcome"] for a in failed.actions if a.kind == "finish"] == ["Failed"]


def test_prebuilt_pods_of_a_deleted_workload_are_deleted():
    # ungated under a Workload (its uid recorded on them) that is gone: the group ended
    pods = [prebuilt(f"g-{i}", "g", group="g", total=2, gated=False, phase="Running",
                     annotations={"clueue.dev/workload-uid": "old"}) for i in range(2)]
    plan = run(QUEUE, pods)
    assert kinds(plan, "delete-pod") == ["default/g-0", "default/g-1"]
