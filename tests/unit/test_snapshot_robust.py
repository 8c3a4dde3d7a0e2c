"""Objects the API server may accept but clueue cannot use: every field of every kind, given a
value of the wrong type, gives a SnapshotError naming the field (or loads), never another
exception; building workloads from what loads never raises either."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any, Iterator

import pytest

from clueue.engine import Document, SnapshotError, build_snapshot
from clueue.engine.workloads import build_workloads
from tests.builders import KUEUE, cluster_queue, cohort, flavor, local_queue, pod, quota, resource_group, workload

_POD_SPEC: dict[str, Any] = {
    "containers": [{"name": "main", "image": "app:1", "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}}}],
    "initContainers": [{"name": "init", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                       {"name": "setup", "resources": {"requests": {"cpu": "2"}}}],
    "overhead": {"cpu": "100m"},
    "nodeSelector": {"zone": "a"},
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}}},
    "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
    "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
    "priority": 5,
    "priorityClassName": "high",
}


def _examples() -> list[dict[str, Any]]:
    """One object of each kind with every field clueue reads."""
    p = pod("p", group="g", total=1, labels={"team": "a"}, annotations={"note": "x"},
            owner={"apiVersion": "batch/v1", "kind": "Job", "name": "j", "controller": True})
    p["spec"] = copy.deepcopy(_POD_SPEC)
    p["status"] = {"phase": "Pending"}
    sets = pod("s", group="gs", annotations={"kueue.x-k8s.io/pod-group-sets":
                                              '[{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]'})
    wl = workload("w", admitted_in=("cq", "f"))
    wl["spec"]["podSets"][0]["template"]["spec"] = copy.deepcopy(_POD_SPEC)
    wl["spec"]["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "wpc"}
    wl["spec"]["priorityClassName"] = "wpc"
    wl["spec"]["active"] = True
    wl["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u"}]
    wl["status"]["conditions"] = [{"type": "Finished", "status": "False"}]
    wl["status"]["reclaimablePods"] = [{"name": "main", "count": 0}]
    cq = cluster_queue("cq", groups=[resource_group({"f": {"cpu": quota(4, 2, 1)}})], cohort="eng",
                       strategy="StrictFIFO", when_can_borrow="Borrow",
                       selector={"matchLabels": {"team": "a"},
                                 "matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]},
                       preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                                   "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 10}})
    cq["spec"]["flavorFungibility"]["whenCanPreempt"] = "Preempt"
    cq["spec"]["stopPolicy"] = "None"
    lq = local_queue("cq")
    lq["spec"]["stopPolicy"] = "None"
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns", "labels": {"team": "a"}}},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": {"zone": "a"}},
         "spec": {"taints": [{"key": "spot", "value": "true", "effect": "NoSchedule"}], "unschedulable": False},
         "status": {"allocatable": {"cpu": "8"}}},
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
         "value": 100, "globalDefault": False},
        {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": "wpc"}, "value": 10},
        flavor("f", labels={"zone": "a"}, taints=[{"key": "spot", "value": "true", "effect": "NoSchedule"}]),
        cq, cohort("eng", parent="org", flavors={"f": {"cpu": 2}}), lq, p, sets, wl,
    ]


# Values of every JSON type but the right one, a key that is not a string, and a YAML timestamp.
_WRONG: tuple[Any, ...] = ("x", 7, 1.5, True, [], {}, [1], ["x"], {"a": 1}, {1: "x"}, [{}], [[1]],
                           datetime(1, 1, 1))


def _paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path into ``node`` (keys and list indexes), the node itself first."""
    yield path
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, path + (i,))


