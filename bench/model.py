"""A plain-Python model of quotas and eligibility, for the references the engine is measured against.

This is deliberately a second, hand-written implementation of the semantics that
``policies/capacity.lp``, ``quota.lp`` and ``eligibility.lp`` document, so that the greedy
reference and the upper bound never ask the engine what fits. It works on the engine's typed
snapshot and workloads (the input layer is shared; the decision logic is not).

Quota tree: ClusterQueues are leaves, cohorts inner nodes. For every flavor F and resource R:

- ``subtree(N)`` is the nominal quota of N and everything below it;
- ``guaranteed(N) = subtree(N) - lendingLimit(N)`` when N has a lending limit below its subtree
  quota: that part is kept for N's subtree and never lent;
- the effective usage ``U(cq)`` is what its workloads use; ``U(cohort)`` is the sum over its
  children C of ``max(U(C), guaranteed(C))``;
- a root may use its subtree quota; a non-root with a borrowing limit B may use
  ``subtree + B``; a non-root without one is bounded only by the nodes above it.

A workload fits when, after adding its usage, ``U(N) <= limit(N)`` for every node N on the way
from its ClusterQueue to the root that has a limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Iterable, Mapping, Sequence

from clueue.engine import Snapshot
from clueue.engine.objects import ClusterQueue, PodSetSpec, ResourceGroup
from clueue.engine.workloads import Workload

__all__ = ["Node", "QuotaTree", "Candidate", "Eligibility", "eligibility", "rank_key", "workload_resources"]

Node = tuple[str, str]  # ("cq", name) or ("cohort", name)
Pair = tuple[str, str]  # (flavor, resource)
ZERO = Fraction(0)


def rank_key(w: Workload) -> tuple[int, int, str]:
    """The rank order of ``policies/ordering.lp``: priority desc, creation time asc, then name."""
    return (-w.priority, w.created, w.key)


def workload_resources(pod_sets: Iterable[PodSetSpec]) -> dict[str, Fraction]:
    """Total requests of a workload per resource name (count x per-pod request, over pod sets).

    >>> workload_resources([PodSetSpec("a", 3, {"cpu": Fraction(2)}), PodSetSpec("b", 1, {"cpu": Fraction(1)})])
    {'cpu': Fraction(7, 1)}
    """
    out: dict[str, Fraction] = {}
    for ps in pod_sets:
        for r, v in ps.requests.items():
            out[r] = out.get(r, ZERO) + v * ps.count
    return out


class QuotaTree:
    """The quota tree of a snapshot with its current effective usage (mutable, for simulations)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.parent: dict[Node, Node | None] = {}
        own: dict[tuple[Node, str, str], Fraction] = {}
        borrowing: dict[tuple[Node, str, str], Fraction] = {}
        lending: dict[tuple[Node, str, str], Fraction] = {}

        def read(node: Node, groups: tuple[ResourceGroup, ...]) -> None:
            for g in groups:
                for fq in g.flavors:
                    for r in g.covered:
                        q = fq.resources.get(r)
                        own[(node, fq.flavor, r)] = q.nominal if q else ZERO
                        if q and q.borrowing_limit is not None:
                            borrowing[(node, fq.flavor, r)] = q.borrowing_limit
                        if q and q.lending_limit is not None:
                            lending[(node, fq.flavor, r)] = q.lending_limit

        for c in snapshot.cohorts.values():
            self.parent[("cohort", c.name)] = ("cohort", c.parent) if c.parent else None
            read(("cohort", c.name), c.resource_groups)
        for cq in snapshot.cluster_queues.values():
            self.parent[("cq", cq.name)] = ("cohort", cq.cohort) if cq.cohort else None
            read(("cq", cq.name), cq.resource_groups)
        for node in list(self.parent.values()):
            while node is not None and node not in self.parent:
                self.parent[node] = None  # a cohort only named by its children
                node = None
        self._check_cycles()
        self.children: dict[Node, list[Node]] = {n: [] for n in self.parent}
        for n, p in self.parent.items():
            if p is not None:
                self.children[p].append(n)
        self.pairs: tuple[Pair, ...] = tuple(sorted({(f, r) for (_, f, r) in own}))
        order = self._bottom_up()
        self.subtree: dict[tuple[Node, str, str], Fraction] = {}
        for n in order:
            for f, r in self.pairs:
                self.subtree[(n, f, r)] = own.get((n, f, r), ZERO) + sum(
                    (self.subtree[(c, f, r)] for c in self.children[n]), ZERO)
        self.guaranteed: dict[tuple[Node, str, str], Fraction] = {
            k: self.subtree[k] - v for k, v in lending.items() if self.subtree.get(k, ZERO) > v}
        self.limit: dict[tuple[Node, str, str], Fraction] = {}
        for n in order:
            for f, r in self.pairs:
                if self.parent[n] is None:
                    self.limit[(n, f, r)] = self.subtree[(n, f, r)]
                elif (n, f, r) in borrowing:
                    self.limit[(n, f, r)] = self.subtree[(n, f, r)] + borrowing[(n, f, r)]
        self.nominal = {k: v for k, v in own.items() if k[0][0] == "cq"}
        self.usage: dict[tuple[Node, str, str], Fraction] = {}  # effective usage U
        self.raw: dict[tuple[Node, str, str], Fraction] = {}  # plain usage of the subtree
        for n in order:
            for f, r in self.pairs:
                self.usage[(n, f, r)] = sum((self._contribution(c, f, r, self.usage[(c, f, r)])
                                             for c in self.children[n]), ZERO)
                self.raw[(n, f, r)] = ZERO
        self._paths: dict[str, tuple[Node, ...]] = {}

    def _check_cycles(self) -> None:
        for start in self.parent:
            seen, node = {start}, self.parent[start]
            while node is not None:
                if node in seen:
                    raise ValueError(f"cohort parents form a cycle at {node[1]}")
                seen.add(node)
                node = self.parent.get(node)

    def _bottom_up(self) -> list[Node]:
        depth: dict[Node, int] = {}
        for n in self.parent:
            d, p = 0, self.parent[n]
            while p is not None:
                d, p = d + 1, self.parent[p]
            depth[n] = d
        return sorted(self.parent, key=lambda n: (-depth[n], n))

    def _contribution(self, node: Node, f: str, r: str, u: Fraction) -> Fraction:
        g = self.guaranteed.get((node, f, r))
        return u if g is None or u >= g else g

    def path(self, cluster_queue: str) -> tuple[Node, ...]:
        """The nodes from ClusterQueue ``cluster_queue`` up to its root."""
        p = self._paths.get(cluster_queue)
        if p is None:
            nodes: list[Node] = []
            node: Node | None = ("cq", cluster_queue)
            while node is not None:
                nodes.append(node)
                node = self.parent.get(node)
            p = self._paths[cluster_queue] = tuple(nodes)
        return p

    def root(self, cluster_queue: str) -> Node:
        return self.path(cluster_queue)[-1]

    def _walk(self, cluster_queue: str, f: str, r: str, delta: Fraction) -> list[tuple[Node, Fraction]]:
        """New effective usage of each node on the path after adding ``delta`` at the leaf."""
        out = []
        d = delta
        for node in self.path(cluster_queue):
            old = self.usage[(node, f, r)]
            new = old + d
            out.append((node, new))
            d = self._contribution(node, f, r, new) - self._contribution(node, f, r, old)
        return out

    def fits(self, cluster_queue: str, deltas: Mapping[Pair, Fraction]) -> bool:
        """Whether adding ``deltas`` ((flavor, resource) -> amount) to the ClusterQueue keeps every limit."""
        for (f, r), delta in deltas.items():
            if (("cq", cluster_queue), f, r) not in self.usage:
                return False  # no node of the tree holds quota of r in f
            for node, new in self._walk(cluster_queue, f, r, delta):
                lim = self.limit.get((node, f, r))
                if lim is not None and new > lim:
                    return False
        return True

    def add(self, cluster_queue: str, deltas: Mapping[Pair, Fraction]) -> None:
        """Add (or, with negative amounts, remove) usage of the ClusterQueue."""
        for (f, r), delta in deltas.items():
            if (("cq", cluster_queue), f, r) not in self.usage:
                continue
            for node, new in self._walk(cluster_queue, f, r, delta):
                self.usage[(node, f, r)] = new
                self.raw[(node, f, r)] += delta

    def borrows(self, cluster_queue: str, f: str, r: str, delta: Fraction = ZERO) -> bool:
        """Whether the ClusterQueue would use more than its nominal quota of r in f."""
        node: Node = ("cq", cluster_queue)
        return self.usage.get((node, f, r), ZERO) + delta > self.nominal.get((node, f, r), ZERO)


