"""Workloads built from Pods and Workload objects, as the plain-pods design specifies."""

from clueue.engine import Config, Document, build_snapshot, load_policy, run_cycle
from clueue.engine.workloads import build_workloads
from tests.builders import (
    cluster_queue, flatten, flavor, group, local_queue, namespace, pod, resource_group, workload,
)


def build(*objs, **config):
    docs = [Document(f"t#{i}", o) for i, o in enumerate(flatten(objs))]
    return build_workloads(build_snapshot(docs), Config(**config))


def by_key(result):
    return {w.key: w for w in result.workloads}


def held_codes(w):
    return [r.code for r in w.held]


def test_single_pod_is_a_workload_named_after_it():
    w = by_key(build(pod("foo", ns="team", cpu="250m")))["team/pod-foo"]
    assert (w.origin, w.queue, [(ps.name, ps.count) for ps in w.pod_sets]) == ("pod", "main", [("main", 1)])
    assert str(w.pod_sets[0].requests["cpu"]) == "1/4"


def test_pods_without_queue_name_are_not_queued():
    assert build(pod("plain", queue=None)).workloads == ()


def test_kube_system_and_controller_namespace_are_excluded():
    result = build(pod("a", ns="kube-system"), pod("b", ns="clueue-system"), pod("c", ns="apps"))
    assert set(by_key(result)) == {"apps/pod-c"}
    assert any("kube-system" in n for n in result.notices)


def test_configured_namespace_and_pod_selectors_apply():
    from clueue.engine.objects import LabelSelector
    only_batch = LabelSelector(match_labels=(("tier", "batch"),))
    result = build(namespace("apps", tier="batch"), namespace("web", tier="web"),
                   pod("a", ns="apps"), pod("b", ns="web"), pod("c", ns="apps", labels={"queue-me": "no"}),
                   namespace_selector=only_batch,
                   pod_selector=LabelSelector(match_labels=(("kueue.x-k8s.io/managed", "true"),)))
    assert set(by_key(result)) == {"apps/pod-a", "apps/pod-c"}


def test_pods_owned_by_other_managed_objects_are_skipped():
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "1", "controller": True}
    custom = {"apiVersion": "example.com/v1", "kind": "Thing", "name": "t", "uid": "2", "controller": True}
    assert set(by_key(build(pod("a", owner=owner), pod("b", owner=custom)))) == {"default/pod-b"}


def test_group_becomes_one_workload_with_pod_sets_by_role():
    drivers = group("job", 1, total=3, image="driver")
    workers = [pod(f"job-w{i}", group="job", total=3, image="worker", gpu=1) for i in range(2)]
    w = by_key(build(drivers, workers))["default/job"]
    assert w.origin == "pod-group" and not w.held
    assert sorted(ps.count for ps in w.pod_sets) == [1, 2]
    assert len({ps.name for ps in w.pod_sets}) == 2


def test_role_hash_ignores_fields_irrelevant_to_scheduling():
    a = pod("g-0", group="g", total=2)
    b = pod("g-1", group="g", total=2, labels={"kueue.x-k8s.io/extra": "x"})
    b["spec"]["containers"][0]["env"] = [{"name": "INDEX", "value": "1"}]
    assert len(by_key(build(a, b))["default/g"].pod_sets) == 1


def test_incomplete_group_waits_with_counts():
    w = by_key(build(group("g", 3, total=4)))["default/g"]
    assert held_codes(w) == ["GroupIncomplete"]
    assert w.held[0].details == {"group": "g", "pods": 3, "total": 4}


def test_pods_disagreeing_on_total_count_hold_their_group_as_one_pod_set_of_its_pods():
    # The API requires a pod set: the Workload that records why must have one, owned by the pods.
    w = by_key(build(pod("g-0", group="g", total=2), pod("g-1", group="g", total=3)))["default/g"]
    assert held_codes(w) == ["GroupCountMismatch"] and [(p.name, p.count) for p in w.pod_sets] == [("main", 2)]
    assert [p.name for p in w.pods["main"]] == ["g-0", "g-1"]


def test_more_than_eight_roles_is_rejected():
    pods = [pod(f"g-{i}", group="g", total=9, image=f"img:{i}") for i in range(9)]
    assert held_codes(by_key(build(pods))["default/g"]) == ["TooManyRoles"]


def test_excess_pods_are_deleted_youngest_first():
    pods = group("g", 2, total=2, minute=0) + [pod("g-late", group="g", total=2, minute=5),
                                               pod("g-later", group="g", total=2, minute=9)]
    result = build(pods)
    assert [a.pod.name for a in result.actions] == ["g-later", "g-late"]
    assert {a.kind for a in result.actions} == {"delete-pod"}
    assert by_key(result)["default/g"].pod_sets[0].count == 2


