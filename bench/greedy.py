"""The greedy reference: Kueue's admission order, hand-written, on the same snapshot.

One pass over the whole pending backlog, in rank order (priority desc, creation time asc, then
name; see :func:`clueue.bench.model.rank_key`). For each workload, pod set by pod set and
resource group by resource group, the first flavor in the ClusterQueue's order whose quota
still fits (borrowing within the cohort up to the limits) is taken, counting the pod sets
already placed; a ClusterQueue with ``whenCanBorrow: TryNextFlavor`` first looks for a flavor
that fits without borrowing. A workload is admitted when every pod set gets a flavor, and its
usage then counts for every later one. Under StrictFIFO a ClusterQueue admits nothing more
once one of its workloads is left out; under BestEffortFIFO later ones still get their turn.

This is what Kueue's scheduler converges to with a full backlog and no preemption, except that
it admits everything that fits in one pass (Kueue admits at most one workload per
ClusterQueue per scheduling cycle). It never calls the ASP engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Mapping, Sequence

from clueue.engine import Snapshot
from clueue.engine.workloads import Workload

from .model import Candidate, Pair, QuotaTree, eligibility

__all__ = ["GreedyResult", "greedy_admit", "compare_in_rank_order", "RankComparison"]


@dataclass(frozen=True)
class GreedyResult:
    """What the greedy pass admitted.

    ``admitted`` maps each admitted workload to ``{(pod set, resource): flavor}``; ``ranked``
    lists every candidate in rank order; ``left_out`` maps the others to ``NoFit`` or
    ``StrictFIFOBlocked``; ``excluded`` those that were never candidates, and why.
    """

    admitted: Mapping[str, Mapping[tuple[str, str], str]]
    ranked: tuple[str, ...]
    left_out: Mapping[str, str]
    excluded: Mapping[str, str] = field(default_factory=dict)


def _try(tree: QuotaTree, c: Candidate) -> dict[tuple[str, str], str] | None:
    """Place every pod set of ``c`` first-fit; on success the usage stays added."""
    placed: list[Mapping[Pair, Fraction]] = []
    chosen: dict[tuple[str, str], str] = {}
    for ps, groups, options in zip(c.workload.pod_sets, c.groups, c.options):
        for gi in groups:
            wanted = [r for r in c.covered[gi] if r in ps.requests]

            def deltas(flavor: str) -> dict[Pair, Fraction]:
                return {(flavor, r): ps.requests[r] * ps.count for r in wanted}  # noqa: B023

            fitting = [f for f in options[gi] if tree.fits(c.cluster_queue, deltas(f))]
            if c.try_next_flavor:
                no_borrow = [f for f in fitting if not any(
                    tree.borrows(c.cluster_queue, f, r, d) for (_, r), d in deltas(f).items())]
                fitting = no_borrow or fitting
            if not fitting:
                for d in placed:
                    tree.add(c.cluster_queue, {k: -v for k, v in d.items()})
                return None
            d = deltas(fitting[0])
            tree.add(c.cluster_queue, d)
            placed.append(d)
            chosen.update({(ps.name, r): fitting[0] for r in wanted})
    return chosen


def greedy_admit(snapshot: Snapshot, workloads: Sequence[Workload]) -> GreedyResult:
    """Run the greedy pass over ``workloads`` (as built by the engine's ``build_workloads``).

    >>> from clueue.bench.scenarios import generate
    >>> from clueue.engine.workloads import build_workloads
    >>> s = generate("baseline", seed=0, scale=0.02); snap = s.snapshot()
    >>> r = greedy_admit(snap, build_workloads(snap).workloads)
    >>> len(r.admitted)  # 6 large workloads (20 CPU) fill each cohort's 120 CPU
    30
    """
    elig = eligibility(snapshot, workloads)
    tree = QuotaTree(snapshot)
    for cq, usage in elig.held:
        tree.add(cq, usage)
    admitted: dict[str, Mapping[tuple[str, str], str]] = {}
    left_out: dict[str, str] = {}
    blocked: set[str] = set()
    for c in elig.candidates:
        if c.cluster_queue in blocked:
            left_out[c.key] = "StrictFIFOBlocked"
            continue
        chosen = _try(tree, c)
        if chosen is None:
            left_out[c.key] = "NoFit"
            if c.strict_fifo:
                blocked.add(c.cluster_queue)
        else:
            admitted[c.key] = chosen
    return GreedyResult(admitted, tuple(c.key for c in elig.candidates), left_out, elig.excluded)


@dataclass(frozen=True)
class RankComparison:
    """How two admitted sets compare lexicographically along the rank order.

    ``verdict`` is ``equal``, ``better`` (the first set admits the first workload on which they
    differ) or ``worse``; ``first_difference`` names that workload and ``position`` its 1-based
    rank.
    """

    verdict: str
    first_difference: str | None = None
    position: int | None = None


def compare_in_rank_order(ranked: Sequence[str], first: set[str] | frozenset[str],
                          second: set[str] | frozenset[str]) -> RankComparison:
    """Compare ``first`` against ``second`` along ``ranked``.

    >>> compare_in_rank_order(["a", "b", "c"], {"a", "c"}, {"a", "b"})
    RankComparison(verdict='worse', first_difference='b', position=2)
    """
    for i, w in enumerate(ranked):
        a, b = w in first, w in second
        if a != b:
            return RankComparison("better" if a else "worse", w, i + 1)
    return RankComparison("equal")
