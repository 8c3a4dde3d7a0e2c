"""Work derived from one object, remembered from one decision cycle to the next.

A controller decides over snapshot after snapshot of the same cluster, and between two cycles
most objects do not change: a backlog of thousands of pending workloads gains a few arrivals
and loses a few admissions. The engine's objects are immutable, so whatever a cycle derives
from one object alone (the workload it builds, its shape and rank, its share of the snapshot
digest) is the same next cycle if the object is the same object. :class:`Memo` keeps those
values by object identity, for as long as the object appears in consecutive cycles.

Values may also depend on the cluster's configuration (queues, cohorts, flavors, priority
classes): all of them are forgotten whenever that configuration changes, so that no value
outlives what it was derived from.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, Iterable, TypeVar

__all__ = ["Memo"]

T = TypeVar("T")
V = TypeVar("V")
_NONE = object()


class Memo:
    """Values derived from immutable objects, kept while the objects recur cycle after cycle.

    >>> memo = Memo()
    >>> memo.start(configuration=("queues",))
    >>> memo.each("length", [("a", 1), ("b",)], len)
    [2, 1]
    """

    def __init__(self, remember: bool = True) -> None:
        self.remember = remember  # False for a single cycle: nothing to reuse, so nothing is kept
        # table -> id(object) -> (object, value), for this cycle and the previous one
        self._now: dict[str, dict[int, tuple[object, Any]]] = {}
        self._last: dict[str, dict[int, tuple[object, Any]]] = {}
        self._configuration: Any = _NONE
        self._numbers: dict[Hashable, int] = {}

    def start(self, configuration: Hashable | tuple[Any, ...]) -> None:
        """Begin a cycle. Values used in the previous cycle stay available; older ones are
        dropped; all are dropped if ``configuration`` differs from the previous cycle's."""
        if configuration != self._configuration:
            self._now.clear()
            self._numbers.clear()
        self._configuration = configuration
        self._last, self._now = self._now, {}

    def each(self, table: str, objs: Iterable[T], derive: Callable[[T], V]) -> list[V]:
        """``derive(obj)`` for every object, computed once while the same object (by identity)
        recurs from cycle to cycle; ``table`` names what is derived."""
        if not self.remember:
            return [derive(obj) for obj in objs]
        objs = list(objs)
        now = self._now.setdefault(table, {})
        last_get, now_get = self._last.get(table, {}).get, now.get
        # Whole-list passes rather than one loop with a body: the backlog is thousands of
        # objects every cycle, and nearly all of them hits. An entry holds its object, so while
        # it is kept no other object can have that id: a hit by id is a hit on the same object.
        keys = list(map(id, objs))
        hits = [last_get(k) or now_get(k) for k in keys]  # most hits were used last cycle
        for i in [i for i, hit in enumerate(hits) if hit is None]:
            hits[i] = (objs[i], derive(objs[i]))
        now.update(zip(keys, hits))
        return [hit[1] for hit in hits]

    def number(self, value: Hashable) -> int:
        """A small number for ``value``, the same for equal values while the configuration
        holds: a cheap key where hashing the value itself, cycle after cycle, would not be."""
        return self._numbers.setdefault(value, len(self._numbers))
