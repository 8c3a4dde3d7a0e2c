"""What a cycle's record says: the cycle itself, and the workloads whose decision changed.

A record (``apiVersion: clueue.dev/v1, kind: DecisionCycle``, docs/decision-log.md) holds the
cycle's id, time, origin, digests, summary, solver statistics, phases, actions, dispatch
(MultiKueue's nominations and why), PodGroups (each one's phase, why, and what was written for
it), notices and rejected objects, and ``workloads``: only those
whose state or reasons differ from what the log last recorded for them (a workload no longer in
the plan once, as ``state: deleted``). A week of a busy cluster thus records each wait once per
change, not once per cycle. A reason whose
amounts or named workloads change (the quota short, the workloads admitted ahead of it this
cycle) but not its code and the objects it is about is the same phase of the wait: a state
records them as of the phase's first cycle (a replay of any cycle gives its exact reasons).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

from clueue.engine import Plan, WorkloadEntry

__all__ = ["RECORD_API_VERSION", "RECORD_KIND", "DELETED", "IDENTITY_DETAILS", "StateTracker", "signature",
           "workload_state", "cycle_record", "iso_time"]

RECORD_API_VERSION = "clueue.dev/v1"
RECORD_KIND = "DecisionCycle"
DELETED = "deleted"  # the state recorded once for a workload that left the plan


def iso_time(epoch: float) -> str:
    """An epoch time as RFC 3339 in UTC, to the millisecond."""
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def workload_state(entry: WorkloadEntry) -> dict[str, Any]:
    """What the log keeps of a workload's decision: its state and where, and why."""
    out: dict[str, Any] = {"name": entry.name, "state": entry.state, "queue": entry.queue,
                           "clusterQueue": entry.cluster_queue, "priority": entry.priority, "origin": entry.origin}
    if entry.admission:
        out["admission"] = [a.to_dict() for a in entry.admission]
    out["reasons"] = [r.to_dict() for r in entry.reasons]
    return out


#: Details that name what a reason is about; the others (amounts, the workloads it waits
#: behind, the victims) may change every cycle of a busy cluster without the wait changing.
IDENTITY_DETAILS = frozenset({"clusterQueue", "flavor", "resource", "podSet", "resourceGroup", "group", "namespace",
                              "localQueue", "head", "kind", "name", "field", "object"})
#: Codes that say the same about the workload: admitted by this cycle, or kept from before.
_SAME_CODE = {"AlreadyAdmitted": "Admitted"}
#: Reasons about this cycle's competition beside another reason: which higher-ranked workloads
#: this cycle admitted into the quota it lacks. Each cycle of a busy queue admits others, or
#: none, while the workload's wait (its InsufficientQuota) stays the same.
_BESIDE = frozenset({"WaitsBehind"})


def _reason_signature(code: str, details: Mapping[str, Any]) -> tuple[Any, ...]:
    return (_SAME_CODE.get(code, code),
            tuple((k, v) for k, v in sorted(details.items()) if k in IDENTITY_DETAILS and isinstance(v, str)))


def _reasons_signature(reasons: Iterable[tuple[str, Mapping[str, Any]]]) -> tuple[Any, ...]:
    held = list(reasons)
    main = [(code, details) for code, details in held if code not in _BESIDE] or held
    return tuple(_reason_signature(code, details) for code, details in main)


def signature(state: Mapping[str, Any]) -> tuple[Any, ...]:
    """What makes a recorded state a new one: the state, queue, ClusterQueue, priority,
    admission, and each reason's code and the objects it names (:data:`IDENTITY_DETAILS`);
    ``WaitsBehind`` only when no other reason holds."""
    return (state["state"], state.get("queue"), state.get("clusterQueue"), state.get("priority"),
            tuple((a["name"], a["count"], tuple(sorted(a["flavors"].items()))) for a in state.get("admission", ())),
            _reasons_signature((r["code"], r.get("details") or {}) for r in state.get("reasons", ())))


def _entry_signature(entry: WorkloadEntry, messages: tuple[str, ...],
                     known: dict[tuple[str, ...], tuple[Any, ...]]) -> tuple[Any, ...]:
    # signature() of workload_state(entry), without building the state (most entries do not
    # change). Thousands of waiting workloads share their reasons word for word: the reasons'
    # signature is worked out once per distinct list of ``messages`` (``known``).
    reasons = known.get(messages)
    if reasons is None:
        reasons = known[messages] = _reasons_signature((r.code, r.details) for r in entry.reasons)
    return (entry.state, entry.queue, entry.cluster_queue, entry.priority,
            tuple((a.name, a.count, tuple(sorted(a.flavors.items()))) for a in entry.admission), reasons)


class StateTracker:
    """The last recorded state of each workload, to record only what changed (by
    :func:`signature`: a reason whose amounts or named workloads change keeps its phase)."""

    def __init__(self, last: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        # name -> (the entry's fields as last seen, or None when read back from the log; signature)
        self._last: dict[str, tuple[tuple[Any, ...] | None, tuple[Any, ...]]] = {
            name: (None, signature(state)) for name, state in (last or {}).items() if state.get("state") != DELETED}

    def changes(self, entries: Iterable[WorkloadEntry]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The states to record for this cycle's ``entries``, and the tracker's next memory
        (pass it to :meth:`commit` once they are stored)."""
        out: list[dict[str, Any]] = []
        nxt: dict[str, tuple[tuple[Any, ...] | None, tuple[Any, ...]]] = {}
        last = self._last
        known: dict[tuple[str, ...], tuple[Any, ...]] = {}
        for entry in entries:
            # Most entries are word for word as last cycle: compared as they are, their signature
            # is not worked out again.
            messages = tuple([r.message for r in entry.reasons])
            fields = (entry.state, entry.queue, entry.cluster_queue, entry.priority, entry.admission, messages)
            held = last.get(entry.name)
            if held is not None and held[0] == fields:
                nxt[entry.name] = held
                continue
            sig = _entry_signature(entry, messages, known)
            nxt[entry.name] = (fields, sig)
            if held is None or held[1] != sig:
                out.append(workload_state(entry))
        out += [{"name": name, "state": DELETED} for name in sorted(last.keys() - nxt.keys())]
        return out, nxt

    def commit(self, memory: dict[str, Any]) -> None:
        self._last = memory


def cycle_record(*, time: float, origin: str, plan: Plan | None, snapshot_digest: str, policy_digest: str,
                 config_digest: str, phases: Mapping[str, float] | None = None, error: str = "") -> dict[str, Any]:
    """The record of one cycle, but for what the store adds as it writes it: its ``id``, its
    snapshot's ``objects`` and the ``workloads`` that changed."""
    record: dict[str, Any] = {
        "apiVersion": RECORD_API_VERSION, "kind": RECORD_KIND, "time": iso_time(time), "origin": origin,
        "snapshotDigest": snapshot_digest, "policyDigest": policy_digest, "configDigest": config_digest}
    if error:
        record["error"] = error
    if phases:
        record["phases"] = {k: round(v, 4) for k, v in phases.items()}
    if plan is not None:
        record["summary"] = plan.summary()
        record["solver"] = plan.solver.to_dict()
        record["actions"] = [a.to_dict() for a in plan.actions]
        record["notices"] = list(plan.notices)
        record["rejected"] = [r.to_dict() for r in plan.rejected]
        if plan.dispatch:
            record["dispatch"] = [d.to_dict() for d in plan.dispatch]
        if plan.pod_groups:  # each coscheduling PodGroup's phase and what was written for it
            record["podGroups"] = [g.to_dict() for g in plan.pod_groups]
    return record
