"""Node selection as kube-scheduler matches it (objects.NodeNeeds) and what a pod takes of a node
beyond its requests (nodematch.Demands): pods, host ports, pod anti-affinity on the hostname."""

from __future__ import annotations

from fractions import Fraction

import pytest

from clueue.engine.nodematch import PODS, Demands
from clueue.engine.kueue_api import HOSTNAME_LABEL
from clueue.engine.objects import (LabelSelector, Node, NodeNeeds, NodeSelectorRequirement, NodeSelectorTerm,
                                   PodAffinityTerm, Requirement)


def req(key: str, op: str, *values: str) -> NodeSelectorRequirement:
    return NodeSelectorRequirement(key, op, values)


@pytest.mark.parametrize("r, value, expected", [
    (req("k", "In", "a", "b"), "b", True), (req("k", "In", "a"), None, False),
    (req("k", "NotIn", "a"), "b", True), (req("k", "NotIn", "a"), None, True), (req("k", "NotIn", "a"), "a", False),
    (req("k", "Exists"), "", True), (req("k", "Exists"), None, False),
    (req("k", "DoesNotExist"), None, True), (req("k", "DoesNotExist"), "x", False),
    (req("k", "Gt", "4"), "5", True), (req("k", "Gt", "4"), "4", False), (req("k", "Gt", "-1"), "0", True),
    (req("k", "Lt", "4"), "3", True), (req("k", "Lt", "4"), "4", False),
    (req("k", "Gt", "4"), "five", False), (req("k", "Lt", "4"), None, False),  # no integer: never
])
def test_requirement_operators(r, value, expected):
    assert r.matches(value) is expected


def test_terms_are_ored_expressions_anded_and_an_empty_term_selects_nothing():
    zone_a = NodeSelectorTerm((req("zone", "In", "a"), req("gpu", "Exists")))
    named = NodeSelectorTerm(fields=(req("metadata.name", "In", "n9"),))
    needs = NodeNeeds(terms=(zone_a, named))
    assert needs.selects("n1", {"zone": "a", "gpu": "x"})
    assert not needs.selects("n1", {"zone": "a"})              # one expression of the term fails
    assert needs.selects("n9", {})                              # the other term holds
    assert not NodeNeeds(terms=(NodeSelectorTerm(),)).selects("n1", {"zone": "a"})
    assert not NodeNeeds(terms=()).selects("n1", {})            # no term: nothing
    assert NodeNeeds().selects("n1", {})                        # no affinity: everything
    assert needs.label_keys() == {"zone", "gpu"} and needs.node_names() == {"n9"}


def test_node_selector_and_affinity_must_both_hold():
    needs = NodeNeeds(node_selector=(("pool", "x"),), terms=(NodeSelectorTerm((req("zone", "NotIn", "a"),)),))
    assert needs.selects("n", {"pool": "x", "zone": "b"})
    assert not needs.selects("n", {"pool": "y", "zone": "b"}) and not needs.selects("n", {"pool": "x", "zone": "a"})
    assert needs.label_keys() == {"pool", "zone"}


def _node(name: str, pods: str | None = "110") -> Node:
    allocatable = {"cpu": Fraction(8)} | ({PODS: Fraction(pods)} if pods else {})
    return Node(name, {HOSTNAME_LABEL: name}, allocatable, (), False)


def test_pods_count_one_each_where_nodes_report_their_limit():
    demands = Demands([_node("a", "4"), _node("b", None)], [("ns", NodeNeeds())], [], {}, most_pods=10)
    assert demands.names() == [PODS]
    assert demands.takes("ns", NodeNeeds()) == {PODS: 1}
    assert demands.capacity(_node("a", "4")) == {PODS: 4}
    assert demands.capacity(_node("b", None)) == {PODS: 10}     # not reported: not limited
    assert demands.cap({PODS: Fraction(50), "cpu": Fraction(1)}) == {PODS: 10, "cpu": 1}
    none = Demands([_node("b", None)], [("ns", NodeNeeds())], [], {}, most_pods=10)
    assert none.names() == [] and none.takes("ns", NodeNeeds()) == {}


