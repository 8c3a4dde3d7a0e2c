"""Which plan the visibility API answers from; never a solve per request.

While this replica decides (it holds the decider lease), the answer comes from its last cycle's
plan, kept by :class:`PlanSource` as an observer of the controller's cycles: the positions are the
ones that cycle ranked and applied. A replica that does not decide (a follower under leader
election, or one that has not cycled yet) runs no cycle, yet the API's Service reaches every
replica: it makes a plan of its own from its watch-fed cache (the same snapshot and policy give
the same plan), when first asked after the cache changed, and answers from it until the cache
changes again. Requests meanwhile wait for that one solve rather than starting their own.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from clueue.engine import ClueueError, Config, Policy, Session

from ..kube.cache import ClusterCache
from .api import RequestError
from .pending import PendingWorkloads

__all__ = ["PlanSource"]

log = logging.getLogger(__name__)


class PlanSource:
    """The waiting workloads to answer from (:meth:`current`), fed the controller's cycles.

    Parameters:
        cache: the controller's watch-fed cache, for a plan of this replica's own.
        policy, config: the controller's, for that plan.
        deciding: whether this replica decides now (holds the decider lease).
    """

    def __init__(self, cache: ClusterCache, policy: Policy, config: Config, *, deciding: Callable[[], bool]) -> None:
        self.cache, self.deciding = cache, deciding
        self._session = Session(policy, config)
        self._lock = threading.Lock()  # the last cycle's plan
        self._solving = threading.Lock()  # this replica's own plan
        self._cycle: tuple[Any, Any] | None = None  # (snapshot, plan) of the last cycle that made a plan
        self._cycle_view: PendingWorkloads | None = None
        self._own: tuple[int, PendingWorkloads] | None = None  # (cache generation, view) of this replica's plan

    def __call__(self, result: Any) -> None:
        """Keep a cycle's snapshot and plan (a ``CycleResult``; one that failed changes nothing)."""
        if result.plan is not None and result.snapshot is not None:
            with self._lock:
                self._cycle, self._cycle_view = (result.snapshot, result.plan), None

    def current(self) -> PendingWorkloads:
        """The waiting workloads of the plan to answer from.

        Raises:
            RequestError: 503, the cache has not listed every kind yet, or this replica's own
                plan could not be made (the policy failed).
        """
        with self._lock:
            if self.deciding() and self._cycle is not None:
                if self._cycle_view is None:
                    self._cycle_view = PendingWorkloads(*self._cycle)
                return self._cycle_view
        if not self.cache.wait_synced(0):
            raise RequestError(503, "ServiceUnavailable", "the controller has not read the cluster yet; "
                               "try again in a few seconds")
        with self._solving:  # one solve at a time; those who waited for it take its answer
            generation = self.cache.generation  # read before the snapshot: a change meanwhile is not missed
            if self._own is None or self._own[0] != generation:
                started = time.monotonic()
                snapshot = self.cache.snapshot()
                try:
                    plan = self._session.run(snapshot, now=int(time.time()))
                except ClueueError as e:
                    raise RequestError(503, "ServiceUnavailable", f"no plan to answer from: {e}") from None
                self._own = (generation, PendingWorkloads(snapshot, plan))
                log.debug("visibility: planned from this replica's cache in %.3f s", time.monotonic() - started)
            return self._own[1]
