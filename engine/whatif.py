"""What would it take: checked counterfactuals for the workloads a cycle leaves out.

For a pending workload, each suggestion names one change to the snapshot (more nominal quota
of a ClusterQueue or Cohort, a higher borrowing or lending limit, admitted workloads finished)
and is shown only once a decision cycle on the changed snapshot admits the workload. Amounts
are least: one unit less (the unit the solver counts the quota tree in) does not admit it,
found by re-solves (a scan of small raises, else the stated shortfall, else bisection). A
re-solve decides only the quota tree of the workload (its ClusterQueues, Cohorts and the
workloads queued or admitted there; the whole snapshot when it has Nodes, which trees share)
and the pending workloads up to it in line; re-solves are cached per tree and change, and with
a fixed rank order one answers for every workload it kept, so workloads of one tree asking about
the same change share them. All of it runs under its own time budget (``Config.whatif_budget``);
what the budget cut short is said, never guessed.

Pure: it calls the decision cycle (cycle.py) on modified snapshots. docs/what-if.md describes
the semantics.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Iterable, Mapping

from .compiler import resource_units
from .config import Config
from .facts import Node
from .prune import rank_key
from .fairsharing import reorders, with_settings
from .objects import FlavorQuotas, ResourceGroup, ResourceQuota
from .plan import Plan, WorkloadEntry
from .policy import Policy
from .quantity import format_quantity, parse_quantity
from .reasons import Reason, make_reason
from .snapshot import Snapshot
from .workloads import build_workloads

__all__ = ["Change", "LIMITS", "what_if", "with_suggestions", "admits", "apply_changes"]

#: Up to this many units, every raise is tried (exact least); beyond, bisection (docs/what-if.md).
_SCAN = 32

#: In a quota tree with more pending workloads asked about than this, only the first in line of
#: each shape (ClusterQueue, pod sets, reasons) is searched; the others refer to it.
_SHARE_ABOVE = 32

#: A re-solve for one workload keeps at least this many of the tree's ranked pending workloads.
_KEEP = 64

#: Which limit of a quota a change raises: spec field names, as users write them.
LIMITS = ("nominalQuota", "borrowingLimit", "lendingLimit")


@dataclass(frozen=True)
class Change:
    """Raise one limit of one quota by ``amount``: ``node`` is ``cq:NAME`` or ``cohort:NAME``."""

    node: str
    flavor: str
    resource: str
    limit: str  # one of LIMITS
    amount: Fraction


def _raise(quota: ResourceQuota, limit: str, amount: Fraction) -> ResourceQuota:
    if limit == "nominalQuota":
        return dataclasses.replace(quota, nominal=quota.nominal + amount)
    if limit == "borrowingLimit":
        assert quota.borrowing_limit is not None
        return dataclasses.replace(quota, borrowing_limit=quota.borrowing_limit + amount)
    assert quota.lending_limit is not None
    return dataclasses.replace(quota, lending_limit=quota.lending_limit + amount)


def _groups(groups: tuple[ResourceGroup, ...], changes: Iterable[Change]) -> tuple[ResourceGroup, ...]:
    by = {(c.flavor, c.resource): c for c in changes}
    return tuple(dataclasses.replace(g, flavors=tuple(
        FlavorQuotas(fq.flavor, {r: _raise(q, by[fq.flavor, r].limit, by[fq.flavor, r].amount)
                                 if (fq.flavor, r) in by else q for r, q in fq.resources.items()})
        for fq in g.flavors)) for g in groups)


def apply_changes(snapshot: Snapshot, changes: Iterable[Change], finished: Iterable[str] = ()) -> Snapshot:
    """``snapshot`` with ``changes`` made and the workloads ``finished`` (their Workload objects
    and pods) gone."""
    changes = list(changes)
    by_node: dict[str, list[Change]] = {}
    for c in changes:
        by_node.setdefault(c.node, []).append(c)
    queues = dict(snapshot.cluster_queues)
    cohorts = dict(snapshot.cohorts)
    for node, cs in by_node.items():
        kind, _, name = node.partition(":")
        if kind == "cq":
            queues[name] = dataclasses.replace(queues[name], resource_groups=_groups(queues[name].resource_groups, cs))
        else:
            cohorts[name] = dataclasses.replace(cohorts[name], resource_groups=_groups(cohorts[name].resource_groups, cs))
    gone = set(finished)
    return dataclasses.replace(
        snapshot, cluster_queues=queues, cohorts=cohorts,
        workloads={k: w for k, w in snapshot.workloads.items() if k not in gone},
        pods={k: p for k, p in snapshot.pods.items() if k not in gone})


def admits(plan: Plan, key: str) -> bool:
    """Whether ``plan`` admits ``key`` now (an ``admit`` action; a preemptor still waits)."""
    return any(a.kind == "admit" and a.workload == key for a in plan.actions)


def _quota(groups: tuple[ResourceGroup, ...], flavor: str, resource: str) -> ResourceQuota | None:
    for g in groups:
        for fq in g.flavors:
            if fq.flavor == flavor and resource in fq.resources:
                return fq.resources[resource]
    return None


class _Tree:
    """One quota tree: its ClusterQueues and Cohorts, and the part of the snapshot a re-solve
    of it needs (cached re-solves: (changes, finished) -> workloads admitted)."""

    def __init__(self, snapshot: Snapshot, members: set[str], pods: Mapping[str, set[str]],
                 run: Callable[[Snapshot], Plan]) -> None:
        self.members = members
        self.pods = pods  # workload -> its pods (namespace/name)
        self.run = run
        pod_keys = set().union(*pods.values()) if pods else set()
        if snapshot.nodes:  # trees share the nodes: decide the whole snapshot
            self.base = snapshot
        else:
            self.base = dataclasses.replace(
                snapshot, cluster_queues={k: q for k, q in snapshot.cluster_queues.items() if f"cq:{k}" in members},
                workloads={k: w for k, w in snapshot.workloads.items() if k in pods},
                pods={k: p for k, p in snapshot.pods.items() if k in pod_keys})
        self.cache: dict[tuple[frozenset[Change], frozenset[str]], frozenset[str]] = {}
        # (changes, finished) -> (how many ranked pending workloads were kept, admitted): with a
        # fixed rank order, a re-solve keeping the first k answers for every workload among them
        self.ahead: dict[tuple[frozenset[Change], frozenset[str]], list[tuple[int, frozenset[str]]]] = {}
        self.solves = 0

    def admitted(self, changes: Iterable[Change], finished: Iterable[str] = ()) -> frozenset[str]:
        key = (frozenset(c for c in changes if c.amount), frozenset(finished))
        if key not in self.cache:
            self.solves += 1
            gone = set(key[1]).union(*(self.pods.get(w, ()) for w in key[1]))
            plan = self.run(apply_changes(self.base, key[0], gone))
            if plan.solver.budget_exhausted:  # a re-solve cut short proves nothing either way
                raise _OutOfTime
            self.cache[key] = frozenset(a.workload for a in plan.actions if a.kind == "admit")
        return self.cache[key]

    def admitted_ahead(self, changes: Iterable[Change], finished: Iterable[str], ranked: list[str],
                       need: int) -> frozenset[str]:
        """Admitted, deciding at least the first ``need`` of the ranked pending workloads
        ``ranked`` (the rest left out): any re-solve that kept as many answers, so the kept count
        is rounded up to a power of two (at least :data:`_KEEP`), which lets the workloads near
        each other in line share their re-solves."""
        key = (frozenset(c for c in changes if c.amount), frozenset(finished))
        for kept, got in self.ahead.get(key, ()):
            if kept >= need:
                return got
        kept = min(len(ranked), max(_KEEP, 1 << max(0, need - 1).bit_length()))
        got = self.admitted(key[0], key[1].union(ranked[kept:]))
        self.ahead.setdefault(key, []).append((kept, got))
        return got


class _Before:
    """A tree's re-solves for one workload, the ``kept``-th of the tree's ranked pending
    workloads ``ranked`` (all of them kept if it is not ranked): those ranked after it are left
    out (in rank order they take nothing from it), which keeps each re-solve small. ``exact``:
    the rank order is fixed (built-in ordering, no fair sharing, no Nodes), so leaving them out
    changes nothing for it: its answers need no confirmation with every pending workload, and
    re-solves are shared with the workloads near it in line (:meth:`_Tree.admitted_ahead`)."""

    def __init__(self, tree: _Tree, ranked: list[str], kept: int, exact: bool = False) -> None:
        self.tree = tree
        self.ranked = ranked
        self.kept = kept
        self.later = frozenset(ranked[kept:])
        self.exact = exact

    @property
    def unconfirmed(self) -> bool:
        """Whether an answer found here must be confirmed with :meth:`full`."""
        return bool(self.later) and not self.exact

    def admitted(self, changes: Iterable[Change], finished: Iterable[str] = ()) -> frozenset[str]:
        if self.exact:
            return self.tree.admitted_ahead(changes, finished, self.ranked, self.kept)
        return self.tree.admitted(changes, self.later.union(finished))

    def full(self) -> _Before:
        """The same re-solves with every pending workload of the tree."""
        return _Before(self.tree, self.ranked, len(self.ranked), self.exact)


class _OutOfTime(Exception):
    pass


def what_if(snapshot: Snapshot, policy: Policy, config: Config, plan: Plan,
            keys: Iterable[str] | None = None,
            run: Callable[[Snapshot, Policy, Config], Plan] | None = None) -> dict[str, tuple[Reason, ...]]:
    """Checked suggestions for each pending workload of ``plan`` (those of ``keys`` only, if
    given), by workload: :data:`reasons.CATALOG` codes ``NeedsQuota``, ``NeedsLimit``,
    ``NeedsFinished``, ``PositionInLine`` and ``WhatIfCutShort``.

    ``run`` decides a snapshot (default: :func:`cycle.run_cycle`).
    """
    if run is None:
        from .cycle import run_cycle as run
    deadline = time.monotonic() + config.whatif_budget
    built = build_workloads(snapshot, config)
    units = resource_units(snapshot, built.workloads)
    by_key = {w.key: w for w in built.workloads}
    wanted = None if keys is None else set(keys)
    entries = [e for e in plan.workloads if e.state == "pending" and e.name in by_key
               and (wanted is None or e.name in wanted)]

    # the quota trees: nodes (cq:NAME, cohort:NAME) and workloads of each
    tree_of_queue = {q: units.node_tree.get(Node("cq", q)) for q in snapshot.cluster_queues}
    members: dict[Node | None, set[str]] = {}
    for q, root in tree_of_queue.items():
        members.setdefault(root, set()).add(f"cq:{q}")
    for n, root in units.node_tree.items():
        members.setdefault(root, set()).add(f"{n.kind}:{n.name}" if n.kind != "cq" else f"cq:{n.name}")
    workload_tree = {w.key: units.tree(w.namespace, w.queue, w.admission.cluster_queue if w.admission else "")
                     for w in built.workloads}
    trees: dict[Node | None, _Tree] = {}

    def tree(root: Node | None) -> _Tree:
        if root not in trees:
            pods = {w.key: {f"{p.namespace}/{p.name}" for ps in w.pods.values() for p in ps}
                    for w in built.workloads if workload_tree[w.key] == root}
            trees[root] = _Tree(snapshot, members.get(root, set()), pods, lambda s: run(s, policy, dataclasses.replace(
                config, time_budget=max(0.01, min(config.time_budget, deadline - time.monotonic())))))
        return trees[root]

    # Whether the rank order is fixed: in the built-in ordering without fair sharing a workload's
    # rank does not depend on usage, and without Nodes nothing ranked after it is placed before it.
    fixed = not policy.user_files and not snapshot.nodes and not reorders(with_settings(snapshot, config))
    out: dict[str, tuple[Reason, ...]] = {}
    asked: dict[Node | None, int] = {}
    for e in entries:
        asked[workload_tree[e.name]] = asked.get(workload_tree[e.name], 0) + 1
    first: dict[object, str] = {}  # (ClusterQueue, pod sets, reason codes) -> the first in line of that shape
    # per tree, once: its pending workloads (ranked ones in rank order, then the others) and admitted ones
    pending: dict[Node | None, list[WorkloadEntry]] = {}
    running: dict[Node | None, list[WorkloadEntry]] = {}
    for x in sorted(plan.workloads, key=lambda x: (x.rank is None, x.rank or 0, x.name)):
        if x.state in ("pending", "admitted") and x.name in workload_tree:
            (pending if x.state == "pending" else running).setdefault(workload_tree[x.name], []).append(x)
    ranked = {root: sum(1 for x in xs if x.rank is not None) for root, xs in pending.items()}
    # the line a re-solve cuts after the workload asked about: the cycle's ranked ones; with the
    # rank order fixed, every pending workload of the tree in the built-in order (prune.py), so
    # that one the cycle left out of its solve is decided beside those ahead of it only
    line = {root: [x.name for x in xs[:ranked[root]]] for root, xs in pending.items()}
    if fixed:
        line = {root: sorted((x.name for x in xs), key=lambda k: rank_key(by_key[k])) for root, xs in pending.items()}
    place = {k: i for names in line.values() for i, k in enumerate(names)}
    for e in sorted(entries, key=lambda e: (e.rank is None, e.rank or 0, e.name)):
        root = workload_tree[e.name]
        step = units.trees.get(root, {})
        suggestions: list[Reason] = []
        queued = pending[root]
        at = queued.index(e) if e.rank is not None else ranked[root]
        ahead = queued[:at] if e.rank is not None else []
        shape = (e.cluster_queue, tuple((p.count, tuple(sorted(p.requests.items()))) for p in e.pod_sets),
                 tuple(sorted(r.code for r in e.reasons)))
        # same shape and queue, further back in line, in a long line: what admits the first comes first
        if shape in first and asked[root] > _SHARE_ABOVE:
            out[e.name] = (make_reason("AfterSameShape", workload=first[shape]),
                           *([make_reason("PositionInLine", position=len(ahead) + 1, ahead=[x.name for x in ahead][:3],
                                          count=len(ahead))] if e.rank is not None else []))
            continue
        first[shape] = e.name
        t = _Before(tree(root), line[root], place[e.name] + 1 if e.name in place else len(line[root]), fixed)
        try:
            if time.monotonic() >= deadline:
                raise _OutOfTime
            # bound of a raise: what it and every pending workload that may be ahead of it ask (with
            # the rank order fixed, what the whole tree asks: the same bound, so the same re-solves,
            # for every workload of the tree)
            suggestions += _quota_suggestions(snapshot, t, e, step, deadline,
                                              queued if e.rank is None or fixed else
                                              [e, *ahead, *queued[ranked[root]:]])
            suggestions += _finish_suggestion(t, e, running.get(root, []), deadline)
        except _OutOfTime:
            suggestions.append(make_reason("WhatIfCutShort", budgetSeconds=config.whatif_budget))
        if e.rank is not None:
            suggestions.append(make_reason("PositionInLine", position=len(ahead) + 1,
                                           ahead=[x.name for x in ahead][:3], count=len(ahead)))
        out[e.name] = tuple(suggestions)
    return out


def _quota_suggestions(snapshot: Snapshot, t: _Before, e: WorkloadEntry, step: Mapping[str, Fraction],
                       deadline: float, queued: list[WorkloadEntry]) -> list[Reason]:
    """The least raise of nominal quota (of its ClusterQueue, then each Cohort above it) and of
    its borrowing limit, per flavor it is short of quota in; and lending limits of others."""
    cq = snapshot.cluster_queues.get(e.cluster_queue or "")
    if cq is None:
        return []
    short: dict[str, dict[str, Fraction]] = {}  # flavor -> resource -> stated shortfall
    for r in e.reasons:
        if r.code == "InsufficientQuota":
            short.setdefault(r.details["flavor"], {})[r.details["resource"]] = parse_quantity(r.details["short"])
    # generous upper bound: what the workloads of ``queued`` ask (it among them)
    total: dict[str, Fraction] = {}
    for x in queued:
        for ps in x.pod_sets:
            for res, q in ps.requests.items():
                total[res] = total.get(res, Fraction(0)) + parse_quantity(q) * ps.count
    out = []
    for flavor, resources in sorted(short.items()):
        targets: list[tuple[str, str, str]] = [(f"cq:{cq.name}", "nominalQuota", "NeedsQuota")]
        cohort = cq.cohort
        while cohort is not None and cohort in snapshot.cohorts:
            c = snapshot.cohorts[cohort]
            if all(_quota(c.resource_groups, flavor, res) is not None for res in resources):
                targets.append((f"cohort:{cohort}", "nominalQuota", "NeedsQuota"))
            cohort = c.parent
        if all((q := _quota(cq.resource_groups, flavor, res)) is not None and q.borrowing_limit is not None
               for res in resources):
            targets.append((f"cq:{cq.name}", "borrowingLimit", "NeedsLimit"))
        for other in sorted(snapshot.cluster_queues.values(), key=lambda q: q.name):
            if other.name != cq.name and f"cq:{other.name}" in t.tree.members and all((q := _quota(other.resource_groups, flavor, res)) is not None
                            and q.lending_limit is not None for res in resources):
                targets.append((f"cq:{other.name}", "lendingLimit", "NeedsLimit"))
        for node, limit, code in targets:
            found = _least(t, e.name, node, flavor, limit, resources, step, total, deadline)
            if found is None:
                continue
            groups = (snapshot.cluster_queues[node[3:]].resource_groups if node.startswith("cq:")
                      else snapshot.cohorts[node[7:]].resource_groups)
            for c in found:
                q = _quota(groups, flavor, c.resource)
                assert q is not None
                now = {"nominalQuota": q.nominal, "borrowingLimit": q.borrowing_limit,
                       "lendingLimit": q.lending_limit}[limit]
                kind, _, name = node.partition(":")
                out.append(make_reason(code, kind="ClusterQueue" if kind == "cq" else "Cohort", name=name,
                                       flavor=flavor, resource=c.resource, limit=limit,
                                       add=format_quantity(c.amount), now=format_quantity(now or Fraction(0)),
                                       less=format_quantity(c.amount - step.get(c.resource, Fraction(1))),
                                       stated=format_quantity(resources[c.resource])))
    return out


def _least(t: _Before, key: str, node: str, flavor: str, limit: str, resources: Mapping[str, Fraction],
           step: Mapping[str, Fraction], total: Mapping[str, Fraction], deadline: float) -> list[Change] | None:
    """The least raise of ``limit`` of every resource of ``resources`` at ``node`` that admits
    ``key``, coordinate by coordinate (each one unit less does not admit it); None if raising
    them all to the upper bound does not admit it."""
    unit = {r: step.get(r, Fraction(1)) for r in resources}
    top = {r: -(-total.get(r, resources[r]) // unit[r]) for r in resources}  # in units, rounded up

    def ok(view: _Before, amounts: Mapping[str, int]) -> bool:
        if time.monotonic() >= deadline:
            raise _OutOfTime
        return key in view.admitted([Change(node, flavor, r, limit, unit[r] * n) for r, n in amounts.items()])

    def search(view: _Before) -> dict[str, int] | None:
        # Admission need not grow with quota: a raise may let a workload ahead in line in, which
        # then takes more than the raise. So up to _SCAN units every amount is tried from 0 up
        # (the least is exact).
        if all(n <= _SCAN for n in top.values()):
            current = dict(top)
            if not ok(view, current):
                return None
            for r in sorted(resources):
                current[r] = next(n for n in range(current[r] + 1) if n == current[r] or ok(view, {**current, r: n}))
            return current
        # Beyond, the stated shortfall (the explanation pass's model of the line, right in nearly
        # every case) is tried first: if it admits and one unit less does not, two re-solves
        # settle it; else bisection below it if it admits, or below the bound, then down while one
        # unit less still admits.
        current = {r: min(top[r], -(-resources[r] // unit[r])) for r in resources}
        if ok(view, current):
            if len(resources) == 1 and all(current.values()) \
                    and not ok(view, {r: n - 1 for r, n in current.items()}):
                return current
        else:
            current = dict(top)
            if not ok(view, current):
                return None
        for r in sorted(resources):
            current[r] = _descend(lambda n: ok(view, {**current, r: n}), current[r])
        return current

    # Searched without the workloads ranked after it, then (unless the rank order is fixed)
    # confirmed with them: a raise can move a workload between the ranking's tiers under fair
    # sharing, so they are not always irrelevant.
    current = search(t)
    full = t.full()
    if t.unconfirmed and (current is None or not ok(full, current)
                          or any(current[r] and ok(full, {**current, r: current[r] - 1}) for r in current)):
        current = search(full)
    if current is None:
        return None
    return [Change(node, flavor, r, limit, unit[r] * n) for r, n in sorted(current.items()) if n]


def _descend(admits: Callable[[int], bool], hi: int) -> int:
    """From ``hi``, which admits, an amount that admits while one less does not (or 0): bisection
    over [0, hi] (the same midpoints for every workload of the tree asking about that raise,
    so they share the re-solves), then down while one less still admits."""
    lo = 0
    while lo < hi:
        mid = (lo + hi) // 2
        if admits(mid):
            hi = mid
        else:
            lo = mid + 1
    while hi > 0 and admits(hi - 1):
        hi -= 1
    return hi


def _finish_suggestion(t: _Before, e: WorkloadEntry, admitted: list[WorkloadEntry], deadline: float) -> list[Reason]:
    """Which admitted workloads of its tree would have to finish first: the shortest run of them,
    oldest admission first (the snapshot has no durations, so when is not known), whose finishing
    admits it, then each put back that it can do without."""
    if not admitted or time.monotonic() >= deadline:
        return []
    # admitted before this cycle first (they have run longest), then this cycle's, by rank
    order = sorted(admitted, key=lambda x: (x.rank is not None, x.rank or 0, x.name))
    names = [x.name for x in order]

    def admits_without(view: _Before, finished: list[str]) -> bool:
        if time.monotonic() >= deadline:
            raise _OutOfTime
        return e.name in view.admitted((), finished)

    def search(view: _Before) -> list[str] | None:
        if not admits_without(view, names):
            return None
        lo, hi = 1, len(names)  # the shortest prefix of ``names`` whose finishing admits it, by bisection
        while lo < hi:
            mid = (lo + hi) // 2
            if admits_without(view, names[:mid]):
                hi = mid
            else:
                lo = mid + 1
        gone = names[:hi]
        for n in list(gone):  # minimal: none of them could stay
            rest = [g for g in gone if g != n]
            if admits_without(view, rest):
                gone = rest
        return gone

    gone = search(t)  # confirmed with every pending workload, as for quota (_least)
    full = t.full()
    if t.unconfirmed and (gone is None or not admits_without(full, gone)
                    or any(admits_without(full, [g for g in gone if g != n]) for n in gone)):
        gone = search(full)
    if not gone:
        return []
    return [make_reason("NeedsFinished", workloads=sorted(gone), count=len(gone))]


def with_suggestions(plan: Plan, suggestions: Mapping[str, tuple[Reason, ...]]) -> Plan:
    """``plan`` with each entry's checked suggestions (``whatIf`` in the plan format), and its
    ``InsufficientQuota`` reasons stating the checked shortfall: the least nominal quota of that
    ClusterQueue that admits it (``checked: true``), where the explanation pass's model of the
    line ahead of it (line.py) may be off."""
    entries = tuple(dataclasses.replace(e, suggestions=suggestions[e.name], reasons=_checked(e.reasons, suggestions[e.name]))
                    if e.name in suggestions else e for e in plan.workloads)
    return dataclasses.replace(plan, workloads=entries)


def _checked(reasons: tuple[Reason, ...], suggestions: tuple[Reason, ...]) -> tuple[Reason, ...]:
    least = {(s.details["name"], s.details["flavor"], s.details["resource"]): s.details["add"]
             for s in suggestions if s.code == "NeedsQuota" and s.details["kind"] == "ClusterQueue"}
    out = []
    for r in reasons:
        key = (r.details.get("clusterQueue"), r.details.get("flavor"), r.details.get("resource"))
        if r.code == "InsufficientQuota" and key in least:
            r = make_reason(r.code, **{**r.details, "short": least[key], "checked": True})
        out.append(r)
    return tuple(out)
