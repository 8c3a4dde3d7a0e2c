"""Quota held beyond a quota tree's nominal quota: found per tree, flavor and resource, with its holders."""

from fractions import Fraction

from clueue.engine import Document, build_snapshot
from clueue.engine.overcommit import over_quota
from clueue.engine.workloads import build_workloads
from tests.builders import cluster_queue, cohort, flatten, flavor, local_queue, workload


def found(*objs):
    snapshot = build_snapshot([Document(f"t#{i}", o) for i, o in enumerate(flatten(objs))])
    return over_quota(snapshot, build_workloads(snapshot).workloads)


def test_two_admissions_into_a_full_flavor_are_named():
    (over,) = found(flavor("f"), cluster_queue("cq", {"f": {"cpu": 4}}), local_queue("cq"),
                    workload("a", cpu="4", admitted_in=("cq", "f")), workload("b", cpu="4", admitted_in=("cq", "f")),
                    workload("c", cpu="4"))
    assert (over.tree, over.flavor, over.resource, over.held, over.quota) == ("ClusterQueue cq", "f", "cpu", 8, 4)
    assert over.workloads == ("default/a", "default/b")
    assert over.message().startswith("ClusterQueue cq holds 8 cpu in flavor f, more than its quota of 4 "
                                     "(admitted: default/a, default/b)")


def test_borrowing_within_a_cohort_is_not_over_quota_but_beyond_the_cohort_is():
    base = [flavor("f"), cohort("co"), cluster_queue("x", {"f": {"cpu": 4}}, cohort="co"),
            cluster_queue("y", {"f": {"cpu": 4}}, cohort="co"), local_queue("x")]
    assert found(*base, workload("a", cpu="6", admitted_in=("x", "f"))) == ()
    (over,) = found(*base, workload("a", cpu="6", admitted_in=("x", "f")), workload("b", cpu="3", admitted_in=("y", "f")))
    assert (over.tree, over.held, over.quota) == ("cohort co", Fraction(9), Fraction(8))


def test_within_quota_is_nothing():
    assert found(flavor("f"), cluster_queue("cq", {"f": {"cpu": 4}}), local_queue("cq"),
                 workload("a", cpu="4", admitted_in=("cq", "f"))) == ()
