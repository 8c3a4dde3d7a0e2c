"""Work derived from one object, remembered from one decision cycle to the next.

A controller decides over snapshot after snapshot of the same cluster, and between two cycles
most objects do not change: a backlog of thousands of pending workloads gains a few arrivals
and loses a few admissions. The engine's objects are immutable, so whatever a cycle derives
from one object alone (the workload it builds, its shape, its line in the snapshot digest, its
plan entry) is the same next cycle if the object is the same object. :class:`Memo` keeps those
values by object identity, for as long as the object appears in consecutive cycles.

A value may also depend on a small *context* (a plan entry on this cycle's reasons, say); it is
reused only when the context compares equal. Everything derived from the cluster's
configuration (queues, cohorts, flavors, priority classes) is forgotten whenever that
configuration changes, so that no value outlives what it was derived from.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, TypeVar

__all__ = ["Memo"]

V = TypeVar("V")
_NONE = object()


class Memo:
    """Values derived from immutable objects, kept while the objects recur cycle after cycle.

    >>> memo = Memo()
    >>> memo.start(configuration=("queues",))
    >>> obj = ("a", 1)
    >>> memo.get("length", obj, lambda: len(obj))
    2
    """

    def __init__(self) -> None:
        # table -> id(object) -> (object, context, value), for this cycle and the previous one
        self._now: dict[str, dict[int, tuple[object, Any, Any]]] = {}
        self._last: dict[str, dict[int, tuple[object, Any, Any]]] = {}
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

    def get(self, table: str, obj: object, derive: Callable[[], V], context: Any = None) -> V:
        """The value ``derive()`` gives for ``obj`` in ``table``, computed once while ``obj``
        (the same object, by identity) recurs with an equal ``context``."""
        now = self._now.get(table)
        if now is None:
            now = self._now[table] = {}
        key = id(obj)
        hit = now.get(key)
        if hit is None:
            hit = self._last.get(table, {}).get(key)
            # The entry holds the object, so its id cannot be reused by another object meanwhile.
            if hit is None or hit[0] is not obj or hit[1] != context:
                hit = (obj, context, derive())
            now[key] = hit
        elif hit[1] != context:
            hit = now[key] = (obj, context, derive())
        return hit[2]  # type: ignore[no-any-return]

    def number(self, value: Hashable) -> int:
        """A small number for ``value``, the same for equal values while the configuration
        holds: a cheap key where hashing the value itself, cycle after cycle, would not be."""
        return self._numbers.setdefault(value, len(self._numbers))
