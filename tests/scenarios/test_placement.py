"""Placement on nodes (docs/placement.md): with Nodes in the snapshot, every pod of an admitted
workload is placed on a node that holds it (free resources, taints, selectors, affinity, the
flavor's labels, schedulability), a gang whole or not at all, and the ungate action pins each
pod to its node; a workload that fits its quota but not the nodes says why, node by node."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tests.builders import cluster_queue, codes, flavor, group, local_queue, pod, run, states, workload

HOST = "kubernetes.io/hostname"
GPU = "nvidia.com/gpu"


def node(name: str, *, cpu: Any = "64", gpu: Any = None, labels: dict[str, str] | None = None,
         taints: list[dict[str, str]] | None = None, unschedulable: bool = False) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": "256Gi", "pods": "110"}
    if gpu is not None:
        allocatable[GPU] = gpu
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {HOST: name, **(labels or {})}},
            "spec": spec, "status": {"allocatable": allocatable}}


def bound(name: str, on: str, **kw: Any) -> dict[str, Any]:
    """A running pod bound to node ``on`` (not queued: it only takes capacity)."""
    p = pod(name, queue=None, gated=False, phase="Running", **kw)
    p["spec"]["nodeName"] = on
    return p


def _queue(**quota: Any) -> list[dict[str, Any]]:
    return [flavor("f"), cluster_queue("cq", {"f": quota or {"cpu": 1000, GPU: 1000}}), local_queue("cq")]


def _pinned(plan, workload: str) -> list[str]:
    """The node each ungated pod of ``workload`` is pinned to, in pod order."""
    return [a.details["nodeSelector"].get(HOST) for a in plan.actions if a.kind == "ungate" and a.workload == workload]


def test_pods_are_pinned_to_nodes_that_hold_them():
    plan = run(_queue(), node("n1", cpu="6"), node("n2", cpu="4"), group("g", 3, cpu="3"))
    assert states(plan)["default/g"] == "admitted"
    assert sorted(_pinned(plan, "default/g")) == ["n1", "n1", "n2"]
    # quota holds all three; two 4-cpu nodes hold one pod each
    plan = run(_queue(), node("n1", cpu="4"), node("n2", cpu="4"), group("g", 3, cpu="3"))
    assert states(plan)["default/g"] == "pending" and _pinned(plan, "default/g") == []
    [reason] = plan.workload("default/g").reasons
    assert reason.code == "NodesUnfit" and reason.details["fit"] == 2
    assert reason.message == (f"needs 3 pods x 3 cpu on nodes of flavor f (pod set {reason.details['podSet']}): "
                              "2 nodes have at least 3 free, so only 2 of its pods fit")


def test_fragmentation_four_nodes_with_seven_free_gpus_hold_no_eight_gpu_pod():
    nodes = [node(f"n{i}", gpu="8") for i in range(4)]
    busy = [bound(f"busy{i}", f"n{i}", gpu="1") for i in range(4)]
    plan = run(_queue(), nodes, busy, group("train", 2, gpu="8"))
    assert states(plan)["default/train"] == "pending"
    [reason] = [r for r in plan.workload("default/train").reasons if r.code == "NodesUnfit"]
    assert reason.details["fit"] == 0
    assert "0 nodes have at least 8 free, the next best has 7" in reason.message
    assert not [a for a in plan.actions if a.workload == "default/train"]


def test_a_gang_is_placed_whole_or_not_at_all():
    nodes = [node(f"n{i}", gpu="8") for i in range(3)]
    plan = run(_queue(), nodes, group("big", 4, gpu="8"), group("small", 3, gpu="8", minute=1))
    assert states(plan)["default/big"] == "pending" and states(plan)["default/small"] == "admitted"
    assert sorted(_pinned(plan, "default/small")) == ["n0", "n1", "n2"]
    assert "NodesUnfit" in codes(plan, "default/big")


def test_bound_pods_use_their_nodes_capacity():
    plan = run(_queue(), node("n1", cpu="8"), node("n2", cpu="8"), bound("x", "n1", cpu="6"),
               group("g", 2, cpu="4"))
    assert states(plan)["default/g"] == "admitted"
    assert _pinned(plan, "default/g") == ["n2", "n2"]


def test_terminated_pods_free_their_nodes():
    done = bound("x", "n1", cpu="8")
    done["status"]["phase"] = "Succeeded"
    plan = run(_queue(), node("n1", cpu="8"), done, pod("p", cpu="8"))
    assert _pinned(plan, "default/pod-p") == ["n1"]


def test_unschedulable_nodes_are_skipped():
    plan = run(_queue(), node("n1", cpu="8", unschedulable=True), node("n2", cpu="8"), pod("p", cpu="8"))
    assert _pinned(plan, "default/pod-p") == ["n2"]
    plan = run(_queue(), node("n1", cpu="8", unschedulable=True), pod("p", cpu="8"))
    assert states(plan)["default/pod-p"] == "pending" and "NodesUnfit" in codes(plan, "default/pod-p")


def test_taints_keep_pods_off_unless_tolerated():
    taint = [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
    nodes = [node("tainted", cpu="8", taints=taint), node("plain", cpu="4")]
    plan = run(_queue(), nodes, pod("a", cpu="6"),
               pod("b", cpu="6", tolerations=[{"key": "dedicated", "operator": "Equal", "value": "ml",
                                                "effect": "NoSchedule"}]))
    assert states(plan)["default/pod-a"] == "pending" and _pinned(plan, "default/pod-b") == ["tainted"]
    prefer = [{"key": "soft", "value": "x", "effect": "PreferNoSchedule"}]
    plan = run(_queue(), node("n", cpu="8", taints=prefer), pod("c", cpu="6"))
    assert _pinned(plan, "default/pod-c") == ["n"]


def test_node_selectors_and_required_affinity_choose_the_nodes():
    nodes = [node("a", cpu="8", labels={"zone": "a"}), node("b", cpu="8", labels={"zone": "b"})]
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}}}
    by_affinity = pod("q", cpu="2")
    by_affinity["spec"]["affinity"] = affinity
    plan = run(_queue(), nodes, pod("p", cpu="2", node_selector={"zone": "a"}), by_affinity)
    assert _pinned(plan, "default/pod-p") == ["a"] and _pinned(plan, "default/pod-q") == ["b"]


def test_the_flavor_node_labels_choose_the_nodes():
    objs = [flavor("a100", {"gpu": "a100"}), flavor("h100", {"gpu": "h100"}),
            cluster_queue("cq", {"a100": {"cpu": 100, GPU: 16}, "h100": {"cpu": 100, GPU: 16}}), local_queue("cq")]
    nodes = [node("h", gpu="8", labels={"gpu": "h100"}), node("a", gpu="8", labels={"gpu": "a100"}),
             bound("x", "a", gpu="4")]
    plan = run(objs, nodes, group("g", 2, gpu="8"))
    # quota holds the gang in either flavor, but neither flavor's nodes hold both its pods
    assert states(plan)["default/g"] == "pending"
    # a100 comes first in the queue, but its only node has 4 GPUs free: the pod goes to h100
    plan = run(objs, nodes, pod("p", gpu="8"))
    assert [a.flavors[GPU] for a in plan.workload("default/pod-p").admission] == ["h100"]
    assert _pinned(plan, "default/pod-p") == ["h"]
    [ungate] = [a for a in plan.actions if a.kind == "ungate"]
    assert ungate.details["nodeSelector"] == {"gpu": "h100", HOST: "h"}


def _named(name: str, hostname: str | None, **kw: Any) -> dict[str, Any]:
    """A Node whose kubernetes.io/hostname label is ``hostname`` (None: it has none), not its name."""
    n = node(name, **kw)
    del n["metadata"]["labels"][HOST]
    if hostname is not None:
        n["metadata"]["labels"][HOST] = hostname
    return n


def _ungates(plan, workload: str) -> list[dict[str, Any]]:
    return [dict(a.details) for a in plan.actions if a.kind == "ungate" and a.workload == workload]


def test_pods_are_pinned_by_the_nodes_hostname_label_not_its_name():
    # the kubelet's --hostname-override, or a cloud's DNS names: the label is not the Node's name
    nodes = [_named("ip-10-0-1-14.ec2.internal", "ip-10-0-1-14", cpu="4"),
             _named("ip-10-0-1-15.ec2.internal", "ip-10-0-1-15", cpu="4")]
    plan = run(_queue(), nodes, group("g", 2, cpu="3"))
    assert states(plan)["default/g"] == "admitted"
    ungates = _ungates(plan, "default/g")
    assert sorted(u["node"] for u in ungates) == ["ip-10-0-1-14.ec2.internal", "ip-10-0-1-15.ec2.internal"]
    for u in ungates:  # each pinned by what kube-scheduler matches: the label of the Node it names
        assert u["nodeSelector"] == {HOST: u["node"].split(".")[0]} and "matchFields" not in u
    # a node without the label, and two nodes sharing one: pinned by matchFields on metadata.name
    nodes = [_named("bare", None, cpu="4"), _named("twin-a", "twin", cpu="4"), _named("twin-b", "twin", cpu="4")]
    plan = run(_queue(), nodes, group("g", 3, cpu="3"))
    ungates = _ungates(plan, "default/g")
    assert sorted(u["node"] for u in ungates) == ["bare", "twin-a", "twin-b"]
    for u in ungates:
        assert HOST not in u["nodeSelector"]
        assert u["matchFields"] == [{"key": "metadata.name", "operator": "In", "values": [u["node"]]}]


def test_pods_pinned_before_hold_the_node_their_pin_names():
    # ungated, not bound yet: a pod pinned by the label, one by matchFields, one by the name as
    # clueue pinned before; each holds its node, so a new pod goes to the one left free
    nodes = [_named("n1.example", "n1", cpu="4"), _named("n2", None, cpu="4"), _named("n3.example", "n3", cpu="4"),
             _named("n4.example", "n4", cpu="4")]
    by_label = pod("a", queue=None, gated=False, cpu="4", node_selector={HOST: "n1"})
    by_field = pod("b", queue=None, gated=False, cpu="4")
    by_field["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}}
    by_name = pod("c", queue=None, gated=False, cpu="4", node_selector={HOST: "n3.example"})
    plan = run(_queue(), nodes, by_label, by_field, by_name, pod("p", cpu="4"))
    assert [u["node"] for u in _ungates(plan, "default/pod-p")] == ["n4.example"]
    plan = run(_queue(), nodes, by_label, by_field, by_name, pod("p", cpu="4"), pod("x", queue=None, gated=False,
                                                                                     cpu="4", node_selector={HOST: "n4"}))
    assert states(plan)["default/pod-p"] == "pending" and "NodesUnfit" in codes(plan, "default/pod-p")


def test_partly_used_nodes_are_filled_before_wholly_free_ones():
    nodes = [node("idle1", gpu="8"), node("idle2", gpu="8"), node("used", gpu="8"), bound("x", "used", gpu="4")]
    plan = run(_queue(), nodes, group("g", 2, gpu="2"))
    assert _pinned(plan, "default/g") == ["used", "used"]


def test_without_nodes_nothing_changes():
    plan = run(_queue(), group("g", 3, cpu="3"))
    assert states(plan)["default/g"] == "admitted" and _pinned(plan, "default/g") == [None] * 3


def test_the_solver_places_gangs_that_greedy_pod_order_would_strand():
    # two 8-GPU nodes and two 4-GPU nodes: the 8-GPU gang gets the big nodes, the 4-GPU pods the small
    nodes = [node("big1", gpu="8"), node("big2", gpu="8"), node("small1", gpu="4"), node("small2", gpu="4")]
    plan = run(_queue(), nodes, group("quad", 2, gpu="4"), group("octo", 2, gpu="8", minute=1))
    assert states(plan)["default/quad"] == "admitted" and states(plan)["default/octo"] == "admitted"
    assert Counter(_pinned(plan, "default/octo")) == Counter({"big1": 1, "big2": 1})


def test_the_admit_action_records_each_pods_node():
    objs = [flavor("f"), cluster_queue("cq", {"f": {"cpu": 100}}), local_queue("cq"), node("n1", cpu="8")]
    plan = run(objs, workload("w", cpu="4", count=2))
    [admit] = [a for a in plan.actions if a.kind == "admit"]
    assert admit.details["nodes"] == {"main": ["n1", "n1"]}
    assert "nodes" not in [a for a in run(_queue(), pod("p")).actions if a.kind == "admit"][0].details


def test_the_solver_knows_what_packing_node_by_node_holds():
    # Two nodes with 7 GPUs free each (one class). After two 4-GPU pods each node has 3 left: one
    # 2-GPU pod each, though 6 GPUs are free in all. The class bounds (placement.lp, step/3) say
    # so in the solve itself: no placement the solver makes fails node by node.
    from clueue.engine.compiler import compile_facts
    from clueue.engine.facts import render_facts
    from clueue.engine.placement import assign_nodes, node_classes
    from clueue.engine.snapshot import Document, build_snapshot
    from clueue.engine.solver import decide
    from clueue.engine.workloads import build_workloads
    from tests.builders import TEST_TIME_BUDGET, flatten, load_policy

    objs = [_queue(), node("n1", gpu="8"), node("n2", gpu="8"), bound("x1", "n1", gpu="1"), bound("x2", "n2", gpu="1"),
            group("quad", 2, gpu="4"), group("pair", 3, gpu="2", minute=1), group("ones", 2, gpu="1", minute=2)]
    plan = run(*objs)
    assert states(plan)["default/quad"] == "admitted" and states(plan)["default/ones"] == "admitted"
    assert states(plan)["default/pair"] == "pending" and "NodesUnfit" in codes(plan, "default/pair")
    snap = build_snapshot([Document(f"t#{i}", o) for i, o in enumerate(flatten(objs))])
    built = build_workloads(snap).workloads
    nodes = node_classes(snap, built)
    decision = decide(render_facts(compile_facts(snap, built, nodes=nodes).lines), load_policy(), budget=TEST_TIME_BUDGET)
    rank = {w: i for i, w in enumerate(decision.ranked)}
    placed = assign_nodes(nodes, decision.placements, {w.key: w for w in built}, rank)
    assert set(decision.choices) == {"default/quad", "default/ones"} and placed.failed == ()
