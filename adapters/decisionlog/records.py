"""What a cycle's record says: the cycle itself, and the workloads whose decision changed.

A record (``apiVersion: clueue.dev/v1, kind: DecisionCycle``, docs/decision-log.md) holds the
cycle's id, time, origin, digests, summary, solver statistics, phases, actions, notices and
rejected objects, and ``workloads``: only those whose state or reasons differ from what the log
last recorded for them (a workload no longer in the plan once, as ``state: deleted``). A week of
a busy cluster thus records each wait once per change, not once per cycle.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

from clueue.engine import Plan, WorkloadEntry

__all__ = ["RECORD_API_VERSION", "RECORD_KIND", "DELETED", "StateTracker", "workload_state", "cycle_record",
           "iso_time"]

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


def _fields(entry: WorkloadEntry) -> tuple[Any, ...]:
    # What workload_state reads: compared as is, which costs far less than building the dict.
    return entry.state, entry.queue, entry.cluster_queue, entry.priority, entry.origin, entry.admission, entry.reasons


class StateTracker:
    """The last recorded state of each workload, to record only what changed."""

    def __init__(self, last: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        # name -> (fields of the entry it was made from, or None when read back from the log; state)
        self._last: dict[str, tuple[tuple[Any, ...] | None, Mapping[str, Any]]] = {
            name: (None, state) for name, state in (last or {}).items() if state.get("state") != DELETED}

    def changes(self, entries: Iterable[WorkloadEntry]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The states to record for this cycle's ``entries``, and the tracker's next memory
        (pass it to :meth:`commit` once they are stored)."""
        out: list[dict[str, Any]] = []
        nxt: dict[str, Any] = {}
        for entry in entries:
            fields = _fields(entry)
            held = self._last.get(entry.name)
            if held is not None and held[0] is not None and held[0] == fields:
                nxt[entry.name] = held
                continue
            state = workload_state(entry)
            if held is None or held[1] != state:
                out.append(state)
            nxt[entry.name] = (fields, state)
        out += [{"name": name, "state": DELETED} for name in sorted(self._last.keys() - nxt.keys())]
        return out, nxt

    def commit(self, memory: dict[str, Any]) -> None:
        self._last = memory


def _summary(plan: Plan) -> dict[str, int]:
    return plan.summary()


def cycle_record(*, cycle_id: int, time: float, origin: str, plan: Plan | None, snapshot_digest: str,
                 policy_digest: str, config_digest: str, workloads: list[dict[str, Any]],
                 phases: Mapping[str, float] | None = None, error: str = "",
                 objects: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The record of one cycle, as both sinks write it."""
    record: dict[str, Any] = {
        "apiVersion": RECORD_API_VERSION, "kind": RECORD_KIND, "id": cycle_id, "time": iso_time(time),
        "origin": origin, "snapshotDigest": snapshot_digest, "policyDigest": policy_digest,
        "configDigest": config_digest}
    if error:
        record["error"] = error
    if phases:
        record["phases"] = {k: round(v, 4) for k, v in phases.items()}
    if objects is not None:
        record["objects"] = dict(objects)
    if plan is not None:
        record["summary"] = _summary(plan)
        record["solver"] = plan.solver.to_dict()
        record["actions"] = [a.to_dict() for a in plan.actions]
        record["notices"] = list(plan.notices)
        record["rejected"] = [r.to_dict() for r in plan.rejected]
    record["workloads"] = workloads
    return record