@dataclass(frozen=True)
class Candidate:
    """A pending workload that may be admitted, with what it may choose.

    ``options[i][g]`` lists, in the ClusterQueue's flavor order, the flavors that pod set ``i``
    may use for resource group ``g`` (taints tolerated, node labels compatible).
    """

    workload: Workload
    cluster_queue: str
    groups: tuple[tuple[int, ...], ...]  # per pod set: indices of the resource groups it needs
    options: tuple[Mapping[int, tuple[str, ...]], ...]
    covered: Mapping[int, tuple[str, ...]]  # resource group index -> resources
    strict_fifo: bool
    try_next_flavor: bool

    @property
    def key(self) -> str:
        return str(self.workload.key)


@dataclass(frozen=True)
class Eligibility:
    """Candidates in rank order, usage held by earlier admissions, and why others are out."""

    candidates: tuple[Candidate, ...]
    held: tuple[tuple[str, Mapping[Pair, Fraction]], ...]  # (ClusterQueue, usage) per admitted workload
    excluded: Mapping[str, str] = field(default_factory=dict)  # workload -> reason


def _namespace_labels(snapshot: Snapshot, name: str) -> dict[str, str]:
    ns = snapshot.namespaces.get(name)
    return {**(ns.labels if ns else {}), "kubernetes.io/metadata.name": name}


