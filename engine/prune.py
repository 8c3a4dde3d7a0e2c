"""Which candidates the solver sees: leaving out those that provably cannot be admitted.

Two facts make most of a large backlog irrelevant to a cycle, under the built-in ordering,
capacity and quota rule groups:

*Shapes.* Pending workloads identical in every fact the compiler emits except their name and
creation time (same queue, namespace, priority, pod sets and requests) are interchangeable. A
later one of a shape is considered after every earlier one, and if an earlier one did not fit, a
later one cannot, with at least as much admitted before it. So the admitted members of a shape
are a prefix of its members in rank order, no longer than the shape's *bound*: how many of it
fit in what the quota tree of its ClusterQueue has free (the nominal quota of all its nodes, less
what admitted workloads use, flavor by flavor; no tree admits beyond its nominal quota of a
flavor, and one held beyond it leaves nothing there), plus one if it might be admitted by
preempting (what else a cycle admits fits beside the victims, and a queue has one preemptor a
cycle: preemption.lp). Members beyond
``bound + 1`` are dropped; the extra one is never admitted and stands for them in the
explanation.

*Prefixes.* The best admitted set in rank order, restricted to the first k candidates, is the
best admitted set of those k alone: no later candidate changes an earlier decision. The cycle
solves a prefix that reaches past the last candidate Kueue's greedy order would admit on each
tree's free quota, and that asks twice what a tree has free where that estimate may fall short
(flavors or inner limits can leave free quota unusable); if afterwards no remaining candidate
could fit on its own on top of that decision (the explanation pass computes this from the
remaining headroom), the decision is the one the whole backlog would give. Otherwise the
prefix grows and the cycle solves again. What a workload admitted by preempting will hold is
its own in the cycle: the others admitted fit beside it and its victims (preemption.lp), in
the flavors it uses. It may be admitted where it does not fit the free quota, so the prefix
reaches every candidate that might preempt: one with possible victims that hold some quota, and
that asks no more than its queue's nominal quota.

*Trees.* Under the built-in policy alone, quota trees are independent problems: no rule
relates workloads of two trees, so the best admitted set is the union of each tree's best
set, and the prefix is taken per tree (a *cut*). Then a tree that is full sends one candidate
to the solve, not every one ranked before another tree's last admission. User files may relate
trees, so with them the cut is one prefix of the whole rank order.

Both rely on the built-in ``ordering.lp``, ``capacity.lp``, ``quota.lp`` and ``preemption.lp``; if a policy
replaces any of them, every candidate is solved. User rules that only add constraints keep this
exact, as long as they tell workloads apart by their facts and not by their names.
"""

from __future__ import annotations

import functools
import sys
from bisect import bisect_left, insort
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from math import floor
from typing import Callable, Collection, Iterable, Iterator, Mapping, NamedTuple

from .fairsharing import reorders
from .memo import Changes, Memo
from .objects import PodSetSpec, ResourceGroup
from .policy import Policy
from .snapshot import Snapshot
from .quota import by_resource, nominal, tree_nominal, workload_queue
from .workloads import Workload, Workloads

__all__ = ["Selection", "select_candidates", "rank_key", "RULE_GROUPS"]

#: The rule groups whose semantics the selection relies on.
RULE_GROUPS = ("ordering.lp", "capacity.lp", "quota.lp", "preemption.lp")
_FILL = 2  # a first prefix asks for twice what a quota tree holds, unless the tree is plain


