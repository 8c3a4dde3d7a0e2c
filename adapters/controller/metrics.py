"""Prometheus metrics of the controller, under the ``clueue_`` prefix (docs/metrics.md).

Three families: the plain-Pod counters of KEP-976 (``clueue_pods_*_total``); the workload and
quota metrics Kueue users already chart, with Kueue's names and labels
(``clueue_pending_workloads``, ``clueue_admitted_workloads_total``, ...); and clueue's own
(cycle phases, solver rounds and outcome, apply writes).

One :class:`Metrics` owns its own :class:`~prometheus_client.CollectorRegistry`, so that two
controllers in one process (tests) never share or collide on a metric. The controller loop
calls :meth:`Metrics.record_cycle` once per cycle with its ``CycleResult`` (duck-typed here:
``snapshot``, ``plan``, ``applied``, ``phases``, ``started``, ``error``).

>>> metrics = Metrics()
>>> metrics.pod_gated()
>>> metrics.registry.get_sample_value("clueue_pods_gated_total")
1.0
"""

from __future__ import annotations

from collections import Counter as Tally
from dataclasses import dataclass, field
from typing import Any, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest

from clueue.adapters.kube.apply import _EVICTED_BY
from clueue.engine.queues import deactivated, entry_usage

# No ``*_created`` series: they double the exposition and nobody charts them (Kueue has none).
disable_created_metrics()

__all__ = ["Metrics", "CycleTally", "tally_cycle", "outcome_of", "OUTCOMES"]

#: A cycle's outcome, the label of ``clueue_cycles_total``: the plan is proven optimal; the time
#: budget ran out first (the plan is the best found); the solver stopped unsure of optimality
#: for another reason; no plan (the cycle raised); no plan and no error (nothing was decided).
OUTCOMES = ("optimal", "budget_exhausted", "unproven", "failed", "skipped")

# Kueue's admission wait buckets (pkg/metrics: 1 s, then doubling from 2.5 s to about 3 h).
_WAIT_BUCKETS = (1.0,) + tuple(2.5 * 2 ** i for i in range(13))
_PHASE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_ROUND_BUCKETS = (0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0)


@dataclass
class CycleTally:
    """What one cycle decided and what its apply wrote, counted once for metrics and logs.

    ``reserved``, ``admitted`` and ``evicted`` are the plan's decisions (workload -> ClusterQueue,
    and workload -> (ClusterQueue, Kueue eviction reason)): a workload with admission checks has
    its quota reserved in one cycle and is admitted in a later one, when every check is Ready;
    without checks both happen at once. The ``*_written`` sets are those the apply actually
    recorded in the cluster. ``ungated`` and ``rejected`` count Pods written.
    """

    outcome: str
    reserved: dict[str, str] = field(default_factory=dict)
    reserved_written: set[str] = field(default_factory=set)
    admitted: dict[str, str] = field(default_factory=dict)
    admitted_written: set[str] = field(default_factory=set)
    created: dict[str, float] = field(default_factory=dict)  # reserved or admitted workload -> creation (epoch s)
    evicted: dict[str, tuple[str, str]] = field(default_factory=dict)
    evicted_written: set[str] = field(default_factory=set)
    pending: Tally[str] = field(default_factory=Tally)  # ClusterQueue -> pending workloads ("active")
    inadmissible: Tally[str] = field(default_factory=Tally)  # ClusterQueue -> inadmissible workloads
    admitted_active: Tally[str] = field(default_factory=Tally)  # ClusterQueue -> admitted workloads
    unqueued: int = 0  # waiting workloads the plan names no ClusterQueue for (e.g. a missing LocalQueue)
    ungated: int = 0
    rejected: int = 0
    writes: int = 0
    errors: int = 0
    retries: int = 0
    deferred: int = 0  # pending Workloads' condition rewrites left for a later cycle (pacing)
    events_dropped: int = 0  # routine Events over the Event limit, not sent
    stopped: bool = False

    @property
    def pending_total(self) -> int:
        return sum(self.pending.values())

    @property
    def inadmissible_total(self) -> int:
        return sum(self.inadmissible.values())


