"""Replaying a recorded cycle: its snapshot, policy and Configuration rebuilt from the log, and
decided again, by the policy it was decided under or another.

The snapshot is rebuilt from the stored documents as a live snapshot is built
(``build_snapshot(..., lenient=True)``: a recorded cycle may have rejected malformed objects),
with the notices it had, and with the views of MultiKueue's workers it had (each rebuilt from
its own stored documents, observed when it was), and decided at the time the cycle decided at
(``now``: timeouts, back-offs and the workers' views' ages depend on it). The recorded
decisions (each workload's last recorded state as of the cycle, the cycle's actions and its
PodGroups' entries) are
compared with the replay's by the decision diff of ``clueue policy diff``
(policytools/diff.py), and the workers each dispatched workload was nominated to apart (that
diff names a nomination, not its workers), so an exact replay shows no change.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from clueue.engine import Action, Config, Document, Plan, Policy, Snapshot, WorkloadEntry, build_snapshot
from clueue.engine.guard import Limits, guarded_cycle
from clueue.engine.plan import PodGroupEntry, PodGroupRelease, PodSetAssignment, SolverInfo
from clueue.engine.policy import PolicyFile, check_safety
from clueue.policytools import SnapshotDiff, snapshot_diff
from clueue.engine.reasons import Reason
from clueue.engine.snapshot import WorkerView

from ..files import parse_config
from .schema import DecisionLogError
from .store import DecisionLog

__all__ = ["Recorded", "load_recorded", "recorded_plan", "NominationChange", "Replay", "replay"]

#: Kinds a controller's cache parses one by one after the others (adapters/kube/cache.py): the
#: rebuilt snapshot reads them in the same order, so that its rejected objects come in its order.
_LAST = {"Pod": 1, "Workload": 2}


@dataclass(frozen=True)
class Recorded:
    """A recorded cycle, rebuilt: its record, snapshot, policy and Configuration, and the time
    it decided at (epoch seconds; None for a cycle recorded without it)."""

    record: Mapping[str, Any]
    snapshot: Snapshot
    policy: Policy
    config: Config
    now: int | None = None


def rebuild_snapshot(documents: list[Document], notices: list[str] | None) -> Snapshot:
    """The snapshot of recorded ``documents``, with the recorded ``notices`` (None: as built)."""
    ordered = sorted(documents, key=lambda d: (_LAST.get(str(d.body.get("kind")), 0), d.source))
    snapshot = build_snapshot(ordered, lenient=True)
    return snapshot if notices is None else replace(snapshot, notices=tuple(notices))


def load_recorded(log: DecisionLog, cycle: int) -> Recorded:
    """Rebuild ``cycle`` from ``log``.

    Raises:
        DecisionLogError: no such cycle, it has no snapshot, or a part of it is missing.
        PolicyError: its stored policy holds a forbidden construct (a tampered log).
    """
    record = log.record(cycle)
    documents, by_worker = log.snapshot_documents(cycle)
    snapshot = rebuild_snapshot(documents, record.get("snapshotNotices"))
    workers = {w["name"]: WorkerView(w["name"], rebuild_snapshot(by_worker.get(w["name"], []),
                                                                 w.get("snapshotNotices")),
                                     age=int(w.get("age", 0)), observed_at=w.get("observedAt"))
               for w in record.get("workers", [])}
    if workers:
        snapshot = replace(snapshot, workers=workers)
    files = tuple(PolicyFile(f["name"], f["path"], f["text"]) for f in log.blob("policy", record["policyDigest"]))
    for f in files:
        check_safety(f)  # a policy file from a log is checked as one from disk
    config = parse_config(Document(f"{log.path}:config {record['configDigest']}", log.blob("config", record["configDigest"])))
    now = record.get("now")
    return Recorded(record, snapshot, Policy(files), config, None if now is None else int(now))


def _entry(state: Mapping[str, Any]) -> WorkloadEntry:
    return WorkloadEntry(
        name=state["name"], queue=state.get("queue", ""), cluster_queue=state.get("clusterQueue"),
        priority=int(state.get("priority", 0)), state=state["state"], origin=state.get("origin", ""),
        admission=tuple(PodSetAssignment(a["name"], int(a["count"]), dict(a["flavors"]))
                        for a in state.get("admission", [])),
        reasons=tuple(Reason(r["code"], r["message"], dict(r.get("details", {}))) for r in state.get("reasons", [])))


def _pod_group(g: Mapping[str, Any]) -> PodGroupEntry:
    """A ``podGroups[]`` entry as a record holds it (Plan.to_dict)."""
    r, why = g.get("release"), g.get("reason")
    release = None if not r else PodGroupRelease(tuple((p["name"], p.get("uid", "")) for p in r.get("pods", [])),
                                                 r.get("workload", ""), int(r["requeues"]), int(r["backoffUntil"]))
    return PodGroupEntry(g["name"], g.get("gang", ""), g.get("queue", ""), g.get("recordedPhase", ""), g["phase"],
                         Reason(why["code"], why["message"], dict(why.get("details", {}))) if why else None,
                         dict(g.get("status", {})), dict(g.get("holds", {})), release, bool(g.get("endBackoff")))


_SOLVER_FIELDS = {"compileSeconds": "compile_seconds", "groundSeconds": "ground_seconds",
                  "solveSeconds": "solve_seconds", "explainSeconds": "explain_seconds",
                  "totalSeconds": "total_seconds", "optimal": "optimal", "budgetSeconds": "budget_seconds",
                  "budgetExhausted": "budget_exhausted", "candidates": "candidates", "pruned": "pruned",
                  "rounds": "rounds", "choices": "choices", "conflicts": "conflicts"}


def recorded_plan(log: DecisionLog, record: Mapping[str, Any]) -> Plan:
    """The decisions the log holds for a cycle, as a plan: each workload's last state recorded
    up to it, its actions and its PodGroups' entries."""
    cycle = int(record["id"])
    entries = tuple(_entry(s) for _, s in sorted(log.latest_states(cycle).items()))
    actions = tuple(Action(a["kind"], a["target"], a["workload"],
                           {k: v for k, v in a.items() if k not in ("kind", "target", "workload")})
                    for a in record.get("actions", []))
    solver = record.get("solver") or {}
    info = SolverInfo(**{field: solver.get(key, 0) for key, field in _SOLVER_FIELDS.items()})
    return Plan(entries, actions, info, record["snapshotDigest"], record["policyDigest"],
                tuple(record.get("notices", [])), pod_groups=tuple(_pod_group(g) for g in record.get("podGroups", [])))


