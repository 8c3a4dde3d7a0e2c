"""Victims per preemptor: clueue against a model of Kueue's candidate order, on the same clusters.

``clueue bench --scenario preemption`` generates small seeded cohorts (two or three
ClusterQueues, one flavor, a few admitted Workloads of 1-4 pods started at different times, one
pending Workload that may preempt), runs one clueue cycle on each, and runs a model of Kueue's
classic preemption for the same preemptor: candidates ordered as Kueue documents them (workloads
of other ClusterQueues that borrow first, then lower priority, then the most recently started,
which is when its quota was reserved: its QuotaReserved condition, which clueue orders by too),
taken one at a time until the preemptor fits, then added back from the second-to-last taken to
the first wherever the preemptor still fits without them. Both are judged by one fit model:
once its victims are gone the preemptor fits the cohort, and when it takes a workload of another
queue its own queue stays within its nominal quota and the victim's queue, counting the victim,
borrows (docs/preemption.md). Reported per side: preemptions, victims and pod-seconds of work
lost per preemptor (pods x seconds each victim had run).
"""

from __future__ import annotations

import itertools
import random
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from clueue.engine import Config, Document, build_snapshot, load_policy, run_cycle
from clueue.engine.kueue_api import KUEUE_GROUP

__all__ = ["Admitted", "Cluster", "cluster", "objects", "fits", "kueue_victims", "victim_benchmark", "render_victims"]

_KUEUE = f"{KUEUE_GROUP}/v1beta1"
#: When the cycle runs, in minutes after the first workload started.
NOW_MINUTE = 60


@dataclass(frozen=True)
class Admitted:
    """An admitted Workload of the model: ``pods`` pods of ``cpu`` each, started at ``minute``."""

    name: str
    queue: str
    cpu: int
    pods: int
    priority: int
    minute: int

    @property
    def usage(self) -> int:
        return self.cpu * self.pods


@dataclass(frozen=True)
class Cluster:
    """One cohort, its admitted Workloads, and the pending one (``queue``, ``cpu``, ``priority``)."""

    nominal: dict[str, int]
    reclaim: dict[str, str]  # queue -> its reclaimWithinCohort policy
    admitted: tuple[Admitted, ...]
    queue: str
    cpu: int
    priority: int