def _replaced(obj: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    node = out
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return out


def _mutations() -> Iterator[Any]:
    for obj in _examples():
        for path in _paths(obj):
            if path and path[0] not in ("apiVersion", "kind"):
                for value in _WRONG:
                    yield pytest.param(obj, path, value, id=f"{obj['kind']}:{'.'.join(map(str, path))}={value!r}")


def test_the_examples_load():
    snapshot = build_snapshot([Document(f"x.yaml#{i}", o) for i, o in enumerate(_examples())])
    assert len(snapshot.pods) == 2 and len(snapshot.workloads) == 1 and len(snapshot.cluster_queues) == 1


@pytest.mark.parametrize("obj,path,value", list(_mutations()))
def test_a_field_of_the_wrong_type_is_a_snapshot_error_naming_it(obj, path, value):
    mutated = _replaced(obj, path, value)
    try:
        snapshot = build_snapshot([Document("x.yaml#1", mutated)])
    except SnapshotError as e:
        assert e.source == "x.yaml#1" and obj["kind"] in e.obj and e.field, e
        return
    build_workloads(snapshot)  # what loads builds without error


@pytest.mark.parametrize("obj,field", [
    (_replaced(pod("p"), ("spec", "containers", 0, "resources"), "4 cpus"), "spec.containers[0].resources"),
    (_replaced(workload("w"), ("status",), {"admission": "yes"}), "status.admission"),
    (_replaced(workload("w"), ("status",), {"reclaimablePods": [{"name": "main", "count": "1"}]}),
     "status.reclaimablePods[0].count"),
    (_replaced(pod("p"), ("spec", "affinity"), {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": "a"}]}]}}}),
     "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values"),
    (cluster_queue("cq", selector={"matchExpressions": [{"key": "team", "operator": "In", "values": [1]}]}),
     "spec.namespaceSelector.matchExpressions[0].values[0]"),
    (_replaced(pod("p"), ("metadata", "labels"), {1: "x"}), "metadata.labels"),
])
def test_the_cases_of_issue_20_name_their_field(obj, field):
    with pytest.raises(SnapshotError) as err:
        build_snapshot([Document("x.yaml#1", obj)])
    assert err.value.field == field and err.value.source == "x.yaml#1"


def test_an_unquoted_timestamp_in_year_one_loads(tmp_path):
    from clueue.adapters.files import load_snapshot
    (tmp_path / "p.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n"
                                     "  creationTimestamp: 0001-01-01T00:00:00\nspec: {containers: []}\n")
    assert load_snapshot([str(tmp_path)]).pods["default/p"].created == -62135596800


def test_a_pod_group_sets_annotation_that_is_not_yaml_holds_its_group():
    bad = pod("p", group="g", annotations={"kueue.x-k8s.io/pod-group-sets": "[{name: main, count: 1"})
    deep = pod("q", group="h", annotations={"kueue.x-k8s.io/pod-group-sets": "[" * 20000 + "]" * 20000})
    built = build_workloads(build_snapshot([Document("a#1", bad), Document("a#2", deep)])).by_key
    assert [r.code for r in built["default/g"].held] == ["InvalidPodGroupSets"]
    assert [r.code for r in built["default/h"].held] == ["InvalidPodGroupSets"]


@pytest.mark.parametrize("obj,field", [
    (workload("w", count=2**31, cpu="1m"), "spec.podSets[0].count"),
    (workload("w", priority=-2**31 - 1), "spec.priority"),
    (_replaced(workload("w", admitted_in=("cq", "f")), ("status", "admission", "podSetAssignments", 0, "count"), 10**30),
     "status.admission.podSetAssignments[0].count"),
    (_replaced(workload("w"), ("status",), {"reclaimablePods": [{"name": "main", "count": -1}]}),
     "status.reclaimablePods[0].count"),
    ({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "p"}, "value": 2**31},
     "value"),
])
def test_counts_and_priorities_are_32_bit_as_in_kubernetes(obj, field):
    # 2**31 pods of 1m cpu were admitted into a quota of 8 cpu.
    with pytest.raises(SnapshotError) as err:
        build_snapshot([Document("x.yaml#1", obj)])
    assert err.value.field == field


def test_a_pod_group_count_beyond_32_bits_holds_its_group():
    sets = pod("p", group="g", annotations={"kueue.x-k8s.io/pod-group-sets": f"[{{name: main, count: {2**31}}}]"})
    total = pod("q", group="h", total=2**31)
    built = build_workloads(build_snapshot([Document("a#1", sets), Document("a#2", total)])).by_key
    assert [r.code for r in built["default/g"].held] == ["InvalidPodGroupSets"]
    assert [r.code for r in built["default/h"].held] == ["InvalidGroupCount"]


def test_plan_on_a_file_fails_in_one_line_naming_file_object_and_field(tmp_path):
    import json

    from click.testing import CliRunner

    from clueue.adapters.cli import main
    (tmp_path / "pods.json").write_text(json.dumps(_replaced(pod("p"), ("spec", "containers", 0, "resources"), "lots")))
    result = CliRunner().invoke(main, ["plan", str(tmp_path)])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"error: {tmp_path / 'pods.json'}#1: Pod p: spec.containers[0].resources: expected an object, got 'lots'"]