@dataclass(frozen=True)
class Selection:
    """The workloads of a cycle, split by how the solver treats them.

    ``fixed`` are always solved (admitted, held, finished, or when selection is off);
    ``ranked`` are the kept pending shape members in the built-in rank order, solved a prefix
    at a time; ``stand_in`` maps each dropped member to the kept member that stands for it;
    ``shape`` maps every kept member to its shape.
    """

    fixed: tuple[Workload, ...]
    ranked: tuple[Workload, ...] = ()
    stand_in: Mapping[str, str] = field(default_factory=dict)
    shape: Mapping[str, int] = field(default_factory=dict)
    demand: tuple[tuple[str, Mapping[str, Fraction]], ...] = ()  # per ranked member: its tree, its needs
    capacity: Mapping[str, Mapping[str, Fraction]] = field(default_factory=dict)  # tree -> resource -> free nominal
    least: Mapping[str, Mapping[str, Fraction]] = field(default_factory=dict)  # tree -> resource -> least any needs
    sizes: Mapping[str, int] = field(default_factory=dict)  # tree -> how many of ``ranked`` are in it
    preempts: tuple[bool, ...] = ()  # per ranked member: it might be admitted by preempting (_Preemptors.may_preempt)
    heads: tuple[bool, ...] = ()  # per ranked member: the first of a ClusterQueue that may hold quota (holds.lp)
    plain: frozenset[str] = frozenset()  # trees whose free quota any candidate may use (_plain)
    independent: bool = False  # quota trees are independent problems: a cut may differ per tree

    def prefix(self, grow: int = 1) -> dict[str, int]:
        """A cut that covers two estimates of what will be admitted: per tree, how many of its
        ranked candidates (the first ones, in rank order) to solve.

        First, Kueue's greedy order on each tree's free quota (ignoring flavors and the limits
        inside the tree): the cut reaches the last candidate that order would admit, so that
        the small candidates which fill what big ones leave are in it. Second, of every tree it
        asks ``grow`` times what is free, and twice that where flavors or the limits inside the
        tree may admit fewer than the first estimate (all but ``plain`` trees), counting only
        candidates small enough for what is free (a bigger one cannot take any of it).
        The walk stops once every tree is settled for both, so it costs the prefix, not the backlog.
        Third, it reaches every candidate that might be admitted by preempting, so that no
        candidate beyond the cut needs the explanation pass, which does not model preemption;
        and the head of every ClusterQueue that may hold its free nominal quota for it
        (holds.lp), whose hold can keep a workload ranked before it from borrowing.
        """
        room = {tree: dict(res) for tree, res in self.capacity.items()}  # what greedy order leaves
        asked: dict[str, dict[str, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
        remaining = dict(self.sizes)
        asking, filling = set(remaining), set(remaining)  # trees still open for either estimate
        seen: Counter[str] = Counter()
        cut: dict[str, int] = {}
        for i, (tree, needs) in enumerate(self.demand):
            remaining[tree] -= 1
            seen[tree] += 1
            if tree in asking:
                free = self.capacity.get(tree, {})
                if _fits(needs, free):
                    for r, v in needs.items():
                        asked[tree][r] += v
                fill = grow if tree in self.plain else grow * _FILL
                if remaining[tree] == 0 or all(asked[tree][r] >= fill * total for r, total in free.items() if total > 0):
                    asking.discard(tree)
                    cut[tree] = seen[tree]
            if tree in filling:
                left = room.setdefault(tree, {})
                if _fits(needs, left):
                    for r, v in needs.items():  # a pod set of no pods needs 0 of what the tree may lack
                        left[r] = left.get(r, Fraction(0)) - v
                    cut[tree] = seen[tree]
                least = self.least.get(tree, {})
                if remaining[tree] == 0 or any(left.get(r, Fraction(0)) < v for r, v in least.items()):
                    filling.discard(tree)  # no candidate of the tree fits what greedy order left
            if not asking and not filling:
                break
        # A candidate that may preempt is admitted on what its own queue frees, whatever the
        # tree has left, and a lender's head may hold quota against those ranked before it:
        # the cut reaches the last of them.
        seen.clear()
        heads = self.heads or (False,) * len(self.demand)
        for i, (tree, _) in enumerate(self.demand):
            seen[tree] += 1
            if self.preempts[i] or heads[i]:
                cut[tree] = max(cut.get(tree, 0), seen[tree])
        return self._covering(cut)

    def grown(self, cut: Mapping[str, int], grow: int) -> dict[str, int]:
        """A longer cut, for a next round: each tree's share four times longer, and at least
        :meth:`prefix` asked to ``grow``."""
        wider = self.prefix(grow)
        return self._covering({tree: min(size, max(4 * cut.get(tree, 0), wider.get(tree, 0)))
                               for tree, size in self.sizes.items()})

    def _covering(self, cut: Mapping[str, int]) -> dict[str, int]:
        """``cut`` itself where quota trees are independent problems; otherwise the shortest
        prefix of the whole rank order that covers it."""
        if self.independent:
            return dict(cut)
        end = max((i + 1 for i, (inside, _, _, _) in enumerate(self._sides(cut)) if inside), default=0)
        return dict(Counter(tree for tree, _ in self.demand[:end]))

    @property
    def preempts_nothing(self) -> bool:
        """Whether no candidate might be admitted by preempting, so nothing is evicted. Only
        under the built-in policy alone (``independent``): user files might preempt by other
        rules, and with selection off every pending workload is among ``fixed``."""
        return self.independent and not any(self.preempts)

    @property
    def idle_rule_groups(self) -> tuple[str, ...]:
        """Built-in rule groups that can decide nothing this cycle (for ``Policy.for_facts``):
        ``preemption.lp`` when nothing is preempted. Without a ``may_preempt/1`` atom nothing
        it derives is read by another rule group, nor by the explanation."""
        return ("preemption.lp",) if self.preempts_nothing else ()

    def admits_nothing(self) -> bool:
        """Whether the decision can only be to admit and evict nothing: nothing is preempted,
        and no candidate needs as little as its quota tree has free of its nominal quota."""
        return self.preempts_nothing and not any(_fits(needs, self.capacity.get(tree, {}))
                                                 for tree, needs in self.demand)

    def split(self, cut: Mapping[str, int]) -> tuple[list[Workload], list[Workload]]:
        """The candidates ``cut`` solves and the others, each in rank order."""
        solved: list[Workload] = []
        unsolved: list[Workload] = []
        for inside, w, _, _ in self._sides(cut):
            (solved if inside else unsolved).append(w)
        return solved, unsolved

    def unsettled(self, admitted: Collection[str], preempting: Collection[str], cut: Mapping[str, int]) -> set[str]:
        """The trees where a candidate beyond ``cut`` might be admitted on top of ``admitted``
        (the ones the solver admitted, ``preempting`` those of them admitted by preempting): it
        needs no more than its tree's nominal quota then has left. None: the decision is the
        whole backlog's. Some: the explanation pass decides.

        What a preempting workload will hold is kept from the others, but only in the flavors
        it uses, where it may go over the quota (preemption.lp): so it counts here in full in a
        plain tree (one flavor per resource), and not at all in the others."""
        left = {tree: dict(res) for tree, res in self.capacity.items()}
        beyond = []
        for inside, w, tree, needs in self._sides(cut):
            if not inside:
                beyond.append((tree, needs))
            elif w.key in admitted and (w.key not in preempting or tree in self.plain):
                room = left.setdefault(tree, {})
                for r, v in needs.items():
                    room[r] = room.get(r, Fraction(0)) - v
        full = {tree for tree, room in left.items()
                if any(room.get(r, Fraction(0)) < v for r, v in self.least.get(tree, {}).items())}
        return {tree for tree, needs in beyond if tree not in full and _fits(needs, left.get(tree, {}))}

    def _sides(self, cut: Mapping[str, int]) -> Iterator[tuple[bool, Workload, str, Mapping[str, Fraction]]]:
        """Each ranked candidate, in rank order: whether ``cut`` solves it, its tree and needs."""
        taken: Counter[str] = Counter()
        for w, (tree, needs) in zip(self.ranked, self.demand):
            taken[tree] += 1
            yield taken[tree] <= cut.get(tree, 0), w, tree, needs


def _fits(needs: Mapping[str, Fraction], free: Mapping[str, Fraction]) -> bool:
    return all(v <= free.get(r, Fraction(0)) for r, v in needs.items())


def rank_key(w: Workload) -> tuple[int, int, int, str]:
    """The built-in ordering (ordering.lp): priority, then PodGroup gangs last, then creation
    time, then name."""
    return (-w.priority, int(w.coscheduled), w.created, w.key)


def _shape(cq: str, w: Workload) -> tuple[object, ...]:
    return (cq, w.namespace, w.queue, w.priority, w.coscheduled, tuple(
        (ps.name, ps.count, _requests(ps), ps.node_labels, ps.tolerations, ps.needs.asked) for ps in w.pod_sets))


def _requests(ps: PodSetSpec) -> tuple[tuple[str, int, int], ...]:
    """A pod set's requests as a key: by numerator and denominator, as hashing and comparing
    Fractions runs Python code, for every pending workload of a first cycle."""
    return tuple(sorted((r, v.numerator, v.denominator) for r, v in ps.requests.items()))


def _trees(snapshot: Snapshot) -> tuple[dict[str, str], dict[str, dict[tuple[str, str], Fraction]], frozenset[str]]:
    """ClusterQueue -> its quota tree; tree -> (flavor, resource) -> nominal quota of the whole
    tree; and the plain trees (:func:`_plain`)."""
    tree_of, quotas, groups = tree_nominal(snapshot)
    return tree_of, quotas, frozenset(tree for tree, gs in groups.items() if _plain(gs, by_resource(quotas[tree])))


def _plain(groups: Iterable[ResourceGroup], totals: Mapping[str, Fraction]) -> bool:
    """Whether a tree with these resource groups (of all its nodes) lets any candidate use any
    of its free quota: one flavor per resource, no lending limits, and no borrowing limit that
    could bind (a node's own nominal quota plus its limit reach the tree's total). Then Kueue's
    greedy order on the tree's free quota admits what the solver admits, as far as quota goes."""
    flavors: dict[str, set[str]] = defaultdict(set)
    for g in groups:
        for fq in g.flavors:
            for r, q in fq.resources.items():
                flavors[r].add(fq.flavor)
                if q.lending_limit is not None:
                    return False
                if q.borrowing_limit is not None and q.nominal + q.borrowing_limit < totals.get(r, Fraction(0)):
                    return False
    return all(len(names) == 1 for names in flavors.values())


def _needs(w: Workload) -> dict[str, Fraction]:
    return _pod_set_needs(tuple((ps.count, _requests(ps)) for ps in w.pod_sets))


@functools.lru_cache(maxsize=4096)
def _pod_set_needs(pod_sets: tuple[tuple[int, tuple[tuple[str, int, int], ...]], ...]) -> dict[str, Fraction]:
    # Workloads of one shape ask the same: compute it once.
    needs: dict[str, Fraction] = defaultdict(Fraction)
    for count, requests in pod_sets:
        for r, numerator, denominator in requests:
            needs[r] += Fraction(numerator, denominator) * count
    return dict(needs)


def _bound(needs: Mapping[str, Fraction], totals: Mapping[str, Fraction]) -> int:
    """How many workloads needing ``needs`` fit in ``totals``: any number, if they need nothing."""
    fits = [floor(totals.get(r, Fraction(0)) / v) for r, v in needs.items() if v > 0]
    return min(fits, default=sys.maxsize)


class _Pending(NamedTuple):
    """What selection needs of one pending workload; ordered by the built-in rank key."""

    rank: tuple[int, int, int, str]
    shape: int  # the number of its shape (Memo.number)
    cluster_queue: str
    needs: Mapping[str, Fraction]
    workload: Workload


def _pending(cq: str | None, w: Workload, memo: Memo) -> _Pending | None:
    return None if cq is None else _Pending(rank_key(w), memo.number(_shape(cq, w)), cq, _needs(w), w)


def select_candidates(snapshot: Snapshot, built: Workloads, policy: Policy, memo: Memo | None = None) -> Selection:
    """Split the workloads of a cycle; see the module docstring. A ``memo`` (memo.py), the one
    that ``built`` was built with, keeps the split, and each shape's members in rank order,
    from one cycle to the next."""
    if reorders(snapshot) or not all(policy.is_builtin(name) for name in RULE_GROUPS):
        return Selection(built.workloads)  # fair sharing orders candidates otherwise (fairsharing.py)
    memo = memo or Memo(remember=False)
    queues = {f"{lq.namespace}/{lq.name}": lq.cluster_queue for lq in snapshot.local_queues.values()}
    tree_of, quotas, plain = _trees(snapshot)
    index, changes = memo.follow("selection", built.changes, built.by_key, _Index)
    index.update(changes, lambda w: _pending(queues.get(f"{w.namespace}/{w.queue}"), w, memo), tree_of)
    fixed = [index.fixed[k] for k in sorted(index.fixed)] + [index.stray[k] for k in sorted(index.stray)]
    held = memo.per_object("held", None, _held_in)
    free = _free(fixed, queues, tree_of, quotas, held)
    preemptors = _Preemptors(snapshot, fixed, queues, held, tree_of)
    kept: list[_Pending] = []
    dropped: dict[int, tuple[str, list[_Pending]]] = {}  # shape -> its stand-in, the members it stands for
    shape: dict[str, int] = {}
    preempts: dict[int, bool] = {}  # shape -> its members might be admitted by preempting
    sizes: Counter[str] = Counter()
    for number, members in index.shapes.items():
        tree = tree_of[members[0].cluster_queue]
        head = members[0]
        preempts[number] = preemptors.may_preempt(head.cluster_queue, head.workload.priority, head.needs,
                                                  free.get(tree, {}))
        # What is admitted beside this cycle's victims fits the free quota; a queue has one
        # preemptor a cycle (preemption.lp).
        limit = _bound(head.needs, free.get(tree, {})) + int(preempts[number]) + 1
        kept += members[:limit]
        sizes[tree] += min(len(members), limit)
        shape.update((p.workload.key, number) for p in members[:limit])
        if len(members) > limit:
            dropped[number] = (members[limit - 1].workload.key, members[limit:])
    kept.sort()
    demand = tuple((tree_of[p.cluster_queue], p.needs) for p in kept)
    holding, seen_queues = _holding_queues(snapshot, bool(policy.user_files)), set()
    heads = []
    for p in kept:  # the first of each queue in rank order: its head (holds.lp)
        heads.append(p.cluster_queue in holding and p.cluster_queue not in seen_queues)
        seen_queues.add(p.cluster_queue)
    return Selection(tuple(fixed), tuple(p.workload for p in kept), _StandIns(dropped), shape, demand, free,
                     _least((tree_of[m[0].cluster_queue], m[0].needs) for m in index.shapes.values()), sizes,
                     tuple(preempts[p.shape] for p in kept), tuple(heads), plain,
                     independent=not policy.user_files)


def _holding_queues(snapshot: Snapshot, user_files: bool) -> frozenset[str]:
    """The ClusterQueues whose head may hold their free nominal quota (holds.lp): those of a
    cohort whose reclaimWithinCohort is LowerPriority, and Never too where user files may
    state ``hold_for_never``."""
    allowed = ("LowerPriority", "Never") if user_files else ("LowerPriority",)
    return frozenset(name for name, cq in snapshot.cluster_queues.items()
                     if cq.cohort and cq.reclaim_within_cohort in allowed)


class _Index:
    """The workloads of a cycle by how selection treats them; kept from cycle to cycle by a
    Session (memo.py), so that a cycle sorts only its new pending workloads into their shapes.

    ``fixed`` are admitted, finished or held; ``stray`` are pending with no quota tree to
    solve them in; ``shapes`` holds the other pending ones, each shape's members in rank order.
    """

    def __init__(self) -> None:
        self.fixed: dict[str, Workload] = {}
        self.stray: dict[str, Workload] = {}
        self.pending: dict[str, _Pending] = {}
        self.shapes: dict[int, list[_Pending]] = {}

    def update(self, changes: Changes[str, Workload], pending: Callable[[Workload], _Pending | None],
               tree_of: Mapping[str, str]) -> None:
        for key in changes.gone:
            if self.fixed.pop(key, None) is None and self.stray.pop(key, None) is None:
                p = self.pending.pop(key)
                members = self.shapes[p.shape]
                del members[bisect_left(members, p)]
                if not members:
                    del self.shapes[p.shape]
        arrived: dict[int, list[_Pending]] = defaultdict(list)
        for key, w in changes.new.items():
            if w.admission is not None or w.finished or w.held:
                self.fixed[key] = w
                continue
            p = pending(w)
            if p is None or p.cluster_queue not in tree_of:
                self.stray[key] = w
            else:
                self.pending[key] = p
                arrived[p.shape].append(p)
        for number, new in arrived.items():
            members = self.shapes.get(number)
            if members is None:  # a new shape (every shape, in a first cycle): sorted at once
                self.shapes[number] = sorted(new)
            else:
                for p in new:
                    insort(members, p)


class _StandIns(Mapping[str, str]):
    """Dropped shape member -> the kept member that stands for it. A busy backlog drops
    thousands of workloads every cycle, and few cycles ever ask which: the mapping is
    spelled out when first read."""

    def __init__(self, dropped: Mapping[int, tuple[str, list[_Pending]]]) -> None:
        self._dropped = dropped
        self._size = sum(len(members) for _, members in dropped.values())

    @functools.cached_property
    def _mapping(self) -> dict[str, str]:
        return {p.workload.key: stand for stand, members in self._dropped.values() for p in members}

    def __getitem__(self, key: str) -> str:
        return self._mapping[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._mapping)

    def __len__(self) -> int:
        return self._size


def _least(shapes: Iterable[tuple[str, Mapping[str, Fraction]]]) -> dict[str, dict[str, Fraction]]:
    """Per tree and resource, the least any of its shapes needs (0 if one needs none of it)."""
    needs_of: dict[str, list[Mapping[str, Fraction]]] = defaultdict(list)
    for tree, needs in shapes:
        needs_of[tree].append(needs)
    return {tree: {r: min(n.get(r, Fraction(0)) for n in all_needs) for r in {r for n in all_needs for r in n}}
            for tree, all_needs in needs_of.items()}


def _free(fixed: Iterable[Workload], queues: Mapping[str, str], tree_of: Mapping[str, str],
          quotas: Mapping[str, Mapping[tuple[str, str], Fraction]],
          held: Callable[[Workload], Mapping[tuple[str, str], Fraction]]) -> dict[str, dict[str, Fraction]]:
    """What each tree's nominal quota leaves once admitted workloads are counted, per resource.
    Counted flavor by flavor: a flavor held beyond its quota (one lowered below its usage)
    leaves nothing, and takes nothing from the others. ``held`` is :func:`_held_in`."""
    left = {tree: dict(q) for tree, q in quotas.items()}
    for w in fixed:
        tree = tree_of.get(workload_queue(w, queues))
        if w.admission is None or w.finished or tree not in left:
            continue
        for key, v in held(w).items():
            if key in left[tree]:
                left[tree][key] -= v
    return {tree: by_resource({key: max(Fraction(0), v) for key, v in q.items()}) for tree, q in left.items()}


class _Preemptors:
    """Who might be admitted by preempting (preemption.lp): a workload with possible victims,
    under withinClusterQueue admitted workloads of its queue of lower priority (of equal
    priority too, under LowerOrNewerEqualPriority), under reclaimWithinCohort admitted
    workloads of the other queues of its tree which borrow (of lower priority only, under
    LowerPriority), under borrowWithinCohort those below its threshold even while its own
    queue borrows."""

    def __init__(self, snapshot: Snapshot, fixed: Iterable[Workload], queues: Mapping[str, str],
                 held: Callable[[Workload], Mapping[tuple[str, str], Fraction]], tree_of: Mapping[str, str]) -> None:
        cqs = snapshot.cluster_queues
        self.within = {name: cq.within_cluster_queue for name, cq in cqs.items() if cq.within_cluster_queue != "Never"}
        self.reclaim = {name: cq.reclaim_within_cohort for name, cq in cqs.items()
                        if cq.reclaim_within_cohort != "Never"}
        self.borrow = {name: cq.borrow_max_priority for name, cq in cqs.items() if cq.borrow_within_cohort != "Never"}
        self.tree_of = tree_of
        self.nominal = {name: by_resource(nominal(cqs[name].resource_groups))
                        for name in {*self.within, *self.reclaim}}
        self.held = held
        self.admitted: dict[str, list[Workload]] = defaultdict(list)  # queue -> its admitted workloads
        # queue -> its nominal quota less what it holds (only where some queue reclaims)
        self.unused = {name: nominal(cq.resource_groups) for name, cq in cqs.items()} if self.reclaim else {}
        for w in fixed:
            cq = workload_queue(w, queues)
            if w.admission is not None and not w.finished and cq in cqs and (cq in self.within or self.reclaim):
                self.admitted[cq].append(w)
                for k, v in held(w).items() if self.reclaim else ():
                    self.unused[cq][k] -= v
        self.borrowing: dict[str, list[str]] = defaultdict(list)  # tree -> its queues that hold beyond nominal
        for cq, unused in self.unused.items():
            if any(v < 0 for v in unused.values()):
                self.borrowing[tree_of[cq]].append(cq)

    def may_preempt(self, cq: str, priority: int, needs: Mapping[str, Fraction],
                    free: Mapping[str, Fraction]) -> bool:
        """Whether a workload of ``priority`` needing ``needs`` might be admitted by preempting:
        it needs no more of any resource than its queue's nominal quota of all flavors together
        (a preempting workload asks no more than the nominal quota of each flavor it uses), and
        it has possible victims in its queue, or in the other queues that borrow, with room for
        what it asks of some resource in its queue's unused nominal quota of some flavor
        (preemption.lp's ``may_reclaim/3``). Under borrowWithinCohort it may ask more than
        its queue's nominal quota, and a workload of another queue that borrows, below its
        threshold, is a possible victim even when its own queue has no room left.

        When only its own queue's workloads can be its victims, they and what its tree has free
        (``free``) must hold all it needs (else preemption.lp finds it ``hopeless/1``)."""
        nominal = self.nominal.get(cq, {})
        borrow = cq in self.borrow
        if not borrow and not all(v <= nominal.get(r, Fraction(0)) for r, v in needs.items()):
            return False
        within, reclaim = self.within.get(cq), self.reclaim.get(cq)
        if within:
            # Equal priorities count under LowerOrNewerEqualPriority, newer or not: more victims
            # than the policy's can only make this answer yes where the policy's is no.
            victims = [w for w in self.admitted.get(cq, ()) if w.priority < priority
                       or (w.priority == priority and within == "LowerOrNewerEqualPriority")]
            held = by_resource(*map(self.held, victims)) if victims and not reclaim else {}
            if victims and (reclaim or _fits(needs, {r: free.get(r, Fraction(0)) + held.get(r, Fraction(0))
                                                      for r in needs})):
                return True
        if not reclaim:
            return False
        lenders = [w.priority for other in self.borrowing.get(self.tree_of.get(cq, ""), ()) if other != cq
                   for w in self.admitted[other]]
        if borrow:
            most = self.borrow[cq]
            threshold = priority if most is None else min(priority, most + 1)
            if any(p < threshold for p in lenders):
                return True
        if not any(r in needs and needs[r] <= v for (_, r), v in self.unused[cq].items()):
            return False
        return any(reclaim == "Any" or p < priority for p in lenders)


def _held_in(w: Workload) -> dict[tuple[str, str], Fraction]:
    """(flavor, resource) -> what admitted ``w`` holds there."""
    assert w.admission is not None
    flavors = {a.name: a.flavors for a in w.admission.pod_sets}
    out: dict[tuple[str, str], Fraction] = defaultdict(Fraction)
    for ps in w.pod_sets:
        for r, v in ps.requests.items():
            out[(flavors.get(ps.name, {}).get(r, ""), r)] += v * w.admitted_count(ps.name)
    return out
