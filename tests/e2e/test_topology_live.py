"""Topology-aware scheduling end to end: ``clueue controller`` places a gang that requires one
rack (Kueue's ``kueue.x-k8s.io/podset-required-topology``) on the nodes of one rack of a
``Topology``, a real kube-scheduler binds its pods there, and the Workloads record Kueue's
``topologyAssignment`` in the API version the cluster prefers.

The module runs its own control plane with kube-scheduler and one controller (the fixtures of
test_placement_live.py). Nodes are registered as a kubelet would register them (no kubelet runs:
bound pods stay Pending).
"""

from __future__ import annotations

import uuid
from typing import Any

from kubernetes import client

from clueue.engine.kueue_api import ROLE_HASH_ANNOTATION
from clueue.engine.snapshot import role_hash
from tests.e2e.controller_harness import wait_until
from tests.e2e.test_adapter import KUEUE, create, gated_pod, queue_setup
# the module's own control plane with kube-scheduler, its controller and an admin client, as there
from tests.e2e.test_placement_live import WAIT_S, api, controller, plane  # noqa: F401 (fixtures)
from tests.testenv.control_plane import ControlPlane

HOSTNAME = "kubernetes.io/hostname"
BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"


def racks(plane: ControlPlane, api: client.ApiClient, sizes: dict[str, int]) -> tuple[str, dict[str, str]]:
    """Racks of 8-cpu nodes (rack name -> nodes, all in block b1) in pool ``pool-<tag>``; a
    Topology (block, rack, hostname), a flavor of it selecting the pool, a ClusterQueue with
    ample cpu and a LocalQueue ``main`` in namespace ``ns-<tag>``. Returns the tag and each
    node's rack."""
    tag = uuid.uuid4().hex[:6]
    rack_of = {}
    for rack, nodes in sizes.items():
        for i in range(nodes):
            name = f"{rack}-n{i}-{tag}"
            plane.create_node(name, {"cpu": "8", "memory": "64Gi"},
                              labels={"pool": f"pool-{tag}", BLOCK: "b1", RACK: rack})
            rack_of[name] = rack
    create(api, {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": f"topo-{tag}"},
                 "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOSTNAME}]}})
    queue_setup(api, tag, nominal=1000, topology=f"topo-{tag}")
    return tag, rack_of


def workload(api: client.ApiClient, ns: str, name: str) -> dict[str, Any]:
    try:
        return client.CustomObjectsApi(api).get_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", ns,
                                                                        "workloads", name)
    except client.ApiException as error:
        if error.status == 404:
            return {}
        raise


def assignment(obj: dict[str, Any]) -> dict[str, Any]:
    """The topologyAssignment of the Workload's first pod set, once admitted ({} before)."""
    sets = ((obj.get("status") or {}).get("admission") or {}).get("podSetAssignments") or [{}]
    return dict(sets[0].get("topologyAssignment") or {})


def test_a_gang_requiring_one_rack_is_bound_within_one_rack(
        plane: ControlPlane, controller: Any, api: client.ApiClient) -> None:
    # r1 has room for 2 pods of 8 cpu, r2 for 3: only r2 holds the gang of 3 (spread, it would fit)
    tag, rack_of = racks(plane, api, {"r1": 2, "r2": 3})
    ns, names = f"ns-{tag}", [f"w-{i}" for i in range(3)]
    for name in names:
        body = gated_pod(ns, name, cpu="8", group="train", total=3)
        body["metadata"]["annotations"][REQUIRED] = RACK
        body["metadata"]["annotations"][ROLE_HASH_ANNOTATION] = role_hash(body)
        create(api, body)

    def bound() -> dict[str, str]:
        found = {name: client.CoreV1Api(api).read_namespaced_pod(name, ns).spec.node_name or "" for name in names}
        return found if all(found.values()) else {}

    nodes = wait_until(bound, WAIT_S, f"kube-scheduler to bind the gang (log: {plane.scheduler_log()})",
                       proc=controller)
    assert {rack_of[n] for n in nodes.values()} == {"r2"} and len(set(nodes.values())) == 3
    # the Workload of the group records the nodes (the Topology's lowest level is the hostname)
    # in the v1beta2 shape: the cluster serves Kueue's v1beta2 as its preferred version
    recorded = wait_until(lambda: assignment(workload(api, ns, "train")), WAIT_S, "the Workload's admission",
                          proc=controller)
    assert recorded == {"levels": [HOSTNAME], "slices": [{
        "domainCount": 3, "valuesPerLevel": [{"individual": {"roots": sorted(nodes.values())}}],
        "podCounts": {"universal": 1}}]}


def test_a_workload_no_rack_holds_waits_and_one_that_fits_records_its_rack(
        plane: ControlPlane, controller: Any, api: client.ApiClient) -> None:
    tag, _ = racks(plane, api, {"r1": 2, "r2": 2})
    ns = f"ns-{tag}"

    def workload_body(name: str, count: int) -> dict[str, Any]:
        return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": name, "namespace": ns}, "spec": {
            "queueName": "main", "podSets": [{"name": "workers", "count": count, "template": {
                "metadata": {"annotations": {REQUIRED: RACK}},
                "spec": {"containers": [{"name": "w", "image": "registry.example/app:1",
                                         "resources": {"requests": {"cpu": "8"}}}]}}}]}}

    # 4 nodes hold 3 pods, but no rack does: the Workload waits, saying so
    create(api, workload_body("big", 3))

    def waiting() -> str:
        reserved = next((c for c in (workload(api, ns, "big").get("status") or {}).get("conditions", [])
                         if c["type"] == "QuotaReserved"), {})
        return reserved.get("message", "") if reserved.get("status") == "False" else ""

    message = wait_until(waiting, WAIT_S, "the big Workload's reason", proc=controller)
    assert f"needs 3 pods in one {RACK} domain; the best, b1/r1, holds 2" in message
    create(api, workload_body("fits", 2))
    recorded = wait_until(lambda: assignment(workload(api, ns, "fits")), WAIT_S, "the Workload admitted",
                          proc=controller)
    assert recorded["levels"] == [HOSTNAME]
    [piece] = recorded["slices"]
    assert piece["domainCount"] == 2 and piece["podCounts"] == {"universal": 1}
    assert len({n.split("-n")[0] for n in piece["valuesPerLevel"][0]["individual"]["roots"]}) == 1  # one rack
    assert not assignment(workload(api, ns, "big"))
