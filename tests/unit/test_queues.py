"""Queue status as Kueue writes it, from a snapshot and its cycle's plan (engine/queues.py)."""

from __future__ import annotations

from clueue.engine import Config, Document, build_snapshot, load_policy, run_cycle
from clueue.engine.queues import pending_positions, queue_statuses
from tests.builders import cluster_queue, flatten, flavor, local_queue, pod, quota, workload


def _statuses(*objs):
    snapshot = build_snapshot([Document(f"test#{i}", o) for i, o in enumerate(flatten(objs))])
    plan = run_cycle(snapshot, load_policy(()), Config())
    return plan, queue_statuses(snapshot, plan)


def _usage(flavors):
    return {(f.name, r.name): (r.total, r.borrowed) for f in flavors for r in f.resources}


def test_counts_and_usage_sum_requests_times_counts_per_flavor():
    plan, st = _statuses(flavor("f"), cluster_queue("cq", {"f": {"cpu": 4, "memory": "8Gi"}}), local_queue("cq"),
                         workload("a", cpu="1500m", count=2, minute=1), workload("b", cpu="2", minute=2),
                         workload("c", cpu="2", minute=3))
    assert {w.name: w.state for w in plan.workloads} == {"default/a": "admitted", "default/b": "pending",
                                                         "default/c": "pending"}
    cq = st.cluster_queues["cq"]
    assert (cq.pending, cq.reserving, cq.admitted) == (2, 1, 1)
    assert _usage(cq.flavors_usage) == {("f", "cpu"): ("3", "0"), ("f", "memory"): ("0", "0")}
    assert cq.flavors_reservation == cq.flavors_usage
    assert (cq.active.status, cq.active.reason) == ("True", "Ready")
    lq = st.local_queues["default/main"]
    assert (lq.pending, lq.reserving, lq.admitted) == (2, 1, 1)
    assert _usage(lq.flavors_usage) == {("f", "cpu"): ("3", None), ("f", "memory"): ("0", None)}
    assert lq.to_dict()["flavorUsage"] == lq.to_dict()["flavorsUsage"]  # v1beta1's name and v1beta2's
    assert (lq.active.status, lq.active.reason) == ("True", "Ready")


def test_borrowed_is_what_exceeds_the_nominal_quota():
    _, st = _statuses(flavor("f"), cluster_queue("a", {"f": {"cpu": quota(2, borrowing=4)}}, cohort="co"),
                      cluster_queue("b", {"f": {"cpu": 4}}, cohort="co"), local_queue("a"),
                      workload("big", cpu="5"))
    assert _usage(st.cluster_queues["a"].flavors_usage) == {("f", "cpu"): ("5", "3")}
    assert _usage(st.cluster_queues["b"].flavors_usage) == {("f", "cpu"): ("0", "0")}


def test_positions_follow_rank_within_each_queue_from_zero():
    plan, st = _statuses(flavor("f"), cluster_queue("cq", {"f": {"cpu": 1}}), local_queue("cq"),
                         local_queue("cq", name="other"), workload("running", cpu="1", minute=0),
                         workload("w1", minute=1), workload("w2", queue="other", minute=2), workload("w3", minute=3))
    assert st.positions == pending_positions(plan)
    assert st.positions["default/w1"] == (0, 0)
    assert st.positions["default/w2"] == (1, 0)  # second in the ClusterQueue, first in its LocalQueue
    assert st.positions["default/w3"] == (2, 1)
    assert "default/running" not in st.positions
    assert (st.local_queues["default/main"].pending, st.local_queues["default/other"].pending) == (2, 1)


def test_a_stopped_cluster_queue_and_a_missing_flavor_make_it_inactive():
    stopped = cluster_queue("cq", {"f": {"cpu": 1}, "gone": {"cpu": 1}})
    stopped["spec"]["stopPolicy"] = "Hold"
    _, st = _statuses(flavor("f"), stopped, local_queue("cq"), pod("p"))
    active = st.cluster_queues["cq"].active
    assert (active.status, active.reason) == ("False", "Stopped")  # the first reason; the message names both
    assert "Hold" in active.message and "gone" in active.message
    lq = st.local_queues["default/main"].active
    assert (lq.status, lq.reason) == ("False", "ClusterQueueIsInactive")
    _, st = _statuses(cluster_queue("cq", {"gone": {"cpu": 1}}), local_queue("cq"))
    assert st.cluster_queues["cq"].active.reason == "FlavorNotFound"


def test_local_queue_reasons_and_a_stopped_one_has_no_pending_workloads():
    held = local_queue("cq", name="held")
    held["spec"]["stopPolicy"] = "Hold"
    plan, st = _statuses(flavor("f"), cluster_queue("cq", {"f": {"cpu": 1}}), held, local_queue("nowhere", name="lost"),
                         workload("w", queue="held"))
    assert (st.local_queues["default/held"].active.reason, st.local_queues["default/held"].pending) == ("Stopped", 0)
    assert st.local_queues["default/lost"].active.reason == "ClusterQueueDoesNotExist"
    assert st.cluster_queues["cq"].pending == 0 and "default/w" not in st.positions
    assert "default/w" in pending_positions(plan)  # without the snapshot, the queue's stop is unknown


def test_a_cluster_queue_without_a_cohort_borrows_nothing_even_over_committed():
    # two admissions recorded by hand hold 5 cpu of a 2-cpu queue: over-committed, not borrowing
    # (Kueue writes borrowed 0 for a ClusterQueue without a cohort); the excess is overcommit's
    _, st = _statuses(flavor("f"), cluster_queue("cq", {"f": {"cpu": 2}}), local_queue("cq"),
                      workload("a", cpu="3", admitted_in=("cq", "f")), workload("b", cpu="2", admitted_in=("cq", "f")))
    assert _usage(st.cluster_queues["cq"].flavors_usage) == {("f", "cpu"): ("5", "0")}
    assert _usage(st.cluster_queues["cq"].flavors_reservation) == {("f", "cpu"): ("5", "0")}


def test_a_deactivated_workload_is_not_pending_and_has_no_position():
    # kueuectl stop workload sets spec.active: false; Kueue takes it out of its queues
    stopped = workload("stopped", cpu="1", minute=1)
    stopped["spec"]["active"] = False
    plan, st = _statuses(flavor("f"), cluster_queue("cq", {"f": {"cpu": 1}}), local_queue("cq"),
                         workload("running", cpu="1", minute=0), stopped, workload("next", cpu="1", minute=2))
    assert plan.workload("default/stopped").state in ("pending", "inadmissible")
    assert "default/stopped" not in st.positions and st.positions["default/next"] == (0, 0)
    assert st.cluster_queues["cq"].pending == 1 and st.local_queues["default/main"].pending == 1
