"""Pacing the writes that only restate why a workload waits.

A pending Workload's ``QuotaReserved=False`` condition is rewritten when its reasons change
(apply.py). In a backlog of thousands, one admission can change the numbers of every workload
behind it: without a limit, one cycle would turn into thousands of status writes. Those writes
inform people; they decide nothing. :class:`PendingWriteLimiter` is a token bucket a
controller keeps from cycle to cycle and hands to every apply: status writes of existing
pending or inadmissible Workloads take a token each, and the ones it refuses are left for a
later cycle (they still differ then, so that cycle writes them). Admissions, evictions,
ungates, deletions, finalizer removals and creating a Workload are decisions and never wait.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

__all__ = ["PendingWriteLimiter"]


class PendingWriteLimiter:
    """A token bucket: ``rate`` tokens a second, at most ``burst`` saved up (a full bucket at first).

    >>> limiter = PendingWriteLimiter(rate=50, burst=500)
    >>> limiter.take()
    True
    """

    def __init__(self, rate: float = 50.0, burst: int = 500, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"a pending-write limit needs a positive rate and a burst of at least 1 "
                             f"(got rate {rate}, burst {burst})")
        self.rate = float(rate)
        self.burst = int(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._since = clock()
        self._lock = threading.Lock()

    def take(self) -> bool:
        """Take one token if there is one: True if the write may go now."""
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._since) * self.rate)
            self._since = now
            if self._tokens < 1.0:
                return False
            self._tokens -= 1.0
            return True