def test_failed_pods_are_replaced_within_the_group():
    pods = [pod("g-0", group="g", total=2, gated=False, phase="Running"),
            pod("g-failed", group="g", total=2, gated=False, phase="Failed", minute=1),
            pod("g-new", group="g", total=2, minute=2)]
    result = build(pods)
    w = by_key(result)["default/g"]
    assert w.admission is not None and w.pod_sets[0].count == 2
    assert sorted(p.name for p in w.pods[w.pod_sets[0].name]) == ["g-0", "g-new"]
    assert result.actions == ()


def test_group_finishes_when_all_pods_succeed():
    w = by_key(build(group("g", 2, gated=False, phase="Succeeded")))["default/g"]
    assert w.finished


def test_group_finishes_when_a_non_retriable_pod_ends():
    pods = [pod("g-0", group="g", total=2, gated=False, phase="Failed",
                annotations={"kueue.x-k8s.io/retriable-in-group": "false"}),
            pod("g-1", group="g", total=2, gated=False, phase="Succeeded")]
    assert by_key(build(pods))["default/g"].finished


def test_failed_group_without_the_annotation_is_not_finished():
    pods = [pod("g-0", group="g", total=2, gated=False, phase="Failed"),
            pod("g-1", group="g", total=2, gated=False, phase="Succeeded")]
    assert not by_key(build(pods))["default/g"].finished


def test_succeeded_pods_of_an_admitted_group_release_quota():
    pods = [pod("g-0", group="g", total=3, gated=False, phase="Succeeded"),
            pod("g-1", group="g", total=3, gated=False, phase="Running"),
            pod("g-2", group="g", total=3, gated=False, phase="Running")]
    w = by_key(build(pods))["default/g"]
    assert w.admission is not None and w.admitted_count(w.pod_sets[0].name) == 2


def test_pod_group_sets_declare_workers_created_later():
    sets = ("[{name: driver, count: 1},"
            " {name: workers, count: 3, template: {spec: {containers: [{name: w, resources: {requests: {cpu: 2}}}]}}}]")
    driver = pod("spark-driver", group="spark", annotations={"kueue.x-k8s.io/pod-group-sets": sets})
    w = by_key(build(driver))["default/spark"]
    assert not w.held
    assert {ps.name: (ps.count, str(ps.requests["cpu"])) for ps in w.pod_sets} == {"driver": (1, "1"), "workers": (3, "2")}


def test_worker_pods_beyond_a_declared_role_count_are_deleted():
    sets = "[{name: driver, count: 1}, {name: workers, count: 1, template: {spec: {containers: [{name: w}]}}}]"
    driver = pod("d", group="s", annotations={"kueue.x-k8s.io/pod-group-sets": sets}, minute=0)
    workers = [pod(f"w{i}", group="s", labels={"kueue.x-k8s.io/pod-group-role": "workers"}, minute=i + 1) for i in range(2)]
    result = build(driver, workers)
    assert [a.pod.name for a in result.actions] == ["w1"]


def test_invalid_pod_group_sets_is_a_reason_not_a_crash():
    bad = pod("d", group="s", annotations={"kueue.x-k8s.io/pod-group-sets": "{not: a list}"})
    assert held_codes(by_key(build(bad))["default/s"]) == ["InvalidPodGroupSets"]


def test_workload_objects_load_and_keep_their_admission():
    result = by_key(build(workload("job", cpu="2", count=3, admitted_in=("cq", "default"))))
    w = result["default/job"]
    assert w.origin == "workload" and w.admission is not None and w.admitted_count("main") == 3


def test_priority_sources():
    objs = [
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass", "metadata": {"name": "prod"}, "value": 900},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "low"}, "value": 5},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "default"}, "value": 1, "globalDefault": True},
        pod("a", labels={"kueue.x-k8s.io/priority-class": "prod"}), pod("b", priority_class="low"), pod("c"),
    ]
    ws = by_key(build(objs))
    assert [ws[f"default/pod-{n}"].priority for n in "abc"] == [900, 5, 1]


def test_an_admission_inferred_from_started_pods_takes_flavors_that_agree():
    # One pod of the group runs ungated (started before clueue), the other waits at its gate. Of
    # the gpu flavors, only one is of the nodes the cpu flavor's label names.
    queues = [flavor("cpu-a", {"pool": "a"}), flavor("gpu-b", {"pool": "b"}), flavor("gpu-a", {"pool": "a"}),
              cluster_queue("cq", groups=[resource_group({"cpu-a": {"cpu": 8}}),
                                          resource_group({"gpu-b": {"nvidia.com/gpu": 8}, "gpu-a": {"nvidia.com/gpu": 8}})]),
              local_queue("cq")]
    members = group("g", 2, gpu="1")
    members[0]["spec"].pop("schedulingGates")
    plan = run_cycle(build_snapshot([Document(f"t#{i}", o) for i, o in enumerate(flatten([queues, members]))]),
                     load_policy())
    assert {a.name: dict(a.flavors) for a in plan.workload("default/g").admission}.popitem()[1] == {
        "cpu": "cpu-a", "nvidia.com/gpu": "gpu-a"}
    [ungate] = [a for a in plan.actions if a.kind == "ungate"]
    assert ungate.details["nodeSelector"] == {"pool": "a"}