def test_host_ports_are_taken_once_per_node():
    web = NodeNeeds(host_ports=(("TCP", 80),))
    demands = Demands([_node("a", None)], [("ns", web)], [], {}, most_pods=1)
    assert demands.names() == ["hostport/TCP/80"]
    assert demands.takes("ns", web) == {"hostport/TCP/80": 1}
    assert demands.takes("ns", NodeNeeds(host_ports=(("UDP", 80),))) == {}  # not in play: no pod set asks it
    assert demands.capacity(_node("a", None)) == {"hostport/TCP/80": 1}


def test_anti_affinity_on_the_hostname_is_taken_by_carriers_and_by_the_pods_it_matches():
    term = PodAffinityTerm(LabelSelector((("app", "web"),)), (), None, HOSTNAME_LABEL)
    zone = PodAffinityTerm(LabelSelector((("app", "web"),)), (), None, "topology.kubernetes.io/zone")
    web = NodeNeeds(anti_affinity=(term, zone), labels=(("app", "web"),))
    demands = Demands([_node("a", None)], [("ns", web)], [], {}, most_pods=1)
    assert demands.names() == ["anti-affinity/0"]              # the zone term is not honoured
    assert demands.takes("ns", web) == {"anti-affinity/0": 1}
    assert demands.takes("ns", NodeNeeds(labels=(("app", "web"),))) == {"anti-affinity/0": 1}  # matched
    assert demands.takes("other", NodeNeeds(labels=(("app", "web"),))) == {}   # another namespace
    assert demands.takes("ns", NodeNeeds(labels=(("app", "db"),))) == {}


def test_a_running_pods_term_counts_only_if_it_keeps_a_pending_pod_away():
    guard = NodeNeeds(anti_affinity=(PodAffinityTerm(LabelSelector(match_expressions=(
        Requirement("app", "In", ("web",)),)), (), LabelSelector(), HOSTNAME_LABEL),))
    web = NodeNeeds(labels=(("app", "web"),))
    demands = Demands([_node("a", None)], [("ns", web)], [("a", "kube-system", guard)], {}, most_pods=1)
    assert demands.takes("ns", web) == {"anti-affinity/0": 1}  # empty namespaceSelector: every namespace
    assert demands.takes("kube-system", guard) == {"anti-affinity/0": 1}
    unrelated = Demands([_node("a", None)], [("ns", NodeNeeds(labels=(("app", "db"),)))], [("a", "ns", guard)], {}, 1)
    assert unrelated.names() == []


def test_pod_affinity_on_the_hostname_asks_for_nodes_where_a_matching_pod_runs():
    term = PodAffinityTerm(LabelSelector((("app", "cache"),)), (), None, HOSTNAME_LABEL)
    web = NodeNeeds(affinity=(term,), labels=(("app", "web"),))
    cache = NodeNeeds(labels=(("app", "cache"),))
    demands = Demands([_node("a", None), _node("b", None)], [("ns", web)], [("b", "ns", cache)], {}, 1)
    assert demands.label_keys() == ["pod-affinity/0"]
    assert demands.labels("a") == {} and demands.labels("b") == {"pod-affinity/0": "yes"}
    assert demands.selector("ns", web) == (("pod-affinity/0", "yes"),)
    assert demands.selector("ns", NodeNeeds()) == ()
    # no pod matches yet: a pod that matches its own term goes anywhere (Kubernetes' first pod),
    # one that does not goes nowhere (no node carries the label)
    alone = Demands([_node("a", None)], [("ns", web)], [], {}, 1)
    assert alone.selector("ns", web) == (("pod-affinity/0", "yes"),) and alone.labels("a") == {}
    selfish = NodeNeeds(affinity=(term,), labels=(("app", "cache"),))
    assert Demands([_node("a", None)], [("ns", selfish)], [], {}, 1).selector("ns", selfish) == ()
