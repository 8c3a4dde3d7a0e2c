"""A workload's timeline: its states and reasons over the recorded cycles, and how long each held.

The log records a workload's state only when it changes, so each record holds from its cycle
until the next record (or, for the last one, until the log's last cycle: "so far"). Records of
one state in a row make a *span* (``pending 38m``); each record is a *phase* of it, with the
reasons that held (``InsufficientQuota in team-a/on-demand cpu, 4 short, 29m``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from .records import DELETED, iso_time
from .schema import DecisionLogError
from .units import format_duration

if TYPE_CHECKING:
    from .store import DecisionLog

__all__ = ["timeline", "workload_timeline", "brief", "render_timeline"]


def brief(reason: Mapping[str, Any]) -> str:
    """A reason in a few words, for a timeline line (the full message is in the data)."""
    code, d = reason["code"], reason.get("details") or {}
    try:
        if code == "InsufficientQuota":
            return f"InsufficientQuota in {d['clusterQueue']}/{d['flavor']} {d['resource']}, {d['short']} short"
        if code == "WaitsBehind":
            return f"WaitsBehind {', '.join(d['workloads'])}"
        if code == "StrictFIFOBlocked":
            return f"StrictFIFOBlocked behind {d['head']}"
        if code == "Preempting":
            return f"Preempting {', '.join(d['victims'])} in {d['clusterQueue']}"
        if code == "Preempted":
            return f"Preempted in {d['clusterQueue']} for {', '.join(d['preemptors'])}"
        if code in ("Admitted", "AlreadyAdmitted"):
            flavors = f" ({', '.join(d['flavors'])})" if d.get("flavors") else ""
            return f"in {d['clusterQueue']}{flavors}"
    except (KeyError, TypeError):  # a policy's own reason under a known code: its message says it
        pass
    return f"{code}: {reason.get('message', '')}"


def timeline(history: Sequence[tuple[int, float, Mapping[str, Any]]], *, last_time: float) -> list[dict[str, Any]]:
    """The spans of a workload's recorded ``history`` ((cycle, time, state), oldest first), as
    of the log's last cycle, at ``last_time``."""
    spans: list[dict[str, Any]] = []
    for i, (cycle, start, state) in enumerate(history):
        ongoing = i + 1 == len(history)
        end = last_time if ongoing else history[i + 1][1]
        phase: dict[str, Any] = {"cycle": cycle, "from": iso_time(start), "seconds": round(max(0.0, end - start), 3),
                                 "reasons": list(state.get("reasons", []))}
        phase["to"] = None if ongoing else iso_time(end)
        if state["state"] == DELETED:
            phase["seconds"] = 0.0
        if spans and spans[-1]["state"] == state["state"] and spans[-1]["clusterQueue"] == state.get("clusterQueue"):
            span = spans[-1]
        else:
            span = {"state": state["state"], "clusterQueue": state.get("clusterQueue"), "from": phase["from"],
                    "fromCycle": cycle, "seconds": 0.0, "phases": []}
            spans.append(span)
        span["phases"].append(phase)
        span["seconds"] = round(span["seconds"] + phase["seconds"], 3)
        span["to"] = phase["to"]
        if state.get("admission"):
            span["admission"] = state["admission"]
    return spans


def workload_timeline(log: DecisionLog, workload: str) -> dict[str, Any]:
    """The data of ``clueue audit why`` (and of the dashboard's timeline) for ``workload``
    (``namespace/name``): its spans as of the log's last cycle.

    Raises:
        DecisionLogError: the log holds no state of it (the message names recorded workloads
            of the same name).
    """
    history = log.history(workload)
    if not history:
        near = log.workloads_like("/" + workload.split("/", 1)[-1])
        hint = f"; recorded workloads of that name: {', '.join(near)}" if near else ""
        raise DecisionLogError(f"workload {workload} is not in decision log {log.path}{hint}")
    span = log.cycle_ids()
    last_time = log.last_time()
    assert span is not None and last_time is not None  # it holds states, so cycles
    return {"workload": workload, "asOfCycle": span[1], "asOf": iso_time(last_time), "records": len(history),
            "spans": timeline(history, last_time=last_time)}


def _clock(stamp: str | None) -> str:
    """``2026-11-28T10:02:13.000Z`` as ``10:02:13``."""
    return stamp[11:19] if stamp else "now"


def render_timeline(data: Mapping[str, Any]) -> str:
    """The text of ``clueue audit why`` from its data (:func:`timeline` spans and context)."""
    spans = data["spans"]
    lines = [f"{data['workload']}: {len(spans)} state(s) over {data['records']} recorded change(s); "
             f"as of cycle {data['asOfCycle']} at {data['asOf']} (times UTC)"]
    for span in spans:
        if span["state"] == DELETED:
            lines.append(f"  deleted at {_clock(span['from'])} (cycle {span['fromCycle']})")
            continue
        ongoing = span["to"] is None
        length = format_duration(span["seconds"]) + (" so far" if ongoing else "")
        where = f" in {span['clusterQueue']}" if span["clusterQueue"] and span["state"] == "admitted" else ""
        lines.append(f"  {span['state']} {length}{where}: from {_clock(span['from'])} "
                     f"{'(ongoing)' if ongoing else 'to ' + _clock(span['to'])}, cycle {span['fromCycle']}")
        for phase in span["phases"]:
            reasons = "; ".join(brief(r) for r in phase["reasons"]) or "(no reason recorded)"
            until = "now" if phase["to"] is None else _clock(phase["to"])
            lines.append(f"    {_clock(phase['from'])}-{until} {format_duration(phase['seconds']):>6}  {reasons}")
    return "\n".join(lines) + "\n"
