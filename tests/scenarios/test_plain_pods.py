"""The plain-pods design's integration-test plan, for every scenario one decision cycle decides.

Each test is one cycle on the cluster state at that point of the scenario. Preemption deleting
all pods of a group runs against a real API server in tests/e2e/test_preemption.py.
"""

from tests.builders import cluster_queue, flavor, group, local_queue, pod, run, states, workload

QUEUE = [flavor("default", labels={"pool": "batch"}), cluster_queue("cq", {"default": {"cpu": 4}}), local_queue("cq")]
SETS = ("[{name: driver, count: 1},"
        " {name: workers, count: 2, template: {spec: {containers: [{name: w, resources: {requests: {cpu: 1}}}]}}}]")


def kinds(plan, kind):
    return sorted(a.target for a in plan.actions if a.kind == kind)


def test_single_pod_queued_admitted_and_finished():
    queued = run(QUEUE, pod("solo"))
    assert states(queued) == {"default/pod-solo": "admitted"}
    assert kinds(queued, "ungate") == ["default/solo"]
    running = run(QUEUE, pod("solo", gated=False, phase="Running"))
    assert states(running) == {"default/pod-solo": "admitted"} and kinds(running, "ungate") == []
    done = run(QUEUE, pod("solo", gated=False, phase="Succeeded"))
    assert states(done) == {"default/pod-solo": "finished"}


def test_group_created_beforehand_queued_and_admitted():
    plan = run(QUEUE, group("g", 3))
    assert states(plan) == {"default/g": "admitted"}
    assert kinds(plan, "ungate") == ["default/g-0", "default/g-1", "default/g-2"]


def test_ungating_records_the_role_hash_that_names_the_pod_set():
    # Ungating adds the flavor's node labels, which the role hash covers: the hash the pod set
    # is named by goes onto the pod with them. Single pods and declared roles need none.
    plan = run(QUEUE, group("g", 2), pod("solo"))
    pod_set = plan.workload("default/g").admission[0].name
    details = {a.target: dict(a.details) for a in plan.actions if a.kind == "ungate"}
    assert details["default/g-0"]["annotations"] == {"kueue.x-k8s.io/role-hash": pod_set}
    assert details["default/g-0"]["nodeSelector"] == {"pool": "batch"}
    assert "annotations" not in details["default/solo"]


def test_failed_pod_recreated_uses_the_same_quota():
    # The group holds all 4 CPU; a replacement pod for the failed one is ungated, nothing else fits.
    plan = run(QUEUE, [pod(f"g-{i}", group="g", total=4, gated=False, phase="Running") for i in range(3)],
               pod("g-3", group="g", total=4, gated=False, phase="Failed"),
               pod("g-3b", group="g", total=4, minute=5), pod("other", minute=6))
    assert states(plan) == {"default/g": "admitted", "default/pod-other": "pending"}
    assert kinds(plan, "ungate") == ["default/g-3b"]


def test_group_finished_when_all_pods_succeed():
    plan = run(QUEUE, group("g", 2, gated=False, phase="Succeeded"), pod("next", cpu=4, minute=9))
    assert states(plan) == {"default/g": "finished", "default/pod-next": "admitted"}


def test_group_finished_when_a_non_retriable_pod_finishes():
    pods = [pod("g-0", group="g", total=2, gated=False, phase="Failed",
                annotations={"kueue.x-k8s.io/retriable-in-group": "false"}),
            pod("g-1", group="g", total=2, gated=False, phase="Succeeded")]
    assert states(run(QUEUE, pods)) == {"default/g": "finished"}


def test_excess_pods_before_admission_youngest_deleted():
    plan = run(QUEUE, group("g", 2, minute=0), pod("g-extra", group="g", total=2, minute=3))
    assert kinds(plan, "delete-pod") == ["default/g-extra"]
    assert states(plan) == {"default/g": "admitted"}
    assert "default/g-extra" not in kinds(plan, "ungate")


def test_excess_pods_after_admission_youngest_per_role_deleted():
    from tests.builders import workload
    admitted = [pod(f"g-{i}", group="g", total=2, gated=False, phase="Running") for i in range(2)]
    extra = pod("g-new", group="g", total=2, minute=30)
    role = run(QUEUE, admitted).workload("default/g").admission[0].name
    record = workload("g", cpu="1", count=2, admitted_in=("cq", "default"))
    record["spec"]["podSets"][0]["name"] = role
    record["status"]["admission"]["podSetAssignments"][0]["name"] = role
    plan = run(QUEUE, admitted, extra, record)
    assert kinds(plan, "delete-pod") == ["default/g-new"]


def test_driver_creates_workers_queued_and_admitted():
    driver = pod("driver", group="spark", annotations={"kueue.x-k8s.io/pod-group-sets": SETS})
    plan = run(QUEUE, driver)
    assert states(plan) == {"default/spark": "admitted"}
    assert {a.name: a.count for a in plan.workload("default/spark").admission} == {"driver": 1, "workers": 2}
    assert kinds(plan, "ungate") == ["default/driver"]


def test_driver_workers_beyond_the_count_are_deleted():
    driver = pod("driver", group="spark", gated=False, phase="Running",
                 annotations={"kueue.x-k8s.io/pod-group-sets": SETS})
    workers = [pod(f"w{i}", group="spark", minute=i + 1, labels={"kueue.x-k8s.io/pod-group-role": "workers"})
               for i in range(3)]
    plan = run(QUEUE, driver, workers)
    assert kinds(plan, "delete-pod") == ["default/w2"]
    assert kinds(plan, "ungate") == ["default/w0", "default/w1"]


def test_driver_workload_finished_when_all_pods_finish():
    driver = pod("driver", group="spark", gated=False, phase="Succeeded",
                 annotations={"kueue.x-k8s.io/pod-group-sets": SETS})
    workers = [pod(f"w{i}", group="spark", gated=False, phase="Succeeded",
                   labels={"kueue.x-k8s.io/pod-group-role": "workers"}) for i in range(2)]
    assert states(run(QUEUE, driver, workers)) == {"default/spark": "finished"}


def test_a_workload_whose_pods_are_gone_is_left_for_garbage_collection():
    # A preempted group's pods are deleted; its Workload (owned by them) lingers until the
    # garbage collector removes it. It must neither be admitted nor hold quota meanwhile.
    leftover = workload("g", cpu="4", admitted_in=("cq", "default"))
    leftover["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "g-0", "uid": "u0"}]
    plan = run(QUEUE, leftover, pod("solo", cpu="4"))
    assert states(plan) == {"default/pod-solo": "admitted"}
    assert "workload default/g: the pods it was made for are gone; it is left for garbage collection" in plan.notices
