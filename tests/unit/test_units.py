"""Resource units per quota tree: huge or odd quantities never hang a cycle, never distort
another tree's quotas, and round only in the safe direction, with a notice."""

import json
import subprocess
import sys
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from clueue.engine import Config, Document, SnapshotError, build_snapshot
from clueue.engine.compiler import compile_facts, resource_units
from clueue.engine.facts import render_facts
from clueue.engine.memo import Memo
from clueue.engine.workloads import build_workloads
from tests.builders import cluster_queue, flatten, flavor, local_queue, namespace, pod, quota, run, states, workload


def reason(plan, name, code):
    return next(r for r in plan.workload(name).reasons if r.code == code)

ROOT = Path(__file__).resolve().parents[2]


def snapshot(*objs):
    return build_snapshot([Document(f"test#{i + 1}", o) for i, o in enumerate(flatten(objs))])


def two_trees(big, *, big_request="1"):
    """Tree ``big`` (a ClusterQueue of its own) with a cpu quota of ``big``, and tree ``small``
    with 4 cpu, each with its workloads."""
    return [flavor("od"), namespace("a"), namespace("b"),
            cluster_queue("big", {"od": {"cpu": big}}), local_queue("big", ns="a"),
            cluster_queue("small", {"od": {"cpu": 4}}), local_queue("small", ns="b"),
            workload("in-big", ns="a", cpu=big_request),
            workload("w1", ns="b", cpu="2", minute=1), workload("w2", ns="b", cpu="2", minute=2),
            workload("w3", ns="b", cpu="1", minute=3)]


def test_a_huge_quota_in_one_tree_leaves_the_other_trees_quota_and_plan_unchanged():
    plan = run(two_trees("1e12"))
    assert {k: v for k, v in states(plan).items() if k.startswith("b/")} == \
        {"b/w1": "admitted", "b/w2": "admitted", "b/w3": "pending"}
    facts = render_facts(compile_facts(snapshot(two_trees("1e12")), build_workloads(
        snapshot(two_trees("1e12")), Config()).workloads).lines)
    assert 'quota(cq("small"),"od","cpu",4).' in facts
    assert 'tree_unit(cq("small"),"cpu","1").' in facts
    assert not any("small" in n for n in plan.notices)


def test_a_huge_quota_beside_small_ones_in_a_cohort_counts_as_what_is_asked():
    # One cohort: a ClusterQueue with 1e12 cpu that lends none of it, and one with 4 cpu. A unit
    # coarse enough for 1e12 would round the small quota to 0 and admit nothing there.
    objs = [flavor("od"), cluster_queue("big", {"od": {"cpu": {"nominalQuota": "1e12", "lendingLimit": 0}}},
                                        cohort="eng"),
            cluster_queue("small", {"od": {"cpu": 4}}, cohort="eng"), local_queue("small"),
            [workload(f"w{i}", cpu="1", minute=i) for i in range(5)]]
    plan = run(objs)
    assert sorted(states(plan).values()) == ["admitted"] * 4 + ["pending"]
    [notice] = [n for n in plan.notices if "cohort eng" in n]
    assert "above what its workloads ask together (5)" in notice
    assert reason(plan, "default/w4", "InsufficientQuota").details["short"] == "1"


def test_a_unit_that_rounds_says_so_and_rounds_requests_up_and_quotas_down():
    # What is asked fits the quota, but 1.5e9 cpu beside 1m is beyond the solver's integers at
    # the finest unit that counts both (1m): no unit counts both exactly.
    objs = [flavor("od"), cluster_queue("big", {"od": {"cpu": "2e9"}}), local_queue("big"),
            workload("huge", cpu="1500000000"), workload("tiny", cpu="1m", minute=1)]
    plan = run(objs)
    [notice] = [n for n in plan.notices if "ClusterQueue big" in n and "counted in units" in n]
    assert "rounded down" in notice
    assert states(plan) == {"default/huge": "admitted", "default/tiny": "admitted"}
    snap = snapshot(objs)
    built = build_workloads(snap, Config()).workloads
    units = resource_units(snap, built)
    unit = units.of_queue("big")["cpu"]
    assert unit > Fraction(1, 1000)
    facts = render_facts(compile_facts(snap, built, units).lines)
    [quota_fact] = [line for line in facts.splitlines() if line.startswith('quota(cq("big")')]
    assert int(quota_fact.rstrip(").").rsplit(",", 1)[1]) * unit <= 2 * 10**9
    [request] = [line for line in facts.splitlines() if line.startswith('pod_request("default/tiny"')]
    assert int(request.rstrip(").").rsplit(",", 1)[1]) * unit >= Fraction(1, 1000)


