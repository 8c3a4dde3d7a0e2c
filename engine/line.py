"""The rank order in the explanation: what workloads ranked after a left-out one took this
cycle (given back when its shortfall is stated), and who is ahead of it in line.

Given back
----------

A workload W left out of a cycle was tried before every workload ranked after it: whatever
those took this cycle would have been W's first, had W fitted. So the room that
``policies/explain.lp`` states for W counts the quota held by workloads admitted this cycle
and ranked after W, in W's quota tree, as free (the counterfactual "raise the quota by what it
is short, re-plan" then admits W).

Naming, for each left-out workload, every admitted one ranked after it would cost left-out x
admitted facts on a big backlog. Instead the rank order of each quota tree is cut into
*segments*: a segment starts at an admitted workload that follows one or more left-out ones,
and holds it and the admitted workloads after it, up to the next segment. The left-out
workloads just before a segment get that segment; what is ranked after them is that segment
and every later one of the tree, which explain.lp sums along the segments' chain:

- ``later_from(W,S)``: left-out W is followed, in its quota tree, by segment S and those after it;
- ``later_bucket(V,S)``: workload V, admitted this cycle, is in segment S;
- ``later_next(S,S2)``: segment S2 follows segment S in the same quota tree.

A segment is named by the workload it starts with. Left-out workloads after the last
admission of their tree get no segment: nothing ranked after them took anything.

Ahead in line
-------------
Quota added to a ClusterQueue goes, in rank order, to the pending workloads of its quota tree
ranked before W first. :func:`in_line` plays that order for each shortfall W states: the
left-out workloads before W in its tree that are short of the same resource in the same flavor
(and of nothing else in it) take, one by one, what they need, each whose shortfall what is
left of the raise covers; the stated shortfall becomes the least raise after which W's still
is, and W's position in that line is said. It is a model: one pool for the whole tree, in which
a workload of another ClusterQueue takes no more than its own queue's limit lets it borrow
(``line_cap/4`` of explain.lp), and only the first ``_PLAYED`` of a long line are played; the
what-if (whatif.py) checks it by re-solves.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Collection, Hashable, Iterable, Mapping, MutableMapping

from .facts import value_text

__all__ = ["given_back_facts", "in_line"]


def given_back_facts(ranked: Iterable[str], admitted: Mapping[str, object], queue_of: Mapping[str, str],
                     trees: Mapping[str, str]) -> list[str]:
    """The segment facts (module docstring) of candidates ``ranked`` (in rank order) of which
    those in ``admitted`` are admitted this cycle; ``queue_of`` maps a candidate to its
    ClusterQueue and ``trees`` a ClusterQueue to its quota tree (candidates without either are
    skipped).

    >>> given_back_facts(["a", "b", "c", "d"], {"b": (), "d": ()}, dict.fromkeys("abcd", "q"), {"q": "t"})
    ['later_from("a","b").', 'later_bucket("b","b").', 'later_from("c","d").', \
'later_next("b","d").', 'later_bucket("d","d").']
    """
    waiting: dict[str, list[str]] = {}  # tree -> left-out candidates since its last admission
    segment: dict[str, str] = {}  # tree -> the segment its admissions now go to
    out: list[str] = []
    for w in ranked:
        tree = trees.get(queue_of.get(w, ""))
        if tree is None:
            continue
        if w not in admitted:
            waiting.setdefault(tree, []).append(w)
            continue
        if waiting.get(tree):
            out += [f"later_from({value_text(x)},{value_text(w)})." for x in waiting.pop(tree)]
            if tree in segment:
                out.append(f"later_next({value_text(segment[tree])},{value_text(w)}).")
            segment[tree] = w
        if tree in segment:
            out.append(f"later_bucket({value_text(w)},{value_text(segment[tree])}).")
    return out


#: Steps of the search for the least raise per shortfall, beyond two per workload played.
_ROUNDS = 8

#: Of a long line, only the first this many (ranked highest: they take added quota first) are
#: played, so that a big backlog costs its explained workloads times this, not their square.
_PLAYED = 16

# in a line: workload, need, shortfall alone, short of nothing else there, ClusterQueue, and
# whether its own limits let it take quota added to another ClusterQueue of the tree
_Entry = tuple[str, int, int, bool, str, bool]


def in_line(reasons: MutableMapping[str, list[Any]], ranked: Iterable[str], admitted: Mapping[str, object],
            queue_of: Mapping[str, str], trees: Mapping[str, str], kinds: Mapping[str, Hashable],
            caps: Mapping[tuple[str, str, str], int], fifo: Collection[str]) -> None:
    """Make each ``insufficient_quota`` term of ``reasons`` (workload -> reason terms of the
    explanation pass) state the shortfall behind those ahead of it in line (``ranked``: the
    workloads in rank order), adding an ``in_line(Q,F,R,Position,Ahead,Count)`` term where
    some ahead would take added quota first (``Ahead``: up to three of them, ``Count``: how many).

    ``kinds`` maps a workload to its kind: its priority and pod sets, part of its shape (prune.py).
    Of the workloads of one ClusterQueue and kind, only the first left out is in line, and the
    later ones state its numbers, as a pruned cycle shares the explanation of a shape, so that
    pruning changes no reason. ``caps`` maps (workload, flavor, resource) to what its
    ClusterQueue's own limit lets it take more (none: no limit of its own), which quota added
    elsewhere in the tree cannot raise. Workloads of ``fifo`` (in StrictFIFO queues) are left as
    they are, and in line for no one: a cycle that leaves out candidates explains them together.
    """
    # (tree, flavor, resource) -> the first of its line so far (_PLAYED), and the line's length
    lines: dict[tuple[str, str, str], tuple[list[_Entry], list[int]]] = {}
    first: dict[tuple[str, Hashable], list[Any]] = {}  # (ClusterQueue, kind) -> the first one's shortfalls
    for w in ranked:
        tree = trees.get(queue_of.get(w, ""))
        if tree is None or w in admitted or w not in reasons or w in fifo:
            continue
        kind = (queue_of[w], kinds.get(w, w))
        short = [t for t in reasons[w] if _shortfall(t)]
        if kind in first:
            if short or not first[kind]:  # (one short of nothing, left out for another reason, says so)
                reasons[w] = [t for t in reasons[w] if t not in short] + first[kind]
            continue
        for t in short:
            q, flavor, resource, need = t.args[:4]
            alone = all(o.args[2] == resource for o in short if o.args[1] == flavor)  # a raise of R may admit it
            line, position = lines.setdefault((tree, flavor, resource), ([], [0]))
            position[0] += 1
            least, taken = _least(line, t.args[7], q)
            if taken:
                reasons[w][reasons[w].index(t)] = dataclasses.replace(t, args=(*t.args[:7], least))
                reasons[w].append(type(t)("in_line", (q, flavor, resource, position[0],
                                                      tuple(e[0] for e in taken[:3]), len(taken))))
            if len(line) < _PLAYED:
                line.append((w, need, t.args[7], alone, q, need <= caps.get((w, flavor, resource), need)))
        first[kind] = [t for t in reasons[w] if _shortfall(t) or getattr(t, "name", None) == "in_line"]


def _shortfall(term: Any) -> bool:
    """Whether ``term`` is explain.lp's ``insufficient_quota`` (a user policy's own term of that
    name with other arguments is left as it is)."""
    return getattr(term, "name", None) == "insufficient_quota" and len(term.args) == 8 and \
        all(isinstance(a, int) for a in term.args[3:])


def _taken(line: list[_Entry], raised: int, queue: str) -> tuple[list[_Entry], int, float]:
    """Those of ``line`` that a raise by ``raised`` admits, in order (each whose shortfall what
    is left of the raise covers takes what it needs), how much they take, and the least larger
    raise at which one more of them would be admitted (where the answer may change)."""
    out, took, change = [], 0, float("inf")
    for entry in line:
        if not entry[3] or (entry[4] != queue and not entry[5]):
            continue
        if entry[2] <= raised - took:
            took += entry[1]
            out.append(entry)
        else:
            change = min(change, entry[2] + took)
    return out, took, change


def _least(line: list[_Entry], short: int, queue: str) -> tuple[int, list[_Entry]]:
    """The least raise after which ``short`` (the shortfall alone) is still covered beside what
    those of ``line`` it admits take; and those. Between two raises at which the ones admitted
    change, the least is found at once; the walk goes from change to change."""
    raised = short
    for _ in range(_ROUNDS + 2 * len(line)):
        taken, took, change = _taken(line, raised, queue)
        if short <= raised - took:
            break
        raised = int(min(short + took, change))
    return raised, taken
