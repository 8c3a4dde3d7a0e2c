"""The controller's recording of its cycles: an observer of each ``CycleResult`` that hands the
cycle to a writer thread of its own.

Recording a busy cycle (hashing the objects that changed, finding the workloads whose state
changed, compressing, SQLite's transaction) costs tens of milliseconds that the decision loop
would wait for before its next cycle. So the observer, in the loop's thread, only takes what the
cycle read and decided as an immutable :class:`CycleInputs` (the plan and the snapshot are
frozen; the lists of documents are copied into tuples, and the documents themselves are never
changed: the cache replaces an object that changes; the plan's entries are spelled out there,
since spelling them out may solve with the loop's session) and queues it; one writer thread
records the queued cycles in order.

**Backpressure.** The queue holds at most ``queue_size`` cycles. A cycle that finds it full (the
writer that far behind: a slow or stuck volume) is not recorded: it is counted by ``on_error``
(the metric ``clueue_decision_log_errors_total``) and logged (once per run of such cycles).
Blocking the loop instead would stop admissions for the log's sake. Dropping a cycle loses no
workload's change for good: the next recorded cycle records every workload whose state differs
from its last recorded one (at that cycle's time); a change undone within the dropped cycles is
not seen.

**Flush.** :meth:`CycleRecorder.flush` waits until the writer has written every queued cycle;
the controller calls it before it gives back the decider lease (at a stop, or when it stops
leading), so that in a log two replicas share, the next decider's cycles come after this one's.
:meth:`CycleRecorder.close` flushes, stops the writer and closes the log. A cycle is written in
one SQLite transaction: a process killed meanwhile leaves each record whole or absent (those
still queued are lost).

It never stops admissions: a cycle that cannot be recorded (the volume is full, the file is
locked, a bug) is logged (once while the same error lasts), counted by ``on_error`` and skipped;
the next cycle tries again, opening the log anew if it had to be closed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from clueue.engine import ClueueError, Config, Document, Plan, Policy
from clueue.engine.config import DecisionLogConfig
from clueue.engine.snapshot import WorkerView

from .recorder import Recorder
from .retention import Retention

__all__ = ["CycleInputs", "CycleRecorder", "QUEUE_SIZE", "FLUSH_SECONDS"]

log = logging.getLogger("clueue.decisionlog")

#: Cycles the writer may be behind before a new one is dropped: each holds its plan and the
#: references to its snapshot's documents (shared with the cache), a few MB for a large cluster.
QUEUE_SIZE = 8
#: How long :meth:`CycleRecorder.flush` waits by default (a stuck volume must not hold a stop).
FLUSH_SECONDS = 30.0


@dataclass(frozen=True)
class CycleInputs:
    """One cycle as the log records it, taken in the loop's thread: nothing in it changes later."""

    started: float
    documents: tuple[Document, ...] | None
    plan: Plan | None
    snapshot_notices: tuple[str, ...]
    error: str
    phases: tuple[tuple[str, float], ...]
    now: int | None
    workers: Mapping[str, WorkerView]
    worker_documents: Mapping[str, tuple[Document, ...]]

    @classmethod
    def of(cls, result: Any) -> CycleInputs:
        """The inputs of a ``CycleResult`` (duck-typed: ``started``, ``documents``,
        ``worker_documents``, ``snapshot``, ``plan``, ``error``, ``phases``, ``now``)."""
        snapshot, plan = result.snapshot, result.plan
        return cls(
            started=result.started,
            documents=None if result.documents is None else tuple(result.documents),
            # the entries are spelled out here: doing so may solve with the loop's session
            plan=None if plan is None else replace(plan, workloads=tuple(plan.workloads)),
            snapshot_notices=tuple(snapshot.notices) if snapshot is not None else (),
            error=result.error, phases=tuple((result.phases or {}).items()), now=result.now,
            workers=snapshot.workers if snapshot is not None else {},
            worker_documents={k: tuple(v) for k, v in (result.worker_documents or {}).items()})

    def record_into(self, recorder: Recorder) -> dict[str, Any]:
        """Record these inputs with ``recorder`` (see :meth:`Recorder.record`)."""
        return recorder.record(started=self.started, documents=self.documents, plan=self.plan,
                               snapshot_notices=self.snapshot_notices, error=self.error,
                               phases=dict(self.phases), now=self.now, workers=self.workers,
                               worker_documents=self.worker_documents)


