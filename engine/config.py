"""How clueue is configured: which pods it manages and how long a cycle may take."""

from __future__ import annotations

from dataclasses import dataclass, field

from .kueue_api import DISPATCHER_ALL_AT_ONCE, DISPATCHER_INCREMENTAL
from .objects import LabelSelector, Requirement

__all__ = ["Config", "PodGroups", "Limits", "DecisionLogConfig", "MultiKueue", "FairSharing", "AdmissionFairSharing", "WaitForPodsReady", "FAIR_STRATEGIES", "ALL_AT_ONCE", "INCREMENTAL", "OPTIMIZED", "DEFAULT_MANAGED_OWNERS"]

#: Controlling owners whose pods another integration queues (KEP-976: such pods are skipped).
DEFAULT_MANAGED_OWNERS: tuple[str, ...] = (
    "batch/Job", "jobset.x-k8s.io/JobSet", "kubeflow.org/*", "ray.io/*",
    "leaderworkerset.x-k8s.io/LeaderWorkerSet", "workload.codeflare.dev/AppWrapper",
)


@dataclass(frozen=True)
class Limits:
    """Budgets of a guarded cycle's process (:mod:`clueue.engine.guard`).

    Parameters:
        seconds: wall-clock limit of the whole cycle; ``None``: three times the solver's time
            budget (the decide pass, its final optimization and the explain pass each get up to
            one budget) plus 10 s for compiling and grounding.
        memory_mib: address space the process may add to what it inherits; ``None``: no limit.
    """

    seconds: float | None = None
    memory_mib: int | None = 2048

    def wall_clock(self, config: Config) -> float:
        return self.seconds if self.seconds is not None else 3 * config.time_budget + 10.0


@dataclass(frozen=True)
class DecisionLogConfig:
    """Where decisions are recorded (adapters/decisionlog, docs/decision-log.md).

    Parameters:
        path: the SQLite file of the decision log.
        max_age_seconds: cycles older than this are deleted (``None``: kept whatever their age).
        max_bytes: the log is kept under this size, oldest cycles first (``None``: no bound).
        json_lines: also write each record as one JSON line to this file (``"-"``: standard
            output); ``None``: no second sink.
    """

    path: str
    max_age_seconds: float | None = 7 * 24 * 3600.0
    max_bytes: int | None = 1 << 30
    json_lines: str | None = None


#: The dispatchers of MultiKueue (docs/dispatch.md): the two Kueue builds in, and clueue's own,
#: which nominates the workers where the policy predicts a workload is admitted (the default).
ALL_AT_ONCE = DISPATCHER_ALL_AT_ONCE
INCREMENTAL = DISPATCHER_INCREMENTAL
OPTIMIZED = "clueue.dev/multikueue-dispatcher-optimized"


@dataclass(frozen=True)
class MultiKueue:
    """The ``multiKueue`` section: how workloads of a ClusterQueue with a MultiKueue admission
    check are dispatched to worker clusters (docs/dispatch.md).

    Parameters:
        dispatcher_name: :data:`OPTIMIZED`, :data:`ALL_AT_ONCE`, :data:`INCREMENTAL`, or any
            other name: an external dispatcher writes ``status.nominatedClusterNames``, clueue none.
        clusters_per_round: Incremental: clusters added to the nominated ones each round.
        round_seconds: Incremental: how long a round lasts.
        stale_after_seconds: Optimized: a worker read longer ago than this is stale; a
            prediction on it is uncertain.
        copies_when_uncertain: Optimized: workers nominated for a workload whose prediction is
            uncertain (it fits only on stale workers, or nowhere while some worker's data is
            stale or unread).
        copies_when_no_fit: Optimized: workers nominated for a workload that fits nowhere, as
            every worker's fresh data tell (0: it waits, and is nominated once one has room).
        gc_interval: seconds between two runs of the garbage collector of remote copies (0: never).
        origin: the ``kueue.x-k8s.io/multikueue-origin`` label value of this manager's copies.
        worker_lost_timeout: seconds a Ready workload's worker may stay out of contact before
            the workload is put back to pending (its check state Retry).
        sync_period: seconds between two passes of the MultiKueue loop (docs/multikueue.md).
    """

    dispatcher_name: str = OPTIMIZED
    clusters_per_round: int = 3
    round_seconds: int = 300
    stale_after_seconds: int = 60
    copies_when_uncertain: int = 3
    copies_when_no_fit: int = 0
    gc_interval: float = 60.0
    origin: str = "multikueue"
    worker_lost_timeout: float = 900.0
    sync_period: float = 1.0


#: Kueue's fair sharing preemption strategies, and the lists of them its configuration accepts.
FAIR_STRATEGIES: tuple[tuple[str, ...], ...] = (
    ("LessThanOrEqualToFinalShare",), ("LessThanInitialShare",),
    ("LessThanOrEqualToFinalShare", "LessThanInitialShare"))


@dataclass(frozen=True)
class FairSharing:
    """Kueue's ``fairSharing`` section (docs/fair-sharing.md): fair sharing between the
    ClusterQueues and Cohorts of a cohort, by weight.

    Parameters:
        enabled: v1beta1's ``enable`` (v1beta2: the section's presence enables it).
        preemption_strategies: one of :data:`FAIR_STRATEGIES`, tried in this order.
    """

    enabled: bool = True
    preemption_strategies: tuple[str, ...] = FAIR_STRATEGIES[2]