def outcome_of(result: Any) -> str:
    """The cycle's outcome, one of :data:`OUTCOMES`."""
    if result.error:
        return "failed"
    if result.plan is None:
        return "skipped"
    solver = result.plan.solver
    if solver.budget_exhausted:
        return "budget_exhausted"
    return "optimal" if solver.optimal else "unproven"


def tally_cycle(result: Any) -> CycleTally:
    """Count what a ``CycleResult`` decided and wrote (one pass over the plan's entries).

    Reading the entries spells them out (engine/plan.py ``Entries``); apply reads them anyway.
    """
    counted = CycleTally(outcome_of(result))
    plan, applied = result.plan, result.applied
    if plan is not None:
        for action in plan.actions:
            cq = action.details.get("clusterQueue") or ""
            if action.kind == "admit":
                counted.reserved[action.target] = cq
                if not action.details.get("admissionChecks"):
                    counted.admitted[action.target] = cq
            elif action.kind == "complete-admission":
                counted.admitted[action.target] = cq
            elif action.kind == "preempt":
                counted.evicted[action.target] = (_evicted_from(result.snapshot, action),
                                                  _EVICTED_BY.get(action.details["reason"]["code"], "Preempted"))
        for entry in plan.workloads:
            if entry.name in counted.admitted or entry.name in counted.reserved:
                created = _created(result.snapshot, entry)
                if created is not None:
                    counted.created[entry.name] = created
            if entry.state == "admitted" and entry.cluster_queue:
                counted.admitted_active[entry.cluster_queue] += 1
            elif entry.state in ("pending", "inadmissible") and entry.has_workload_object and not deactivated(entry):
                if not entry.cluster_queue:
                    counted.unqueued += 1
                else:
                    (counted.pending if entry.state == "pending" else counted.inadmissible)[entry.cluster_queue] += 1
    if applied is not None:
        # Each write is "<verb> <Kind> <namespace/name>[: detail]" (adapters/kube/apply.py).
        # Rejected as the seed counts it: pods beyond their group's count, not the pods of a
        # group that ended because its Workload was deleted.
        excess = {a.target for a in plan.actions if a.kind == "delete-pod"
                  and dict(a.details).get("reason", {}).get("code") == "ExcessPod"} if plan is not None else set()
        for write in applied.writes:
            verb, kind, rest = (write.split(" ", 2) + ["", ""])[:3]
            name = rest.split(":", 1)[0]
            if verb == "ungate" and kind == "Pod":
                counted.ungated += 1
            elif verb == "delete" and kind == "Pod" and name in excess:
                counted.rejected += 1
            elif verb == "status" and kind == "Workload" and name in counted.reserved:
                counted.reserved_written.add(name)
                if name in counted.admitted:
                    counted.admitted_written.add(name)
            elif verb == "admit" and kind == "Workload" and name in counted.admitted:
                counted.admitted_written.add(name)
            elif verb == "preempt" and kind == "Workload":
                counted.evicted_written.add(name)
        counted.writes, counted.errors = len(applied.writes), len(applied.errors)
        counted.retries, counted.stopped = applied.retries, applied.stopped
        counted.deferred, counted.events_dropped = len(applied.deferred), applied.events_dropped
    return counted


def _evicted_from(snapshot: Any, action: Any) -> str:
    """The ClusterQueue a preempted workload is evicted from: its recorded admission's, else
    the one its plan reason names."""
    held = snapshot.workloads.get(action.target) if snapshot is not None else None
    if held is not None and held.admission is not None and held.admission.cluster_queue:
        return str(held.admission.cluster_queue)
    return str(action.details["reason"].get("details", {}).get("clusterQueue") or "")