def test_every_tree_stays_within_the_solvers_integers_after_rounding_up():
    # 3000 pods of 1500m beside a quota of 2e9 cpu: the exact total is far beyond 2**30, and
    # rounding each request up adds to it; the tree's amounts must still add up below 2**30.
    objs = [flavor("od"), cluster_queue("cq", {"od": {"cpu": "2e9"}}), local_queue("cq"),
            workload("w", cpu="1500m", count=3000)]
    snap = snapshot(objs)
    built = build_workloads(snap, Config()).workloads
    units = resource_units(snap, built)
    lines = compile_facts(snap, built, units).lines
    quota_total = sum(int(f.rstrip(").").rsplit(",", 1)[1]) for f in lines["quota"])
    asked = int(lines["pod_request"][0].rstrip(").").rsplit(",", 1)[1]) * 3000
    assert quota_total + asked < 2**30
    assert quota_total * units.of_queue("cq")["cpu"] <= Fraction(2 * 10**9)


CHILD = """
import json, sys
from tests.builders import *
where, value = sys.argv[1], sys.argv[2]
plan = run(flavor("od"), namespace("a"), namespace("b"), namespace("c"),
           cluster_queue("team-a", {"od": {"cpu": quota(8, borrowing=4)}}, cohort="eng"), local_queue("team-a", ns="a"),
           cluster_queue("team-b", {"od": {"cpu": quota(8, lending=2)}}, cohort="eng"), local_queue("team-b", ns="b"),
           cluster_queue("research", {"od": {"cpu": value if where == "quota" else 16}}), local_queue("research", ns="c"),
           pod("p-a", ns="a", cpu="4"), pod("p-b", ns="b", cpu=value if where == "request" else "4"),
           pod("p-c", ns="c", cpu="1", minute=1))
print(json.dumps({"states": {w.name: w.state for w in plan.workloads}, "notices": list(plan.notices),
                  "codes": {w.name: [r.code for r in w.reasons] for w in plan.workloads}}))
"""


