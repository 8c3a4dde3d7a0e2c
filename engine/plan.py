"""The plan: the versioned output of a decision cycle (``apiVersion: clueue.dev/v1, kind: Plan``).

JSON and YAML carry :meth:`Plan.to_dict`; the text output is rendered from the same data.
The format is documented in ``docs/plan-format.md``; fields are only ever added within v1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, overload

from .objects import CheckState, Rejected
from .reasons import Reason

__all__ = ["PLAN_API_VERSION", "PodSetAssignment", "TopologyAssignment", "PodSetRequest", "WorkloadEntry", "Entries", "Action", "SolverInfo", "DispatchEntry", "WorkerNote",
           "PodGroupEntry", "PodGroupRelease", "Plan", "STATES", "UNBUILT_CODES"]

PLAN_API_VERSION = "clueue.dev/v1"
STATES = ("admitted", "pending", "inadmissible", "finished")
#: Reasons that keep a group of pods from having a Workload object at all (KEP-976: the Workload
#: is built once the pods the group declares are all there, and never from pods that disagree
#: on their count; pods naming a prebuilt Workload that does not exist wait for it): the group
#: is not queued anywhere until they are gone.
UNBUILT_CODES = frozenset({"GroupIncomplete", "GroupCountMismatch", "InvalidGroupCount", "TooManyRoles",
                           "InvalidPodGroupSets", "PrebuiltWorkloadNotFound"})


@dataclass(frozen=True)
class TopologyAssignment:
    """Where the pods of a pod set in a topology-aware flavor go, as Kueue records it: the node
    labels of the levels, from the highest, and the pods of each domain (its values per level)."""

    levels: tuple[str, ...]
    domains: tuple[tuple[tuple[str, ...], int], ...]  # (values, pods)

    def to_dict(self, version: str = "v1beta1") -> dict[str, Any]:
        """Kueue's ``topologyAssignment`` of API ``version``: v1beta1 lists domains; v1beta2
        packs them into one slice, a value shared by every domain written once (``universal``)."""
        if version == "v1beta1":
            return {"levels": list(self.levels),
                    "domains": [{"values": list(values), "count": pods} for values, pods in self.domains]}
        counts = [pods for _, pods in self.domains]
        per_level = []
        for i in range(len(self.levels)):
            values = [v[i] for v, _ in self.domains]
            per_level.append({"universal": values[0]} if len(set(values)) == 1 else {"individual": {"roots": values}})
        return {"levels": list(self.levels), "slices": [{
            "domainCount": len(self.domains), "valuesPerLevel": per_level,
            "podCounts": {"universal": counts[0]} if len(set(counts)) == 1 else {"individual": counts}}]}


@dataclass(frozen=True)
class PodSetAssignment:
    name: str
    count: int
    flavors: Mapping[str, str]  # resource -> flavor
    topology: TopologyAssignment | None = None  # in a flavor with a Topology (docs/placement.md)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "count": self.count, "flavors": dict(sorted(self.flavors.items()))}
        if self.topology is not None:
            out["topologyAssignment"] = self.topology.to_dict()
        return out


@dataclass(frozen=True)
class PodSetRequest:
    """A pod set as queued: ``count`` pods, each requesting ``requests`` (quantities)."""

    name: str
    count: int
    requests: Mapping[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "count": self.count, "requests": dict(sorted(self.requests.items()))}


@dataclass(frozen=True)
class WorkloadEntry:
    """The decision for one workload and the reasons behind it."""

    name: str  # namespace/name
    queue: str
    cluster_queue: str | None
    priority: int
    state: str  # one of STATES
    origin: str
    rank: int | None = None  # 1-based position among this cycle's candidates
    pod_sets: tuple[PodSetRequest, ...] = ()
    pods: tuple[tuple[str, str], ...] = ()  # (name, uid) of the pods it is made of, for plain pods
    admission: tuple[PodSetAssignment, ...] = ()
    reasons: tuple[Reason, ...] = ()
    # (pod set, succeeded pods) of an admitted pod group: its status.reclaimablePods
    reclaimable: tuple[tuple[str, int], ...] = ()
    # of a workload holding quota in a ClusterQueue with admission checks: the checks its
    # flavors require, with their states (docs/admission-checks.md)
    admission_checks: tuple[CheckState, ...] = ()
    confirmed: bool = False  # its Workload records Admitted=True: admitted whatever its checks say now
    # checked "what would it take" suggestions (whatif.py), only when asked for (plan --what-if, explain)
    suggestions: tuple[Reason, ...] = ()
    # waitForPodsReady: the PodsReady condition (status, reason, message) apply records on the
    # Workload clueue makes for pods (podsready.py); None: none is written
    pods_ready: tuple[str, str, str] | None = None

    @property
    def phase(self) -> str | None:
        """For an admitted entry: ``QuotaReserved`` while an admission check is not Ready (its
        pods stay gated), else ``Admitted``; None for the other states."""
        if self.state != "admitted":
            return None
        ready = self.confirmed or all(c.state == "Ready" for c in self.admission_checks)
        return "Admitted" if ready else "QuotaReserved"

    @property
    def has_workload_object(self) -> bool:
        """Whether a Workload object stands for it in the cluster (or apply makes one): False for
        a group of pods held by one of :data:`UNBUILT_CODES`, which Kueue neither queues nor
        counts, so queue status, positions and metrics leave it out."""
        return self.state == "admitted" or not any(r.code in UNBUILT_CODES for r in self.reasons)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "queue": self.queue, "clusterQueue": self.cluster_queue,
                               "priority": self.priority, "state": self.state, "origin": self.origin}
        if self.rank is not None:
            out["rank"] = self.rank
        out["podSets"] = [p.to_dict() for p in self.pod_sets]
        if self.pods:
            out["pods"] = [{"name": name, "uid": uid} for name, uid in self.pods]
        if self.admission:
            out["admission"] = {"clusterQueue": self.cluster_queue, "podSets": [a.to_dict() for a in self.admission]}
        out["reasons"] = [r.to_dict() for r in self.reasons]
        if self.suggestions:
            out["whatIf"] = [s.to_dict() for s in self.suggestions]
        if self.reclaimable:
            out["reclaimablePods"] = [{"name": name, "count": count} for name, count in self.reclaimable]
        if self.pods_ready is not None:
            out["podsReady"] = dict(zip(("status", "reason", "message"), self.pods_ready))
        if self.admission_checks:
            out["phase"] = self.phase
            out["admissionChecks"] = [{"name": c.name, "state": c.state, "message": c.message}
                                      for c in self.admission_checks]
        return out


@dataclass(frozen=True)
class Action:
    """Something an adapter does to apply the plan.

    Kinds: ``admit`` (write the Workload's admission), ``ungate`` (remove the admission gate of
    a pod, add ``nodeSelector`` and any ``annotations``), ``delete-pod`` (an excess pod, or a
    pod of a group whose Workload was deleted), ``finalize-pod`` (remove the pod's finalizer
    ``kueue.x-k8s.io/managed``), ``finish`` (mark the Workload of finished pods Finished),
    ``preempt`` (evict an admitted workload and delete its pods), ``complete-admission`` (every
    admission check of a workload whose quota is reserved is Ready: record it Admitted).
    """

    kind: str
    target: str  # "namespace/name" of the pod or workload acted on
    workload: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "target": self.target, "workload": self.workload, **dict(self.details)}


@dataclass(frozen=True)
class WorkerNote:
    """Why one worker cluster was or was not nominated for a dispatched workload: a stable
    ``code``, the numbers behind it (``details``, amounts as quantities) and a ``message``."""

    worker: str
    nominated: bool
    code: str
    details: Mapping[str, Any]
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"worker": self.worker, "nominated": self.nominated, "code": self.code,
                "details": dict(self.details), "message": self.message}


@dataclass(frozen=True)
class DispatchEntry:
    """The dispatch of one workload to MultiKueue's workers (docs/dispatch.md): the workers
    nominated (``status.nominatedClusterNames``) and a note for every worker of its config."""

    workload: str
    dispatcher: str  # Optimized, AllAtOnce or Incremental
    nominated: tuple[str, ...]
    workers: tuple[WorkerNote, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"workload": self.workload, "dispatcher": self.dispatcher, "nominated": list(self.nominated),
                "workers": [n.to_dict() for n in self.workers]}


@dataclass(frozen=True)
class PodGroupRelease:
    """A PodGroup released after its schedule timeout (docs/podgroups.md): its live ``pods``
    (name, uid) are deleted, and so is its gang's ``workload`` ("" none), and it is held for a
    back-off, recorded in its annotations: ``requeues`` and ``backoff_until`` (epoch seconds)."""

    pods: tuple[tuple[str, str], ...]
    workload: str
    requeues: int
    backoff_until: int

    def to_dict(self) -> dict[str, Any]:
        return {"pods": [{"name": n, "uid": u} for n, u in self.pods], "workload": self.workload,
                "requeues": self.requeues, "backoffUntil": self.backoff_until}


@dataclass(frozen=True)
class PodGroupEntry:
    """The decision for one coscheduling PodGroup (docs/podgroups.md): its phase once the plan
    is applied, why (a reason with the numbers), and all an adapter writes for it: its
    ``status`` (scheduling.x-k8s.io/v1alpha1 fields, as they are to read), a ``release`` after
    its schedule timeout, the end of its back-off (``end_backoff``: remove the back-off
    annotation). ``recorded_phase`` is what its status says now ("": nothing)."""

    name: str  # namespace/name
    gang: str  # the key of the workload its queued pods make (podgroup-<name>)
    queue: str  # its LocalQueue ("": none)
    recorded_phase: str
    phase: str
    reason: Reason | None
    status: Mapping[str, Any]
    holds: Mapping[str, str] = field(default_factory=dict)  # InQueue: resource -> quantity it holds
    release: PodGroupRelease | None = None
    end_backoff: bool = False

    @property
    def changed(self) -> bool:
        """Whether the cycle changes its phase (an unset phase reads as Pending)."""
        return self.phase != (self.recorded_phase or "Pending")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "gang": self.gang, "queue": self.queue}
        if self.recorded_phase:
            out["recordedPhase"] = self.recorded_phase
        out["phase"] = self.phase
        out["reason"] = self.reason.to_dict() if self.reason is not None else None
        out["status"] = dict(self.status)
        if self.holds:
            out["holds"] = dict(self.holds)
        if self.release is not None:
            out["release"] = self.release.to_dict()
        if self.end_backoff:
            out["endBackoff"] = True
        return out


@dataclass(frozen=True)
class SolverInfo:
    compile_seconds: float
    ground_seconds: float
    solve_seconds: float
    explain_seconds: float
    total_seconds: float
    optimal: bool
    budget_seconds: float
    budget_exhausted: bool
    candidates: int
    pruned: int
    rounds: int
    choices: int
    conflicts: int

    def to_dict(self) -> dict[str, Any]:
        r = lambda x: round(x, 4)  # noqa: E731 - seconds to 0.1 ms
        return {"compileSeconds": r(self.compile_seconds), "groundSeconds": r(self.ground_seconds),
                "solveSeconds": r(self.solve_seconds), "explainSeconds": r(self.explain_seconds),
                "totalSeconds": r(self.total_seconds), "optimal": self.optimal,
                "budgetSeconds": self.budget_seconds, "budgetExhausted": self.budget_exhausted,
                "candidates": self.candidates, "pruned": self.pruned, "rounds": self.rounds, "choices": self.choices, "conflicts": self.conflicts}


class Entries(Sequence[WorkloadEntry]):
    """A plan's workload entries, spelled out when first read.

    A cycle decides and explains every workload, but thousands of pending ones share a few
    explanations; writing out one entry each is work only for readers of those entries. A
    controller applying the plan's actions never reads them, so it never pays for it.
    """

    def __init__(self, spell_out: Callable[[], tuple[WorkloadEntry, ...]]) -> None:
        self._spell_out: Callable[[], tuple[WorkloadEntry, ...]] | None = spell_out
        self._entries: tuple[WorkloadEntry, ...] = ()

    def _all(self) -> tuple[WorkloadEntry, ...]:
        if self._spell_out is not None:
            self._entries, self._spell_out = self._spell_out(), None
        return self._entries

    @overload
    def __getitem__(self, index: int) -> WorkloadEntry: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[WorkloadEntry, ...]: ...
    def __getitem__(self, index: int | slice) -> WorkloadEntry | tuple[WorkloadEntry, ...]:
        return self._all()[index]

    def __len__(self) -> int:
        return len(self._all())

    def __iter__(self) -> Iterator[WorkloadEntry]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and self._all() == tuple(other)

    def __hash__(self) -> int:
        return hash(self._all())

    def __repr__(self) -> str:
        return f"Entries({self._all()!r})"

    def __reduce__(self) -> tuple[Any, ...]:  # pickled (e.g. from a guarded child process) as a plain tuple
        return (tuple, (self._all(),))


@dataclass(frozen=True)
class Plan:
    workloads: Sequence[WorkloadEntry]  # a tuple, or Entries spelled out on first read
    actions: tuple[Action, ...]
    solver: SolverInfo
    snapshot_digest: str
    policy_digest: str
    notices: tuple[str, ...] = ()
    rejected: tuple[Rejected, ...] = ()  # objects of a live snapshot left out as malformed
    dispatch: tuple[DispatchEntry, ...] = ()  # workloads dispatched to MultiKueue's workers
    # when a cycle is due though nothing changes: a waitForPodsReady timeout or back-off ends
    # (epoch seconds; None: none). podsready.py; or admission fair sharing's next usage sample
    # (admission_usage.py)
    wake_at: int | None = None
    # the time the cycle decided at (epoch seconds; None: not given): the queue status written
    # after it samples admission fair sharing's usage then (admission_usage.py)
    decided_at: int | None = None
    # coscheduling PodGroups (podgroups.py): each one's phase after the plan and what to write
    pod_groups: tuple[PodGroupEntry, ...] = ()

    def workload(self, name: str) -> WorkloadEntry:
        """The entry for ``namespace/name`` (or a unique bare ``name``).

        Raises:
            KeyError: no such workload, or a bare name matching several.
        """
        exact = [w for w in self.workloads if w.name == name]
        loose = exact or [w for w in self.workloads if w.name.split("/", 1)[1] == name]
        if len(loose) != 1:
            raise KeyError(name)
        return loose[0]

    def pod_group(self, name: str) -> PodGroupEntry:
        """The PodGroup entry for ``namespace/name``.

        Raises:
            KeyError: no such PodGroup.
        """
        for g in self.pod_groups:
            if g.name == name:
                return g
        raise KeyError(name)

    def summary(self) -> dict[str, int]:
        return {s: sum(1 for w in self.workloads if w.state == s) for s in STATES}

    def to_dict(self) -> dict[str, Any]:
        return {
            "apiVersion": PLAN_API_VERSION,
            "kind": "Plan",
            "metadata": {"snapshotDigest": self.snapshot_digest, "policyDigest": self.policy_digest},
            "summary": self.summary(),
            "workloads": [w.to_dict() for w in self.workloads],
            "actions": [a.to_dict() for a in self.actions],
            "solver": self.solver.to_dict(),
            "notices": list(self.notices),
            "rejected": [r.to_dict() for r in self.rejected],
            **({"dispatch": [d.to_dict() for d in self.dispatch]} if self.dispatch else {}),
            **({"podGroups": [g.to_dict() for g in self.pod_groups]} if self.pod_groups else {}),
        }