@dataclass(frozen=True)
class AdmissionFairSharing:
    """Kueue's ``admissionFairSharing`` section: the order of the LocalQueues of a ClusterQueue
    whose ``spec.admissionScope.admissionMode`` is ``UsageBasedAdmissionFairSharing``, by the
    usage they consumed (docs/fair-sharing.md).

    Parameters:
        half_life_seconds: ``usageHalfLifeTime``: consumed usage halves in this time (0: forgotten at once).
        sampling_seconds: ``usageSamplingInterval``: how often consumed usage is sampled.
        resource_weights: ``resourceWeights``: resource -> weight in the weighted usage (default 1).
    """

    half_life_seconds: float = 0.0
    sampling_seconds: float = 300.0
    resource_weights: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class WaitForPodsReady:
    """Kueue's ``waitForPodsReady`` section (docs/pods-ready.md): an admitted workload whose pods
    are not all ready in time is evicted and requeued with exponential back-off.

    Parameters:
        enabled: v1beta1's ``enable`` (v1beta2: the section's presence enables it).
        timeout_seconds: ``timeout``: how long after admission its pods may take to be ready.
        block_admission: ``blockAdmission``: while an admitted workload's pods are not ready,
            nothing else is admitted (Kueue defaults it to ``enable``).
        recovery_timeout_seconds: ``recoveryTimeout``: how long pods that were ready may stay
            not ready (``None``: no limit).
        requeuing_timestamp: ``requeuingStrategy.timestamp``: ``Eviction`` or ``Creation``.
        backoff_limit_count: ``requeuingStrategy.backoffLimitCount``: requeues before the
            workload is deactivated (``None``: no limit).
        backoff_base_seconds: ``requeuingStrategy.backoffBaseSeconds``: the first back-off.
        backoff_max_seconds: ``requeuingStrategy.backoffMaxSeconds``: the longest back-off.
    """

    enabled: bool = True
    timeout_seconds: float = 300.0
    block_admission: bool = True
    recovery_timeout_seconds: float | None = None
    requeuing_timestamp: str = "Eviction"
    backoff_limit_count: int | None = None
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600


@dataclass(frozen=True)
class PodGroups:
    """The ``podGroups`` section: coscheduling PodGroups whose pods carry no queue name
    (docs/podgroups.md).

    Parameters:
        gang_schedule_without_queue: clueue gang-schedules them (the webhook gates their pods,
            the engine admits a group only where ``minMember`` pods fit on the nodes at once, no
            quota applying); ``False`` leaves them to the nodes (a scheduler with the
            coscheduling plugin), as Pods without a queue name: clueue writes only their status.
        pod_selector: which of those Pods, labelled ``scheduling.x-k8s.io/pod-group``, are gated.
    """

    gang_schedule_without_queue: bool = True
    pod_selector: LabelSelector = LabelSelector()


@dataclass(frozen=True)
class Config:
    """Options of a decision cycle.

    Parameters:
        controller_namespace: where clueue itself runs; its pods are never queued.
        namespace_selector: namespaces whose pods are queued; ``None`` means every namespace
            except ``kube-system`` and the controller's own (the seed's default).
        pod_selector: pods that are queued, among those with a queue name.
        managed_owners: ``group/Kind`` (or ``group/*``) of controllers whose pods are skipped.
        time_budget: seconds the solver may spend on one cycle.
        limits: the time and memory limits of a cycle run by ``clueue plan``, ``explain`` and ``apply``.
        decision_log: where cycles are recorded; ``None``: nowhere (it decides nothing).
        multikueue: dispatch to MultiKueue's worker clusters.
        fair_sharing: clueue's own ``fairSharing`` section; ``None``: the one of Kueue's
            Configuration in the snapshot (the ``kueue-manager-config`` ConfigMap), if any.
        admission_fair_sharing: likewise for ``admissionFairSharing``.
        wait_for_pods_ready: likewise for ``waitForPodsReady`` (docs/pods-ready.md).
        whatif_budget: seconds the checked "what would it take" suggestions (whatif.py) may
            spend on their re-solves, apart from the cycle's own budget.
        pod_groups: coscheduling PodGroups without a queue (:class:`PodGroups`).
    """

    controller_namespace: str = "clueue-system"
    namespace_selector: LabelSelector | None = None
    pod_selector: LabelSelector = LabelSelector()
    managed_owners: tuple[str, ...] = DEFAULT_MANAGED_OWNERS
    time_budget: float = 10.0
    limits: Limits = field(default_factory=Limits)
    decision_log: DecisionLogConfig | None = None
    multikueue: MultiKueue = field(default_factory=MultiKueue)
    fair_sharing: FairSharing | None = None
    admission_fair_sharing: AdmissionFairSharing | None = None
    wait_for_pods_ready: WaitForPodsReady | None = None
    whatif_budget: float = 10.0
    pod_groups: PodGroups = field(default_factory=PodGroups)

    def effective_namespace_selector(self) -> LabelSelector:
        if self.namespace_selector is not None:
            return self.namespace_selector
        return LabelSelector(match_expressions=(Requirement(
            "kubernetes.io/metadata.name", "NotIn", ("kube-system", self.controller_namespace)),))

    def owner_is_managed(self, owner: str) -> bool:
        group, _, kind = owner.partition("/")
        return any(m == owner or (m.endswith("/*") and m[:-2] == group) for m in self.managed_owners)