@dataclass(frozen=True)
class NominationChange:
    """A dispatched workload nominated to other workers by the replay (``()``: none written)."""

    workload: str
    recorded: tuple[str, ...]
    replayed: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"workload": self.workload, "recorded": list(self.recorded), "replayed": list(self.replayed)}


def _nominations(actions: Any) -> dict[str, tuple[str, ...]]:
    """The workers each ``nominate`` action (as a record holds it) names, by workload."""
    return {a["workload"]: tuple(a.get("clusterNames", ())) for a in actions if a["kind"] == "nominate"}


def nomination_changes(recorded: Any, replayed: Any) -> tuple[NominationChange, ...]:
    """The workloads whose nominated workers differ between two lists of actions (as records
    hold them)."""
    before, after = _nominations(recorded), _nominations(replayed)
    return tuple(NominationChange(w, before.get(w, ()), after.get(w, ()))
                 for w in sorted(before.keys() | after.keys()) if before.get(w) != after.get(w))


@dataclass(frozen=True)
class Replay:
    """A recorded cycle decided again: the recorded decisions, the new plan and their diff
    (``nominations``: the dispatched workloads nominated to other workers)."""

    recorded: Recorded
    plan: Plan
    diff: SnapshotDiff
    nominations: tuple[NominationChange, ...] = ()

    @property
    def same_snapshot(self) -> bool:
        """Whether the rebuilt snapshot has the recorded digest (the replay saw what the cycle saw)."""
        return self.plan.snapshot_digest == self.recorded.record["snapshotDigest"]


def replay(log: DecisionLog, cycle: int, *, policy: Policy | None = None, limits: Limits | None = Limits()) -> Replay:
    """Decide recorded ``cycle`` again, under its own policy or ``policy``, and diff the
    decisions with the recorded ones.

    Raises:
        DecisionLogError: see :func:`load_recorded`; the cycle recorded no plan.
        PolicyError, SolveError: the policy fails on the snapshot.
    """
    recorded = load_recorded(log, cycle)
    if "summary" not in recorded.record:
        raise DecisionLogError(f"cycle {cycle} failed ({recorded.record.get('error', 'no plan')}): it recorded "
                               "no decisions to compare with")
    plan = guarded_cycle(recorded.snapshot, policy or recorded.policy, recorded.config, limits=limits,
                         now=recorded.now)
    base = recorded_plan(log, recorded.record)
    diff = snapshot_diff(f"cycle {cycle}", base, plan)
    nominations = nomination_changes(recorded.record.get("actions", []), [a.to_dict() for a in plan.actions])
    return Replay(recorded, plan, diff, nominations)
