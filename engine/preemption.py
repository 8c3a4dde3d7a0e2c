"""Why each victim of preemption is evicted: who preempts it, under which of Kueue's rules, and
the numbers behind it (docs/preemption.md).

The decide pass (policies/preemption.lp) says which preempting workload counts on which victim
(``Decision.preempts``); this module names the rule of each such pair with Kueue's reasons for
the ``Preempted`` condition:

- ``InClusterQueue``: the preemptor is of the victim's ClusterQueue (withinClusterQueue);
- ``InCohortReclaimWhileBorrowing``: of another queue of the cohort, which borrows once the
  preemptor is admitted and every victim is gone (borrowWithinCohort);
- ``InCohortReclamation``: of another queue, which takes back its nominal quota
  (reclaimWithinCohort);
- ``InCohortFairSharing``: of another queue, with fair sharing on (docs/fair-sharing.md); the
  ``shares`` field of a preemption is where the shares before and after go (None until the
  fair-sharing rule group reports them).

Pure: the decision, the snapshot's queues and the workloads in, reasons out.
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction
from typing import Iterable, Mapping

from .fairsharing import PreemptionShares
from .quantity import format_quantity
from .quota import nominal
from .reasons import Reason, make_reason
from .snapshot import Snapshot
from .solver import Decision
from .workloads import Workload

__all__ = ["Victims", "RULES"]

#: Kueue's reasons on a victim's ``Preempted`` condition, in the words of its message.
RULES: Mapping[str, str] = {"InClusterQueue": "prioritization in the ClusterQueue",
                            "InCohortReclamation": "reclamation within the cohort",
                            "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
                            "InCohortFairSharing": "Fair Sharing within the cohort"}


def _usage(w: Workload, flavors: Iterable[tuple[str, int, Mapping[str, str]]]) -> dict[tuple[str, str], Fraction]:
    """(flavor, resource) -> what ``w`` uses with ``flavors``: (pod set, pods, resource -> flavor)."""
    requests = {ps.name: ps.requests for ps in w.pod_sets}
    out: dict[tuple[str, str], Fraction] = defaultdict(Fraction)
    for name, count, chosen in flavors:
        for r, f in chosen.items():
            out[f, r] += Fraction(requests.get(name, {}).get(r, 0)) * count
    return out


def _held(w: Workload) -> dict[tuple[str, str], Fraction]:
    """What admitted ``w`` holds from before the cycle, by (flavor, resource)."""
    return _usage(w, ((a.name, a.count, a.flavors) for a in w.held_admission()))


def _chosen(w: Workload, decision: Decision) -> dict[tuple[str, str], Fraction]:
    """What preempting ``w`` will use with the flavors the decision chose for it."""
    chosen = decision.assignments.get(w.key, {})
    return _usage(w, ((ps.name, ps.count, {r: f for (p, r), f in chosen.items() if p == ps.name})
                      for ps in w.pod_sets))


def _amounts(usage: Mapping[tuple[str, str], Fraction]) -> dict[str, dict[str, str]]:
    """flavor -> resource -> amount, as the plan writes quantities."""
    out: dict[str, dict[str, str]] = {}
    for (f, r), a in sorted(usage.items()):
        if a:
            out.setdefault(f, {})[r] = format_quantity(a)
    return out


class Victims:
    """The ``Preempted`` reason of every victim of a decision, built once per cycle."""

    def __init__(self, snapshot: Snapshot, workloads: Iterable[Workload], decision: Decision) -> None:
        self.decision = decision
        self.fair_sharing = snapshot.kueue_settings.fair_sharing is not None
        self._by_key: dict[str, Workload] = {}
        self.fair: PreemptionShares | None = None  # under fair sharing: the shares behind each preemption
        if not decision.preempts:
            self.borrowing: frozenset[str] = frozenset()
            return
        workloads = list(workloads)
        if snapshot.kueue_settings.fair_sharing is not None:
            self.fair = PreemptionShares(snapshot, workloads)
        wanted = {k for pair in decision.preempts for k in pair}
        held: dict[tuple[str, str, str], Fraction] = defaultdict(Fraction)  # (queue, flavor, resource) after the cycle
        for w in workloads:
            if w.key in wanted:
                self._by_key[w.key] = w
            if w.key in decision.preempting:
                queue, usage = decision.cluster_queues.get(w.key) or "", _chosen(w, decision)
            elif w.admission is not None and w.key not in decision.evicted and not w.evict:
                queue, usage = w.admission.cluster_queue or "", _held(w)
            else:
                continue
            for (f, r), a in usage.items():
                held[queue, f, r] += a
        quotas = {q: nominal(cq.resource_groups) for q, cq in snapshot.cluster_queues.items()}
        # Kueue's "while borrowing": once admitted, with every victim gone, the preemptor's queue
        # holds more than its nominal quota of a flavor and resource the preemptor uses.
        self.borrowing = frozenset(
            p for p in decision.preempting if p in self._by_key and any(
                held[q, f, r] > quotas.get(q, {}).get((f, r), 0)
                for q in [decision.cluster_queues.get(p) or ""] for (f, r), a in _chosen(self._by_key[p], decision).items() if a))

    def rule(self, preemptor: str, victim_queue: str | None) -> str:
        """Kueue's reason for a preemption by ``preemptor`` of a workload of ``victim_queue``."""
        if self.decision.cluster_queues.get(preemptor) == victim_queue:
            return "InClusterQueue"
        if self.fair_sharing:  # Kueue names every preemption across queues so under fair sharing
            return "InCohortFairSharing"
        if self.fair is not None:  # across queues, fair sharing's strategies decide (fairsharing.lp)
            return "InCohortFairSharing"
        return "InCohortReclaimWhileBorrowing" if preemptor in self.borrowing else "InCohortReclamation"

    def reason(self, key: str) -> Reason:
        """Why admitted ``key`` is evicted: each preemptor that counts on its quota, the rule, what
        the preemptor asks (by flavor and resource), and what ``key`` held; ``shares`` stays None
        unless fair sharing decided the preemption."""
        cq = self.decision.cluster_queues.get(key)
        preemptors = sorted(p for p, v in self.decision.preempts if v == key)
        victim = self._by_key.get(key)
        preemptions = [{"preemptor": p, "clusterQueue": self.decision.cluster_queues.get(p), "rule": self.rule(p, cq),
                        "needs": _amounts(_chosen(self._by_key[p], self.decision)) if p in self._by_key else {},
                        "shares": self.fair.between(p, self.decision.cluster_queues.get(p) or "", key)
                        if self.fair is not None else None} for p in preemptors]
        held = _amounts(_held(victim)) if victim is not None and victim.admission is not None else {}
        return make_reason("Preempted", clusterQueue=cq, preemptors=preemptors, preemptions=preemptions, held=held)