@pytest.mark.parametrize("where,value", [("quota", "1e18"), ("quota", "9E"), ("request", "1e18"), ("request", "9E")])
def test_huge_quantities_within_kubernetes_bounds_do_not_hang_the_cycle(where, value):
    # A quota or request near 2^63 made the bits of a cohort's draw (capacity.lp) overflow
    # clingo's integers, and grounding never ended.
    done = subprocess.run([sys.executable, "-c", CHILD, where, value], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["states"]["c/pod-p-c"] == "admitted"  # in tree research
    if where == "quota":  # in tree research: the cohort eng counts as before
        assert plan["states"]["a/pod-p-a"] == plan["states"]["b/pod-p-b"] == "admitted"
        assert all("research" in n for n in plan["notices"])
    else:  # in cohort eng: it never fits, and is left out of the solve, so the rest of eng counts exactly
        assert plan["states"]["b/pod-p-b"] == "inadmissible" and plan["codes"]["b/pod-p-b"] == ["ExceedsQuotaTree"]
        assert plan["states"]["a/pod-p-a"] == "admitted" and plan["notices"] == []


@pytest.mark.parametrize("value", ["8Ei", "1e400", "1e999999999", "0.1n"])
def test_a_quota_beyond_kubernetes_bounds_is_an_error_naming_file_object_and_field(value):
    with pytest.raises(SnapshotError) as e:
        snapshot(flavor("od"), cluster_queue("big", {"od": {"cpu": value}}))
    assert e.value.source == "test#2" and e.value.obj == "ClusterQueue big"
    assert e.value.field == "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
    assert ("2^63-1" in e.value.detail) or ("finer than 1n" in e.value.detail)


def test_a_request_beyond_kubernetes_bounds_is_an_error_naming_the_pod_and_field():
    objs = [flavor("od"), cluster_queue("cq", {"od": {"cpu": 4}}), local_queue("cq"), pod("p", cpu="8Ei")]
    with pytest.raises(SnapshotError) as e:
        build_workloads(snapshot(objs), Config())
    assert "Pod" in e.value.obj and "p" in e.value.obj
    assert e.value.field.endswith("resources.requests.cpu") and "2^63-1" in e.value.detail


def test_an_infinite_quota_from_yaml_is_named_as_such():
    body = yaml.safe_load("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n"
                          "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: od\n"
                          "      resources: [{name: cpu, nominalQuota: .inf}]\n")
    with pytest.raises(SnapshotError, match="infinite and NaN values are not numbers Kubernetes accepts"):
        build_snapshot([Document("q.yaml#1", body)])


def test_a_workload_whose_queue_is_in_no_tree_gets_units_of_its_own():
    plan = run(two_trees(4), workload("lost", ns="b", queue="absent", cpu="9E"))
    assert plan.workload("b/lost").state == "inadmissible"
    assert plan.workload("b/w1").state == "admitted"
    assert not plan.notices


def test_amounts_in_reasons_are_read_back_in_their_trees_unit():
    objs = [flavor("od"), namespace("a"), namespace("b"),
            cluster_queue("a", {"od": {"cpu": 4, "memory": "4Gi"}}), local_queue("a", ns="a"),
            cluster_queue("b", {"od": {"cpu": 4, "memory": "1Gi"}}), local_queue("b", ns="b"),
            pod("x", ns="a", memory="2Gi"), pod("y", ns="a", memory="2Gi", minute=1),
            pod("z", ns="a", memory="2Gi", minute=2), pod("u", ns="b", memory="512Mi")]
    plan = run(objs)
    [short] = [r for r in plan.workload("a/pod-z").reasons if r.code == "InsufficientQuota" and
               r.details["resource"] == "memory"]
    assert (short.details["need"], short.details["unusedNominal"], short.details["short"]) == ("2Gi", "0", "2Gi")


def test_a_new_request_in_one_tree_keeps_the_facts_kept_for_the_other_trees(monkeypatch):
    from clueue.engine import compiler
    derived = []
    real = compiler._own_facts
    monkeypatch.setattr(compiler, "_own_facts", lambda units, caps, w: derived.append(w.key) or real(units, caps, w))
    before = snapshot(two_trees(16))
    half = snapshot(workload("half", ns="a", cpu="500m")).workloads
    after = replace(before, workloads={**before.workloads, **half})
    memo = Memo()
    for snap in (before, after):
        memo.start(snap.configuration())
        derived.clear()
        compile_facts(snap, build_workloads(snap, Config(), memo).workloads, memo=memo)
    # The unit of tree big halved, so its workloads' facts are derived anew; tree small's are kept.
    assert sorted(derived) == ["a/half", "a/in-big"]


def test_a_workload_asking_beyond_its_tree_and_the_solvers_integers_is_held_and_the_rest_decided():
    # 2**31-1 pods of 1m cpu: 2.1 million cpu beside a quota of 8. Left in the solve it would
    # make the tree's unit coarse enough to round the quota to nothing, or overflow clingo.
    objs = [flavor("od"), cluster_queue("cq", {"od": {"cpu": 8}}), local_queue("cq"),
            workload("huge", cpu="1m", count=2**31 - 1), workload("ok", cpu="1", minute=1)]
    plan = run(objs)
    assert states(plan) == {"default/huge": "inadmissible", "default/ok": "admitted"}
    assert [r.details for r in plan.workload("default/huge").reasons] == [
        {"clusterQueue": "cq", "resource": "cpu", "need": "2147483647m", "quota": "8"}]
    assert not plan.notices


def test_no_quota_is_said_to_count_as_the_asks_when_none_is_above_them():
    objs = [flavor("od"), cluster_queue("big", {"od": {"cpu": "1e9"}}), local_queue("big"),
            workload("huge", cpu="1500000000"), workload("tiny", cpu="1m", minute=1)]
    notices = run(objs).notices
    assert any("counted in units" in n for n in notices)
    assert not any("count as that much" in n for n in notices)
