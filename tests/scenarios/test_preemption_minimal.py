"""Victim sets are minimal and take borrowed quota back first: checked by brute force on small
random clusters (a seeded generator, so every run sees the same clusters).

The clusters and the fit model are those of ``clueue bench --scenario preemption``
(bench/preemption.py): one cohort of two or three ClusterQueues with one flavor, a few admitted
Workloads, one pending Workload that may preempt; once its victims are gone the preemptor fits
the cohort, and when it takes a workload of another queue (reclaim) its own queue stays within
its nominal quota and the victim's queue, counting the victim, borrows. Against that model the
test checks each plan that preempts: no victim could be spared, and no possible victim set
evicts fewer workloads of the preemptor's own queue.
"""

from __future__ import annotations

import itertools

import pytest

from clueue.bench.preemption import Cluster, cluster, fits, objects
from tests.builders import flatten, run

_SEEDS = range(150)


def _own(c: Cluster, victims: frozenset[str]) -> int:
    return sum(1 for a in c.admitted if a.name in victims and a.queue == c.queue)


@pytest.mark.parametrize("seed", _SEEDS)
def test_victim_sets_are_minimal_and_reclaim_first(seed):
    c = cluster(seed)
    plan = run(flatten(objects(c)))
    victims = frozenset(a.target.split("/", 1)[1] for a in plan.actions if a.kind == "preempt")
    if not victims:
        return
    assert fits(c, victims), f"seed {seed}: the preemptor does not fit once {sorted(victims)} are gone"
    for v in victims:
        assert not fits(c, victims - {v}), f"seed {seed}: {v} could be spared of {sorted(victims)}"
    names = [a.name for a in c.admitted]
    fewest = min(_own(c, frozenset(s)) for k in range(len(names) + 1) for s in itertools.combinations(names, k)
                 if fits(c, frozenset(s)))
    assert _own(c, victims) == fewest, f"seed {seed}: {sorted(victims)} evicts more of the queue's own work than needed"
