"""Node placement end to end: ``clueue controller`` places gangs on real Node objects and a real
kube-scheduler (same release as the apiserver) binds their pods.

The module runs its own control plane with kube-scheduler and one controller for all its tests.
Nodes are registered as a kubelet would register them (no kubelet runs, so bound pods stay
Pending unless a test sets their phase). Each test has its own pool of nodes (a label the
flavor's nodeLabels select), its own flavor, ClusterQueue and namespace, so the tests do not
depend on each other's pods.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from clueue.engine.kueue_api import POD_GROUP_LABEL, ROLE_HASH_ANNOTATION
from clueue.engine.snapshot import role_hash
from tests.e2e.controller_harness import CONTROLLER_NS, start_controller, stop_controller, wait_until
from tests.e2e.test_adapter import create, gated_pod, queue_setup
from tests.testenv.build import ensure_binaries
from tests.testenv.control_plane import ControlPlane

GPU = "nvidia.com/gpu"
HOSTNAME = "kubernetes.io/hostname"
#: Cycles on every change, and when a PodGroup timeout ends (the default resync is minutes away).
CONTROLLER_ARGS = ("--batch-window", "0.05", "--max-delay", "0.5", "--lease-duration", "4")
WAIT_S = 90.0  # a guard against hanging on a loaded machine, not a measure of speed


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    with ControlPlane(ensure_binaries(), scheduler=True) as plane:
        plane.create_namespace(CONTROLLER_NS)
        yield plane


@pytest.fixture(scope="module")
def controller(plane: ControlPlane) -> Iterator[Any]:
    proc = start_controller(plane, *CONTROLLER_ARGS)
    yield proc
    assert stop_controller(proc) == 0


@pytest.fixture
def api(plane: ControlPlane) -> Iterator[client.ApiClient]:
    with plane.api_client() as admin:
        yield admin


def gpu_pool(plane: ControlPlane, api: client.ApiClient, nodes: int, gpus: int = 16, cpus: int = 0) -> str:
    """``nodes`` nodes of 8 GPUs, 64 cpu in pool ``pool-<tag>``; a flavor selecting the pool, a
    ClusterQueue with ``gpus`` GPUs (and ``cpus``, default 64 a node) of quota and a LocalQueue
    ``main`` in namespace ``ns-<tag>``. Returns the tag."""
    tag = uuid.uuid4().hex[:6]
    for i in range(nodes):
        plane.create_node(f"n{i}-{tag}", {"cpu": "64", "memory": "256Gi", GPU: "8"}, labels={"pool": f"pool-{tag}"})
    queue_setup(api, tag, quotas={"cpu": cpus or 64 * nodes, GPU: gpus})
    return tag


def gpu_member(ns: str, name: str, gpus: int, *, group: str, total: int | None = None) -> dict[str, Any]:
    """A gated pod of pod group ``group`` (a plain-pods group with ``total``, else a PodGroup's
    member) asking for ``gpus`` GPUs, as the webhook leaves it."""
    body = gated_pod(ns, name, cpu="1", group=group if total else None, total=total)
    if total is None:
        body["metadata"]["labels"][POD_GROUP_LABEL] = group
    body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", GPU: str(gpus)},
                                                  "limits": {GPU: str(gpus)}}
    body["metadata"]["annotations"][ROLE_HASH_ANNOTATION] = role_hash(body)
    return body


def pod_of(api: client.ApiClient, ns: str, name: str) -> client.V1Pod:
    return client.CoreV1Api(api).read_namespaced_pod(name, ns)


def workload(api: client.ApiClient, ns: str, name: str) -> dict[str, Any] | None:
    try:
        return client.CustomObjectsApi(api).get_namespaced_custom_object("kueue.x-k8s.io", "v1beta1", ns,
                                                                        "workloads", name)
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions", []) if c["type"] == kind), {})


def test_a_gang_that_fits_is_bound_by_kube_scheduler_to_the_nodes_clueue_chose(
        plane: ControlPlane, controller: Any, api: client.ApiClient) -> None:
    tag = gpu_pool(plane, api, nodes=4, gpus=32)
    ns, names = f"ns-{tag}", [f"w-{i}" for i in range(3)]
    # 3 pods of 8 GPUs and a 4-GPU one: whole nodes for three, the fourth on the last node.
    for name in names:
        create(api, gpu_member(ns, name, 8, group="train", total=4))
    create(api, gpu_member(ns, "w-small", 4, group="train", total=4))
    names.append("w-small")

    def pinned() -> dict[str, str]:
        pods = {name: pod_of(api, ns, name) for name in names}
        if any(p.spec.scheduling_gates for p in pods.values()):
            return {}
        return {name: (p.spec.node_selector or {}).get(HOSTNAME, "") for name, p in pods.items()}

    nodes = wait_until(pinned, WAIT_S, "the gang ungated", proc=controller)
    assert all(nodes.values()), f"every pod is ungated pinned to a node: {nodes}"
    assert len({nodes[name] for name in names[:3]}) == 3  # a node of 8 GPUs holds one 8-GPU pod
    assert set(nodes.values()) <= {f"n{i}-{tag}" for i in range(4)}

    def bound() -> dict[str, str]:
        found = {name: pod_of(api, ns, name).spec.node_name or "" for name in names}
        return found if all(found.values()) else {}

    assert wait_until(bound, WAIT_S, f"kube-scheduler to bind the gang (log: {plane.scheduler_log()})") == nodes
    assert condition(workload(api, ns, "train"), "Admitted").get("status") == "True"


def test_pods_are_pinned_to_nodes_whose_hostname_label_is_not_their_name(
        plane: ControlPlane, controller: Any, api: client.ApiClient) -> None:
    # A kubelet with --hostname-override, or a cloud naming Nodes by DNS name, labels its Node
    # with another hostname than the Node's name; a Node registered without a kubelet may have
    # no hostname label at all. Each pod must be pinned so that kube-scheduler finds its Node.
    tag = gpu_pool(plane, api, nodes=0, gpus=16, cpus=128)  # its nodes are made below
    ns = f"ns-{tag}"
    dns, bare = f"ip-10-0-1-14-{tag}.ec2.internal", f"bare-{tag}"
    plane.create_node(dns, {"cpu": "64", "memory": "256Gi", GPU: "8"},
                      labels={"pool": f"pool-{tag}", HOSTNAME: f"ip-10-0-1-14-{tag}"})
    plane.create_node(bare, {"cpu": "64", "memory": "256Gi", GPU: "8"}, labels={"pool": f"pool-{tag}"})
    client.CoreV1Api(api).patch_node(bare, {"metadata": {"labels": {HOSTNAME: None}}})
    names = ["p-0", "p-1"]
    # a required node affinity of two terms (ORed): the pin by name must be added to each
    terms = [{"matchExpressions": [{"key": "pool", "operator": "In", "values": [f"pool-{tag}"]}]},
             {"matchExpressions": [{"key": "never", "operator": "In", "values": ["x"]}]}]
    for name in names:  # 8 GPUs each: one on each node
        body = gpu_member(ns, name, 8, group="pair", total=2)
        body["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": terms}}}
        body["metadata"]["annotations"][ROLE_HASH_ANNOTATION] = role_hash(body)
        create(api, body)

    def bound() -> dict[str, client.V1Pod]:
        pods = {name: pod_of(api, ns, name) for name in names}
        return pods if all(p.spec.node_name for p in pods.values()) else {}

    pods = wait_until(bound, WAIT_S, f"kube-scheduler to bind the pair (log: {plane.scheduler_log()})",
                      proc=controller)
    assert sorted(p.spec.node_name for p in pods.values()) == sorted([dns, bare])
    for p in pods.values():  # each bound where clueue pinned it, by the pin the Node answers to
        if p.spec.node_name == dns:
            assert p.spec.node_selector[HOSTNAME] == f"ip-10-0-1-14-{tag}"
        else:
            assert HOSTNAME not in p.spec.node_selector
            pinned = p.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution \
                .node_selector_terms
            assert len(pinned) == 2 and [t.match_expressions[0].key for t in pinned] == ["pool", "never"]
            for term in pinned:
                assert [(f.key, f.operator, f.values) for f in term.match_fields] == [("metadata.name", "In", [bare])]


def test_a_gang_that_fits_the_quota_but_not_the_nodes_is_neither_ungated_nor_bound(
        plane: ControlPlane, controller: Any, api: client.ApiClient) -> None:
    tag = gpu_pool(plane, api, nodes=2, gpus=16)
    ns = f"ns-{tag}"
    # Another tenant's pods (not queued) hold 1 GPU on each node: 7 free on each, 14 in all.
    for i in range(2):
        other = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"other-{i}", "namespace": ns},
                 "spec": {"nodeName": f"n{i}-{tag}", "containers": [{"name": "main", "image": "registry.example/x:1",
                          "resources": {"requests": {GPU: "1"}, "limits": {GPU: "1"}}}]}}
        create(api, other)
        client.CoreV1Api(api).patch_namespaced_pod_status(f"other-{i}", ns, {"status": {"phase": "Running"}})
    for i in range(2):  # 16 GPUs of quota: the quota fits, the nodes do not
        create(api, gpu_member(ns, f"big-{i}", 8, group="big", total=2))

    seen: list[str] = []

    def unfit() -> str:
        # The message renders the NodesUnfit reason (engine/reasons.py): "needs 2 pods x 8
        # nvidia.com/gpu on nodes of flavor ...: ..., the next best has 7, so only 0 of its pods fit".
        reserved = condition(workload(api, ns, "big"), "QuotaReserved")
        seen[:] = [str(reserved)]
        message = reserved.get("message", "") if reserved.get("status") == "False" else ""
        return message if f"needs 2 pods x 8 {GPU} on nodes of flavor fl-{tag}" in message else ""

    try:
        message = wait_until(unfit, WAIT_S, "the gang to wait for nodes", proc=controller)
    except AssertionError as error:
        raise AssertionError(f"{error}\nlast QuotaReserved condition: {seen}") from None
    assert "has 7" in message and "only 0 of its pods fit" in message, message
    for i in range(2):
        pod = pod_of(api, ns, f"big-{i}")
        assert pod.spec.scheduling_gates and not pod.spec.node_name


def test_a_podgroup_placed_but_never_running_is_released_whole_after_its_timeout(
        plane: ControlPlane, controller: Any, api: client.ApiClient) -> None:
    tag = gpu_pool(plane, api, nodes=2, gpus=16)
    ns = f"ns-{tag}"
    objects = client.CustomObjectsApi(api)
    objects.create_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", ns, "podgroups", {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "slow", "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "main"}},
        "spec": {"minMember": 2, "scheduleTimeoutSeconds": 5}})
    for i in range(2):
        create(api, gpu_member(ns, f"slow-{i}", 8, group="slow"))

    def bound() -> list[str]:
        found = [pod_of(api, ns, f"slow-{i}").spec.node_name or "" for i in range(2)]
        return found if all(found) else []

    # Placed and bound, but no kubelet ever runs them: the group times out.
    assert sorted(wait_until(bound, WAIT_S, "kube-scheduler to bind the group", proc=controller)) == [
        f"n0-{tag}", f"n1-{tag}"]

    def released() -> dict[str, Any]:
        group = objects.get_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", ns, "podgroups", "slow")
        return group if "clueue.dev/requeues" in group["metadata"].get("annotations", {}) else {}

    group = wait_until(released, WAIT_S, "the group released after its timeout", proc=controller)
    assert group["metadata"]["annotations"]["clueue.dev/requeues"] == "1"
    assert wait_until(lambda: workload(api, ns, "podgroup-slow") is None, WAIT_S, "its Workload deleted")
    # Released whole: every pod deleted (a bound pod waits for its kubelet to confirm; none runs).
    # The release writes the group, then its Workload, then its pods: wait for the last of them.
    def undeleted() -> list[str]:
        return [p.metadata.name for p in client.CoreV1Api(api).list_namespaced_pod(ns).items
                if not p.metadata.deletion_timestamp]
    assert wait_until(lambda: not undeleted(), WAIT_S, "its pods deleted", proc=controller), undeleted()


def test_a_podgroup_without_a_queue_starts_only_where_min_member_pods_fit_and_kube_scheduler_binds_them(
        plane: ControlPlane, controller: Any, api: client.ApiClient) -> None:
    """Issue 33: a coscheduling PodGroup whose pods carry no queue name (gated, as clueue's webhook
    leaves them) is gang-scheduled on the nodes alone: with room for 3 of its 4 pods none starts
    and it says NodesUnfit; once a node more joins, all four are ungated pinned together and
    kube-scheduler binds each to the node clueue chose. No ClusterQueue's quota applies."""
    tag = gpu_pool(plane, api, nodes=3, gpus=0)  # no GPU quota at all: it does not matter here
    ns = f"ns-{tag}"
    objects = client.CustomObjectsApi(api)
    objects.create_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", ns, "podgroups", {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "mpi", "namespace": ns}, "spec": {"minMember": 4}})
    names = [f"mpi-{i}" for i in range(4)]
    for name in names:
        body = gpu_member(ns, name, 8, group="mpi")
        del body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]  # no queue: the built-in one of no quota
        body["spec"]["nodeSelector"] = {"pool": f"pool-{tag}"}  # this test's nodes only
        create(api, body)

    def waits() -> str:
        reserved = condition(workload(api, ns, "podgroup-mpi"), "QuotaReserved")
        return reserved.get("message", "") if reserved.get("status") == "False" else ""

    message = wait_until(waits, WAIT_S, "the group to wait for the nodes", proc=controller)
    assert "only 3 of its pods fit" in message, message
    assert all(pod_of(api, ns, name).spec.scheduling_gates for name in names)  # none started alone

    plane.create_node(f"n3-{tag}", {"cpu": "64", "memory": "256Gi", GPU: "8"}, labels={"pool": f"pool-{tag}"})

    def bound() -> dict[str, str]:
        found = {name: pod_of(api, ns, name).spec.node_name or "" for name in names}
        return found if all(found.values()) else {}

    nodes = wait_until(bound, WAIT_S, f"kube-scheduler to bind the group (log: {plane.scheduler_log()})",
                       proc=controller)
    assert sorted(nodes.values()) == sorted(f"n{i}-{tag}" for i in range(4))  # one 8-GPU pod per 8-GPU node
    for name, node in nodes.items():  # each bound where clueue pinned it (by node selector or affinity)
        spec = pod_of(api, ns, name).spec
        assert node in f"{spec.node_selector} {spec.affinity}", (name, node, spec.node_selector, spec.affinity)
    admitted = workload(api, ns, "podgroup-mpi")
    assert condition(admitted, "Admitted").get("status") == "True"
    assert admitted["status"]["admission"]["clusterQueue"] == "clueue-coscheduling"

    def scheduling() -> bool:
        group = objects.get_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", ns, "podgroups", "mpi")
        return (group.get("status") or {}).get("phase") == "Scheduling"

    wait_until(scheduling, WAIT_S, "the group's phase Scheduling", proc=controller)