class Metrics:
    """The controller's metrics, in a registry of their own (``.registry``).

    Counters only grow; gauges about queues are recomputed from each cycle's snapshot and plan
    (cleared, then set), so a deleted ClusterQueue's series disappear with it.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        # KEP-976 "Metrics": plain pods.
        self.gated = Counter("clueue_pods_gated", "Pods that got the admission scheduling gate (webhook).", registry=r)
        self.ungated = Counter("clueue_pods_ungated", "Pods whose admission scheduling gate was removed.", registry=r)
        self.rejected = Counter("clueue_pods_rejected",
                                "Pods deleted because their group had more pods than it declares.", registry=r)
        # Kueue's workload and quota metrics.
        self.pending = Gauge("clueue_pending_workloads", "Pending workloads per ClusterQueue and status "
                             "(active: may be admitted when quota frees; inadmissible: cannot be as things are).",
                             ["cluster_queue", "status"], registry=r)
        self.admitted_active = Gauge("clueue_admitted_active_workloads",
                                     "Admitted workloads that have not finished, per ClusterQueue.",
                                     ["cluster_queue"], registry=r)
        self.reserved = Counter("clueue_quota_reserved_workloads",
                                "Workloads whose quota was reserved (admission written), per ClusterQueue.",
                                ["cluster_queue"], registry=r)
        self.reserved_wait = Histogram("clueue_quota_reserved_wait_time_seconds",
                                       "Seconds from a workload's creation to the cycle that reserved its quota, "
                                       "per ClusterQueue.", ["cluster_queue"], buckets=_WAIT_BUCKETS, registry=r)
        self.admitted = Counter("clueue_admitted_workloads", "Workloads admitted (quota reserved and every admission "
                                "check Ready), per ClusterQueue.", ["cluster_queue"], registry=r)
        self.evicted = Counter("clueue_evicted_workloads", "Workloads evicted, per ClusterQueue and Kueue reason.",
                               ["cluster_queue", "reason"], registry=r)
        self.wait = Histogram("clueue_admission_wait_time_seconds",
                              "Seconds from a workload's creation to the cycle that admitted it, per ClusterQueue.",
                              ["cluster_queue"], buckets=_WAIT_BUCKETS, registry=r)
        quota_labels = ["cohort", "cluster_queue", "flavor", "resource"]
        self.usage = Gauge("clueue_cluster_queue_resource_usage", "Quota used by the admitted workloads "
                           "(base units: cores, bytes, ...).", quota_labels, registry=r)
        self.nominal = Gauge("clueue_cluster_queue_nominal_quota", "Nominal quota (base units).", quota_labels,
                             registry=r)
        self.borrowing = Gauge("clueue_cluster_queue_borrowing_limit", "Borrowing limit, where one is set "
                               "(base units).", quota_labels, registry=r)
        self.lending = Gauge("clueue_cluster_queue_lending_limit", "Lending limit, where one is set (base units).",
                             quota_labels, registry=r)
        # clueue's own.
        self.phase = Histogram("clueue_cycle_phase_duration_seconds", "Seconds of each phase of a decision cycle.",
                               ["phase"], buckets=_PHASE_BUCKETS, registry=r)
        self.solver_phase = Histogram("clueue_solver_phase_duration_seconds",
                                      "Seconds of each step of the decide phase (compile, ground, solve, explain).",
                                      ["phase"], buckets=_PHASE_BUCKETS, registry=r)
        self.cycles = Counter("clueue_cycles", "Decision cycles by outcome.", ["outcome"], registry=r)
        self.rounds = Histogram("clueue_solver_rounds", "Solver rounds per cycle (longer candidate prefixes).",
                                buckets=_ROUND_BUCKETS, registry=r)
        self.candidates = Gauge("clueue_solver_candidates", "Workloads the last cycle's solver ranked.", registry=r)
        self.unqueued = Gauge("clueue_unqueued_workloads", "Waiting workloads with no ClusterQueue "
                              "(their LocalQueue or ClusterQueue is missing).", registry=r)
        self.writes = Counter("clueue_apply_writes", "Writes made applying plans, by verb.", ["verb"], registry=r)
        self.errors = Counter("clueue_apply_errors", "Writes or reads refused while applying plans.", registry=r)
        self.retries = Counter("clueue_apply_retries", "Requests sent again while applying plans.", registry=r)
        self.deferred = Counter("clueue_apply_deferred", "Pending Workloads' condition rewrites left for a "
                                "later cycle by the pending-write limit.", registry=r)
        self.events_dropped = Counter("clueue_events_dropped", "Routine (Normal) Events not sent: over the "
                                      "Event limit. Warning Events are never dropped.", registry=r)
        self.stopped = Counter("clueue_apply_stopped", "Applies stopped before the end of their plan "
                               "(API server unavailable or lease lost).", registry=r)
        self.last_cycle = Gauge("clueue_last_cycle_timestamp_seconds", "When the last cycle ended (epoch seconds).",
                                registry=r)
        self.last_success = Gauge("clueue_last_successful_cycle_timestamp_seconds",
                                  "When the last cycle that produced a plan ended (epoch seconds).", registry=r)
        self.leader = Gauge("clueue_leader", "1 while this replica holds the decider lease, else 0.", registry=r)
        self.decision_log_errors = Counter("clueue_decision_log_errors", "Cycles the decision log could not record "
                                           "(decided and applied all the same; docs/decision-log.md).", registry=r)
        # MultiKueue, per worker cluster (adapters/multikueue/).
        self.multikueue_active = Gauge("clueue_multikueue_worker_active", "1 while the worker cluster answers "
                                       "(its MultiKueueCluster is Active), else 0.", ["cluster"], registry=r)
        self.multikueue_dispatched = Counter("clueue_multikueue_dispatched", "Workload copies created in the "
                                             "worker cluster.", ["cluster"], registry=r)
        self.multikueue_admitted = Counter("clueue_multikueue_admitted", "Workloads admitted first in the worker "
                                           "cluster (their MultiKueue check made Ready).", ["cluster"], registry=r)
        self.multikueue_lost = Counter("clueue_multikueue_lost", "Workloads put back to pending because the worker "
                                       "cluster they ran on was out of reach for workerLostTimeout.", ["cluster"],
                                       registry=r)
        for outcome in OUTCOMES:  # every outcome shown from the start, so rates of 0 are charted too
            self.cycles.labels(outcome)

    # -- events outside the cycle ------------------------------------------------------------
    def pod_gated(self) -> None:
        """A Pod got the admission gate (the webhook calls this)."""
        self.gated.inc()

    def pods_ungated(self, n: int) -> None:
        self.ungated.inc(n)

    def pods_rejected(self, n: int) -> None:
        self.rejected.inc(n)

    def set_leader(self, leader: bool) -> None:
        self.leader.set(1 if leader else 0)

    def decision_log_failed(self) -> None:
        """A cycle could not be recorded in the decision log."""
        self.decision_log_errors.inc()

    def set_multikueue_workers(self, active: Mapping[str, bool]) -> None:
        """Each MultiKueueCluster's state (a deleted one's series disappears)."""
        self.multikueue_active.clear()
        for cluster, up in active.items():
            self.multikueue_active.labels(cluster).set(1 if up else 0)

    # -- once per cycle ------------------------------------------------------------------------
    def count_writes(self, writes: list[str]) -> None:
        """Writes made outside a cycle (the background writer's: pending Workloads' conditions,
        queue status), counted by verb as a cycle's are."""
        for write in writes:
            self.writes.labels(write.split(" ", 1)[0]).inc()

    def record_cycle(self, result: Any, counted: CycleTally | None = None) -> CycleTally:
        """Record one ``CycleResult``; returns its tally (pass it in if already made, e.g. for the log line)."""
        counted = counted if counted is not None else tally_cycle(result)
        ended = result.started + sum(result.phases.values())
        for phase, seconds in result.phases.items():
            self.phase.labels(phase).observe(seconds)
        self.cycles.labels(counted.outcome).inc()
        self.last_cycle.set(ended)
        plan = result.plan
        if plan is not None:
            self.last_success.set(ended)
            solver = plan.solver
            for step, seconds in (("compile", solver.compile_seconds), ("ground", solver.ground_seconds),
                                  ("solve", solver.solve_seconds), ("explain", solver.explain_seconds)):
                self.solver_phase.labels(step).observe(max(0.0, seconds))
            self.rounds.observe(solver.rounds)
            self.candidates.set(solver.candidates)
            self._queues(result.snapshot, plan, counted)
        self.pods_ungated(counted.ungated)
        self.pods_rejected(counted.rejected)
        for written, decided, counter, wait in ((counted.reserved_written, counted.reserved, self.reserved,
                                                 self.reserved_wait),
                                                (counted.admitted_written, counted.admitted, self.admitted, self.wait)):
            for key in sorted(written):
                counter.labels(decided[key]).inc()
                if key in counted.created:
                    wait.labels(decided[key]).observe(max(0.0, result.started - counted.created[key]))
        for key in sorted(counted.evicted_written & counted.evicted.keys()):
            self.evicted.labels(*counted.evicted[key]).inc()
        if result.applied is not None:
            for write in result.applied.writes:
                self.writes.labels(write.split(" ", 1)[0]).inc()
        self.errors.inc(counted.errors)
        self.retries.inc(counted.retries)
        self.deferred.inc(counted.deferred)
        self.events_dropped.inc(counted.events_dropped)
        if counted.stopped:
            self.stopped.inc()
        return counted

    def _queues(self, snapshot: Any, plan: Any, counted: CycleTally) -> None:
        """Recompute the per-queue gauges from this cycle alone."""
        for gauge in (self.pending, self.admitted_active, self.usage, self.nominal, self.borrowing, self.lending):
            gauge.clear()
        queues = set(snapshot.cluster_queues) | set(counted.pending) | set(counted.inadmissible)
        for cq in sorted(queues):
            self.pending.labels(cq, "active").set(counted.pending.get(cq, 0))
            self.pending.labels(cq, "inadmissible").set(counted.inadmissible.get(cq, 0))
            self.admitted_active.labels(cq).set(counted.admitted_active.get(cq, 0))
        self.unqueued.set(counted.unqueued)
        for name, cq in snapshot.cluster_queues.items():
            cohort = cq.cohort or ""
            for group in cq.resource_groups:
                for fq in group.flavors:
                    for resource, q in fq.resources.items():
                        labels = (cohort, name, fq.flavor, resource)
                        self.nominal.labels(*labels).set(float(q.nominal))
                        self.usage.labels(*labels).set(0)
                        if q.borrowing_limit is not None:
                            self.borrowing.labels(*labels).set(float(q.borrowing_limit))
                        if q.lending_limit is not None:
                            self.lending.labels(*labels).set(float(q.lending_limit))
        for (cq, fl, resource), amount in _usage(plan).items():
            held = snapshot.cluster_queues.get(cq)
            self.usage.labels((held.cohort or "") if held else "", cq, fl, resource).set(float(amount))

    def render(self) -> bytes:
        """The metrics in Prometheus' text exposition format."""
        return generate_latest(self.registry)


def _usage(plan: Any) -> dict[tuple[str, str, str], Any]:
    """(ClusterQueue, flavor, resource) -> quantity used by the plan's admitted workloads."""
    used: dict[tuple[str, str, str], Any] = {}
    for entry in plan.workloads:
        if entry.state != "admitted" or not entry.cluster_queue:
            continue
        for (flavor, resource), quantity in entry_usage(entry).items():
            key = (entry.cluster_queue, flavor, resource)
            used[key] = used.get(key, 0) + quantity
    return used


def _created(snapshot: Any, entry: Any) -> float | None:
    """When the workload of plan ``entry`` was created (epoch seconds): its earliest pod for plain
    pods (its Workload object may be made by this very cycle), else its Workload object."""
    if snapshot is None:
        return None
    ns = entry.name.split("/", 1)[0]
    pods = [snapshot.pods[f"{ns}/{name}"].created for name, _ in entry.pods if f"{ns}/{name}" in snapshot.pods]
    if pods:
        return float(min(pods))
    held = snapshot.workloads.get(entry.name)
    return float(held.created) if held is not None else None
