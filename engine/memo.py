"""State derived from the objects of a snapshot, kept from one decision cycle to the next.

A controller decides over snapshot after snapshot of the same cluster, and between two cycles
most objects do not change: a backlog of thousands of pending workloads gains a few arrivals
and loses a few admissions. The engine's objects are immutable, so whatever a cycle derives
from one object alone (the workload it builds, its place among the candidates, its share of
the snapshot digest) stays right for as long as the object is the same object. A cycle that
visits every object of the backlog in Python costs milliseconds per visit over thousands of
objects, so :meth:`Memo.track` hands each consumer only what changed since the last cycle, and
the consumer keeps its own state up to date with it.

Derived state may also depend on the cluster's configuration (queues, cohorts, flavors,
priority classes): all of it is dropped whenever that configuration changes, so that nothing
outlives what it was derived from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import compress
from operator import is_, not_
from typing import Any, Callable, Generic, Hashable, Mapping, TypeVar

__all__ = ["Memo", "Changes"]

K = TypeVar("K")
T = TypeVar("T")
S = TypeVar("S")
_NONE = object()


@dataclass(frozen=True)
class Changes(Generic[K, T]):
    """What changed in a mapping since a consumer last saw it.

    ``gone`` holds the keys removed or whose object was replaced; ``new`` the objects added or
    replacing, by key, in no particular order. A replaced key is in both: drop it, then add it.
    """

    new: Mapping[K, T]
    gone: frozenset[K] = frozenset()


@dataclass
class _Tracked:
    state: Any
    objects: dict[Any, Any] = field(default_factory=dict)  # the mapping when last seen


class Memo:
    """State derived from immutable objects, kept while the configuration holds.

    >>> memo = Memo()
    >>> memo.start(configuration=("queues",))
    >>> seen, changes = memo.track("names", {"a": "x"}, set)
    >>> sorted(changes.new), sorted(changes.gone)
    (['a'], [])
    >>> seen.update(changes.new)
    >>> memo.start(configuration=("queues",))
    >>> seen, changes = memo.track("names", {"a": "x", "b": "y"}, set)
    >>> sorted(seen), sorted(changes.new)
    (['a'], ['b'])
    """

    def __init__(self, remember: bool = True) -> None:
        self.remember = remember  # False for a single cycle: nothing to reuse, so nothing is kept
        self._tracked: dict[str, _Tracked] = {}
        self._configuration: Any = _NONE
        self._numbers: dict[Hashable, int] = {}

    def start(self, configuration: Hashable | tuple[Any, ...]) -> None:
        """Begin a cycle; all kept state is dropped if ``configuration`` differs from the
        previous cycle's."""
        if configuration != self._configuration:
            self._tracked.clear()
            self._numbers.clear()
        self._configuration = configuration

    def track(self, table: str, mapping: Mapping[K, T], state: Callable[[], S]) -> tuple[S, Changes[K, T]]:
        """The state kept under ``table`` (made by ``state()`` the first time, and after a
        change of configuration), and what changed in ``mapping`` since the last call for
        ``table``, by object identity. The caller brings the state up to date with the changes;
        the state must be derived from ``mapping``'s objects alone, and from the configuration.
        """
        if not self.remember:
            return state(), Changes(mapping)
        kept = self._tracked.get(table)
        if kept is None:
            kept = self._tracked[table] = _Tracked(state())
        # Passes in C (map, compress) rather than loops with a body: the backlog is thousands of
        # objects every cycle, and nearly all of them are the very objects seen last cycle.
        last = kept.objects
        new = list(compress(mapping, map(not_, map(is_, map(last.get, mapping), mapping.values()))))
        replaced = {k for k in new if k in last}
        # Keys that left, counted before they are looked for: most cycles none did.
        removed = len(last) - (len(mapping) - (len(new) - len(replaced)))
        gone = replaced | (last.keys() - mapping.keys()) if removed else replaced
        kept.objects = dict(mapping)
        return kept.state, Changes({k: mapping[k] for k in new}, frozenset(gone))

    def number(self, value: Hashable) -> int:
        """A small number for ``value``, the same for equal values while the configuration
        holds: a cheap key where hashing the value itself, cycle after cycle, would not be."""
        return self._numbers.setdefault(value, len(self._numbers))
