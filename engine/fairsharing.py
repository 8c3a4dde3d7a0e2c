"""Fair sharing: the shares of the nodes of each quota tree, as Kueue defines them, in integers
(docs/fair-sharing.md); and the order of the LocalQueues of a ClusterQueue under admission
fair sharing. Pure: the facts policies/fairsharing.lp reads are computed from the snapshot.

**The share of a node** (a ClusterQueue or Cohort below a cohort; a root has none) is Kueue's
dominant resource share: for each resource, what the node uses above its subtree quota, summed
over flavors, divided by what its parent could lend it of that resource over all flavors (what
the parent's subtree could make available to it, borrowing limits included, with no usage);
the largest such ratio, divided by the node's ``fairSharing.weight``. A node with weight 0 that
borrows has an infinite share: it comes after every node that has not, and such nodes compare by
their unweighted ratio. Usage climbs the tree as Kueue keeps it: a node counts in its parent
only what exceeds the part of its quota it does not lend (``lendingLimit``).

**Integers.** A share is ``ceil(10**6 * borrowed / lendable / weight)``, parts per million of
what the parent can lend (Kueue's ``status.fairSharing.weightedShare`` is the same in parts per
thousand); a finite share is capped at :data:`FINITE_CAP`, and a zero-weight borrower's is
:data:`INFINITE` plus its unweighted share (capped at :data:`FINITE_CAP`), so that integers
compare as Kueue compares shares.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction
from math import ceil
from typing import Iterable, Iterator, Mapping

from .facts import Node
from .config import Config
from .kueueconfig import KUEUE_CONFIG_MAP, KueueSettings, effective_settings
from .objects import ResourceGroup
from .quantity import parse_quantity
from .queues import FlavorUsage
from .snapshot import Snapshot
from .workloads import Workload

__all__ = ["ShareTree", "SCALE", "FINITE_CAP", "INFINITE", "fair_sharing_facts", "share_value", "lq_usage",
           "reorders", "with_settings", "PreemptionShares", "MAX_WEIGHTED_SHARE", "status_share", "status_shares",
           "held_quota"]

#: Shares are counted in parts per million of what the parent can lend.
SCALE = 10**6
#: The largest finite share (and zero-weight unweighted share) the facts hold.
FINITE_CAP = 2**28 - 1
#: The share of a node of weight 0 that borrows starts here: above every finite share.
INFINITE = 2**29
#: Kueue's ``weightedShare`` of a node of weight 0 that borrows: the largest int64.
MAX_WEIGHTED_SHARE = 2**63 - 1

FlavorResource = tuple[str, str]
Usage = Mapping[FlavorResource, Fraction]


@dataclass
class _Node:
    parent: Node | None
    weight: Fraction
    nominal: dict[FlavorResource, Fraction]
    lending: dict[FlavorResource, Fraction]
    borrowing: dict[FlavorResource, Fraction]


def share_value(borrowing: bool, ratio: Fraction, weight: Fraction) -> int:
    """The integer share of a node whose largest resource ratio (borrowed / lendable) is
    ``ratio`` and whose weight is ``weight`` (see the module docstring)."""
    if not borrowing or ratio == 0:
        return 0
    if weight == 0:
        return INFINITE + min(ceil(ratio * SCALE), FINITE_CAP)
    return min(ceil(ratio * SCALE / weight), FINITE_CAP)


class ShareTree:
    """The quota trees of a snapshot with the usage of its admitted workloads, to compute shares."""

    def __init__(self, snapshot: Snapshot, admitted: Iterable[Workload]) -> None:
        self.nodes: dict[Node, _Node] = {}
        for c in snapshot.cohorts.values():
            self.nodes[Node("cohort", c.name)] = _node(Node("cohort", c.parent) if c.parent else None,
                                                       c.fair_weight, c.resource_groups)
        for cq in snapshot.cluster_queues.values():
            self.nodes[Node("cq", cq.name)] = _node(Node("cohort", cq.cohort) if cq.cohort else None,
                                                    cq.fair_weight, cq.resource_groups)
            if cq.cohort:  # a cohort named only by ClusterQueues exists, without quota
                self.nodes.setdefault(Node("cohort", cq.cohort), _node(None, Fraction(1), ()))
        self.children: dict[Node, list[Node]] = defaultdict(list)
        for n, v in list(self.nodes.items()):  # a parent named only by a child is added, as a root
            if v.parent is not None:
                self.nodes.setdefault(v.parent, _node(None, Fraction(1), ()))
                self.children[v.parent].append(n)
        self.subtree: dict[Node, dict[FlavorResource, Fraction]] = {}
        for n in self.nodes:
            self._subtree(n)
        self.usage: dict[Node, dict[FlavorResource, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
        self._lendable: dict[Node, dict[str, Fraction]] = {}
        for w in admitted:
            if w.admission is not None:
                self.hold(w.admission.cluster_queue, held_usage(w))

    def hold(self, cluster_queue: str, usage: Usage) -> None:
        """Count ``usage`` as held in ``cluster_queue`` (ignored if the queue is unknown)."""
        if Node("cq", cluster_queue) in self.nodes:
            self._add(Node("cq", cluster_queue), usage, self.usage)

    def _subtree(self, n: Node) -> dict[FlavorResource, Fraction]:
        """Kueue's SubtreeQuota: a node's nominal quota plus what its children do not keep."""
        if n not in self.subtree:
            total = defaultdict(Fraction, self.nodes[n].nominal)
            for c in self.children.get(n, ()):
                for fr, q in self._subtree(c).items():
                    total[fr] += q - self.local(c, fr)
            self.subtree[n] = dict(total)
        return self.subtree[n]

    def local(self, n: Node, fr: FlavorResource) -> Fraction:
        """What ``n`` keeps of its subtree quota of ``fr`` for itself (not lent: lendingLimit)."""
        limit = self.nodes[n].lending.get(fr)
        return max(Fraction(0), self.subtree[n].get(fr, Fraction(0)) - limit) if limit is not None else Fraction(0)

    def path(self, n: Node) -> Iterator[Node]:
        """``n`` and its ancestors, up to the root."""
        node: Node | None = n
        while node is not None:
            yield node
            node = self.nodes[node].parent

    def _add(self, cq: Node, delta: Usage, usage: dict[Node, dict[FlavorResource, Fraction]]) -> None:
        """Add ``delta`` (negative: remove) to ``cq`` in ``usage``; each node passes on to its
        parent the change of what it uses beyond what it keeps (Kueue's addUsage/removeUsage)."""
        change = dict(delta)
        for n in self.path(cq):
            passed = {}
            for fr, d in change.items():
                before = usage[n][fr]
                usage[n][fr] = before + d
                keep = self.local(n, fr)
                moved = max(Fraction(0), before + d - keep) - max(Fraction(0), before - keep)
                if moved:
                    passed[fr] = moved
            if not passed:
                return
            change = passed

    def simulated(self, cq: Node, delta: Usage) -> dict[Node, dict[FlavorResource, Fraction]]:
        """The usage of the nodes on ``cq``'s path once ``delta`` is added there."""
        usage: dict[Node, dict[FlavorResource, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
        for n in self.path(cq):
            usage[n].update(self.usage.get(n, {}))
        self._add(cq, delta, usage)
        return usage

    def lendable(self, parent: Node) -> dict[str, Fraction]:
        """Per resource, what ``parent`` could make available over all flavors with no usage."""
        if parent not in self._lendable:
            root = list(self.path(parent))[-1]
            total: dict[str, Fraction] = defaultdict(Fraction)
            for fr in self.subtree[root]:
                total[fr[1]] += self._potential(parent, fr)
            self._lendable[parent] = dict(total)
        return self._lendable[parent]

    def _potential(self, n: Node, fr: FlavorResource) -> Fraction:
        """Kueue's potentialAvailable: the most ``n`` could use of ``fr`` with no usage."""
        v = self.nodes[n]
        if v.parent is None:
            return self.subtree[n].get(fr, Fraction(0))
        avail = self.local(n, fr) + self._potential(v.parent, fr)
        if fr in v.borrowing:
            avail = min(avail, self.subtree[n].get(fr, Fraction(0)) + v.borrowing[fr])
        return avail

    def share(self, n: Node, usage: Mapping[Node, Mapping[FlavorResource, Fraction]] | None = None) -> int:
        """The integer share of node ``n`` with ``usage`` (by default the admitted workloads')."""
        v = self.nodes[n]
        if v.parent is None:
            return 0
        used = (usage if usage is not None else self.usage).get(n, {})
        borrowed: dict[str, Fraction] = defaultdict(Fraction)
        for fr, quota in self.subtree[n].items():
            over = used.get(fr, Fraction(0)) - quota
            if over > 0:
                borrowed[fr[1]] += over
        if not borrowed:
            return 0
        lendable = self.lendable(v.parent)
        ratio = max((b / lendable[r] for r, b in borrowed.items() if lendable.get(r, 0) > 0), default=Fraction(0))
        return share_value(True, ratio, v.weight)


def status_share(share: int) -> int:
    """Kueue's ``status.fairSharing.weightedShare`` for an integer share (parts per million):
    the same in parts per thousand, rounded up; the largest int64 for a zero-weight borrower.

    >>> status_share(250_000), status_share(1), status_share(0), status_share(INFINITE + 5)
    (250, 1, 0, 9223372036854775807)
    """
    return MAX_WEIGHTED_SHARE if share >= INFINITE else -(-share // (SCALE // 1000))


def status_shares(snapshot: Snapshot, held: Mapping[str, Usage]) -> dict[Node, int]:
    """Every ClusterQueue's and Cohort's ``weightedShare`` (:func:`status_share`) when the
    ClusterQueues hold ``held`` (name -> (flavor, resource) -> amount): the status Kueue writes
    under fair sharing, from the same shares the policy compares."""
    tree = ShareTree(snapshot, ())
    for cq, usage in held.items():
        tree.hold(cq, usage)
    return {n: status_share(tree.share(n)) for n in tree.nodes}


def held_quota(flavors: Iterable[FlavorUsage]) -> dict[FlavorResource, Fraction]:
    """A queue status's per-flavor amounts (``flavorsReservation``, ``flavorsUsage``) as numbers."""
    return {(f.name, r.name): parse_quantity(r.total) for f in flavors for r in f.resources}


def _node(parent: Node | None, weight: Fraction, groups: Iterable[ResourceGroup]) -> _Node:
    nominal, lending, borrowing = {}, {}, {}
    for g in groups:
        for fq in g.flavors:
            for r in g.covered:
                q = fq.resources.get(r)
                nominal[fq.flavor, r] = q.nominal if q else Fraction(0)
                if q and q.lending_limit is not None:
                    lending[fq.flavor, r] = q.lending_limit
                if q and q.borrowing_limit is not None:
                    borrowing[fq.flavor, r] = q.borrowing_limit
    return _Node(parent, weight, nominal, lending, borrowing)


def held_usage(w: Workload) -> dict[FlavorResource, Fraction]:
    """What admitted ``w`` holds, by flavor and resource (reclaimable pods excluded)."""
    assert w.admission is not None
    held: dict[FlavorResource, Fraction] = defaultdict(Fraction)
    by_name = {ps.name: ps for ps in w.pod_sets}
    for a in w.admission.pod_sets:
        ps = by_name.get(a.name)
        if ps is None:
            continue
        for r, f in a.flavors.items():
            held[f, r] += ps.requests.get(r, Fraction(0)) * w.admitted_count(a.name)
    return dict(held)


def asked_usage(w: Workload, groups: Iterable[ResourceGroup]) -> dict[FlavorResource, Fraction]:
    """What pending ``w`` would hold in its ClusterQueue's first flavor of each resource group
    (the flavor Kueue tries first; the solver may choose another)."""
    first = {r: g.flavors[0].flavor for g in groups if g.flavors for r in g.covered}
    asked: dict[FlavorResource, Fraction] = defaultdict(Fraction)
    for ps in w.pod_sets:
        for r, v in ps.requests.items():
            if r in first:
                asked[first[r], r] += v * ps.count
    return dict(asked)


def lq_usage(consumed: Mapping[str, Fraction], weight: Fraction, resource_weights: Mapping[str, float]) -> Fraction | None:
    """A LocalQueue's weighted usage under admission fair sharing: its consumed resources, each
    times its resource weight (default 1), divided by the queue's weight; ``None`` (after every
    other) for weight 0."""
    if weight <= 0:
        return None
    total = sum((Fraction(resource_weights.get(r, 1.0)) * v for r, v in consumed.items()), Fraction(0))
    return total / weight


def fair_sharing_facts(snapshot: Snapshot, live: Iterable[Workload], settings: KueueSettings
                       ) -> Iterator[tuple[str, tuple[object, ...]]]:
    """The facts of fair sharing and admission fair sharing, as (predicate, arguments); none
    when neither is on. See docs/fair-sharing.md and policies/fairsharing.lp."""
    fair, afs = settings.fair_sharing, settings.admission_fair_sharing
    afs_queues = _afs_queues(snapshot) if afs is not None else set()
    if fair is None and not afs_queues:
        return
    workloads = list(live)
    lq_rank = _lq_ranks(snapshot, afs_queues, afs.resource_weights if afs is not None else ())
    tree = ShareTree(snapshot, (w for w in workloads if w.admission is not None)) if fair is not None else None
    if tree is not None:
        for i, s in enumerate(fair.preemption_strategies):
            yield "fair_strategy", (s, i)
        for n, v in sorted(tree.nodes.items(), key=lambda item: str(item[0])):
            if v.parent is not None:
                yield "fair_weight", (n, ceil(v.weight * 1000))
                yield "fair_share", (n, tree.share(n))
    reclaiming = {q.name for q in snapshot.cluster_queues.values() if q.reclaim_within_cohort != "Never"}
    contested = set()  # roots of trees where some queue reclaims: their admitted workloads may be victims
    pending: dict[str, list[tuple[tuple[object, ...], str, int, int]]] = defaultdict(list)
    preemptor_shares: dict[str, dict[Node, int]] = {}  # pending workload of a reclaiming queue -> shares after
    for w in workloads:
        if w.admission is not None or w.finished:
            continue
        lq = snapshot.local_queues.get(f"{w.namespace}/{w.queue}")
        cq = snapshot.cluster_queues.get(lq.cluster_queue) if lq is not None else None
        if lq is None or cq is None:
            continue
        top, own = 0, 0
        if tree is not None and cq.cohort:
            node = Node("cq", cq.name)
            usage = tree.simulated(node, asked_usage(w, cq.resource_groups))
            shares = {n: tree.share(n, usage) for n in tree.path(node) if tree.nodes[n].parent is not None}
            top, own = shares[list(shares)[-1]], shares[node]
            if cq.name in reclaiming:
                contested.add(list(tree.path(node))[-1])
                preemptor_shares[w.key] = shares
        rank = lq_rank.get(f"{lq.namespace}/{lq.name}", 0)
        pending[cq.name].append(((rank, -w.priority, w.coscheduled, w.created, w.key), w.key, top, own))
    # Within a ClusterQueue, Kueue's order holds (its head goes first); across ClusterQueues the
    # lower share after admission goes first: each workload ranks by the highest shares of those
    # of its ClusterQueue ahead of it and its own, so shares never reorder one ClusterQueue.
    # Only the head of a ClusterQueue (the first not held) preempts across queues in a cycle, as
    # Kueue lets the head of each ClusterQueue preempt: the shares of the others are not needed.
    held = {w.key for w in workloads if w.held}
    for queued in pending.values():
        most, head = (0, 0), None
        for (rank, *_), key, top, own in sorted(queued):
            most = max(most, (top, own))
            yield "fair_rank", (key, *most, rank)
            if head is None and key not in held:
                head = key
        for n, share in preemptor_shares.get(head or "", {}).items():
            yield "fair_preemptor_share", (head, n, share)
    if tree is None:
        return
    for w in workloads:
        if w.admission is None or w.finished or Node("cq", w.admission.cluster_queue) not in tree.nodes:
            continue
        node = Node("cq", w.admission.cluster_queue)
        if list(tree.path(node))[-1] not in contested:
            continue
        after = tree.simulated(node, {fr: -v for fr, v in held_usage(w).items()})
        for n in tree.path(node):
            if tree.nodes[n].parent is not None:
                yield "fair_victim_share", (w.key, n, tree.share(n), tree.share(n, after))


class PreemptionShares:
    """The shares behind a preemption across ClusterQueues under fair sharing, for the victim's
    plan entry (engine/preemption.py): built once per cycle from its admitted workloads."""

    def __init__(self, snapshot: Snapshot, workloads: Iterable[Workload]) -> None:
        self.snapshot = snapshot
        self.by_key = {w.key: w for w in workloads}
        self.tree = ShareTree(snapshot, (w for w in self.by_key.values() if w.admission is not None))

    def between(self, preemptor: str, preemptor_queue: str, victim: str) -> dict[str, object] | None:
        """What Kueue's strategies compare for ``preemptor`` (pending in ``preemptor_queue``) and
        admitted ``victim``: the two nodes under their lowest common cohort, the preemptor's side
        once it is admitted, the victim's side before and after the victim goes (decimal
        fractions of what the cohort lends); ``None`` if they share a ClusterQueue or are in different trees."""
        p, v = self.by_key.get(preemptor), self.by_key.get(victim)
        cq = self.snapshot.cluster_queues.get(preemptor_queue)
        if p is None or v is None or v.admission is None or cq is None or v.admission.cluster_queue == cq.name:
            return None
        p_node, v_node = Node("cq", cq.name), Node("cq", v.admission.cluster_queue)
        if p_node not in self.tree.nodes or v_node not in self.tree.nodes:
            return None
        p_path, v_path = list(self.tree.path(p_node)), list(self.tree.path(v_node))
        common = next((n for n in v_path if n in p_path), None)
        if common is None:
            return None
        p_side, v_side = p_path[p_path.index(common) - 1], v_path[v_path.index(common) - 1]
        admitted = self.tree.simulated(p_node, asked_usage(p, cq.resource_groups))
        gone = self.tree.simulated(v_node, {fr: -a for fr, a in held_usage(v).items()})
        return {"preemptorNode": str(p_side), "victimNode": str(v_side),
                "preemptor": _decimal(self.tree.share(p_side, admitted)), "before": _decimal(self.tree.share(v_side)),
                "after": _decimal(self.tree.share(v_side, gone))}


def _decimal(share: int) -> str:
    """An integer share as a decimal fraction of what the parent lends ("inf" for weight 0)."""
    return "inf" if share >= INFINITE else f"{share / SCALE:.6f}".rstrip("0").rstrip(".")


def _afs_queues(snapshot: Snapshot) -> set[str]:
    """The ClusterQueues whose admission scope is usage-based admission fair sharing."""
    return {q.name for q in snapshot.cluster_queues.values() if q.admission_scope == "UsageBasedAdmissionFairSharing"}


def reorders(snapshot: Snapshot) -> bool:
    """Whether fair sharing or admission fair sharing changes the rank order of ``snapshot``'s
    cycle (then candidate selection, which assumes the built-in order, is off: prune.py)."""
    settings = snapshot.kueue_settings
    return settings.fair_sharing is not None or (settings.admission_fair_sharing is not None and bool(_afs_queues(snapshot)))


def with_settings(snapshot: Snapshot, config: Config) -> Snapshot:
    """``snapshot`` deciding by the fair sharing sections in effect: clueue's ``config``'s where
    set, else those of Kueue's Configuration in the snapshot (kueueconfig.effective_settings)."""
    settings = effective_settings(snapshot.kueue_settings, config)
    if settings == snapshot.kueue_settings:
        return snapshot
    return dataclasses.replace(snapshot, kueue_configs={**snapshot.kueue_configs, KUEUE_CONFIG_MAP: settings})


def _lq_ranks(snapshot: Snapshot, queues: set[str], weights: Iterable[tuple[str, float]]) -> dict[str, int]:
    """LocalQueue key -> its position (from 0, equal usage equal position) by weighted usage
    among the LocalQueues of its ClusterQueue, for ClusterQueues in ``queues``; weight 0 last."""
    resource_weights = dict(weights)
    by_cq: dict[str, dict[str, Fraction | None]] = defaultdict(dict)
    for lq in snapshot.local_queues.values():
        if lq.cluster_queue in queues:
            by_cq[lq.cluster_queue][f"{lq.namespace}/{lq.name}"] = lq_usage(lq.consumed, lq.fair_weight, resource_weights)
    ranks = {}
    for usages in by_cq.values():
        order = sorted({u for u in usages.values() if u is not None})
        for key, u in usages.items():
            ranks[key] = order.index(u) if u is not None else len(order)
    return ranks
