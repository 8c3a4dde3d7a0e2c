"""Victim sets are minimal and take borrowed quota back first: checked by brute force on small
random clusters (a seeded generator, so every run sees the same clusters).

Each cluster is one cohort of two or three ClusterQueues with one flavor and one resource, a few
admitted Workloads, and one pending Workload that may preempt. The test models the fit the way
docs/preemption.md states it for such a cluster: once its victims are gone, the preemptor fits
the cohort; when it takes a workload of another queue (reclaim), its own queue stays within its
nominal quota and the victim's queue, counting the victim, borrows. Against that model it checks
each plan that preempts: no victim could be spared, and no possible victim set evicts fewer
workloads of the preemptor's own queue.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

import pytest

from tests.builders import cluster_queue, flavor, local_queue, run, workload

_SEEDS = range(150)


@dataclass(frozen=True)
class _Admitted:
    name: str
    queue: str
    cpu: int
    priority: int
    minute: int


@dataclass(frozen=True)
class _Cluster:
    nominal: dict[str, int]
    reclaim: dict[str, str]  # queue -> its reclaimWithinCohort policy
    admitted: tuple[_Admitted, ...]
    queue: str  # the preemptor's
    cpu: int
    priority: int


def _cluster(seed: int) -> _Cluster:
    rnd = random.Random(seed)
    queues = [f"q{i}" for i in range(rnd.choice((2, 3)))]
    nominal = {q: rnd.randint(3, 8) for q in queues}
    reclaim = {q: rnd.choice(("Any", "LowerPriority", "Never")) for q in queues}
    room, admitted = sum(nominal.values()), []
    for i in range(rnd.randint(3, 7)):
        cpu = rnd.randint(1, 4)
        if cpu > room:
            break
        room -= cpu
        admitted.append(_Admitted(f"a{i}", rnd.choice(queues), cpu, rnd.choice((0, 10, 20)), i))
    queue = rnd.choice(queues)
    return _Cluster(nominal, reclaim, tuple(admitted), queue, rnd.randint(1, nominal[queue]), rnd.choice((5, 15, 25)))


def _objects(c: _Cluster) -> list:
    objs: list = [flavor("f")]
    for q, n in c.nominal.items():
        preemption = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": c.reclaim[q]}
        objs += [cluster_queue(q, {"f": {"cpu": n}}, cohort="all", preemption=preemption),
                 local_queue(q, name=q)]
    objs += [workload(a.name, queue=a.queue, cpu=str(a.cpu), priority=a.priority, minute=a.minute,
                      admitted_in=(a.queue, "f")) for a in c.admitted]
    return objs + [workload("new", queue=c.queue, cpu=str(c.cpu), priority=c.priority, minute=30)]


def _may_take(c: _Cluster, v: _Admitted) -> bool:
    if v.queue == c.queue:
        return v.priority < c.priority
    return c.reclaim[c.queue] == "Any" or (c.reclaim[c.queue] == "LowerPriority" and v.priority < c.priority)


def _fits(c: _Cluster, victims: frozenset[str]) -> bool:
    """Whether the preemptor fits once ``victims`` are gone, under the rules they were taken by."""
    gone = [a for a in c.admitted if a.name in victims]
    if not all(_may_take(c, v) for v in gone):
        return False
    kept = [a for a in c.admitted if a.name not in victims]
    if sum(a.cpu for a in kept) + c.cpu > sum(c.nominal.values()):
        return False
    if any(v.queue != c.queue for v in gone):
        if sum(a.cpu for a in kept if a.queue == c.queue) + c.cpu > c.nominal[c.queue]:
            return False
        for v in gone:  # its queue, counting it, borrows
            if v.queue != c.queue and sum(a.cpu for a in kept if a.queue == v.queue) + v.cpu <= c.nominal[v.queue]:
                return False
    return True


def _own(c: _Cluster, victims: frozenset[str]) -> int:
    return sum(1 for a in c.admitted if a.name in victims and a.queue == c.queue)


@pytest.mark.parametrize("seed", _SEEDS)
def test_victim_sets_are_minimal_and_reclaim_first(seed):
    c = _cluster(seed)
    plan = run(_objects(c))
    victims = frozenset(a.target.split("/", 1)[1] for a in plan.actions if a.kind == "preempt")
    if not victims:
        return
    assert _fits(c, victims), f"seed {seed}: the preemptor does not fit once {sorted(victims)} are gone"
    for v in victims:
        assert not _fits(c, victims - {v}), f"seed {seed}: {v} could be spared of {sorted(victims)}"
    names = [a.name for a in c.admitted]
    fewest = min(_own(c, frozenset(s)) for k in range(len(names) + 1) for s in itertools.combinations(names, k)
                 if _fits(c, frozenset(s)))
    assert _own(c, victims) == fewest, f"seed {seed}: {sorted(victims)} evicts more of the queue's own work than needed"
