"""engine/topology.py and its pieces elsewhere: domains, the levels node classes split by,
preferred costs, what keeps a pod set off a flavor, Kueue's topologyAssignment in both API
versions, the annotations' parsing (slices too) and the one-node packing of assign_nodes."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest

from clueue.engine import Document, SnapshotError, build_snapshot
from clueue.engine.objects import PodSetSpec, Topology, TopologyRequest
from clueue.engine.placement import assign_nodes, bundle, node_classes
from clueue.engine.plan import TopologyAssignment
from clueue.engine.fields import Fields
from clueue.engine.snapshot import parse_topology_request
from clueue.engine.topology import (domain, domain_costs, split_labels, topology_assignment, topology_unfit,
                                    unusable)
from clueue.engine.workloads import Workload

BLOCK, RACK, HOST = "block", "rack", "kubernetes.io/hostname"
TOPOLOGY = Topology("dc", (BLOCK, RACK, HOST))


def snapshot(*docs):
    return build_snapshot([Document(f"test#{i}", d) for i, d in enumerate(docs)])


def topology_doc(name="dc", levels=(BLOCK, RACK, HOST), version="v1beta2"):
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": label} for label in levels]}}


def flavor_doc(name, topology=None):
    spec = {"nodeLabels": {"pool": name}}
    if topology:
        spec["topologyName"] = topology
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def node_doc(name, block, rack, cpu="4"):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {HOST: name, BLOCK: block, RACK: rack, "pool": "tas"}},
            "status": {"allocatable": {"cpu": cpu}}}


def pod_set(mode=None, level=RACK, count=4):
    return PodSetSpec("main", count, {"cpu": Fraction(1)}, topology=TopologyRequest(mode, level) if mode else None)


def test_a_domain_is_the_values_of_its_level_and_those_above():
    labels = {BLOCK: "b1", RACK: "r1", HOST: "n1"}
    assert domain(TOPOLOGY, RACK, labels) == "b1/r1"
    assert domain(TOPOLOGY, BLOCK, labels) == "b1"
    assert domain(TOPOLOGY, RACK, {RACK: "r1"}) is None  # no block label: in no rack domain
    assert domain(TOPOLOGY, "zone", labels) is None


def test_classes_split_by_the_levels_asked_for_and_those_above_never_by_hostname():
    s = snapshot(topology_doc(), topology_doc("flat", ("zone", RACK)))
    assert split_labels(s, [pod_set("required", RACK)]) == {BLOCK, RACK, "zone"}
    assert split_labels(s, [pod_set("preferred", HOST)]) == {BLOCK, RACK}
    assert split_labels(s, [pod_set("unconstrained", ""), pod_set()]) == set()


def test_preferred_costs_grow_up_the_levels_so_one_domain_above_outweighs_all_below():
    assert domain_costs(TOPOLOGY, pod_set("preferred", RACK, count=4)) == {RACK: 1, BLOCK: 5}
    assert domain_costs(TOPOLOGY, pod_set("preferred", HOST, count=2)) == {RACK: 1, BLOCK: 3}
    assert domain_costs(TOPOLOGY, pod_set("preferred", RACK, count=2**30)) == {RACK: 1, BLOCK: 2**20}


def test_what_keeps_a_pod_set_off_a_flavor_names_the_object_and_field():
    s = snapshot(topology_doc(), flavor_doc("tas", "dc"), flavor_doc("plain"), flavor_doc("lost", "gone"))
    assert unusable(s, pod_set("required"), "tas") is None
    assert unusable(s, pod_set(), "plain") is None
    assert unusable(s, pod_set("required"), "plain") == (
        "ResourceFlavor plain has no spec.topologyName, and the pod set asks for topology-aware scheduling "
        "(kueue.x-k8s.io/podset-required-topology)")
    assert "names Topology gone in spec.topologyName, which does not exist" in unusable(s, pod_set(), "lost")
    assert unusable(s, pod_set("preferred", "zone"), "tas") == (
        "Topology dc has no level zone (spec.levels), which the pod set asks for in "
        "kueue.x-k8s.io/podset-preferred-topology")


def test_topology_unfit_names_the_closest_domain_and_passes_what_fits():
    s = snapshot(topology_doc(), flavor_doc("tas", "dc"))
    fits = {"tas": [({BLOCK: "b1", RACK: "r1"}, 1, 2), ({BLOCK: "b1", RACK: "r2"}, 2, 1)]}
    details = topology_unfit(s, pod_set("required", RACK, count=3), fits)
    assert details is not None and details["fit"] == 2 and "the best, b1/r1, holds 2" in str(details["why"])
    assert topology_unfit(s, pod_set("required", BLOCK, count=3), fits) is None
    assert topology_unfit(s, pod_set("preferred", RACK, count=3), fits) is None  # preferred spreads
    hostname = topology_unfit(s, pod_set("required", HOST, count=3), fits)
    assert hostname is not None and hostname["why"] == "needs 3 pods in one node; the best holds 2"


def test_topology_assignment_lists_nodes_when_the_lowest_level_is_the_hostname():
    nodes = [node_doc("n1", "b1", "r1"), node_doc("n2", "b1", "r2")]
    s = snapshot(topology_doc(), flavor_doc("tas", "dc"), *nodes)
    got = topology_assignment(s, {"cpu": "tas"}, ("n1", "n1", "n2"))
    assert got == TopologyAssignment((HOST,), ((("n1",), 2), (("n2",), 1)))
    s = snapshot(topology_doc(levels=(BLOCK, RACK)), flavor_doc("tas", "dc"), *nodes)
    assert topology_assignment(s, {"cpu": "tas"}, ("n1", "n2", "n2")) == TopologyAssignment(
        (BLOCK, RACK), ((("b1", "r1"), 1), (("b1", "r2"), 2)))
    assert topology_assignment(snapshot(flavor_doc("plain")), {"cpu": "plain"}, ("n1",)) is None


def test_topology_assignment_shapes_of_v1beta1_and_v1beta2():
    a = TopologyAssignment((BLOCK, RACK), ((("b1", "r1"), 1), (("b1", "r2"), 2)))
    assert a.to_dict("v1beta1") == {"levels": [BLOCK, RACK], "domains": [
        {"values": ["b1", "r1"], "count": 1}, {"values": ["b1", "r2"], "count": 2}]}
    assert a.to_dict("v1beta2") == {"levels": [BLOCK, RACK], "slices": [{
        "domainCount": 2, "valuesPerLevel": [{"universal": "b1"}, {"individual": {"roots": ["r1", "r2"]}}],
        "podCounts": {"individual": [1, 2]}}]}


@pytest.mark.parametrize("annotations, expected", [
    ({}, None),
    ({"kueue.x-k8s.io/podset-required-topology": RACK}, TopologyRequest("required", RACK)),
    ({"kueue.x-k8s.io/podset-preferred-topology": HOST}, TopologyRequest("preferred", HOST)),
    ({"kueue.x-k8s.io/podset-unconstrained-topology": "true"}, TopologyRequest("unconstrained")),
    ({"kueue.x-k8s.io/podset-unconstrained-topology": "false"}, None),
])
def test_topology_annotations_are_read(annotations, expected):
    f = Fields(Document("test#1", {"kind": "Pod", "metadata": {"name": "p", "namespace": "default"}}), "Pod")
    assert parse_topology_request(f, "metadata.annotations", annotations) == expected


@pytest.mark.parametrize("annotations, words", [
    ({"kueue.x-k8s.io/podset-required-topology": ""}, "expected the node label of a topology level"),
    ({"kueue.x-k8s.io/podset-unconstrained-topology": "yes"}, "expected \"true\" or \"false\", got 'yes'"),
])
def test_malformed_topology_annotations_are_refused_naming_the_annotation(annotations, words):
    f = Fields(Document("test#1", {"kind": "Pod", "metadata": {"name": "p", "namespace": "default"}}), "Pod")
    with pytest.raises(SnapshotError) as e:
        parse_topology_request(f, "metadata.annotations", annotations)
    assert words in str(e.value) and f"metadata.annotations[{next(iter(annotations))}]" in str(e.value)


def test_only_topology_is_read_in_v1alpha1():
    assert snapshot(topology_doc(version="v1alpha1")).topologies["dc"].levels == (BLOCK, RACK, HOST)
    old = {**flavor_doc("tas"), "apiVersion": "kueue.x-k8s.io/v1alpha1"}
    with pytest.raises(SnapshotError, match="unsupported version"):
        snapshot(old)


def test_a_pod_set_requiring_one_node_is_packed_onto_one_node():
    # two identical nodes, one class: 3 pods of 1 cpu each fit on either, not split between them
    s = snapshot(node_doc("n1", "b1", "r1"), node_doc("n2", "b1", "r1"))
    one = PodSetSpec("main", 3, {"cpu": Fraction(1)}, topology=TopologyRequest("required", HOST))
    spread = PodSetSpec("other", 2, {"cpu": Fraction(2)})
    w = Workload(namespace="default", name="w", queue="main", priority=0, created=0, origin="workload", pod_sets=(one, spread))
    classes = node_classes(s, [w])
    [c] = classes.classes
    placed = assign_nodes(classes, {w.key: [("main", c.id, 3), ("other", c.id, 2)]}, {w.key: w}, {w.key: 0})
    assert not placed.failed
    assert len(set(placed.nodes[w.key, "main"])) == 1
    # 3 pods of 2 cpu: no node holds them, though the class does
    big = PodSetSpec("main", 3, {"cpu": Fraction(2)}, topology=TopologyRequest("required", HOST))
    w = Workload(namespace="default", name="w", queue="main", priority=0, created=0, origin="workload", pod_sets=(big,))
    placed = assign_nodes(classes, {w.key: [("main", c.id, 3)]}, {w.key: w}, {w.key: 0})
    assert placed.failed == ((w.key, c.id),)


def test_slice_annotations_are_read_with_their_mode():
    f = Fields(Document("test#1", {"kind": "Pod", "metadata": {"name": "p", "namespace": "default"}}), "Pod")
    annotations = {"kueue.x-k8s.io/podset-preferred-topology": BLOCK,
                   "kueue.x-k8s.io/podset-slice-required-topology": HOST, "kueue.x-k8s.io/podset-slice-size": "4"}
    assert parse_topology_request(f, "metadata.annotations", annotations) == TopologyRequest("preferred", BLOCK, HOST, 4)
    with pytest.raises(SnapshotError, match="podset-slice-size"):
        parse_topology_request(f, "metadata.annotations", {**annotations, "kueue.x-k8s.io/podset-slice-size": "0"})


def test_slices_must_divide_the_pod_set_and_lie_at_or_below_its_level():
    s = snapshot(topology_doc(), flavor_doc("tas", "dc"))
    ps = PodSetSpec("main", 6, {"cpu": Fraction(1)}, topology=TopologyRequest("required", RACK, HOST, 2))
    assert unusable(s, ps, "tas") is None
    assert "no whole number of slices" in str(unusable(s, replace(ps, count=5), "tas"))
    above = replace(ps, topology=TopologyRequest("required", RACK, BLOCK, 2))
    assert "is above the pod set's level" in str(unusable(s, above, "tas"))
    assert split_labels(s, [replace(ps, topology=TopologyRequest("preferred", HOST, RACK, 2))]) == {BLOCK, RACK}


def test_bundles_are_the_pods_one_node_takes_together():
    assert bundle(PodSetSpec("main", 6, {}, topology=TopologyRequest("required", HOST)), 6) == 6
    assert bundle(PodSetSpec("main", 6, {}, topology=TopologyRequest("required", RACK, HOST, 2)), 4) == 2
    assert bundle(PodSetSpec("main", 6, {}, topology=TopologyRequest("required", RACK)), 4) == 1
