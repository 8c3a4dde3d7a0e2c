"""The greedy reference on small cases checked by hand."""

from __future__ import annotations

from clueue.bench.greedy import compare_in_rank_order, greedy_admit
from clueue.engine import Document, build_snapshot
from clueue.engine.workloads import build_workloads
from tests.builders import cluster_queue, cohort, flatten, flavor, local_queue, quota, workload


def greedy(*objs):
    snap = build_snapshot([Document(f"t#{i}", o) for i, o in enumerate(flatten(objs))])
    return greedy_admit(snap, build_workloads(snap).workloads)


def admitted(result):
    return sorted(k.split("/")[1] for k in result.admitted)


def test_higher_priority_then_older_first():
    r = greedy(flavor("f"), cluster_queue("cq", {"f": {"cpu": 2}}), local_queue("cq"),
               workload("old-low", cpu=2, priority=0, minute=0),
               workload("new-high", cpu=2, priority=10, minute=5),
               workload("b-tie", cpu=2, priority=10, minute=5))
    assert r.ranked == ("default/b-tie", "default/new-high", "default/old-low")
    assert admitted(r) == ["b-tie"]
    assert r.left_out == {"default/new-high": "NoFit", "default/old-low": "NoFit"}


def test_first_flavor_that_fits_in_the_queues_order():
    r = greedy(flavor("x"), flavor("y"), cluster_queue("cq", {"x": {"cpu": 2}, "y": {"cpu": 4}}), local_queue("cq"),
               workload("w1", cpu=2, minute=0), workload("w2", cpu=2, minute=1), workload("w3", cpu=3, minute=2))
    assert r.admitted["default/w1"] == {("main", "cpu"): "x"}
    assert r.admitted["default/w2"] == {("main", "cpu"): "y"}
    assert "default/w3" not in r.admitted  # y has 2 left, x none


def test_borrowing_within_the_cohort_up_to_the_borrowing_limit():
    base = [flavor("f"), local_queue("a"), local_queue("b", name="b")]
    r = greedy(*base, cluster_queue("a", {"f": {"cpu": 2}}, cohort="c"), cluster_queue("b", {"f": {"cpu": 4}}, cohort="c"),
               workload("big", cpu=5))
    assert admitted(r) == ["big"]  # 5 <= 2 + 4 in the cohort
    r = greedy(*base, cluster_queue("a", {"f": {"cpu": quota(2, borrowing=2)}}, cohort="c"),
               cluster_queue("b", {"f": {"cpu": 4}}, cohort="c"), workload("big", cpu=5), workload("four", cpu=4, minute=1))
    assert admitted(r) == ["four"]  # a may use at most 2 + 2


def test_lending_limit_keeps_the_rest_of_a_lenders_quota():
    r = greedy(flavor("f"), local_queue("a"), cluster_queue("a", {"f": {"cpu": 2}}, cohort="c"),
               cluster_queue("b", {"f": {"cpu": quota(4, lending=1)}}, cohort="c"),
               workload("four", cpu=4), workload("three", cpu=3, minute=1))
    assert admitted(r) == ["three"]  # a gets its 2 plus the 1 that b lends


def test_hierarchical_cohort_limits_apply_on_the_way_up():
    r = greedy(flavor("f"), local_queue("a"),
               cohort("root"), cohort("team", parent="root", flavors={"f": {"cpu": quota(0, borrowing=1)}}),
               cluster_queue("a", {"f": {"cpu": 2}}, cohort="team"), cluster_queue("z", {"f": {"cpu": 10}}, cohort="root"),
               workload("w1", cpu=3), workload("w2", cpu=1, minute=1))
    assert admitted(r) == ["w1"]  # the team may use its 2 plus 1 borrowed


def test_strict_fifo_blocks_the_queue_best_effort_does_not():
    def run(strategy):
        return greedy(flavor("f"), local_queue("cq"), cluster_queue("cq", {"f": {"cpu": 4}}, strategy=strategy),
                      workload("w1", cpu=3, minute=0), workload("w2", cpu=2, minute=1), workload("w3", cpu=1, minute=2))
    assert admitted(run("BestEffortFIFO")) == ["w1", "w3"]
    strict = run("StrictFIFO")
    assert admitted(strict) == ["w1"]
    assert strict.left_out["default/w3"] == "StrictFIFOBlocked"


def test_pod_sets_are_placed_one_after_another():
    sets = [{"name": n, "count": 1, "template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}} for n, cpu in (("a", 3), ("b", 2))]
    r = greedy(flavor("x"), flavor("y"), local_queue("cq"), cluster_queue("cq", {"x": {"cpu": 4}, "y": {"cpu": 4}}),
               workload("gang", pod_sets=sets))
    assert r.admitted["default/gang"] == {("a", "cpu"): "x", ("b", "cpu"): "y"}


def test_try_next_flavor_prefers_a_flavor_without_borrowing():
    def run(when):
        return greedy(flavor("x"), flavor("y"), local_queue("a"),
                      cluster_queue("a", {"x": {"cpu": 1}, "y": {"cpu": 4}}, cohort="c", when_can_borrow=when),
                      cluster_queue("b", {"x": {"cpu": 8}, "y": {"cpu": 0}}, cohort="c"), workload("w", cpu=2))
    assert run("Borrow").admitted["default/w"] == {("main", "cpu"): "x"}
    assert run("TryNextFlavor").admitted["default/w"] == {("main", "cpu"): "y"}


def test_already_admitted_workloads_hold_their_quota():
    r = greedy(flavor("f"), local_queue("cq"), cluster_queue("cq", {"f": {"cpu": 4}}),
               workload("running", cpu=3, admitted_in=("cq", "f")), workload("w", cpu=2))
    assert admitted(r) == [] and r.ranked == ("default/w",)


def test_ineligible_workloads_are_not_candidates():
    r = greedy(flavor("f"), local_queue("cq"), cluster_queue("cq", {"f": {"cpu": 4}}),
               workload("lost", queue="missing"), workload("gpu", pod_sets=[{"name": "main", "count": 1, "template": {
                   "spec": {"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": 1}}}]}}}]))
    assert r.ranked == ()
    assert r.excluded == {"default/lost": "LocalQueueNotFound", "default/gpu": "ResourceNotCovered"}


def test_compare_in_rank_order():
    ranked = ["a", "b", "c", "d"]
    assert compare_in_rank_order(ranked, {"a", "b"}, {"a", "b"}).verdict == "equal"
    better = compare_in_rank_order(ranked, {"a", "b"}, {"a", "c", "d"})
    assert (better.verdict, better.first_difference, better.position) == ("better", "b", 2)
    assert compare_in_rank_order(ranked, {"c", "d"}, {"a"}).verdict == "worse"
