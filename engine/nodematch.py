"""What a pod takes of a node beyond its resource requests, as resources placement can count.

kube-scheduler keeps a pod off a node for reasons other than free cpu and memory. Three of them
are limits of one node that pods share, and placement counts them as resources of the node
(in placement only: quota never sees them), so the solver's class totals, the node-by-node
packing and the shortage reasons all treat them as they treat cpu (docs/placement.md):

- ``pods``: a node holds at most its allocatable ``pods`` (NodeResourcesFit's "Too many
  pods"); every pod that is not terminated and is on the node, or pinned there, counts 1.
- ``hostport/<protocol>/<port>``: a node has each host port once (NodePorts): every pod binding
  it takes it. The host IP is not looked at, so two pods binding one port on different IPs are
  kept apart too (kube-scheduler would let them share the node).
- ``anti-affinity/<n>``: a required pod anti-affinity term with topology key
  ``kubernetes.io/hostname`` (InterPodAffinity): a node has room for one pod that carries the
  term or matches its selector. Exact when the pods carrying a term match it themselves (the
  common "one pod per node" of a gang); otherwise stricter than Kubernetes, which lets pods
  that only match, or only carry, the term share a node.

A required pod affinity term with topology key ``kubernetes.io/hostname`` is a filter instead:
a node carries the label ``pod-affinity/<n>: "yes"`` (for placement only) where a pod on it
matches the term, and the pods carrying the term ask for it as a node selector would.

Pure Python: no clingo here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from .objects import Node, NodeNeeds, PodAffinityTerm
from .kueue_api import HOSTNAME_LABEL  # the only topology key of pod (anti-)affinity placement honours

__all__ = ["PODS", "Demands", "ScopedTerm"]

PODS = "pods"
_PORT = "hostport/"
_ANTI = "anti-affinity/"
_AFFINITY = "pod-affinity/"


@dataclass(frozen=True)
class ScopedTerm:
    """A pod affinity or anti-affinity term with the namespace of the pod that carries it (the
    namespace a term without namespaces means)."""

    term: PodAffinityTerm
    namespace: str

    def matches(self, namespace: str, labels: Mapping[str, str],
                namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
        """Whether a pod in ``namespace`` with ``labels`` is one the term speaks of (keeps away,
        or seeks)."""
        t = self.term
        if t.selector is None:
            return False
        if t.namespaces or t.namespace_selector is not None:
            selected = namespace in t.namespaces or (
                t.namespace_selector is not None and t.namespace_selector.matches(namespace_labels.get(namespace, {})))
        else:
            selected = namespace == self.namespace
        return selected and t.selector.matches(labels)


def _scoped(namespace: str, terms: Iterable[PodAffinityTerm]) -> list[ScopedTerm]:
    """The ``terms`` placement honours (topology key: the hostname), scoped to ``namespace``."""
    return [ScopedTerm(t, namespace) for t in terms if t.topology_key == HOSTNAME_LABEL]


class Demands:
    """The placement-only resources of a cycle: which are in play, what each node has of them,
    and what each pod takes, and the pod affinity labels of nodes. ``pending``: (namespace,
    needs) of every pod set to place; ``running``: (node, namespace, needs) of every pod on a
    node (bound or pinned, not terminated)."""

    def __init__(self, nodes: Iterable[Node], pending: Iterable[tuple[str, NodeNeeds]],
                 running: Iterable[tuple[str, str, NodeNeeds]], namespace_labels: Mapping[str, Mapping[str, str]],
                 most_pods: int) -> None:
        pending, running = list(dict.fromkeys(pending)), list(running)
        self.namespace_labels = namespace_labels
        # A node without allocatable pods is not limited (a kubelet always reports it; test
        # snapshots often leave it out): none counts pods if no node reports them.
        self.count_pods = any(PODS in n.allocatable for n in nodes)
        self.most_pods = Fraction(most_pods)
        self.asked_ports = {p for _, needs in pending for p in needs.host_ports}
        self.ports = sorted(self.asked_ports)
        terms = {s for ns, needs in pending for s in _scoped(ns, needs.anti_affinity)}
        # a running pod's term matters if some pod to place is one it keeps away
        terms |= {s for _, ns, needs in running for s in _scoped(ns, needs.anti_affinity)
                  if any(s.matches(pns, dict(p.labels), namespace_labels) for pns, p in pending)}
        self.terms = sorted(terms, key=repr)
        self.affinity = sorted({s for ns, needs in pending for s in _scoped(ns, needs.affinity)}, key=repr)
        self.matched: dict[str, set[int]] = {}  # node -> the affinity terms a pod on it matches
        for node, ns, needs in running:
            for i, s in enumerate(self.affinity):
                if s.matches(ns, dict(needs.labels), namespace_labels):
                    self.matched.setdefault(node, set()).add(i)
        self.anywhere = set().union(*self.matched.values())

    def names(self) -> list[str]:
        """The resources in play, by name."""
        return ([PODS] if self.count_pods else []) + [f"{_PORT}{proto}/{port}" for proto, port in self.ports] + \
            [f"{_ANTI}{i}" for i in range(len(self.terms))]

    def capacity(self, node: Node) -> dict[str, Fraction]:
        """What ``node`` has of each resource in play, before any pod takes some."""
        out = {r: Fraction(1) for r in self.names()}
        if self.count_pods:
            out[PODS] = node.allocatable.get(PODS, self.most_pods)
        return out

    def takes(self, namespace: str, needs: NodeNeeds) -> dict[str, Fraction]:
        """What one pod in ``namespace`` asking ``needs`` takes of the resources in play."""
        out: dict[str, Fraction] = {PODS: Fraction(1)} if self.count_pods else {}
        for proto, port in needs.host_ports:
            if (proto, port) in self.asked_ports:
                out[f"{_PORT}{proto}/{port}"] = Fraction(1)
        if self.terms:
            mine = set(_scoped(namespace, needs.anti_affinity))
            labels = dict(needs.labels)
            for i, s in enumerate(self.terms):
                if s in mine or s.matches(namespace, labels, self.namespace_labels):
                    out[f"{_ANTI}{i}"] = Fraction(1)
        return out

    def labels(self, node: str) -> dict[str, str]:
        """The pod affinity labels of ``node``: ``pod-affinity/<n>: "yes"`` for each term in play
        that a pod on it matches."""
        return {f"{_AFFINITY}{i}": "yes" for i in sorted(self.matched.get(node, ()))}

    def label_keys(self) -> list[str]:
        """The keys of :meth:`labels` in play."""
        return [f"{_AFFINITY}{i}" for i in range(len(self.affinity))]

    def selector(self, namespace: str, needs: NodeNeeds) -> tuple[tuple[str, str], ...]:
        """The pod affinity labels a node needs for a pod in ``namespace`` asking ``needs``: of
        each of its terms that some pod on a node matches. A term no pod matches yet keeps the
        pod off every node, but when the pod matches it itself (Kubernetes lets the first such
        pod go anywhere)."""
        out = []
        labels = dict(needs.labels)
        for s in _scoped(namespace, needs.affinity):
            i = self.affinity.index(s)
            if i in self.anywhere or not s.matches(namespace, labels, self.namespace_labels):
                out.append((f"{_AFFINITY}{i}", "yes"))
        return tuple(out)

    def cap(self, free: Mapping[str, Fraction]) -> dict[str, Fraction]:
        """``free`` with the pods free capped as :meth:`capacity` caps them, so that nodes alike
        but in how many more pods than could ever come they hold fall into one class."""
        if PODS not in free:
            return dict(free)
        return {**free, PODS: min(free[PODS], self.most_pods)}

