"""How fair a replay was: each borrowing queue's share of its cohort over time, against its
weighted fair share (the ``fair-sharing`` scenario; docs/benchmarks.md).

After every cycle of the replay, for each cohort: what each ClusterQueue borrows (uses above
its nominal quota) as a fraction of what the cohort can lend it (engine/fairsharing.py). The
queues that still have pending work and use all their nominal quota *contend* (to admit more
they borrow); the borrowed quota they hold together is their
pool, and a queue's fair share of it is its weight over the contenders' weights (queues that
want no more keep what they hold). The deviation of a contending queue is how far its share is
from that fair share, in fractions of what the cohort lends. Reported per queue: the average
share and fair share over the contended samples; overall: the largest deviation, the average
of each sample's largest deviation, and evictions per admitted workload.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import replace
from fractions import Fraction
from typing import Any, Iterable, Mapping

from clueue.engine.facts import Node
from clueue.engine.fairsharing import ShareTree
from clueue.engine.objects import KueueWorkload
from clueue.engine.snapshot import Snapshot
from clueue.engine.workloads import build_workloads

__all__ = ["ShareTimeline"]


class ShareTimeline:
    """A replay observer (replay.Observer) collecting the borrowing queues' shares."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.full = snapshot
        self.queue_of = {f"{lq.namespace}/{lq.name}": lq.cluster_queue for lq in snapshot.local_queues.values()}
        self.weights = {q.name: q.fair_weight for q in snapshot.cluster_queues.values() if q.cohort}
        self.cohort = {q.name: q.cohort for q in snapshot.cluster_queues.values() if q.cohort}
        self.shares: dict[str, list[tuple[float, float]]] = defaultdict(list)  # queue -> (share, fair share)
        self.worst: list[float] = []  # per sample: the largest deviation of a contending queue

    def __call__(self, at_ms: float, running: Mapping[str, KueueWorkload], pending: Iterable[str]) -> None:
        snap = replace(self.full, workloads=dict(running))
        tree = ShareTree(snap, [w for w in build_workloads(snap).workloads if w.admission is not None])
        wanting = {self.queue_of.get(k.rpartition("/")[0] + "/" + self.full.workloads[k].queue_name)
                   for k in pending if k in self.full.workloads}
        by_cohort: dict[str, list[str]] = defaultdict(list)
        for q, c in self.cohort.items():
            if q in wanting and self.weights[q] > 0 and self._full(tree, q):
                by_cohort[c].append(q)
        for cohort, contenders in by_cohort.items():
            lendable = sum(tree.lendable(Node("cohort", cohort)).values(), Fraction(0))
            if not lendable or len(contenders) < 2:
                continue
            borrowed = {q: self._borrowed(tree, q) / lendable for q in contenders}
            pool, weight = sum(borrowed.values()), sum(self.weights[q] for q in contenders)
            worst = 0.0
            for q in contenders:
                fair = pool * self.weights[q] / weight
                self.shares[q].append((float(borrowed[q]), float(fair)))
                worst = max(worst, abs(float(borrowed[q] - fair)))
            self.worst.append(worst)

    @staticmethod
    def _full(tree: ShareTree, queue: str) -> bool:
        """Whether ``queue`` uses all its nominal quota: to admit more, it borrows."""
        node = Node("cq", queue)
        used = tree.usage.get(node, {})
        return all(used.get(fr, Fraction(0)) >= q for fr, q in tree.subtree[node].items())

    @staticmethod
    def _borrowed(tree: ShareTree, queue: str) -> Fraction:
        node = Node("cq", queue)
        used = tree.usage.get(node, {})
        return sum((max(Fraction(0), u - tree.subtree[node].get(fr, Fraction(0))) for fr, u in used.items()), Fraction(0))

    def summary(self, replayed: Mapping[str, Any]) -> dict[str, Any]:
        """The report of the replay ``replayed`` (replay.replay's result) as fairness figures."""
        admitted = sum(c["count"] for c in replayed.get("admissionSeconds", {}).values())
        evicted = sum(replayed.get("evictions", {}).values())
        return {
            "samples": len(self.worst),
            "maxDeviation": round(max(self.worst, default=0.0), 4),
            "meanMaxDeviation": round(statistics.fmean(self.worst), 4) if self.worst else 0.0,
            "evictionsPerAdmitted": round(evicted / admitted, 4) if admitted else 0.0,
            "queues": {q: {"weight": str(self.weights[q]), "samples": len(v),
                           "averageShare": round(statistics.fmean(s for s, _ in v), 4),
                           "averageFairShare": round(statistics.fmean(f for _, f in v), 4)}
                       for q, v in sorted(self.shares.items())},
        }
