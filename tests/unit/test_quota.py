"""The quota notions' one home (engine/quota.py): the holding ClusterQueue, nominal quota per
node and per tree, the trees, and the one rule for cohort cycles."""

from __future__ import annotations

import doctest
from fractions import Fraction

import pytest

from clueue.engine import Document, SnapshotError, build_snapshot, quota
from clueue.engine.quota import by_resource, cohort_cycles, holding_queue, nominal, quota_trees, tree_nominal
from tests.builders import cluster_queue, cohort, flatten, flavor, local_queue, run, workload


def snapshot(*objs, lenient: bool = False):
    return build_snapshot([Document(f"t#{i}", o) for i, o in enumerate(flatten(objs))], lenient=lenient)


def test_the_examples_hold() -> None:
    assert doctest.testmod(quota).failed == 0


def test_a_workload_holds_quota_in_its_admissions_queue_else_in_its_local_queues() -> None:
    queues = {"ns/lq": "cq"}
    assert holding_queue("", "ns", "lq", queues) == "cq"
    assert holding_queue("elsewhere", "ns", "lq", queues) == "elsewhere"  # admitted before the LocalQueue moved
    assert holding_queue("", "ns", "gone", queues) == ""


def test_nominal_quota_per_node_and_per_tree() -> None:
    snap = snapshot(flavor("a"), flavor("b"), cohort("root"), cohort("mid", parent="root", flavors={"a": {"cpu": 2}}),
                    cluster_queue("x", {"a": {"cpu": 4, "memory": "1Gi"}, "b": {"cpu": 1}}, cohort="mid"),
                    cluster_queue("y", {"a": {"cpu": 3}}, cohort="root"),
                    cluster_queue("alone", {"a": {"cpu": 5}}))
    x = snap.cluster_queues["x"]
    assert nominal(x.resource_groups) == {("a", "cpu"): 4, ("a", "memory"): 2**30, ("b", "cpu"): 1}
    tree_of, quotas, _ = tree_nominal(snap)
    assert tree_of == {"alone": "cq/alone", "x": "cohort/root", "y": "cohort/root"}
    assert quotas["cohort/root"][("a", "cpu")] == 4 + 3 + 2  # the cohorts' own quota counts too
    assert by_resource(quotas["cohort/root"]) == {"cpu": Fraction(10), "memory": Fraction(2**30)}
    assert quotas["cq/alone"] == {("a", "cpu"): 5}


def test_cohorts_in_or_under_a_cycle_and_their_queues_are_named_with_the_cycle() -> None:
    snap = snapshot(cohort("a", parent="b"), cohort("b", parent="a"), cohort("under", parent="a"), cohort("fine"),
                    cluster_queue("in", {}, cohort="under"), cluster_queue("out", {}, cohort="fine"))
    found = {(kind, name): str(e.detail) for kind, name, e in cohort_cycles(snap.cohorts, snap.cluster_queues)}
    assert found == {("Cohort", "a"): "cohort parents form a cycle: a -> b -> a",
                     ("Cohort", "b"): "cohort parents form a cycle: a -> b -> a",
                     ("Cohort", "under"): "cohort parents form a cycle: a -> b -> a",
                     ("ClusterQueue", "in"): "its cohort under is in or under a cycle of cohort parents: a -> b -> a"}
    # The walk to a root ends where the cycle turns back: the trees of such a snapshot can be told.
    tree_of, _ = quota_trees(snap)
    assert tree_of["out"] == "cohort/fine" and tree_of["in"].startswith("cohort/")


def test_offline_a_cycle_is_refused_in_the_words_a_live_snapshot_rejects_it_with() -> None:
    # x hangs under the cycle y -> z -> y: offline the plan names x and the cycle itself (not the
    # path from x into it), as the live snapshot's rejection of x does.
    objs = [flavor("f"), cohort("x", parent="y"), cohort("y", parent="z"), cohort("z", parent="y"),
            cluster_queue("cq", {"f": {"cpu": 1}}, cohort="x"), local_queue("cq"), workload("w")]
    with pytest.raises(SnapshotError) as err:
        run(*objs)
    live = {(r.kind, r.name): r for r in snapshot(*objs, lenient=True).rejected}
    assert (err.value.obj, err.value.field) == ("Cohort x", "spec.parentName")
    assert err.value.detail == live[("Cohort", "x")].message == "cohort parents form a cycle: y -> z -> y"
