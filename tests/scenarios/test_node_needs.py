"""What a pod needs of a node besides free resources (docs/placement.md, issue 22): required node
affinity with every operator, the node's pods limit, host ports, pod anti-affinity on the
hostname; gated pods of a workload admitted before get nodes first; a workload left out because
its pods do not fit on the nodes says so (NodesUnfit), not NoCombinedFit or a quota reason."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from clueue.engine import SnapshotError
from tests.builders import cluster_queue, codes, flavor, group, local_queue, pod, run, states, workload
from tests.scenarios.test_placement import HOST, _pinned, _queue, bound, node


def _affine(p: dict[str, Any], *terms: list[dict[str, Any]], fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """``p`` with a required node affinity of ``terms`` (each a list of matchExpressions)."""
    selector_terms = [{"matchExpressions": t} for t in terms] + ([{"matchFields": fields}] if fields else [])
    p["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": selector_terms}}}
    return p


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


def _nodes() -> list[dict[str, Any]]:
    return [node("a", cpu="8", labels={"zone": "a", "gen": "3"}), node("b", cpu="8", labels={"zone": "b", "gen": "5"}),
            node("c", cpu="8", labels={"gen": "x"})]


@pytest.mark.parametrize("terms, expected", [
    ([[_expr("zone", "NotIn", "a")]], {"b", "c"}),            # NotIn: a node without the label passes
    ([[_expr("zone", "Exists")]], {"a", "b"}),
    ([[_expr("zone", "DoesNotExist")]], {"c"}),
    ([[_expr("gen", "Gt", "4")]], {"b"}),                     # c's "x" is no integer: never greater
    ([[_expr("gen", "Lt", "4")]], {"a"}),
    ([[_expr("zone", "Exists"), _expr("gen", "Gt", "3")]], {"b"}),       # expressions of a term: AND
    ([[_expr("zone", "In", "a")], [_expr("zone", "DoesNotExist")]], {"a", "c"}),  # terms: OR
])
def test_required_node_affinity_operators(terms, expected):
    pods = [_affine(pod(f"p{i}", cpu="6"), *terms) for i in range(3)]
    plan = run(_queue(), _nodes(), pods)
    pinned = {n for i in range(3) for n in _pinned(plan, f"default/pod-p{i}")}
    assert pinned == expected
    # one pod per node (6 of 8 cpu each): the others wait, told that the nodes they may use are full
    waiting = [i for i in range(3) if states(plan)[f"default/pod-p{i}"] == "pending"]
    assert len(waiting) == 3 - len(expected)
    for i in waiting:
        assert codes(plan, f"default/pod-p{i}") == ["NodesUnfit"]


def test_match_fields_names_the_node_and_node_selector_ands_with_affinity():
    p = _affine(pod("p", cpu="1"), fields=[_expr("metadata.name", "In", "b")])
    q = _affine(pod("q", cpu="1", node_selector={"zone": "a"}), [_expr("gen", "Exists")])
    r = _affine(pod("r", cpu="1", node_selector={"zone": "a"}), [_expr("gen", "Gt", "4")])
    plan = run(_queue(), _nodes(), p, q, r)
    assert _pinned(plan, "default/pod-p") == ["b"] and _pinned(plan, "default/pod-q") == ["a"]
    assert states(plan)["default/pod-r"] == "pending" and codes(plan, "default/pod-r") == ["NodesUnfit"]
    [reason] = plan.workload("default/pod-r").reasons
    assert "no schedulable node matches" in reason.message


def test_an_empty_term_selects_no_node():
    p = pod("p", cpu="1")
    p["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{}]}}}
    plan = run(_queue(), _nodes(), p)
    assert states(plan)["default/pod-p"] == "pending" and codes(plan, "default/pod-p") == ["NodesUnfit"]


@pytest.mark.parametrize("expr, field, words", [
    (_expr("gen", "Gt", "four"), "values", "exactly one integer"),
    (_expr("gen", "Lt", "1", "2"), "values", "exactly one integer"),
    (_expr("gen", "Near", "1"), "operator", "expected In, NotIn"),
    (_expr("gen", "In"), "values", "at least one value"),
    (_expr("gen", "Exists", "1"), "values", "takes no values"),
])
def test_invalid_node_affinity_names_pod_and_field(expr, field, words):
    with pytest.raises(SnapshotError) as e:
        run(_queue(), _nodes(), _affine(pod("p"), [expr]))
    text = str(e.value)
    assert "Pod p:" in text and "nodeSelectorTerms[0].matchExpressions[0]." + field in text and words in text


def test_invalid_match_fields_are_refused():
    with pytest.raises(SnapshotError, match=r"matchFields\[0\]\.key.*only metadata.name"):
        run(_queue(), _nodes(), _affine(pod("p"), fields=[_expr("metadata.labels", "In", "b")]))


def _small(name: str, pods: str, **kw: Any) -> dict[str, Any]:
    n = node(name, cpu="64", **kw)
    n["status"]["allocatable"]["pods"] = pods
    return n


def test_a_node_holds_no_more_pods_than_its_pods_allocatable():
    # 64 cpu would hold all six; pods: 4 minus the one running leaves 3 per node... on one of two nodes
    nodes = [_small("n1", "4"), _small("n2", "2"), bound("x", "n1", cpu="1")]
    plan = run(_queue(), nodes, group("g", 5, cpu="1"))
    assert Counter(_pinned(plan, "default/g")) == Counter({"n1": 3, "n2": 2})
    plan = run(_queue(), nodes, group("g", 6, cpu="1"))
    assert states(plan)["default/g"] == "pending"
    [reason] = plan.workload("default/g").reasons
    assert reason.code == "NodesUnfit" and reason.details["fit"] == 5 and reason.details["request"] == "1 pods"


def test_terminated_pods_do_not_count_against_the_pods_limit():
    done = bound("x", "n1", cpu="1")
    done["status"]["phase"] = "Failed"
    plan = run(_queue(), _small("n1", "1"), done, pod("p", cpu="1"))
    assert _pinned(plan, "default/pod-p") == ["n1"]


def _ported(p: dict[str, Any], port: int, protocol: str = "TCP") -> dict[str, Any]:
    p["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": port, "protocol": protocol}]
    return p


def test_pods_asking_one_host_port_never_share_a_node():
    nodes = [node(f"n{i}", cpu="64") for i in range(3)]
    plan = run(_queue(), nodes, [_ported(p, 8080) for p in group("g", 3, cpu="1")])
    assert sorted(_pinned(plan, "default/g")) == ["n0", "n1", "n2"]
    plan = run(_queue(), nodes, [_ported(p, 8080) for p in group("g", 4, cpu="1")])
    assert states(plan)["default/g"] == "pending" and codes(plan, "default/g") == ["NodesUnfit"]
    # a running pod holding the port keeps its node out; another protocol or port does not
    holder = _ported(bound("x", "n0", cpu="1"), 8080)
    plan = run(_queue(), nodes, holder, [_ported(p, 8080) for p in group("g", 2, cpu="1")],
               _ported(pod("udp", cpu="1"), 8080, "UDP"))
    assert sorted(_pinned(plan, "default/g")) == ["n1", "n2"] and _pinned(plan, "default/pod-udp") == ["n0"]


def _anti(p: dict[str, Any], labels: dict[str, str], key: str = HOST) -> dict[str, Any]:
    p["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": labels}, "topologyKey": key}]}}
    return p


def test_pod_anti_affinity_on_the_hostname_puts_one_pod_of_a_gang_per_node():
    nodes = [node(f"n{i}", cpu="64") for i in range(3)]
    gang = [_anti(p, {"app": "web"}) for p in group("g", 3, cpu="1", labels={"app": "web"})]
    plan = run(_queue(), nodes, gang)
    assert sorted(_pinned(plan, "default/g")) == ["n0", "n1", "n2"]
    # a running pod the term matches keeps its node out; so does one whose own term matches the gang
    plan = run(_queue(), nodes, bound("x", "n0", cpu="1", labels={"app": "web"}),
               [_anti(p, {"app": "web"}) for p in group("g", 2, cpu="1", labels={"app": "web"})])
    assert sorted(_pinned(plan, "default/g")) == ["n1", "n2"]
    guard = _anti(bound("y", "n1", cpu="1", labels={"app": "db"}), {"app": "web"})
    plan = run(_queue(), nodes, guard, group("h", 2, cpu="1", labels={"app": "web"}))
    assert "n1" not in _pinned(plan, "default/h") and states(plan)["default/h"] == "admitted"
    plan = run(_queue(), nodes[:2], gang)
    assert states(plan)["default/g"] == "pending" and codes(plan, "default/g") == ["NodesUnfit"]


def _admitted_group(objs: list[Any], nodes: list[dict[str, Any]], name: str, count: int, cpu: str
                    ) -> list[dict[str, Any]]:
    """Gated pods of group ``name`` and its Workload, admitted before (as an apply interrupted
    between the admission and the ungating leaves them): the admission a first cycle decides."""
    pods = group(name, count, cpu=cpu)
    [admit] = [a for a in run(objs, nodes, pods).actions if a.kind == "admit"]
    sets = [{"name": s["name"], "count": s["count"], "template": {"spec": {"containers": [
        {"name": "main", "image": "registry.example/app:1", "resources": {"requests": {"cpu": cpu}}}]}}}
        for s in admit.details["podSets"]]
    wl = workload(name, pod_sets=sets, admitted_in=("cq", "f"))
    wl["metadata"]["uid"] = f"u-{name}"
    for p in pods:
        p["metadata"]["annotations"]["kueue.x-k8s.io/workload-uid"] = f"u-{name}"
    return [wl, *pods]


def test_admitted_workload_with_gated_pods_gets_nodes_first():
    # admitted before this cycle (apply interrupted before the ungating): its gated pods are ungated
    # each with a node, on the capacity left, before the pending pod is placed
    objs = [flavor("f"), cluster_queue("cq", {"f": {"cpu": 100}}), local_queue("cq")]
    nodes = [node("n1", cpu="8"), node("n2", cpu="8")]
    admitted = _admitted_group(objs, nodes, "old", 2, "6")
    plan = run(objs, nodes, admitted, pod("new", cpu="6", minute=5))
    assert not [a for a in plan.actions if a.kind == "admit" and a.target == "default/old"]
    old = [a for a in plan.actions if a.kind == "ungate" and a.target.startswith("default/old-")]
    assert sorted(a.details["nodeSelector"][HOST] for a in old) == ["n1", "n2"]
    assert states(plan)["default/pod-new"] == "pending" and codes(plan, "default/pod-new") == ["NodesUnfit"]


def test_nodes_are_why_not_no_combined_fit_when_pod_sets_fit_alone_but_not_together():
    objs = [flavor("f"), cluster_queue("cq", {"f": {"cpu": 100}}), local_queue("cq")]
    sets = [{"name": n, "count": 1, "template": {"spec": {"containers": [
        {"name": "main", "image": "x", "resources": {"requests": {"cpu": "6"}}}]}}} for n in ("a", "b")]
    plan = run(objs, node("n1", cpu="8"), workload("w", pod_sets=sets))
    assert states(plan)["default/w"] == "pending"
    [reason] = plan.workload("default/w").reasons
    assert reason.code == "NodesUnfit" and reason.details["podSet"] == "b" and reason.details["fit"] == 0


def test_a_flavor_without_quota_does_not_hide_that_the_nodes_of_another_are_full():
    objs = [flavor("small", {"pool": "small"}), flavor("big", {"pool": "big"}),
            cluster_queue("cq", {"small": {"cpu": 10}, "big": {"cpu": 100}}), local_queue("cq"),
            workload("user", cpu="6", admitted_in=("cq", "small"))]  # small has 4 cpu of quota left
    nodes = [node("s", cpu="64", labels={"pool": "small"}), node("b", cpu="4", labels={"pool": "big"})]
    plan = run(objs, nodes, pod("p", cpu="8", minute=1))
    assert states(plan)["default/pod-p"] == "pending"
    found = {r.code: r for r in plan.workload("default/pod-p").reasons}
    assert "NodesUnfit" in found and found["NodesUnfit"].details["flavor"] == "big"
    assert found["InsufficientQuota"].details["flavor"] == "small"


def _affinity(p: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    p["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": labels}, "topologyKey": HOST}]}}
    return p


def test_pod_affinity_on_the_hostname_goes_where_a_matching_pod_runs():
    nodes = [node(f"n{i}", cpu="8") for i in range(3)]
    cache = bound("cache", "n2", cpu="1", labels={"app": "cache"})
    plan = run(_queue(), nodes, cache, [_affinity(p, {"app": "cache"}) for p in group("g", 2, cpu="2")])
    assert _pinned(plan, "default/g") == ["n2", "n2"]
    # n2 has 7 cpu free: three 3-cpu pods do not fit there, and no other node runs a cache
    plan = run(_queue(), nodes, cache, [_affinity(p, {"app": "cache"}) for p in group("g", 3, cpu="3")])
    assert states(plan)["default/g"] == "pending" and codes(plan, "default/g") == ["NodesUnfit"]
    # no pod matches: a pod that does not match its own term goes nowhere, one that does anywhere
    plan = run(_queue(), nodes, _affinity(pod("p", cpu="1"), {"app": "cache"}),
               _affinity(pod("q", cpu="1", labels={"app": "solo"}), {"app": "solo"}))
    assert codes(plan, "default/pod-p") == ["NodesUnfit"] and len(_pinned(plan, "default/pod-q")) == 1


def test_gated_pods_of_an_admitted_workload_that_fit_nowhere_stay_gated_and_say_why():
    objs = [flavor("f"), cluster_queue("cq", {"f": {"cpu": 100}}), local_queue("cq")]
    admitted = _admitted_group(objs, [node("n1", cpu="16")], "old", 2, "6")
    plan = run(objs, node("n1", cpu="8"), admitted)  # the node shrank since
    assert not [a for a in plan.actions if a.kind == "ungate"]  # never without a node
    entry = plan.workload("default/old")
    assert entry.state == "admitted" and [r.code for r in entry.reasons] == ["AlreadyAdmitted", "NodesUnfit"]
    assert entry.reasons[1].details["fit"] == 1 and entry.reasons[1].details["flavor"] == "f"