def cluster(seed: int) -> Cluster:
    """The seeded cluster ``seed``: the same one on every machine."""
    rnd = random.Random(seed)
    queues = [f"q{i}" for i in range(rnd.choice((2, 3)))]
    nominal = {q: rnd.randint(3, 8) for q in queues}
    reclaim = {q: rnd.choice(("Any", "LowerPriority", "Never")) for q in queues}
    room, admitted = sum(nominal.values()), []
    for i in range(rnd.randint(3, 7)):
        pods = rnd.choice((1, 1, 2, 3))
        cpu = rnd.randint(1, max(1, 4 // pods))
        if cpu * pods > room:
            break
        room -= cpu * pods
        admitted.append(Admitted(f"a{i}", rnd.choice(queues), cpu, pods, rnd.choice((0, 10, 20)), rnd.randint(0, 50)))
    queue = rnd.choice(queues)
    return Cluster(nominal, reclaim, tuple(admitted), queue, rnd.randint(1, nominal[queue]), rnd.choice((5, 15, 25)))


def _minute(m: int) -> str:
    return f"2026-11-21T{8 + m // 60:02d}:{m % 60:02d}:00Z"


def objects(c: Cluster) -> list[dict[str, Any]]:
    """The Kubernetes objects of ``c``, as users write them."""
    out: list[dict[str, Any]] = [{"apiVersion": _KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "f"}, "spec": {}}]
    for q, n in c.nominal.items():
        out.append({"apiVersion": _KUEUE, "kind": "ClusterQueue", "metadata": {"name": q}, "spec": {
            "namespaceSelector": {}, "cohort": "all",
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": c.reclaim[q]},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "f", "resources": [{"name": "cpu", "nominalQuota": n}]}]}]}})
        out.append({"apiVersion": _KUEUE, "kind": "LocalQueue", "metadata": {"name": q, "namespace": "default"},
                    "spec": {"clusterQueue": q}})
    for w in c.admitted:
        out.append(_workload(w.name, w.queue, w.cpu, w.pods, w.priority, w.minute, admitted=True))
    out.append(_workload("new", c.queue, c.cpu, 1, c.priority, NOW_MINUTE, admitted=False))
    return out


def _workload(name: str, queue: str, cpu: int, pods: int, priority: int, minute: int, *, admitted: bool) -> dict[str, Any]:
    sets = [{"name": "main", "count": pods, "template": {"spec": {"containers": [
        {"name": "main", "image": "registry.example/app:1", "resources": {"requests": {"cpu": str(cpu)}}}]}}}]
    out: dict[str, Any] = {"apiVersion": _KUEUE, "kind": "Workload", "metadata": {
        "name": name, "namespace": "default", "creationTimestamp": _minute(minute)},
        "spec": {"queueName": queue, "priority": priority, "podSets": sets}}
    if admitted:  # started when its quota was reserved: the time both sides order victims by
        out["status"] = {"admission": {"clusterQueue": queue, "podSetAssignments": [
            {"name": "main", "count": pods, "flavors": {"cpu": "f"}}]}, "conditions": [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "lastTransitionTime": _minute(minute)}]}
    return out


def may_take(c: Cluster, v: Admitted) -> bool:
    """Whether the preemptor may take ``v`` at all: lower priority in its own queue, or as its
    queue's reclaimWithinCohort allows in another."""
    if v.queue == c.queue:
        return v.priority < c.priority
    return c.reclaim[c.queue] == "Any" or (c.reclaim[c.queue] == "LowerPriority" and v.priority < c.priority)


def fits(c: Cluster, victims: frozenset[str]) -> bool:
    """Whether the preemptor fits once ``victims`` are gone, under the rules they were taken by;
    and where some victim set lets it fit its queue's nominal quota while it might take from
    other queues, within that quota (Kueue tries victims without borrowing first)."""
    return _fits(c, victims) and (not _reclaim_first(c) or _within_nominal(c, victims))


def _within_nominal(c: Cluster, victims: frozenset[str]) -> bool:
    return sum(a.usage for a in c.admitted if a.queue == c.queue and a.name not in victims) + c.cpu <= c.nominal[c.queue]


_REMEMBERED: dict[int, tuple[Cluster, bool]] = {}  # id -> the cluster, its _reclaim_first


def _reclaim_first(c: Cluster) -> bool:
    """Whether the preemptor, whose queue holds less than its nominal quota and which might take
    from another queue that borrows, has some victim set with which it fits that quota."""
    seen = _REMEMBERED.get(id(c))
    if seen is not None and seen[0] is c:
        return seen[1]
    if len(_REMEMBERED) > 1024:
        _REMEMBERED.clear()
    answer = _reclaim_first_uncached(c)
    _REMEMBERED[id(c)] = (c, answer)
    return answer


def _reclaim_first_uncached(c: Cluster) -> bool:
    if sum(a.usage for a in c.admitted if a.queue == c.queue) >= c.nominal[c.queue]:
        return False
    if not any(a.queue != c.queue and may_take(c, a) and
               sum(b.usage for b in c.admitted if b.queue == a.queue) > c.nominal[a.queue] for a in c.admitted):
        return False
    names = [a.name for a in c.admitted]
    return any(_fits(c, frozenset(s)) and _within_nominal(c, frozenset(s))
               for k in range(len(names) + 1) for s in itertools.combinations(names, k))


def _fits(c: Cluster, victims: frozenset[str]) -> bool:
    gone = [a for a in c.admitted if a.name in victims]
    if not all(may_take(c, v) for v in gone):
        return False
    kept = [a for a in c.admitted if a.name not in victims]
    if sum(a.usage for a in kept) + c.cpu > sum(c.nominal.values()):
        return False
    if any(v.queue != c.queue for v in gone):
        if sum(a.usage for a in kept if a.queue == c.queue) + c.cpu > c.nominal[c.queue]:
            return False
        for v in gone:  # its queue, counting it, borrows
            if v.queue != c.queue and sum(a.usage for a in kept if a.queue == v.queue) + v.usage <= c.nominal[v.queue]:
                return False
    return True


def kueue_victims(c: Cluster) -> frozenset[str] | None:
    """Kueue's victims for the preemptor of ``c`` (None: it does not preempt): candidates in
    Kueue's order, taken until the preemptor fits, then the unneeded ones added back."""
    if fits(c, frozenset()):
        return None
    order = sorted((a for a in c.admitted if may_take(c, a)),
                   key=lambda a: (a.queue == c.queue, a.priority, -a.minute, a.name))
    taken: list[str] = []
    for a in order:
        if a.queue != c.queue and not fits(c, frozenset(taken) | {a.name}) and \
                sum(b.usage for b in c.admitted if b.queue == a.queue and b.name not in taken) <= c.nominal[a.queue]:
            continue  # its queue no longer borrows
        taken.append(a.name)
        if fits(c, frozenset(taken)):
            break
    else:
        return None
    for name in reversed(taken[:-1]):  # add back what is not needed, the last taken stays
        if fits(c, frozenset(taken) - {name}):
            taken.remove(name)
    return frozenset(taken)


def _lost(c: Cluster, victims: Iterable[str]) -> int:
    """Pod-seconds of work the victims had done."""
    by_name = {a.name: a for a in c.admitted}
    return sum(by_name[v].pods * (NOW_MINUTE - by_name[v].minute) * 60 for v in victims)


def victim_benchmark(seeds: int = 500, first: int = 0, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Run clueue and the Kueue model on ``seeds`` clusters; the figures of each side."""
    policy = load_policy()
    sides: dict[str, dict[str, list[int]]] = {"clueue": {"victims": [], "podSeconds": []},
                                               "kueue": {"victims": [], "podSeconds": []}}
    both = fewer = more = 0
    for i, seed in enumerate(range(first, first + seeds)):
        c = cluster(seed)
        plan = run_cycle(build_snapshot([Document(f"preemption#{seed}.{n}", o) for n, o in enumerate(objects(c))]),
                         policy, Config())
        mine = frozenset(a.target.split("/", 1)[1] for a in plan.actions if a.kind == "preempt")
        kueue = kueue_victims(c)
        for side, victims in (("clueue", mine if mine else None), ("kueue", kueue)):
            if victims:
                sides[side]["victims"].append(len(victims))
                sides[side]["podSeconds"].append(_lost(c, victims))
        if mine and kueue:
            both += 1
            fewer += _lost(c, mine) < _lost(c, kueue)
            more += _lost(c, mine) > _lost(c, kueue)
        if progress is not None:
            progress(i + 1, seeds)
    return {"clusters": seeds, "firstSeed": first, "bothPreempt": both,
            "clueueLosesLess": fewer, "clueueLosesMore": more,
            **{side: {"preemptions": len(f["victims"]),
                      "victimsPerPreemptor": round(statistics.fmean(f["victims"]), 3) if f["victims"] else 0.0,
                      "podSecondsPerPreemptor": round(statistics.fmean(f["podSeconds"]), 1) if f["podSeconds"] else 0.0}
               for side, f in sides.items()}}


def render_victims(result: dict[str, Any]) -> str:
    """The report as text."""
    rows = [f"Preemption victims on {result['clusters']} seeded clusters (seeds {result['firstSeed']}-"
            f"{result['firstSeed'] + result['clusters'] - 1}):",
            f"{'':8} {'preemptions':>12} {'victims/preemptor':>18} {'pod-s lost/preemptor':>21}"]
    for side in ("clueue", "kueue"):
        s = result[side]
        rows.append(f"{side:8} {s['preemptions']:>12} {s['victimsPerPreemptor']:>18} {s['podSecondsPerPreemptor']:>21}")
    rows.append(f"where both preempt ({result['bothPreempt']}): clueue loses less work in {result['clueueLosesLess']}, "
                f"more in {result['clueueLosesMore']}")
    return "\n".join(rows)
