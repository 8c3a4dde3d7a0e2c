"""Rendering plans for people (Jinja2 templates) and for programs (JSON, YAML)."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from typing import Any, Container, Iterable, Mapping, Sequence

import jinja2
import yaml

from clueue.engine import Plan, Snapshot
from clueue.engine.plan import Action, WorkloadEntry
from clueue.engine.podgroups import rfc3339

from .scope import Scope

__all__ = ["render_plan", "render_explanation", "dump"]

_env = jinja2.Environment(loader=jinja2.PackageLoader("clueue.adapters", "templates"),
                          undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
_env.filters["rfc3339"] = rfc3339  # epoch seconds as Kubernetes writes times

_EVERYTHING = Scope()
# The text plan's per-ClusterQueue columns: each workload counts in exactly one.
_COLUMNS = ("new", "before", "pending", "evicted", "inadmissible", "finished")
_HEADINGS = ("admitted new", "admitted before", "pending", "evicted", "inadmissible", "finished")


def dump(data: Any, fmt: str) -> str:
    """``data`` as JSON or YAML, keys in a stable order."""
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=120)


def render_plan(plan: Plan, fmt: str, *, scope: Scope = _EVERYTHING, snapshot: Snapshot | None = None) -> str:
    """The plan as ``text``, ``json`` or ``yaml``, showing the workloads of ``scope`` and their actions.

    A narrowing ``scope`` needs the ``snapshot`` the plan was made from (for labels); its
    summary then counts the workloads shown, and ``metadata.filter`` says what narrowed it.
    """
    shown = plan
    if scope.narrows:
        if snapshot is None:
            raise ValueError("a narrowing scope reads labels from the snapshot: give it")
        workloads = tuple(w for w in plan.workloads if scope.shows(w, snapshot))
        names = {w.name for w in workloads}
        shown = dataclasses.replace(plan, workloads=workloads, actions=tuple(a for a in plan.actions if a.workload in names),
                                    dispatch=tuple(d for d in plan.dispatch if d.workload in names),
                                    pod_groups=tuple(g for g in plan.pod_groups if scope.shows_group(g, snapshot)))
    data = shown.to_dict()
    if scope.narrows:
        data["metadata"]["filter"] = scope.to_dict(len(plan.workloads))
    if fmt != "text":
        return dump(data, fmt)
    evicted = {a.workload for a in shown.actions if a.kind == "preempt"}
    columns = [_column(w, evicted) for w in shown.workloads]
    return _env.get_template("plan.txt.j2").render(
        plan=data, total=len(plan.workloads), scope=scope.describe(), count=Counter(columns),
        columns=columns, origins=_origins(plan, shown.actions),
        by_queue=_by_queue(shown.workloads, columns))


def render_explanation(plan: Plan, workload: str, fmt: str) -> str:
    """One workload's decision with its reasons and the actions that apply it.

    Raises:
        KeyError: no such workload in the plan.
    """
    entry = plan.workload(workload)
    actions = [a for a in plan.actions if a.workload == entry.name]
    # MultiKueue: why each worker was or was not nominated (docs/dispatch.md)
    dispatch = next((d.to_dict() for d in plan.dispatch if d.workload == entry.name), None)
    if fmt == "text":
        return _env.get_template("explain.txt.j2").render(
            w=entry.to_dict(), actions=[a.to_dict() for a in actions], origins=_origins(plan, actions),
            candidates=plan.solver.candidates, dispatch=dispatch) + "\n"
    return dump({**entry.to_dict(), "actions": [a.to_dict() for a in actions],
                 **({"dispatch": dispatch} if dispatch else {})}, fmt)


def _column(w: WorkloadEntry, evicted: Container[str]) -> str:
    """Where the text plan counts ``w``: evicted by this cycle (preempted, deactivated, drained),
    admitted by it or before it, or else its state."""
    if w.name in evicted:
        return "evicted"
    if w.state == "admitted":
        return "before" if w.reasons and w.reasons[0].code in ("AlreadyAdmitted", "WaitingForAdmissionChecks") else "new"
    return w.state


def _origins(plan: Plan, actions: Sequence[Action]) -> list[str]:
    """What each of ``actions`` comes from (see :func:`_origin`); preemptors are looked up in the
    whole ``plan``, as they may not be shown."""
    entries = {w.name: w for w in plan.workloads} if any(a.kind == "preempt" for a in actions) else {}
    return [_origin(a, entries) for a in actions]


def _origin(action: Action, entries: Mapping[str, WorkloadEntry]) -> str:
    """Where a destructive action comes from, for the text plan: the group in excess, the preemptors."""
    reason = action.details.get("reason")
    if not reason:
        return ""
    if action.kind != "preempt" or reason["code"] != "Preempted":  # an excess pod, a queue drained, ...
        return f"({reason['message']})"
    queue = reason["details"]["clusterQueue"]
    preemptors = []
    for name in reason["details"]["preemptors"]:
        p = entries[name]
        elsewhere = "" if p.cluster_queue == queue else f", ClusterQueue {p.cluster_queue} of the same cohort"
        preemptors.append(f"{name} (priority {p.priority}{elsewhere})")
    return (f"(priority {entries[action.workload].priority}, ClusterQueue {queue}) "
            f"to make room for {', '.join(preemptors)}")


def _by_queue(workloads: Iterable[WorkloadEntry], columns: Iterable[str]) -> list[str]:
    """The text plan's closing table: per ClusterQueue, how many workloads fall in each column."""
    counts: dict[str, dict[str, int]] = {}
    for w, column in zip(workloads, columns):
        counts.setdefault(w.cluster_queue or "(none)", dict.fromkeys(_COLUMNS, 0))[column] += 1
    names = sorted(counts, key=lambda n: (n == "(none)", n))  # workloads whose LocalQueue leads nowhere last
    width = max([len("ClusterQueue"), *map(len, names)])
    rows = [f"{'ClusterQueue'.ljust(width)}  {'  '.join(_HEADINGS)}"]
    for name in names:
        rows.append(f"{name.ljust(width)}  " + "  ".join(str(counts[name][c]).rjust(len(h))
                                                         for c, h in zip(_COLUMNS, _HEADINGS)))
    return rows
