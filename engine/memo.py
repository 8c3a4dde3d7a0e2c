"""State derived from the objects of a snapshot, kept from one decision cycle to the next.

A controller decides over snapshot after snapshot of the same cluster, and between two cycles
most objects do not change: a backlog of thousands of pending workloads gains a few arrivals
and loses a few admissions. The engine's objects are immutable, so whatever a cycle derives
from one object alone (the workload it builds, its place among the candidates, its share of
the snapshot digest) stays right for as long as the object is the same object. A cycle that
visits every object of the backlog in Python costs milliseconds per visit over thousands of
objects, so the memo hands each consumer only what changed since the last cycle, and the
consumer keeps its own state up to date with it:

- :meth:`Memo.track` finds what changed in a mapping of the snapshot, by object identity;
  consumers of the same mapping in one cycle share one search;
- :meth:`Memo.update` keeps a derived mapping whose producer knows which keys it touched, and
  says what changed in it;
- :meth:`Memo.follow` hands such changes on to a consumer of the derived mapping;
- :meth:`Memo.per_object` keeps what was derived from one object alone, for the objects a
  consumer asked about in this cycle or the last.

Derived state may also depend on the cluster's configuration (queues, cohorts, flavors,
priority classes): all of it is dropped whenever that configuration changes, so that nothing
outlives what it was derived from.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import compress
from operator import is_, not_
from typing import Any, Callable, Generic, Hashable, Iterable, Mapping, TypeVar

__all__ = ["Memo", "Changes", "PerObject"]

K = TypeVar("K")
T = TypeVar("T")
S = TypeVar("S")
_NONE = object()


@dataclass(frozen=True)
class Changes(Generic[K, T]):
    """What changed in a mapping between two of its versions.

    ``gone`` holds the keys removed or whose object was replaced; ``new`` the objects added or
    replacing, by key, in no particular order. A replaced key is in both: drop it, then add it.
    ``base`` and ``head`` name the versions they lead from and to (None: from nothing), so
    that :meth:`Memo.follow` can tell whether a consumer is at ``base``.
    """

    new: Mapping[K, T]
    gone: frozenset[K] = frozenset()
    base: object = None
    head: object = None


class _Version:
    """A mapping as consumers saw it in one cycle (a copy: the caller may reuse its mapping)."""

    __slots__ = ("objects",)

    def __init__(self, mapping: Mapping[Any, Any]) -> None:
        self.objects = dict(mapping)


class PerObject(Generic[T, S]):
    """Values derived from single objects, by object identity: those asked for in this cycle
    or the last (an entry holds its object, so no id is reused while it is kept)."""

    __slots__ = ("_derive", "_current", "_previous")

    def __init__(self, derive: Callable[[T], S]) -> None:
        self._derive = derive
        self._current: dict[int, tuple[T, S]] = {}
        self._previous: dict[int, tuple[T, S]] = {}

    def __call__(self, obj: T) -> S:
        """The value derived from ``obj``, derived now if it was not asked for lately."""
        entry = self._current.get(id(obj))
        if entry is None:
            entry = self._previous.get(id(obj)) or (obj, self._derive(obj))
            self._current[id(obj)] = entry
        return entry[1]

    def age(self) -> None:
        """Begin a cycle: forget what the last cycle did not ask for."""
        self._previous, self._current = self._current, {}


@dataclass
class _Tracked:
    state: Any
    version: Any = None  # the version of the mapping the state was last brought to


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
        # This cycle's versions (id of a mapping -> the mapping, its version) and searches ((id
        # of the version searched from, id of the mapping) -> the changes). The entries hold
        # the mappings and the changes their base versions, so no id is reused while kept.
        self._versions: dict[int, tuple[Mapping[Any, Any], _Version]] = {}
        self._searches: dict[tuple[int, int], Changes[Any, Any]] = {}
        self._per_object: dict[str, tuple[Hashable, PerObject[Any, Any]]] = {}

    def start(self, configuration: Hashable | tuple[Any, ...]) -> None:
        """Begin a cycle; all kept state is dropped if ``configuration`` differs from the
        previous cycle's."""
        if configuration != self._configuration:
            self._tracked.clear()
            self._numbers.clear()
            self._per_object.clear()
        for _, values in self._per_object.values():
            values.age()
        self._configuration = configuration
        self._versions.clear()
        self._searches.clear()

    def track(self, table: str, mapping: Mapping[K, T], state: Callable[[], S]) -> tuple[S, Changes[K, T]]:
        """The state kept under ``table`` (made by ``state()`` the first time, and after a
        change of configuration), and what changed in ``mapping`` since the last call for
        ``table``, by object identity. The caller brings the state up to date with the changes;
        the state must be derived from ``mapping``'s objects alone, and from the configuration.
        """
        if not self.remember:
            return state(), Changes(mapping)
        kept = self._kept(table, state)
        if id(mapping) not in self._versions:  # the first look at it this cycle: one copy for all
            self._versions[id(mapping)] = (mapping, _Version(mapping))
        head = self._versions[id(mapping)][1]
        search = (id(kept.version), id(mapping))
        changes = self._searches.get(search)
        if changes is None:
            changes = self._searches[search] = _search(kept.version, head)
        kept.version = head
        return kept.state, changes

    def update(self, table: str, touched: Iterable[K], current: Callable[[K], T | None]) -> tuple[dict[K, T], Changes[K, T]]:
        """A mapping kept under ``table`` whose producer knows that only the ``touched`` keys
        may differ from last cycle; ``current(key)`` is a key's object now (None: gone).
        Returns the mapping, up to date (the memo changes it in later cycles), and what changed.
        """
        kept = self._kept(table, dict)
        mapping: dict[K, T] = kept.state
        new: dict[K, T] = {}
        gone = set()
        for key in touched:
            before, after = mapping.get(key), current(key)
            if before is after:
                continue
            if before is not None:
                gone.add(key)
                del mapping[key]
            if after is not None:
                new[key] = mapping[key] = after
        changes = Changes(new, frozenset(gone), kept.version, object())
        kept.version = changes.head
        return mapping, changes

    def follow(self, table: str, changes: Changes[K, T], whole: Mapping[K, T],
               state: Callable[[], S]) -> tuple[S, Changes[K, T]]:
        """The state kept under ``table`` and the changes that bring it to ``changes.head``:
        ``changes`` themselves if the state was last brought to ``changes.base``; otherwise
        (a first cycle, a cycle this consumer skipped) a new state and all of ``whole``."""
        kept = self._tracked.get(table) if self.remember else None
        if kept is None or changes.base is None or kept.version is not changes.base:
            kept = self._kept(table, state, fresh=True)
            changes = Changes(whole, frozenset(), None, changes.head)
        kept.version = changes.head
        return kept.state, changes

    def per_object(self, table: str, depends: Hashable, derive: Callable[[T], S]) -> PerObject[T, S]:
        """The values kept under ``table``, derived by ``derive`` from one object alone and
        from ``depends`` (and the configuration): they are dropped when ``depends`` changes.
        Within one cycle they are kept even by a memo that does not remember: a cycle derives
        the same objects' values once per round and again for the explanation."""
        kept = self._per_object.get(table)
        if kept is None or kept[0] != depends:
            kept = self._per_object[table] = (depends, PerObject(derive))
        return kept[1]

    def number(self, value: Hashable) -> int:
        """A small number for ``value``, the same for equal values while the configuration
        holds: a cheap key where hashing the value itself, cycle after cycle, would not be."""
        return self._numbers.setdefault(value, len(self._numbers))

    def _kept(self, table: str, state: Callable[[], Any], fresh: bool = False) -> _Tracked:
        kept = None if fresh or not self.remember else self._tracked.get(table)
        if kept is None:
            kept = _Tracked(state())
            if self.remember:
                self._tracked[table] = kept
        return kept


def _search(since: _Version | None, head: _Version) -> Changes[Any, Any]:
    """What changed from version ``since`` to ``head``, by object identity."""
    last, mapping = since.objects if since is not None else {}, head.objects
    # Passes in C (map, compress) rather than loops with a body: the backlog is thousands of
    # objects every cycle, and nearly all of them are the very objects seen last cycle.
    new = list(compress(mapping, map(not_, map(is_, map(last.get, mapping), mapping.values()))))
    replaced = {k for k in new if k in last}
    # Keys that left, counted before they are looked for: most cycles none did.
    removed = len(last) - (len(mapping) - (len(new) - len(replaced)))
    gone = replaced | (last.keys() - mapping.keys()) if removed else replaced
    return Changes({k: mapping[k] for k in new}, frozenset(gone), since, head)
