"""The upper bound and the gap, on cases checked by hand."""

from __future__ import annotations

from fractions import Fraction

import pytest

from clueue.bench.bound import gap, subset_sum_max, upper_bound
from clueue.bench.greedy import greedy_admit
from clueue.bench.scenarios import generate
from clueue.engine import Document, build_snapshot
from clueue.engine.workloads import build_workloads
from tests.builders import cluster_queue, flatten, flavor, local_queue, quota, workload

F = Fraction


def bound(*objs):
    snap = build_snapshot([Document(f"t#{i}", o) for i, o in enumerate(flatten(objs))])
    return upper_bound(snap, build_workloads(snap).workloads)


@pytest.mark.parametrize("sizes,cap,best", [
    ([4, 6, 6], 10, 10),
    ([3, 7], 9, 7),
    ([5, 5, 5], 12, 10),
    ([], 10, 0),
    ([11], 10, 0),
    ([1, 2], 10, 3),
    ([F(1, 2), F(3, 2), 2], F(5, 2), F(5, 2)),
])
def test_subset_sum_max(sizes, cap, best):
    assert subset_sum_max([F(s) for s in sizes], F(cap)) == best


def test_pooled_cohort_bound():
    objs = [flavor("f"), local_queue("a"), local_queue("b", name="b"),
            cluster_queue("a", {"f": {"cpu": 5}}, cohort="c"), cluster_queue("b", {"f": {"cpu": 5}}, cohort="c"),
            workload("a1", cpu=4), workload("a2", cpu=4), workload("b1", queue="b", cpu=4)]
    b = bound(*objs)
    assert b.resources == {"cpu": 8}  # two 4s fit the cohort's 10, three do not
    assert b.demand == {"cpu": 12} and b.capacity == {"cpu": 10}


def test_per_queue_limits_tighten_the_bound():
    b = bound(flavor("f"), local_queue("a"),
              cluster_queue("a", {"f": {"cpu": quota(5, borrowing=0)}}, cohort="c"),
              cluster_queue("z", {"f": {"cpu": 5}}, cohort="c"),
              workload("a1", cpu=3), workload("a2", cpu=3))
    assert b.resources == {"cpu": 3}  # a may not borrow: only one 3 fits its 5


def test_held_usage_and_flavors_pool():
    b = bound(flavor("x"), flavor("y"), local_queue("cq"), cluster_queue("cq", {"x": {"cpu": 4}, "y": {"cpu": 6}}),
              workload("running", cpu=3, admitted_in=("cq", "x")), workload("w1", cpu=4), workload("w2", cpu=4))
    assert b.resources == {"cpu": 4}  # 10 - 3 = 7 free: one 4 fits
    assert b.capacity == {"cpu": 7}


def test_workloads_too_large_for_their_queue_do_not_count():
    b = bound(flavor("f"), local_queue("cq"), cluster_queue("cq", {"f": {"cpu": 4}}), workload("huge", cpu=9))
    assert b.resources == {"cpu": 0} and b.demand == {"cpu": 0}


def test_gap():
    assert gap(F(98), F(100)) == pytest.approx(0.02)
    assert gap(0, 0) == 0.0
    assert gap(10, 10) == 0.0


@pytest.mark.parametrize("name", ["baseline", "flavors", "gangs", "fragmentation"])
def test_greedy_never_exceeds_the_bound(name):
    snap = generate(name, seed=1, scale=0.3).snapshot()
    built = build_workloads(snap).workloads
    b = upper_bound(snap, built)
    by_key = {w.key: w for w in built}
    g = greedy_admit(snap, built)
    for r, limit in b.resources.items():
        used = sum((ps.requests.get(r, 0) * ps.count for k in g.admitted for ps in by_key[k].pod_sets), F(0))
        assert used <= limit