def _flavor_fits(snapshot: Snapshot, flavor: str, ps: PodSetSpec) -> bool:
    rf = snapshot.flavors[flavor]
    for t in rf.node_taints:
        if t.effect == "PreferNoSchedule":
            continue
        if not any((tol.effect in ("", t.effect)) and (
                (tol.operator == "Equal" and tol.key == t.key and tol.value == t.value)
                or (tol.operator == "Exists" and tol.key in (t.key, ""))) for tol in ps.tolerations):
            return False
    for req in ps.node_labels:
        if req.key in rf.node_labels and rf.node_labels[req.key] not in req.values:
            return False
    return True


def _candidate(snapshot: Snapshot, w: Workload, cq: ClusterQueue) -> Candidate | str:
    if cq.stopped:
        return "ClusterQueueStopped"
    if any(fq.flavor not in snapshot.flavors for g in cq.resource_groups for fq in g.flavors):
        return "ClusterQueueInactive"
    if not (cq.namespace_selector is not None and cq.namespace_selector.matches(_namespace_labels(snapshot, w.namespace))):
        return "NamespaceNotSelected"
    group_of = {r: gi for gi, g in enumerate(cq.resource_groups) for r in g.covered}
    groups, options = [], []
    for ps in w.pod_sets:
        needed = sorted({group_of[r] for r in ps.requests if r in group_of})
        if any(r not in group_of for r in ps.requests):
            return "ResourceNotCovered"
        opts = {gi: tuple(fq.flavor for fq in cq.resource_groups[gi].flavors if _flavor_fits(snapshot, fq.flavor, ps))
                for gi in needed}
        if any(not o for o in opts.values()):
            return "NoFittingFlavor"
        groups.append(tuple(needed))
        options.append(opts)
    return Candidate(w, cq.name, tuple(groups), tuple(options),
                     {gi: g.covered for gi, g in enumerate(cq.resource_groups)},
                     cq.queueing_strategy == "StrictFIFO", cq.when_can_borrow == "TryNextFlavor")


def _held_usage(w: Workload) -> dict[Pair, Fraction]:
    assert w.admission is not None
    out: dict[Pair, Fraction] = {}
    specs = {ps.name: ps for ps in w.pod_sets}
    for a in w.admission.pod_sets:
        ps = specs.get(a.name)
        if ps is None:
            continue
        n = w.admitted_count(a.name)
        for r, f in a.flavors.items():
            if r in ps.requests:
                out[(f, r)] = out.get((f, r), ZERO) + ps.requests[r] * n
    return out


def eligibility(snapshot: Snapshot, workloads: Sequence[Workload]) -> Eligibility:
    """Split workloads into candidates (in rank order), held usage and excluded ones."""
    candidates: list[Candidate] = []
    held: list[tuple[str, Mapping[Pair, Fraction]]] = []
    excluded: dict[str, str] = {}
    for w in sorted(workloads, key=rank_key):
        if w.finished:
            continue
        lq = snapshot.local_queues.get(f"{w.namespace}/{w.queue}")
        if w.admission is not None:
            cq_name = w.admission.cluster_queue or (lq.cluster_queue if lq else "")
            if cq_name in snapshot.cluster_queues:
                held.append((cq_name, _held_usage(w)))
            continue
        if w.held:
            excluded[w.key] = "Held"
            continue
        if lq is None:
            excluded[w.key] = "LocalQueueNotFound"
            continue
        cq = snapshot.cluster_queues.get(lq.cluster_queue)
        if cq is None:
            excluded[w.key] = "ClusterQueueNotFound"
            continue
        c = _candidate(snapshot, w, cq)
        if isinstance(c, str):
            excluded[w.key] = c
        else:
            candidates.append(c)
    return Eligibility(tuple(candidates), tuple(held), excluded)
