"""Where the dashboard's plan comes from (docs/dashboard.md), each a callable returning a
:class:`~.views.Current`:

- a snapshot read by ``read`` (files, or a live cluster) and decided by the code of ``clueue
  plan`` (:func:`planned`);
- a decision log's last cycle, its snapshot rebuilt and decided again under its recorded policy
  and Configuration, as ``clueue audit replay`` does (:func:`recorded`);
- the controller's last cycle (``server.LatestCycle``).
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from clueue.engine import Config, Policy, Snapshot
from clueue.engine.guard import guarded_cycle

from .views import Current

__all__ = ["Refreshing", "planned", "recorded"]


class Refreshing:
    """A :class:`Current` made by ``make`` and kept until ``stale(current)`` says it is old;
    one request at a time remakes it. A failure to make one is raised to that request (its page
    says why) and tried again at the next."""

    def __init__(self, make: Callable[[], Current], stale: Callable[[Current], bool]) -> None:
        self.make, self.stale = make, stale
        self._current: Current | None = None
        self._lock = threading.Lock()

    def __call__(self) -> Current:
        with self._lock:
            if self._current is None or self.stale(self._current):
                self._current = self.make()
            return self._current


def planned(read: Callable[[], Snapshot], policy: Policy, config: Config, origin: str) -> Callable[[], Current]:
    """A decision over the snapshot ``read`` gives, as ``clueue plan`` decides it."""
    def make() -> Current:
        taken = time.time()
        snapshot = read()
        return Current(snapshot, guarded_cycle(snapshot, policy, config, now=int(taken)), taken, origin)
    return make


def recorded(db: str) -> Refreshing:
    """The last cycle of the log at ``db`` decided again under its recorded policy, made anew
    once a newer cycle is recorded."""
    from ..decisionlog.replay import load_recorded
    from ..decisionlog.schema import DecisionLogError
    from ..decisionlog.store import DecisionLog

    def last() -> int:
        with DecisionLog.open(db) as log:
            ids = log.cycle_ids()
        if ids is None:
            raise DecisionLogError(f"decision log {db} holds no cycle yet")
        return ids[1]

    def make() -> Current:
        cycle = last()
        with DecisionLog.open(db) as log:
            rebuilt = load_recorded(log, cycle)
        plan = guarded_cycle(rebuilt.snapshot, rebuilt.policy, rebuilt.config, now=rebuilt.now)  # as it was decided
        return Current(rebuilt.snapshot, plan, time.time(), f"cycle {cycle} of the decision log, decided again")

    return Refreshing(make, lambda current: not current.origin.startswith(f"cycle {last()} "))
