"""What a pod needs of a node, end to end (docs/placement.md): clueue's cycle places pods under a
NotIn/Exists node affinity and the nodes' pods limits, and a real kube-scheduler (same release
as the apiserver) binds every pod to exactly the node clueue chose; gated pods of a workload
admitted before (an apply interrupted between admitting and ungating) are ungated each with a
node, on the capacity left, and bound there.

The module runs its own control plane with kube-scheduler. Cycles are run and applied by the
test itself (``run_cycle`` + ``apply_plan``), so that it can stop an apply halfway. No kubelet
runs: bound pods stay Pending.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from kubernetes import client

from clueue.adapters.kube import apply_plan, read_cluster
from clueue.engine import load_policy, run_cycle
from clueue.engine.plan import Plan
from tests.e2e.controller_harness import wait_until
from tests.e2e.test_adapter import create, gated_pod, queue_setup
# the module's own control plane with kube-scheduler, and an admin client, as there
from tests.e2e.test_placement_live import WAIT_S, api, plane  # noqa: F401 (fixtures)
from tests.testenv.control_plane import ControlPlane

HOSTNAME = "kubernetes.io/hostname"


def _pool(plane: ControlPlane, api: client.ApiClient, nodes: dict[str, dict[str, Any]]) -> str:
    """Nodes ``<name>-<tag>`` (name -> {"labels", "pods", "cpu"}) in pool ``pool-<tag>``; a flavor
    selecting the pool, a ClusterQueue with ample quota and a LocalQueue ``main`` in namespace
    ``ns-<tag>``. Returns the tag."""
    tag = uuid.uuid4().hex[:6]
    for name, spec in nodes.items():
        plane.create_node(f"{name}-{tag}", {"cpu": spec.get("cpu", "64"), "memory": "64Gi", "pods": spec.get("pods", "110")},
                          labels={"pool": f"pool-{tag}", **spec.get("labels", {})})
    queue_setup(api, tag, nominal=1000)
    return tag


def _cycle(api: client.ApiClient, tag: str) -> Plan:
    """One decision cycle over the cluster; the plan keeps only this test's actions."""
    plan = run_cycle(read_cluster(api), load_policy())
    return dataclasses.replace(plan, actions=tuple(a for a in plan.actions if a.workload.startswith(f"ns-{tag}/")))


def _ungated(plan: Plan) -> dict[str, str]:
    """Pod name -> the node its ungate action pins it to."""
    return {a.target.split("/")[1]: a.details["nodeSelector"].get(HOSTNAME, "") for a in plan.actions
            if a.kind == "ungate"}


def _bound(api: client.ApiClient, ns: str, names: list[str]) -> dict[str, str]:
    """Pod name -> its node, once kube-scheduler has bound every one of ``names``."""
    def nodes() -> dict[str, str]:
        found = {n: client.CoreV1Api(api).read_namespaced_pod(n, ns).spec.node_name or "" for n in names}
        return found if all(found.values()) else {}
    return wait_until(nodes, WAIT_S, "kube-scheduler to bind the pods")


def test_kube_scheduler_binds_to_the_nodes_chosen_under_not_in_exists_affinity_and_pods_limits(
        plane: ControlPlane, api: client.ApiClient) -> None:
    # zone a is excluded (NotIn), the unlabelled node too (Exists); b and c hold 2 pods each
    tag = _pool(plane, api, {"a": {"labels": {"zone": "a"}}, "b": {"labels": {"zone": "b"}, "pods": "2"},
                             "c": {"labels": {"zone": "c"}, "pods": "2"}, "none": {}})
    ns, names = f"ns-{tag}", [f"p-{i}" for i in range(4)]
    for name in names:
        body = gated_pod(ns, name, cpu="1", group="gang", total=4)
        body["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]},
                                                        {"key": "zone", "operator": "Exists"}]}]}}}
        create(api, body)
    plan = _cycle(api, tag)
    chosen = _ungated(plan)
    assert sorted(chosen.values()) == [f"b-{tag}", f"b-{tag}", f"c-{tag}", f"c-{tag}"], chosen
    result = apply_plan(api, plan)
    assert not result.errors, result.errors
    assert _bound(api, ns, names) == chosen
    # a fifth pod like them finds every node it may use full (pods limits): it stays gated, told why
    late = gated_pod(ns, "late", cpu="1")
    late["spec"]["affinity"] = body["spec"]["affinity"]
    create(api, late)
    plan = _cycle(api, tag)
    assert "late" not in _ungated(plan)
    [reason] = plan.workload(f"{ns}/pod-late").reasons
    assert reason.code == "NodesUnfit" and reason.details["request"] == "1 pods", reason.message

def test_gated_pods_of_a_workload_admitted_before_are_ungated_with_nodes(
        plane: ControlPlane, api: client.ApiClient) -> None:
    tag = _pool(plane, api, {"n0": {"cpu": "8"}, "n1": {"cpu": "8"}, "n2": {"cpu": "8"}})
    ns, names = f"ns-{tag}", ["old-0", "old-1"]
    # another tenant's running pod holds 4 cpu of n0: the gang of 6-cpu pods fits only on n1 and n2
    create(api, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "other", "namespace": ns},
                 "spec": {"nodeName": f"n0-{tag}", "containers": [{"name": "main", "image": "registry.example/x:1",
                                                                   "resources": {"requests": {"cpu": "4"}}}]}})
    client.CoreV1Api(api).patch_namespaced_pod_status("other", ns, {"status": {"phase": "Running"}})
    for name in names:
        create(api, gated_pod(ns, name, cpu="6", group="old", total=2))
    # the apply is interrupted after the admission, before any ungating
    plan = _cycle(api, tag)
    assert [a.kind for a in plan.actions if a.kind == "admit"] == ["admit"]
    result = apply_plan(api, dataclasses.replace(plan, actions=tuple(a for a in plan.actions if a.kind != "ungate")))
    assert not result.errors, result.errors
    for name in names:
        assert client.CoreV1Api(api).read_namespaced_pod(name, ns).spec.scheduling_gates

    plan = _cycle(api, tag)
    assert not [a for a in plan.actions if a.kind == "admit"]  # admitted already: only its pods are ungated
    chosen = _ungated(plan)
    assert sorted(chosen) == names and sorted(chosen.values()) == [f"n1-{tag}", f"n2-{tag}"], chosen
    result = apply_plan(api, plan)
    assert not result.errors, result.errors
    assert _bound(api, ns, names) == chosen
