"""Candidate selection under fair sharing and admission fair sharing: the plan with selection
equals the plan that solves every candidate (a user copy of ordering.lp turns selection off).

Under fair sharing the rank order puts the shares after admission first (fair_rank/4), so the
candidates solved must be a prefix of that order, not of the plain one; and the head of a
ClusterQueue that reclaims may preempt while it borrows, which makes it a possible preemptor
the cut must reach (prune.py)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from clueue.engine.config import FAIR_STRATEGIES, FairSharing
from tests.builders import cluster_queue, cohort, flavor, local_queue, quota, workload
from tests.unit.test_prune import comparable, pruned_and_unpruned


def fair_backlog(seed: int, hierarchy: bool = False) -> list[Any]:
    """Random weighted queues of two cohorts (with ``hierarchy``, the queues of each under two
    sub-cohorts), each holding admitted workloads, some beyond their nominal quota, and a
    backlog of a few shapes: enough that selection leaves most of it out."""
    rng = random.Random(seed)
    objs: list[Any] = [flavor("od"), flavor("spot")]
    if hierarchy:
        for c in range(2):
            objs += [cohort(f"co{c}"), cohort(f"co{c}-x", f"co{c}"), cohort(f"co{c}-y", f"co{c}")]
    for c in range(5):
        parent = f"co{c % 2}-{'xy'[c // 2 % 2]}" if hierarchy else f"co{c % 2}"
        preemption = rng.choice([None, {"withinClusterQueue": "LowerPriority"},
                                 {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
                                 {"reclaimWithinCohort": "LowerPriority"}])
        q = cluster_queue(f"cq{c}", {"od": {"cpu": quota(rng.randint(2, 6), rng.choice([None, 4]))},
                                     "spot": {"cpu": rng.randint(0, 3)}},
                          cohort=parent, strategy="StrictFIFO" if c == 4 else None, preemption=preemption)
        q["spec"]["fairSharing"] = {"weight": rng.choice(["0", "1", "1", "2", "4"])}
        objs += [q, local_queue(f"cq{c}", ns=f"ns{c}")]
        objs += [workload(f"run{i}", ns=f"ns{c}", cpu=rng.choice([1, 2]), priority=rng.choice([0, 1, 5]), minute=i,
                          admitted_in=(f"cq{c}", "od")) for i in range(rng.randint(0, 5))]
        for i in range(rng.randint(10, 30)):
            cpu, prio = rng.choice([(1, 1), (1, 1), (2, 5), (4, 9), (1, 0)])
            objs.append(workload(f"w{i}", ns=f"ns{c}", cpu=cpu, priority=prio, minute=rng.randint(0, 20)))
    return objs


@pytest.mark.parametrize("seed,hierarchy", [(seed, False) for seed in range(16)] + [(seed, True) for seed in range(8)])
def test_selection_under_fair_sharing_gives_the_plan_of_the_whole_backlog(seed, hierarchy, tmp_path):
    strategies = FAIR_STRATEGIES[seed % len(FAIR_STRATEGIES)]
    pruned, unpruned = pruned_and_unpruned([fair_backlog(seed, hierarchy)], tmp_path,
                                           fair_sharing=FairSharing(True, strategies))
    assert pruned.solver.pruned > 0 and unpruned.solver.pruned == 0
    assert comparable(pruned) == comparable(unpruned)


def afs_backlog(seed: int) -> list[Any]:
    """One ClusterQueue shared by three LocalQueues of different consumed usage and weights,
    under admission fair sharing, beside a fair-sharing cohort."""
    rng = random.Random(seed)
    shared = cluster_queue("shared", {"od": {"cpu": rng.randint(3, 8)}}, cohort="co",
                           preemption={"withinClusterQueue": "LowerPriority"})
    shared["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    objs: list[Any] = [flavor("od"), shared, cluster_queue("other", {"od": {"cpu": 4}}, cohort="co"),
                       local_queue("other", ns="o")]
    for name in ("x", "y", "z"):
        lq = local_queue("shared", name, ns="team")
        lq["status"] = {"fairSharing": {"admissionFairSharingStatus": {
            "consumedResources": {"cpu": str(rng.randint(0, 20))}}}}
        lq["spec"]["fairSharing"] = {"weight": rng.choice(["1", "2"])}
        objs.append(lq)
        objs += [workload(f"{name}{i}", ns="team", queue=name, cpu=rng.choice([1, 2]), priority=rng.choice([0, 5]),
                          minute=rng.randint(0, 20)) for i in range(rng.randint(8, 20))]
    objs += [workload(f"o{i}", ns="o", cpu=1, minute=i) for i in range(10)]
    return objs


AFS_CONFIG = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
              "data": {"controller_manager_config.yaml": "kind: Configuration\nadmissionFairSharing:\n"
                       "  usageHalfLifeTime: 168h\n  usageSamplingInterval: 5m\n"}}


@pytest.mark.parametrize("seed", range(6))
def test_selection_under_admission_fair_sharing_gives_the_plan_of_the_whole_backlog(seed, tmp_path):
    pruned, unpruned = pruned_and_unpruned([afs_backlog(seed), AFS_CONFIG], tmp_path,
                                           fair_sharing=FairSharing() if seed % 2 else None)
    assert pruned.solver.pruned > 0 and unpruned.solver.pruned == 0
    assert comparable(pruned) == comparable(unpruned)


def test_the_head_of_a_reclaiming_queue_preempts_while_borrowing_though_ranked_last(tmp_path):
    # b borrows 6 of the cohort's 12; a holds its 3 and asks 3 more (it would borrow 3): only
    # fair sharing lets its head reclaim (3 borrowed after, not above b's 3 once b0 is gone).
    # a's share after admission ranks it after c's many small workloads, which fit nowhere
    # (b borrows c's quota): the cut must still reach a's head, which may preempt.
    a = cluster_queue("a", {"od": {"cpu": 3}}, cohort="co", preemption={"reclaimWithinCohort": "Any"})
    objs = [flavor("od"), a, cluster_queue("b", {"od": {"cpu": 3}}, cohort="co"),
            cluster_queue("c", {"od": {"cpu": 6}}, cohort="co"),
            local_queue("a", ns="a"), local_queue("b", ns="b"), local_queue("c", ns="c"),
            workload("a0", ns="a", cpu=3, admitted_in=("a", "od")),
            [workload(f"b{i}", ns="b", cpu=3, minute=i, admitted_in=("b", "od")) for i in range(3)],
            workload("want", ns="a", cpu=3, minute=30),
            [workload(f"c{i}", ns="c", cpu=1, minute=i) for i in range(40)]]
    pruned, unpruned = pruned_and_unpruned(objs, tmp_path, fair_sharing=FairSharing())
    assert pruned.solver.pruned > 0
    assert comparable(pruned) == comparable(unpruned)
    assert {a.target for a in pruned.actions if a.kind == "preempt"} == {"b/b2"}
