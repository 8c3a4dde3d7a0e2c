"""Topology-aware scheduling (docs/placement.md, "Topology-aware scheduling"): a ResourceFlavor
names a Topology (levels block, rack, hostname); a pod set's annotation asks for all its pods in
one domain of a level (required), for as few domains as can be (preferred), or for nothing
(unconstrained, also what a pod set without annotation gets); an admitted Workload records
Kueue's topologyAssignment."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.builders import cluster_queue, codes, flavor, group, local_queue, run, states, workload
from tests.scenarios.test_placement import HOST, bound, node

from clueue.engine import SnapshotError

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"


def topology(name: str = "default", levels: tuple[str, ...] = (BLOCK, RACK, HOST),
             version: str = "v1beta1") -> dict[str, Any]:
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": label} for label in levels]}}


def tas_queue(topology_name: str | None = "default") -> list[dict[str, Any]]:
    """Flavor ``tas`` (nodes labelled pool=tas) of Topology ``topology_name``, in ClusterQueue cq."""
    f = flavor("tas", {"pool": "tas"})
    if topology_name:
        f["spec"]["topologyName"] = topology_name
    return [f, cluster_queue("cq", {"tas": {"cpu": 1000}}), local_queue("cq")]


def rack(block: str, name: str, nodes: int, cpu: str = "4") -> list[dict[str, Any]]:
    """``nodes`` nodes of ``cpu`` in rack ``name`` of ``block``, named ``<block>-<rack>-<i>``."""
    return [node(f"{block}-{name}-{i}", cpu=cpu, labels={"pool": "tas", BLOCK: block, RACK: name})
            for i in range(nodes)]


def gang(name: str, pods: int, mode: str | None = None, level: str = RACK, cpu: str = "4", **kw: Any) -> list[dict[str, Any]]:
    annotations = {f"kueue.x-k8s.io/podset-{mode}-topology": level} if mode else {}
    return group(name, pods, cpu=cpu, annotations=annotations, **kw)


def pinned(plan, name: str) -> list[str]:
    return [a.details["nodeSelector"][HOST] for a in plan.actions if a.kind == "ungate" and a.workload == name]


def racks_of(nodes: list[str]) -> Counter[str]:
    """Pods per rack (``<block>-<rack>``) of the nodes ``nodes``."""
    return Counter(n.rsplit("-", 1)[0] for n in nodes)


# -- required -------------------------------------------------------------------------------------

def test_a_gang_requiring_one_rack_is_placed_within_one_rack():
    nodes = rack("b1", "r0", 2) + rack("b1", "r1", 3) + rack("b2", "r2", 4)
    plan = run(topology(), tas_queue(), nodes, gang("g", 4, "required"))
    assert states(plan)["default/g"] == "admitted"
    assert racks_of(pinned(plan, "default/g")) == {"b2-r2": 4}
    # without the annotation the same gang spreads (unconstrained: as Kueue's implicit default)
    plan = run(topology(), tas_queue(), rack("b1", "r0", 2) + rack("b1", "r1", 3), gang("g", 4))
    assert states(plan)["default/g"] == "admitted" and len(racks_of(pinned(plan, "default/g"))) == 2


def test_a_gang_no_rack_holds_waits_and_says_which_rack_comes_closest():
    nodes = rack("b1", "r0", 2) + rack("b1", "r1", 3) + rack("b2", "r2", 4)
    plan = run(topology(), tas_queue(), nodes, gang("g", 5, "required"))
    assert states(plan)["default/g"] == "pending" and pinned(plan, "default/g") == []
    [reason] = [r for r in plan.workload("default/g").reasons if r.code == "TopologyUnfit"]
    assert reason.details["fit"] == 4 and reason.details["level"] == RACK
    assert reason.message.endswith(f"needs 5 pods in one {RACK} domain; the best, b2/r2, holds 4")
    # the same gang requiring one block fits in b1 (2 + 3 nodes)
    plan = run(topology(), tas_queue(), nodes, gang("g", 5, "required", level=BLOCK))
    assert racks_of(pinned(plan, "default/g")) == {"b1-r0": 2, "b1-r1": 3}


def test_racks_of_the_same_name_in_two_blocks_are_two_domains():
    nodes = rack("b1", "r1", 2) + rack("b2", "r1", 2)
    plan = run(topology(), tas_queue(), nodes, gang("g", 3, "required"))
    assert states(plan)["default/g"] == "pending"
    assert "TopologyUnfit" in codes(plan, "default/g")


def test_required_hostname_puts_every_pod_on_one_node():
    nodes = [node(f"n{i}", cpu="4", labels={"pool": "tas", BLOCK: "b1", RACK: "r1"}) for i in range(6)]
    big = node("big", cpu="8", labels={"pool": "tas", BLOCK: "b1", RACK: "r1"})
    plan = run(topology(), tas_queue(), nodes, big, gang("g", 3, "required", level=HOST, cpu="2"))
    assert pinned(plan, "default/g") == ["big"] * 3
    # identical nodes stay one class, and the pods still share one of them
    plan = run(topology(), tas_queue(), nodes, gang("g", 2, "required", level=HOST, cpu="2"))
    assert len(set(pinned(plan, "default/g"))) == 1
    plan = run(topology(), tas_queue(), nodes, gang("g", 3, "required", level=HOST, cpu="2"))
    assert states(plan)["default/g"] == "pending"
    [reason] = [r for r in plan.workload("default/g").reasons if r.code == "TopologyUnfit"]
    assert reason.message.endswith("needs 3 pods in one node; the best holds 2")


# -- preferred ------------------------------------------------------------------------------------

def test_preferred_keeps_a_gang_in_one_rack_that_holds_it_over_filling_used_nodes():
    # r0's nodes are partly used: filling them would open fewer free nodes (placement.lp's
    # objective), but the gang prefers one rack and r1 holds it
    nodes = rack("b1", "r0", 2) + rack("b1", "r1", 3)
    busy = [bound(f"busy{i}", f"b1-r0-{i}", cpu="1") for i in range(2)]
    plan = run(topology(), tas_queue(), nodes, busy, gang("g", 3, "preferred", cpu="3"))
    assert racks_of(pinned(plan, "default/g")) == {"b1-r1": 3}


def test_preferred_spreads_over_the_fewest_racks_within_one_block_when_no_rack_holds_it():
    # no rack holds 6 pods; block b1 does (r0 + r1), though b2's partly used nodes would open
    # fewer free ones: the unconstrained gang takes them, the preferring one stays in b1
    nodes = rack("b1", "r0", 3) + rack("b1", "r1", 3) + rack("b2", "r2", 4)
    busy = [bound(f"busy{i}", f"b2-r2-{i}", cpu="1") for i in range(4)]
    plan = run(topology(), tas_queue(), nodes, busy, gang("g", 6, cpu="3"))
    assert racks_of(pinned(plan, "default/g"))["b2-r2"] == 4
    plan = run(topology(), tas_queue(), nodes, busy, gang("g", 6, "preferred", cpu="3"))
    assert states(plan)["default/g"] == "admitted"
    assert racks_of(pinned(plan, "default/g")) == {"b1-r0": 3, "b1-r1": 3}  # one block, two racks
    plan = run(topology(), tas_queue(), nodes, gang("g", 9, "preferred"))
    assert states(plan)["default/g"] == "admitted"
    used = racks_of(pinned(plan, "default/g"))
    assert sum(used.values()) == 9 and len(used) == 3


# -- flavors, Workloads, bad input ----------------------------------------------------------------

def test_a_flavor_without_topology_places_as_before_and_takes_no_topology_requests():
    nodes = rack("b1", "r0", 2) + rack("b1", "r1", 2)
    plan = run(tas_queue(None), nodes, gang("g", 3))
    assert states(plan)["default/g"] == "admitted"
    assert all("topologyAssignment" not in ps for a in plan.actions if a.kind == "admit" for ps in a.details["podSets"])
    plan = run(topology(), tas_queue(None), nodes, gang("g", 2, "required"))
    assert states(plan)["default/g"] == "pending"
    [reason] = [r for r in plan.workload("default/g").reasons if r.code == "TopologyUnfit"]
    assert "ResourceFlavor tas has no spec.topologyName" in reason.message


def test_a_level_the_topology_lacks_and_a_missing_topology_are_named():
    nodes = rack("b1", "r0", 2)
    plan = run(topology(levels=(BLOCK, HOST)), tas_queue(), nodes, gang("g", 2, "required"))
    assert states(plan)["default/g"] == "pending"
    assert f"Topology default has no level {RACK} (spec.levels)" in plan.workload("default/g").reasons[-1].message
    plan = run(tas_queue("gone"), nodes, gang("g", 2, "unconstrained", level="true"), gang("h", 1, minute=1))
    assert states(plan) == {"default/g": "pending", "default/h": "pending"}
    for name in ("default/g", "default/h"):
        [reason] = [r for r in plan.workload(name).reasons if r.code == "TopologyUnfit"]
        assert "ResourceFlavor tas names Topology gone in spec.topologyName, which does not exist" in reason.message


@pytest.mark.parametrize("levels, field, words", [
    ((HOST, RACK), "spec.levels[0].nodeLabel", "kubernetes.io/hostname can only be the lowest level"),
    ((RACK, RACK), "spec.levels[1].nodeLabel", "levels must be unique"),
    ((), "spec.levels", "expected 1 to 16 levels"),
])
def test_a_malformed_topology_is_refused_naming_the_field(levels, field, words):
    with pytest.raises(SnapshotError) as e:
        run(topology(levels=levels))
    assert field in str(e.value) and words in str(e.value) and "Topology default" in str(e.value)


def test_two_topology_annotations_on_one_pod_set_are_refused():
    pods = group("g", 1, annotations={REQUIRED: RACK, PREFERRED: RACK})
    with pytest.raises(SnapshotError) as e:
        run(topology(), tas_queue(), pods)
    assert REQUIRED in str(e.value) and PREFERRED in str(e.value) and "metadata.annotations" in str(e.value)


def test_v1alpha1_topologies_load():
    plan = run(topology(version="v1alpha1"), tas_queue(), rack("b1", "r0", 2), gang("g", 2, "required"))
    assert states(plan)["default/g"] == "admitted"


def test_an_admitted_workload_records_kueues_topology_assignment():
    sets = [{"name": "workers", "count": 3, "template": {
        "metadata": {"annotations": {REQUIRED: RACK}},
        "spec": {"containers": [{"name": "w", "resources": {"requests": {"cpu": "4"}}}]}}}]
    nodes = rack("b1", "r0", 2) + rack("b1", "r1", 3)
    plan = run(topology(levels=(BLOCK, RACK)), tas_queue(), nodes, workload("train", pod_sets=sets))
    [admit] = [a for a in plan.actions if a.kind == "admit"]
    assert admit.details["podSets"][0]["topologyAssignment"] == {
        "levels": [BLOCK, RACK], "domains": [{"values": ["b1", "r1"], "count": 3}]}
    # with the hostname as lowest level, Kueue records only the nodes
    plan = run(topology(), tas_queue(), nodes, workload("train", pod_sets=sets))
    [a] = plan.workload("default/train").admission
    assert a.topology is not None and a.topology.to_dict() == {
        "levels": [HOST], "domains": [{"values": [f"b1-r1-{i}"], "count": 1} for i in range(3)]}
    assert a.topology.to_dict("v1beta2") == {"levels": [HOST], "slices": [{
        "domainCount": 3, "valuesPerLevel": [{"individual": {"roots": ["b1-r1-0", "b1-r1-1", "b1-r1-2"]}}],
        "podCounts": {"universal": 1}}]}


# -- slices ----------------------------------------------------------------------------------------

def sliced(name: str, pods: int, mode: str, level: str, slice_level: str, size: Any, cpu: str = "4",
           **kw: Any) -> list[dict[str, Any]]:
    annotations = {f"kueue.x-k8s.io/podset-{mode}-topology": level,
                   "kueue.x-k8s.io/podset-slice-required-topology": slice_level,
                   "kueue.x-k8s.io/podset-slice-size": str(size)}
    return group(name, pods, cpu=cpu, annotations=annotations, **kw)


def test_slices_put_whole_slices_in_each_rack():
    # 3 racks of 3 one-pod nodes: 4 pods in slices of 2 take two racks, 2 pods in each
    nodes = rack("b1", "r0", 3) + rack("b1", "r1", 3) + rack("b1", "r2", 3)
    plan = run(topology(), tas_queue(), nodes, sliced("g", 4, "preferred", BLOCK, RACK, 2))
    assert states(plan)["default/g"] == "admitted"
    assert sorted(racks_of(pinned(plan, "default/g")).values()) == [2, 2]
    # 6 pods in slices of 4 do not divide: the pod set says so
    plan = run(topology(), tas_queue(), nodes, sliced("g", 6, "preferred", BLOCK, RACK, 4))
    assert states(plan)["default/g"] == "pending"
    [reason] = [r for r in plan.workload("default/g").reasons if r.code == "TopologyUnfit"]
    assert "its 6 pods are no whole number of slices of kueue.x-k8s.io/podset-slice-size 4" in reason.message


def test_slices_of_the_hostname_level_put_whole_slices_on_each_node():
    # each node holds 3 pods of 2 cpu; slices of 2 on one node each: 2 pods per node
    nodes = rack("b1", "r0", 3, cpu="6")
    plan = run(topology(), tas_queue(), nodes, sliced("g", 6, "required", RACK, HOST, 2, cpu="2"))
    assert states(plan)["default/g"] == "admitted"
    assert sorted(Counter(pinned(plan, "default/g")).values()) == [2, 2, 2]
    # 8 pods need 4 slices: the rack holds 3 (one per node), so it waits and says so
    plan = run(topology(), tas_queue(), nodes, sliced("g", 8, "required", RACK, HOST, 2, cpu="2"))
    assert states(plan)["default/g"] == "pending"
    [reason] = [r for r in plan.workload("default/g").reasons if r.code == "TopologyUnfit"]
    assert reason.message.endswith(f"needs 8 pods in one {RACK} domain, in slices of 2 within one {HOST}; "
                                   "the best, b1/r0, holds 6")


def test_slices_above_the_pod_sets_level_or_without_a_mode_or_size_are_refused():
    nodes = rack("b1", "r0", 2)
    plan = run(topology(), tas_queue(), nodes, sliced("g", 2, "required", RACK, BLOCK, 2))
    [reason] = [r for r in plan.workload("default/g").reasons if r.code == "TopologyUnfit"]
    assert f"kueue.x-k8s.io/podset-slice-required-topology {BLOCK} is above the pod set's level {RACK}" in reason.message
    with pytest.raises(SnapshotError, match="needs kueue.x-k8s.io/podset-required-topology or"):
        run(topology(), tas_queue(), group("g", 2, annotations={"kueue.x-k8s.io/podset-slice-required-topology": RACK}))
    with pytest.raises(SnapshotError, match=r"podset-slice-size\]: expected a positive integer"):
        run(topology(), tas_queue(), group("g", 2, annotations={
            REQUIRED: BLOCK, "kueue.x-k8s.io/podset-slice-required-topology": RACK}))
