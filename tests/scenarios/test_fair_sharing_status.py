"""The queue status fair sharing writes (docs/queue-status.md, docs/fair-sharing.md), from one
cycle's plan: ClusterQueue and Cohort ``weightedShare`` as Kueue reports it, and admission fair
sharing's consumed usage per LocalQueue, sampled with its decay and read back by the next cycle
to order the LocalQueues of one ClusterQueue."""

from __future__ import annotations

from datetime import datetime, timezone
from fractions import Fraction
from typing import Any

from clueue.engine import Config, Document, Snapshot, build_snapshot, load_policy, run_cycle
from clueue.engine.admission_usage import admitted_requests, admitted_usage, consumed_updates, decayed, entry_penalty
from clueue.engine.config import FairSharing
from clueue.engine.facts import Node
from clueue.engine.fairsharing import MAX_WEIGHTED_SHARE, held_quota, status_shares, with_settings
from clueue.engine.queues import queue_statuses
from tests.builders import cluster_queue, flavor, local_queue, workload
from tests.scenarios.test_fair_sharing import b_borrows, cohort_ab, kueue_config

T0 = int(datetime(2026, 11, 21, 8, 0, tzinfo=timezone.utc).timestamp())
HALF_LIFE = 3600
SECTION = ("kind: Configuration\nadmissionFairSharing:\n  usageHalfLifeTime: 1h\n  usageSamplingInterval: 5m\n")


def snapshot_of(*objs: dict[str, Any], config: Config = Config()) -> Snapshot:
    return with_settings(build_snapshot([Document(f"test#{i + 1}", o) for i, o in enumerate(objs)]), config)


def stamp(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def afs_objects(x_cpu: str = "0", y_cpu: str = "0", x_at: int = 0, y_at: int = 0, section: bool = True
                ) -> list[dict[str, Any]]:
    """One ClusterQueue of 4 cpu under admission fair sharing, LocalQueues x and y with the
    consumed usage and lastUpdate given (0: no status)."""
    shared = cluster_queue("shared", {"f": {"cpu": 4}})
    shared["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    queues = []
    for name, cpu, at in (("x", x_cpu, x_at), ("y", y_cpu, y_at)):
        lq = local_queue("shared", name)
        if at:
            lq["status"] = {"fairSharing": {"weightedShare": 0, "admissionFairSharingStatus": {
                "consumedResources": {"cpu": cpu}, "lastUpdate": stamp(at)}}}
        queues.append(lq)
    return [flavor("f"), shared, *queues, *([kueue_config(SECTION)] if section else [])]


def afs_snapshot(**kw: Any) -> Snapshot:
    return snapshot_of(*afs_objects(**kw))


def test_weighted_share_is_kueues_parts_per_thousand_of_the_policys_share():
    # b borrows 6 of the 12 cpu the cohort lends: 0.5 -> 500; a holds its nominal quota: 0
    objs = [*cohort_ab(), *b_borrows("3", "3", "3")]
    snapshot = snapshot_of(*objs, config=Config(fair_sharing=FairSharing()))
    plan = run_cycle(snapshot, load_policy(()), Config(fair_sharing=FairSharing()))
    statuses = queue_statuses(snapshot, plan)
    shares = status_shares(snapshot, {n: held_quota(s.flavors_reservation) for n, s in statuses.cluster_queues.items()})
    assert shares[Node("cq", "b")] == 500 and shares[Node("cq", "a")] == 0 and shares[Node("cq", "c")] == 0
    assert shares[Node("cohort", "co")] == 0  # a root has no share
    # weight 0 while borrowing: the largest int64, as Kueue writes it
    zero = snapshot_of(*cohort_ab(b_weight="0"), *b_borrows("3", "3", "3"))
    assert status_shares(zero, {"b": {("f", "cpu"): 9}})[Node("cq", "b")] == MAX_WEIGHTED_SHARE


def test_consumed_usage_is_sampled_with_its_decay_and_orders_the_next_cycle():
    # x consumed 4 cpu an hour ago and its workload still holds 4; y consumed 6 and holds nothing,
    # so x's next workload ranks first. Sampled an hour later (one half-life): x stays at 4, y
    # halves to 3, and the next cycle, reading that status, ranks y's first.
    before = [*afs_objects(x_cpu="4", y_cpu="6", x_at=T0 - HALF_LIFE, y_at=T0 - HALF_LIFE),
              workload("x-old", queue="x", cpu="4", admitted_in=("shared", "f")),
              workload("from-x", queue="x", cpu="4", minute=1), workload("from-y", queue="y", cpu="4", minute=2)]
    snapshot = snapshot_of(*before)
    plan = run_cycle(snapshot, load_policy(()), Config(), now=T0)
    assert [w.name for w in sorted(plan.workloads, key=lambda w: w.rank or 99)][:2] == ["default/from-x", "default/from-y"]
    assert plan.decided_at == T0 and plan.wake_at == T0 + 300  # the next sample
    updates = consumed_updates(snapshot, admitted_usage(queue_statuses(snapshot, plan)), T0)
    assert {k: (u.resources, u.last_update) for k, u in updates.items()} == {
        "default/x": ({"cpu": 4}, T0), "default/y": ({"cpu": 3}, T0)}

    # the next cycle reads the written status back: y (3) now goes before x (4)
    after = [*afs_objects(x_cpu="4", y_cpu="3", x_at=T0, y_at=T0), *before[len(afs_objects()):]]
    replan = run_cycle(snapshot_of(*after), load_policy(()), Config(), now=T0 + 60)
    assert [w.name for w in sorted(replan.workloads, key=lambda w: w.rank or 99)][:2] == ["default/from-y", "default/from-x"]
    # within the interval nothing is sampled again
    assert consumed_updates(snapshot_of(*after), admitted_usage(queue_statuses(snapshot_of(*after), replan)),
                            T0 + 60) == {}


def test_a_queue_that_admits_is_sampled_at_once_with_the_entry_penalty():
    # sampled a minute ago: only y, which admits a 2-cpu workload now, is sampled again, with
    # its penalty (2 cpu times what a 5 min interval moves in a 1 h half-life) on top
    objs = [*afs_objects(x_cpu="1", y_cpu="1", x_at=T0 - 60, y_at=T0 - 60), workload("from-y", queue="y", cpu="2")]
    snapshot = snapshot_of(*objs)
    plan = run_cycle(snapshot, load_policy(()), Config(), now=T0)
    assert plan.workload("default/from-y").state == "admitted"
    assert admitted_requests(plan) == {"default/y": {"cpu": 2}}
    updates = consumed_updates(snapshot, admitted_usage(queue_statuses(snapshot, plan)), T0, admitted_requests(plan))
    afs = snapshot.kueue_settings.admission_fair_sharing
    assert afs is not None and set(updates) == {"default/y"}
    expected = decayed({"cpu": Fraction(1)}, {"cpu": Fraction(2)}, 60, HALF_LIFE)["cpu"] + \
        entry_penalty({"cpu": Fraction(2)}, afs)["cpu"]
    assert updates["default/y"].resources == {"cpu": expected} and updates["default/y"].last_update == T0