class CycleRecorder:
    """Records each cycle a controller observes into the log ``settings`` names, from a writer
    thread (see the module). ``on_error`` is called for each cycle not recorded (from either
    thread), ``on_written`` by the writer with each record written, the seconds it took and the
    writer's CPU seconds in them (the rest is waiting: for the disk, or for the interpreter's
    lock while the loop's thread runs)."""

    def __init__(self, settings: DecisionLogConfig, *, policy: Policy, config: Config,
                 on_error: Callable[[], None] = lambda: None, queue_size: int = QUEUE_SIZE,
                 on_written: Callable[[dict[str, Any], float, float], None] = lambda record, wall, cpu: None
                 ) -> None:
        self.settings = settings
        self.policy = policy
        self.config = config
        self.on_error = on_error
        self.on_written = on_written
        self.queue_size = queue_size
        self.recorder: Recorder | None = None  # opened by the writer for the first cycle (only a leader decides)
        self.dropped = 0  # cycles not queued because the queue was full, in all
        self._told = ""  # the last error logged (the writer's)
        self._dropping = 0  # cycles dropped in a row (the loop's)
        self._cond = threading.Condition()
        self._queue: deque[CycleInputs] = deque()
        self._busy = False  # the writer holds a cycle it took from the queue
        self._closing = False
        self._writer: threading.Thread | None = None

    def __call__(self, result: Any) -> None:
        """Queue one ``CycleResult`` for the writer; never raises, never waits for the log."""
        try:
            inputs = CycleInputs.of(result)
        except Exception:  # noqa: BLE001 - the log must never stop the cycles: said, counted, skipped
            self.on_error()
            log.exception("decision log %s: cycle not recorded", self.settings.path)
            return
        with self._cond:
            closed = self._closing
            full = not closed and len(self._queue) >= self.queue_size
            if not closed and not full:
                self._queue.append(inputs)
                self._start()
                self._cond.notify_all()
        if closed:  # a cycle that ended after the stop (past its grace): counted, not recorded
            self.on_error()
            return
        if full:
            self.dropped += 1
            self._dropping += 1
            self.on_error()
            if self._dropping == 1:
                log.warning("decision log %s: cycle not recorded: the writer is %d cycles behind (a slow volume?)",
                            self.settings.path, self.queue_size)
        elif self._dropping:
            log.info("decision log %s: recording again, %d cycle(s) not recorded", self.settings.path, self._dropping)
            self._dropping = 0

    def flush(self, timeout: float | None = FLUSH_SECONDS) -> bool:
        """Wait until every queued cycle is written (or failed); False if ``timeout`` passed first."""
        with self._cond:
            done = self._cond.wait_for(lambda: not self._queue and not self._busy, timeout)
            left = len(self._queue) + self._busy
        if not done:
            log.warning("decision log %s: %d cycle(s) not written after %g s", self.settings.path, left, timeout)
        return done

    def close(self, timeout: float | None = FLUSH_SECONDS) -> None:
        """Write what is queued (for at most ``timeout`` seconds), stop the writer and close the
        log. Cycles still queued then are counted as not recorded."""
        self.flush(timeout)
        with self._cond:
            self._closing = True
            lost = len(self._queue)
            self._queue.clear()
            self._cond.notify_all()
            writer = self._writer
        for _ in range(lost):
            self.on_error()
        if writer is not None:
            writer.join(timeout)
            if writer.is_alive():  # stuck in a write: its connection stays open, the process ends anyway
                return
        self._close_log()

    # -- the writer thread -----------------------------------------------------------------------
    def _start(self) -> None:
        """Start the writer if it is not running (called holding the lock)."""
        if self._writer is None:
            self._writer = threading.Thread(target=self._run, name="decision-log-writer", daemon=True)
            self._writer.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._closing)
                if self._closing:
                    return
                inputs = self._queue.popleft()
                self._busy = True
            try:
                self._write(inputs)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _write(self, inputs: CycleInputs) -> None:
        try:
            if self.recorder is None:
                self.recorder = Recorder.open(
                    self.settings.path, origin="controller", policy=self.policy, config=self.config,
                    json_lines=self.settings.json_lines,
                    retention=Retention(self.settings.max_age_seconds, self.settings.max_bytes))
            wall, cpu = time.perf_counter(), time.thread_time()
            record = inputs.record_into(self.recorder)
            self.on_written(record, time.perf_counter() - wall, time.thread_time() - cpu)
            if self._told:
                log.info("decision log %s: recording again", self.settings.path)
            self._told = ""
        except Exception as e:  # noqa: BLE001 - the log must never stop the cycles: said, counted, skipped
            self.on_error()
            message = str(e) if isinstance(e, ClueueError) else f"{type(e).__name__}: {e}"
            if message != self._told:
                log.warning("decision log %s: cycle not recorded: %s", self.settings.path, message)
            self._told = message
            self._close_log()

    def _close_log(self) -> None:
        recorder, self.recorder = self.recorder, None
        if recorder is not None:
            try:
                recorder.close()
            except Exception:  # noqa: BLE001 - closing after a failure: nothing more to do
                log.debug("closing the decision log failed", exc_info=True)
