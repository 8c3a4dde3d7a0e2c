"""The controller's background writer: what informs and decides nothing, off the cycle's path.

A cycle writes its decisions (admissions, evictions, ungates, deletions, Workloads made for
pods) and hands the rest to this writer, then ends: the next cycle never waits for them.

- **Pending Workloads' conditions.** Of the workloads that wait, only the first
  :data:`HEADS` of each ClusterQueue, in the plan's order, are written at all: Kueue too
  writes only for the heads it tried, and a backlog of thousands, restated after every
  admission, would spend the API server's writes on news nobody reads. One is written when
  its reason codes change from the ones this writer last wrote for it (a number changing in
  the same reason is no news), or, for one it never wrote, when its recorded condition differs
  from the plan's (apply.py's :func:`~clueue.adapters.kube.apply.desired_status`). The full
  reasons of every workload stay in ``clueue explain``, ``clueue list`` and the dashboard.
  Writes take a token each from the controller's pending-write limiter (pacing.py); the writer
  always works on the latest cycle's wants, highest-ranked first, so a workload admitted
  meanwhile is never told it waits (and the status write checks its admission anyway).
- **Queue status** (queue_status.py), at most once every :data:`QUEUE_PERIOD_S` seconds,
  from the latest cycle's snapshot and plan.
- **Events** the cycle's apply recorded (at most one per admission; the Normal ones already
  limited by the controller's Event limit).

Every write is fenced by the decider lease the controller holds at that moment (none held:
nothing is written, and the wants are dropped). The cache is told of each status write before
it is sent (:meth:`~clueue.adapters.kube.cache.ClusterCache.hold`), so its own events do not
start cycles.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from typing import Any, Callable

from kubernetes import client

from clueue.adapters.kube.apply import SentWarnings, apply_plan, desired_status
from clueue.adapters.kube.cache import ClusterCache
from clueue.adapters.kube.pacing import PendingWriteLimiter
from clueue.adapters.kube.queue_status import write_queue_status
from clueue.engine import Plan, Snapshot, WorkloadEntry

__all__ = ["BackgroundWriter", "HEADS", "QUEUE_PERIOD_S", "heads"]

log = logging.getLogger("clueue.controller")

HEADS = 5  # waiting workloads per ClusterQueue whose status is written
QUEUE_PERIOD_S = 5.0  # queue status written at most this often: it informs, and competes with admissions
_BATCH = 16  # pending status writes sent at once (the apply's threads)


def heads(entries: tuple[WorkloadEntry, ...], per_queue: int = HEADS) -> list[WorkloadEntry]:
    """The first ``per_queue`` of ``entries`` of each ClusterQueue (its LocalQueue's name for one
    without), in rank order (unranked last, in the plan's order)."""
    ordered = sorted(entries, key=lambda e: (e.rank is None, e.rank or 0))
    seen: dict[str, int] = {}
    out = []
    for entry in ordered:
        queue = entry.cluster_queue or f"lq:{entry.queue}"
        seen[queue] = seen.get(queue, 0) + 1
        if seen[queue] <= per_queue:
            out.append(entry)
    return out


def _codes(entry: WorkloadEntry) -> tuple[str, ...]:
    return (entry.state,) + tuple(sorted({r.code for r in entry.reasons}))


class BackgroundWriter:
    """One thread writing, paced, what the latest cycle handed it (:meth:`offer`, :meth:`events`)."""

    def __init__(self, api: client.ApiClient, cache: ClusterCache, *, fence: Callable[[], Callable[[], None] | None],
                 pending_writes: PendingWriteLimiter, warned: SentWarnings | None = None,
                 per_queue: int = HEADS, queue_period: float = QUEUE_PERIOD_S) -> None:
        """``fence``: the fence of the decider lease held now, None when none is held."""
        self.api = api
        self.cache = cache
        self.fence = fence
        self.pending_writes = pending_writes
        self.warned = warned
        self.per_queue = per_queue
        self.queue_period = queue_period
        self.on_writes: Callable[[list[str]], None] = lambda writes: None  # e.g. the metrics' write counter
        self.written = 0  # status writes sent
        self.skipped = 0  # wanted, but their reason codes had not changed
        self._wants: dict[str, WorkloadEntry] = {}  # workload -> its latest waiting entry, heads only
        self._plan: Plan | None = None
        self._basis: Snapshot | None = None  # the snapshot _plan was decided from
        self._queues: tuple[Snapshot, Plan] | None = None
        self._queues_at = 0.0
        self._events: list[Callable[[], str]] = []
        self._told: dict[str, tuple[str, ...]] = {}  # workload -> the reason codes last written for it
        self._lock = threading.Condition()
        self._busy = threading.Lock()  # held while a round writes: drop() waits for it
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> BackgroundWriter:
        self._thread = threading.Thread(target=self._run, name="clueue-writer", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- from the cycle --------------------------------------------------------------------------
    def offer(self, snapshot: Snapshot, plan: Plan, waiting: tuple[WorkloadEntry, ...], queues: bool = True) -> None:
        """The latest cycle's wants: its waiting entries (:func:`~clueue.adapters.kube.decide.informational`)
        and (``queues``) its queue status. They replace the previous cycle's."""
        wanted = {e.name: e for e in heads(waiting, self.per_queue)}
        with self._lock:
            self._wants = wanted
            self._plan, self._basis = plan, snapshot
            self._queues = (snapshot, plan) if queues else None
            live = {e.name for e in plan.workloads}
            for name in [n for n in self._told if n not in live]:  # admitted, finished or gone: forgotten
                del self._told[name]
            self._lock.notify_all()

    def events(self, sends: list[Callable[[], str]]) -> None:
        """Events to send (from :func:`~clueue.adapters.kube.apply.apply_plan`'s ``event_sink``)."""
        if sends:
            with self._lock:
                self._events += sends
                self._lock.notify_all()

    def drop(self, wait: float = 0.0) -> None:
        """Forget what is wanted (the decider lease is given back or lost: the next decider
        writes its own), after waiting up to ``wait`` seconds for the round in flight to end."""
        acquired = self._busy.acquire(timeout=wait) if wait > 0 else False
        try:
            with self._lock:
                self._wants, self._queues, self._events = {}, None, []
                self._told.clear()
        finally:
            if acquired:
                self._busy.release()

    # -- the thread ------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with self._busy:
                    did = self._step()
                if not did:
                    with self._lock:
                        self._lock.wait(self._idle())
            except Exception:  # noqa: BLE001 - informing must never end the controller
                log.exception("background writes failed")
                self._stop.wait(1.0)

    def _idle(self) -> float:
        """Seconds to wait for work: until the queue status is due, or a token comes."""
        waits = [5.0]
        if self._queues is not None:
            waits.append(max(0.05, self._queues_at + self.queue_period - time.monotonic()))
        if self._wants:
            waits.append(max(0.05, 1.0 / self.pending_writes.rate))
        return min(waits)

    def _step(self) -> bool:
        """One round of writes; False if there was nothing to do now."""
        with self._lock:
            sends, self._events = self._events, []
        for send in sends:
            warning = send()
            if warning:
                log.debug("%s", warning)
        fence = self.fence()
        if fence is None:
            self.drop()
            return bool(sends)
        did = bool(sends)
        with self._lock:
            queues = self._queues if time.monotonic() >= self._queues_at + self.queue_period else None
            if queues is not None:
                self._queues = None
        if queues is not None:
            self._queues_at = time.monotonic()
            errors: list[str] = []
            self.on_writes(write_queue_status(self.api, queues[0], queues[1], version=self.cache.version or "",
                                              fence=fence, errors=errors))
            for e in errors:
                log.debug("queue status: %s", e)
            did = True
        return self._pending(fence) or did

    def _pending(self, fence: Callable[[], None]) -> bool:
        """Write the status of the highest-ranked wanted workloads the limiter has tokens for."""
        batch: list[WorkloadEntry] = []
        with self._lock:
            plan, basis = self._plan, self._basis
            for name, entry in list(self._wants.items()):
                if len(batch) >= _BATCH:
                    break
                del self._wants[name]
                doc = self.cache.get("Workload", name)
                if doc is None or desired_status(entry, dict(doc.body.get("status") or {}),
                                                 self.cache.version or "v1beta1") is None:
                    continue
                if self._told.get(name) == _codes(entry) and entry.pods_ready is None:
                    self.skipped += 1
                    continue
                if not self.pending_writes.take():
                    self._wants = {name: entry, **self._wants}  # first again once a token comes
                    break
                batch.append(entry)
        if not batch or plan is None:
            return False
        keys = [("Workload", e.name) for e in batch]
        self.cache.hold(keys)
        result = None
        try:
            result = apply_plan(self.api, replace(plan, workloads=tuple(batch), actions=(), rejected=()),
                                fence=fence, cached=self.cache.get, warned=self.warned, workers=min(len(batch), 8),
                                event_sink=self.events, basis=basis)  # only onto the Workloads it decided about
        finally:
            self.cache.release(keys, result.written if result is not None else ())
        written = {w.split(" ", 2)[2] for w in result.writes if w.startswith("status Workload ")}
        settled = written | {w.split(" ", 2)[2] for w in result.skipped if w.startswith("status Workload ")}
        with self._lock:
            for entry in batch:
                if entry.name in settled:  # recorded now, with these codes
                    self._told[entry.name] = _codes(entry)
        self.written += len(written)
        self.on_writes(result.writes)
        for e in result.errors:
            log.debug("pending status: %s", e)
        return True


def lease_fence(controller: Any) -> Callable[[], Callable[[], None] | None]:
    """The fence of the lease ``controller`` holds at the moment of asking (None: none)."""
    def fence() -> Callable[[], None] | None:
        lease = controller.lease
        return None if lease is None else lease.fence
    return fence
