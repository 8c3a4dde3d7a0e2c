"""The controller's decision loop: one cycle at a time, when the cluster changed.

The loop runs in one thread, so two cycles never overlap. While this replica may decide (it
leads, or leader election is off) it holds the decider lease (adapters/kube/lease.py) for as
long as it leads, renewed in the background, and runs a cycle:

- **when something changed** in the watch-fed cache (adapters/kube/cache.py), debounced: the
  cycle starts once nothing changed for ``batch_window`` seconds, or ``max_delay`` seconds after
  the first change it waits for, whichever comes first (:class:`Debounce`), so a burst of pod
  creations is decided in one cycle rather than one per pod;
- **after taking the decider lease**, and every ``resync_period`` seconds, with every kind
  listed again first (``ClusterCache.resync``): the snapshot then holds every write of a
  previous decider, and anything a watch may have missed;
- **at once, without the batch window, when quota was given back** (a Workload finished or
  deleted while admitted, a Pod ended: ``ClusterCache.take_urgent``);
- **again, with back-off** (1 s doubling to 60 s), after a cycle that failed or whose apply
  reported errors or stopped; at once after one that evicted (its preemptors are admitted
  by the next cycle, once the evictions are written); and 1-10 s after one whose rewrites of
  pending Workloads' conditions were paced (``ApplyResult.deferred``, adapters/kube/pacing.py);
- **again, with its own back-off** (1 s doubling to 60 s), after a cycle whose search the time
  budget cut short (``SolverInfo.budget_exhausted``): its plan is the best found in time, maybe
  admitting nothing that fits (a loaded machine, the first cycle loading the policy), and the
  cluster need not change again for a better one to be looked for; a cycle that finishes its
  search ends the back-off;
- **when a PodGroup's schedule timeout or requeue back-off ends** (``Decided.next_due``): the
  passing of time is no change of the cluster, yet it decides a release or a new admission.

Each cycle waits until the cache holds this controller's own previous writes (the cache's
expectations), takes a snapshot of the cache, decides in one :class:`~clueue.engine.cycle.Session`
(what it derived from the backlog is kept across cycles), applies the plan as ``clueue apply``
does (:func:`~clueue.adapters.kube.decide.decide_and_apply`, the same code), records the writes
as expectations for the next cycle (the Workloads its status writes returned go into the cache
at once: ``ClusterCache.absorb``), hands what only informs (waiting Workloads' conditions, queue
status, Events) to the background writer (writer.py), and a :class:`CycleResult` to every observer (the
metrics and the summary log line). A cycle that fails is a :class:`CycleResult` with ``error``
set: the process never dies of one bad cycle.

**Stopping.** :meth:`Controller.stop` (SIGTERM): the apply in flight starts no further
workload's writes (``should_stop``) and finishes those it started, so no workload is left half
written; the next leader applies the rest. Only as a last resort, ``shutdown_grace`` seconds
after the stop (a server that stopped answering mid-write), the fence refuses the next write:
apply writes in an order in which any prefix is safe (a workload's admission is recorded
before its pods are ungated). The decider lease is then released.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from kubernetes import client

from clueue.adapters.kube.apply import ApplyResult, SentWarnings
from clueue.adapters.kube.cache import ClusterCache
from clueue.adapters.kube.decide import decide_and_apply
from clueue.adapters.kube.lease import DURATION_S, DeciderLease, LeaseHeld, LeaseLost
from clueue.adapters.kube.pacing import PendingWriteLimiter
from clueue.adapters.controller.writer import BackgroundWriter, lease_fence
from clueue.engine import ClueueError, Config, Document, Plan, Policy, Snapshot
from clueue.engine.cycle import Session
from clueue.engine.memo import Memo
from clueue.engine.snapshot import WorkerView

__all__ = ["Controller", "CycleResult", "Debounce", "Backoff", "decide_again_in", "log_cycle", "wait_before_cycle",
           "monotonic_at"]

log = logging.getLogger("clueue.controller")

# When a cycle's pending-status rewrites were held back (pacing.py), the next cycle comes once
# the limiter has tokens for them, within these bounds.
_DEFERRED_MIN_S = 1.0
_DEFERRED_MAX_S = 10.0
APPLY_WORKERS = 32  # workloads written at once (apply.py): each is a few round trips, mostly waiting


@dataclass
class CycleResult:
    """One cycle, as observers (metrics, the log line) see it.

    ``phases`` holds the seconds of ``snapshot`` (waiting for the cache and reading it, with a
    resync's lists), ``decide`` (the session's cycle) and ``apply`` (the writes); ``started`` is
    the wall-clock time the cycle began (epoch seconds). ``error`` is set when the cycle failed,
    and then ``plan`` and ``applied`` are None. ``next_due`` is when the next PodGroup schedule
    timeout or back-off ends (epoch seconds; None: none), the loop's next cycle at the latest.
    ``documents`` are the objects the snapshot was built from, and ``worker_documents`` those
    of each MultiKueue worker's view, kept only for a decision log (``Controller.keep_documents``).
    ``now`` is the time the cycle decided at (epoch seconds: its clock for timeouts and the
    workers' views' ages), None if it decided nothing.
    """

    started: float
    snapshot: Snapshot | None = None
    documents: list[Document] | None = None
    worker_documents: dict[str, list[Document]] | None = None
    now: int | None = None
    plan: Plan | None = None
    applied: ApplyResult | None = None
    phases: dict[str, float] = field(default_factory=lambda: {"snapshot": 0.0, "decide": 0.0, "apply": 0.0})
    error: str = ""
    resynced: bool = False
    next_due: int | None = None

    @property
    def failed(self) -> bool:
        """Whether the next cycle should come after a back-off: it failed, or some writes did."""
        return bool(self.error) or self.applied is not None and (bool(self.applied.errors) or self.applied.stopped)


@dataclass
class Debounce:
    """When a batch of changes is due: ``window`` seconds after the last change, and at most
    ``max_delay`` seconds after the first. Times are the caller's (monotonic) clock.

    >>> d = Debounce(0.2, 2.0); d.note(10.0); round(d.due_in(10.1), 3)
    0.1
    """

    window: float
    max_delay: float
    first: float | None = None
    last: float | None = None

    def note(self, now: float) -> None:
        """A change happened at ``now``."""
        if self.first is None:
            self.first = now
        self.last = now

    def due_in(self, now: float) -> float | None:
        """Seconds until the batch is due (0: now); None when no change is waiting."""
        if self.first is None or self.last is None:
            return None
        return max(0.0, min(self.last + self.window, self.first + self.max_delay) - now)

    def reset(self) -> None:
        """The batch was taken by a cycle."""
        self.first = self.last = None


@dataclass
class Backoff:
    """Seconds to wait before retrying after failures in a row: ``initial`` doubling to ``maximum``."""

    initial: float = 1.0
    maximum: float = 60.0
    current: float = 0.0

    def failed(self) -> float:
        self.current = min(self.maximum, self.current * 2 if self.current else self.initial)
        return self.current

    def succeeded(self) -> None:
        self.current = 0.0


def decide_again_in(result: CycleResult, unfinished: Backoff) -> float | None:
    """Seconds until a cycle whose search the time budget cut short is decided again (its
    plan is only the best found in time; the cluster need not change again for a better one to
    be looked for), by ``unfinished``, the back-off of such cycles in a row; None after a cycle
    that finished its search (which ends the back-off) or made no plan."""
    if result.plan is None:
        return None
    if result.plan.solver.budget_exhausted:
        return unfinished.failed()
    unfinished.succeeded()
    return None


def wait_before_cycle(now: float, resync_at: float, *deadlines: float | None) -> float:
    """Seconds to wait before the next cycle (0: start it now): until the resync is due at
    ``resync_at`` or the earliest of ``deadlines`` (times of the same clock as ``now``; None:
    not set) comes.

    >>> wait_before_cycle(10.0, 300.0, None, 12.5)
    2.5
    """
    return max(0.0, min([resync_at - now] + [d - now for d in deadlines if d is not None]))


def monotonic_at(epoch: float | None, *, wall: float, mono: float) -> float | None:
    """The monotonic time at which the wall clock (now ``wall``, monotonic ``mono``) shows
    ``epoch``; None for None.

    >>> monotonic_at(1000, wall=990.5, mono=7.0)
    16.5
    """
    return None if epoch is None else mono + max(0.0, epoch - wall)


def log_cycle(result: CycleResult) -> None:
    """A short line per cycle (the controller's own, when no observer is given)."""
    timing = " ".join(f"{k} {v:.3f}s" for k, v in result.phases.items())
    if result.error:
        log.warning("cycle failed: %s; %s", result.error, timing)
    elif result.applied is not None:
        log.info("cycle: %d actions; %s; %s", len(result.plan.actions) if result.plan else 0,
                 result.applied.summary(), timing)


class _LeaderLease(DeciderLease):
    """The decider lease, whose fence also refuses writes once this replica stopped leading or
    its shutdown grace passed."""

    def __init__(self, *args: Any, may_write: Callable[[], str], stopping: Callable[[], bool] = lambda: False,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.may_write = may_write
        self.api = _Unless(self.api, stopping)  # waiting for another holder ends at a stop

    def fence(self) -> None:
        refused = self.may_write()
        if refused:
            raise LeaseLost(f"{refused}; stopped writing")
        super().fence()


class _Unless:
    """A Lease API whose reads raise :class:`LeaseHeld` once ``stopping``: a controller stopped
    while waiting for the decider lease (a crashed holder's: up to a lease duration) gives up
    at the wait's next poll instead of taking the lease and deciding after the stop."""

    def __init__(self, api: Any, stopping: Callable[[], bool]) -> None:
        self._api, self._stopping = api, stopping

    def read_namespaced_lease(self, *args: Any, **kwargs: Any) -> Any:
        if self._stopping():
            raise LeaseHeld("stopping: the decider lease is no longer wanted")
        return self._api.read_namespaced_lease(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)


class Controller:
    """The decision loop of one replica; :meth:`run` blocks until :meth:`stop`.

    >>> controller = Controller(api, ClusterCache(api).start(), policy, config)   # doctest: +SKIP
    >>> threading.Thread(target=controller.run).start(); ...; controller.stop()   # doctest: +SKIP
    """

    def __init__(self, api: client.ApiClient, cache: ClusterCache, policy: Policy, config: Config = Config(), *,
                 namespace: str | None = None, identity: str | None = None, batch_window: float = 0.2,
                 max_delay: float = 2.0, resync_period: float = 300.0, lease_duration: int = DURATION_S,
                 leading: Callable[[], bool] = lambda: True,
                 observers: Sequence[Callable[[CycleResult], None]] | None = None, expectation_timeout: float = 10.0,
                 shutdown_grace: float = 5.0, keep_documents: bool = False) -> None:
        self.api = api
        self.cache = cache
        self.policy = policy
        self.config = config
        self.namespace = namespace or config.controller_namespace
        self.identity = identity
        self.batch_window = batch_window
        self.max_delay = max(max_delay, batch_window)
        self.resync_period = resync_period
        self.lease_duration = lease_duration
        self.leading = leading
        self.observers = [log_cycle] if observers is None else list(observers)
        self.expectation_timeout = expectation_timeout
        self.shutdown_grace = shutdown_grace
        self.keep_documents = keep_documents  # a decision log observer records each cycle's objects
        # MultiKueue's workers as last read (adapters/kube/dispatch_workers.py), for dispatch;
        # called with a dict to fill with each view's documents when they are kept
        self.workers: Callable[[dict[str, list[Document]] | None], Mapping[str, WorkerView]] = lambda read: {}
        # called before the decider lease is given back (stop, leadership lost): a decision log
        # writes what it holds, so that the next decider's cycles come after this one's
        self.before_release: list[Callable[[], None]] = []
        self.session = Session(policy, config)
        self._memo = Memo()  # for the over-quota check, kept across cycles as the session keeps its own
        # Writes that inform and decide nothing are paced across cycles, so that a backlog's
        # restated reasons and routine Events never delay the next decision (pacing.py):
        self.pending_writes = PendingWriteLimiter(rate=50, burst=100)  # pending Workloads' conditions
        self.events = PendingWriteLimiter(rate=20, burst=200)  # Normal Events beyond it dropped, never Warnings
        self.warned = SentWarnings()  # a pod of a group whose Workload cannot be built is told why once
        # what only informs (pending Workloads' conditions, queue status, Events), off the cycle's path
        self.writer = BackgroundWriter(api, cache, fence=lease_fence(self), pending_writes=self.pending_writes,
                                       warned=self.warned)
        self.cycles = 0
        self.lease: DeciderLease | None = None
        self._stopping = threading.Event()
        self._stopped_at = 0.0
        self._wake = threading.Event()
        self._crashed = False
        self._told: set[str] = set()  # the apply errors and warnings logged already

    # -- control from other threads ------------------------------------------------------------
    def stop(self) -> None:
        """Take no new cycle; the one in flight finishes the workloads it started writing, for at
        most ``shutdown_grace`` more seconds."""
        if not self._stopping.is_set():
            self._stopped_at = time.monotonic()
            self._stopping.set()
        self._wake.set()

    def wake(self) -> None:
        """Look at the leadership again now (a leader-election callback calls this)."""
        self._wake.set()

    def ready(self) -> bool:
        """Whether the cache has listed every kind once."""
        return self.cache.wait_synced(0)

    def healthy(self) -> bool:
        """False once the loop ended other than by :meth:`stop` (a bug): the pod should restart."""
        return not self._crashed

    def _refusal(self) -> str:
        """Why a write must not be sent now ("" if it may)."""
        if not self.leading():
            return "this replica is no longer the leader"
        if self._stopping.is_set() and time.monotonic() - self._stopped_at > self.shutdown_grace:
            return f"shutting down ({self.shutdown_grace:g} s after the stop)"
        return ""

    # -- the loop --------------------------------------------------------------------------------
    def run(self) -> None:
        """Decide until :meth:`stop`; the decider lease is released at the end."""
        debounce = Debounce(self.batch_window, self.max_delay)
        backoff = Backoff()
        unfinished = Backoff()  # cycles in a row whose search the time budget cut short
        retry_at: float | None = None
        due_at: float | None = None  # monotonic: a PodGroup timeout or back-off ends (Decided.next_due)
        next_resync = 0.0
        self.writer.start()
        try:
            while not self._stopping.is_set():
                if not self.leading():
                    self._drop_lease()
                    self._wake.wait(0.5)
                    self._wake.clear()
                    continue
                if self.lease is None or self._lease_lost():
                    if not self._take_lease(backoff):
                        continue
                    backoff.succeeded()
                    next_resync = 0.0  # the first cycle under a new lease reads everything again
                now = time.monotonic()
                changed = self.cache.take_changes()
                if changed:
                    log.debug("changed: %s", ", ".join(sorted(changed)))
                    debounce.note(now)
                batch = debounce.due_in(now)
                if batch is not None and self.cache.take_urgent():  # quota given back: used at once
                    batch = 0.0
                wait = wait_before_cycle(now, next_resync, None if batch is None else now + batch, retry_at, due_at)
                if wait > 0:
                    self.cache.wait_changed(min(wait, 0.5))  # 0.5: the leadership and the lease are looked at again
                    continue
                resync = now >= next_resync
                debounce.reset()
                retry_at = None
                result = self._cycle(resync)
                # Wall clock to monotonic now, with a hundredth of a second over: woken a moment
                # early, the cycle would find nothing due yet and be due again at once.
                due_at = monotonic_at(None if result.next_due is None else result.next_due + 0.01,
                                      wall=time.time(), mono=time.monotonic())
                if resync and not result.error:
                    next_resync = time.monotonic() + self.resync_period
                if result.failed:
                    retry_at = time.monotonic() + backoff.failed()
                elif result.applied is not None:
                    backoff.succeeded()
                    applied = result.applied
                    if applied.deferred:  # paced: the rest once the limiter has room for them
                        retry_at = time.monotonic() + min(_DEFERRED_MAX_S, max(
                            _DEFERRED_MIN_S, len(applied.deferred) / self.pending_writes.rate))
                    if any(w.startswith("preempt ") for w in applied.writes):
                        debounce.note(time.monotonic())  # admit the preemptors once the evictions are seen
                again = decide_again_in(result, unfinished)
                if again is not None:
                    retry_at = min(time.monotonic() + again, retry_at if retry_at is not None else float("inf"))
        except BaseException:
            self._crashed = True
            raise
        finally:
            self._drop_lease()
            self.writer.stop()

    def _lease_lost(self) -> bool:
        assert self.lease is not None
        try:
            self.lease.fence()
            return False
        except LeaseLost as e:
            log.warning("%s; taking it again", e)
            self._drop_lease()
            return True

    def _take_lease(self, backoff: Backoff) -> bool:
        """Take the decider lease, waiting a lease duration and then some for another holder
        (one that crashed holding it is taken over once its record has not changed for that long)."""
        lease = _LeaderLease(self.api, self.namespace, identity=self.identity, duration=self.lease_duration,
                             may_write=self._refusal, stopping=self._stopping.is_set)
        try:
            self.lease = lease.acquire(timeout=lease.duration * 2 + 1)
            if self._stopping.is_set():  # taken just as the stop came: no cycle under it
                self._drop_lease()
                return False
            log.info("took the decider lease %s/%s as %s", self.namespace, lease.name, lease.identity)
            return True
        except LeaseHeld as e:
            log.info("%s", e)
        except Exception as e:  # noqa: BLE001 - unreachable, forbidden, no namespace: said, then retried
            wait = backoff.failed()
            log.error("cannot take the decider lease: %s; trying again in %.0f s", e, wait)
            self._stopping.wait(wait)
        return False

    def _drop_lease(self) -> None:
        lease, self.lease = self.lease, None
        if lease is None:
            return
        self.writer.drop(wait=self.shutdown_grace)  # its writes end before the lease is given back
        for hook in self.before_release:
            try:
                hook()
            except Exception:  # noqa: BLE001 - the lease is released all the same
                log.exception("before releasing the decider lease")
        try:
            lease.release()
            log.info("released the decider lease %s/%s", lease.namespace, lease.name)
        except Exception as e:  # noqa: BLE001 - it expires on its own after its duration
            log.warning("could not release the decider lease: %s", e)

    def _tell(self, applied: ApplyResult, plan: Plan | None) -> None:
        """Log the apply's errors and warnings, and the objects the snapshot left out as
        malformed (a bad ConfigMap of Kueue's, a ClusterQueue...: their Warning Events say it on
        the objects), each once while it lasts (a cycle that meets the same refusal or
        over-committed quota as the last one does not say it again)."""
        lines = [f"apply: {line}" for line in applied.errors] + list(applied.warnings) + [
            f"{r.kind} {r.namespace + '/' if r.namespace else ''}{r.name}: {r.field + ': ' if r.field else ''}"
            f"{r.message}; clueue cannot use it and leaves it out" for r in (plan.rejected if plan else ())]
        for line in lines:
            if line not in self._told:
                log.warning("%s", line)
        self._told = set(lines)

    def _cycle(self, resync: bool) -> CycleResult:
        """One cycle; never raises (a failure is the result's ``error``)."""
        result = CycleResult(started=time.time(), resynced=resync)
        t0 = time.monotonic()
        marks = {"read": t0, "decided": t0}

        def read() -> Snapshot:
            if self.keep_documents:
                result.documents, result.worker_documents = [], {}
                result.snapshot = self.cache.snapshot(result.documents)
            else:
                result.snapshot = self.cache.snapshot()
            workers = self.workers(result.worker_documents) if result.snapshot.multikueue_configs else {}
            if workers:
                result.snapshot = replace(result.snapshot, workers=workers)
            marks["read"] = time.monotonic()
            return result.snapshot

        def decide(snapshot: Snapshot) -> Plan:
            result.now = int(time.time())
            plan = self.session.run(snapshot, now=result.now)
            marks["decided"] = time.monotonic()
            return plan

        self.cache.begin_writes()
        written: list[tuple[str, str, str]] = []
        try:
            if resync:
                self.cache.resync()
            self.cache.wait_for_expectations(self.expectation_timeout)
            decided = decide_and_apply(self.api, self.policy, self.config, read=read, decide=decide, lease=self.lease,
                                       lease_namespace=self.namespace, memo=self._memo,
                                       pending_writes=self.pending_writes, events=self.events,
                                       warned=self.warned, cached=self.cache.get,
                                       workers=APPLY_WORKERS, should_stop=self._stopping.is_set,
                                       later=self.writer.offer, event_sink=self.writer.events)
            result.plan, result.applied, result.next_due = decided.plan, decided.applied, decided.next_due
            self.cache.absorb("Workload", decided.applied.answers)  # the next cycle needs no watch for them
            written = decided.applied.written
            self._tell(decided.applied, decided.plan)
        except ClueueError as e:
            result.error = str(e)
        except Exception as e:  # noqa: BLE001 - a bug must not stop the controller: logged, retried
            log.exception("cycle failed")
            result.error = f"{type(e).__name__}: {e}"
        finally:
            self.cache.expect(written)
        if result.error:
            self._memo = Memo()  # as the session does: what a failed cycle kept may be half updated
        end = time.monotonic()
        read_at = marks["read"] if result.snapshot is not None else end
        decided_at = max(marks["decided"], read_at)
        result.phases = {"snapshot": read_at - t0, "decide": decided_at - read_at, "apply": end - decided_at}
        self.cycles += 1
        for observe in self.observers:
            try:
                observe(result)
            except Exception:  # noqa: BLE001 - an observer's bug is not the cycle's
                log.exception("observing a cycle failed")
        return result
