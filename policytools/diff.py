"""``clueue policy diff`` (and ``clueue audit replay``): the decisions two plans over one
snapshot make differently, and their report for people and as data.

:func:`diff_policies` runs two policy versions on the same snapshots; :func:`snapshot_diff`
compares two plans already made (a recorded cycle and its replay); :func:`render_diff` and
:func:`diff_document` print the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from clueue.engine import Action, Config, Plan, Policy, Snapshot, WorkloadEntry
from clueue.engine.guard import Limits, guarded_cycle
from clueue.engine.plan import PodGroupEntry

__all__ = [
    "WorkloadChange", "PodGroupChange", "SnapshotDiff", "diff_plans", "diff_pod_groups", "snapshot_diff",
    "diff_policies", "render_diff", "diff_document",
]


_IMPLIED_ACTIONS = ("admit", "ungate")  # follow from the admission, which is compared already


def _decision(entry: WorkloadEntry | None, actions: Sequence[Action]) -> dict[str, Any]:
    if entry is None:
        return {"state": None, "clusterQueue": None, "admission": [], "actions": []}
    return {"state": entry.state, "clusterQueue": entry.cluster_queue,
            "admission": [a.to_dict() for a in entry.admission],
            "actions": sorted(f"{a.kind} {a.target}" for a in actions
                              if a.workload == entry.name and a.kind not in _IMPLIED_ACTIONS)}


@dataclass(frozen=True)
class WorkloadChange:
    """A workload decided differently by the two policies: what changed, and both sides."""

    workload: str
    changed: tuple[str, ...]  # among state, clusterQueue, admission, actions
    base: Mapping[str, Any]  # the decision: state, clusterQueue, admission, actions, reasons
    new: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"workload": self.workload, "changed": list(self.changed), "base": dict(self.base), "new": dict(self.new)}


@dataclass(frozen=True)
class PodGroupChange:
    """A coscheduling PodGroup decided differently (the plans' ``podGroups[]``): what changed
    (among phase, release, endBackoff), and both sides (with the reason)."""

    pod_group: str
    changed: tuple[str, ...]
    base: Mapping[str, Any]  # phase (None: absent), reason, release, endBackoff
    new: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"podGroup": self.pod_group, "changed": list(self.changed), "base": dict(self.base),
                "new": dict(self.new)}


@dataclass(frozen=True)
class SnapshotDiff:
    source: str
    snapshot_digest: str
    workloads: int
    changes: tuple[WorkloadChange, ...]
    pod_groups: tuple[PodGroupChange, ...] = ()
    pod_group_count: int = 0  # PodGroups in the new plan

    @property
    def changed(self) -> bool:
        """Whether any workload or PodGroup is decided differently."""
        return bool(self.changes or self.pod_groups)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "snapshotDigest": self.snapshot_digest, "workloads": self.workloads,
                "changes": [c.to_dict() for c in self.changes], "podGroups": self.pod_group_count,
                "podGroupChanges": [c.to_dict() for c in self.pod_groups]}


def diff_plans(base: Plan, new: Plan) -> list[WorkloadChange]:
    """Workloads whose decision (state, ClusterQueue, flavors and counts, other actions) differs."""
    before = {w.name: w for w in base.workloads}
    after = {w.name: w for w in new.workloads}
    out = []
    for name in sorted(set(before) | set(after)):
        b, a = _decision(before.get(name), base.actions), _decision(after.get(name), new.actions)
        changed = tuple(k for k in b if b[k] != a[k])
        if changed:
            out.append(WorkloadChange(name, changed, {**b, "reasons": _reasons(before.get(name))},
                                      {**a, "reasons": _reasons(after.get(name))}))
    return out


_GROUP_DECISION = ("phase", "release", "endBackoff")


def _group_decision(entry: PodGroupEntry | None) -> dict[str, Any]:
    if entry is None:
        return {"phase": None, "release": None, "endBackoff": False, "reason": None}
    return {"phase": entry.phase, "release": entry.release.to_dict() if entry.release is not None else None,
            "endBackoff": entry.end_backoff, "reason": entry.reason.to_dict() if entry.reason is not None else None}


def diff_pod_groups(base: Plan, new: Plan) -> list[PodGroupChange]:
    """PodGroups whose decision (phase, release after a timeout, end of back-off) differs."""
    before = {g.name: g for g in base.pod_groups}
    after = {g.name: g for g in new.pod_groups}
    out = []
    for name in sorted(set(before) | set(after)):
        b, a = _group_decision(before.get(name)), _group_decision(after.get(name))
        changed = tuple(k for k in _GROUP_DECISION if b[k] != a[k])
        if changed:
            out.append(PodGroupChange(name, changed, b, a))
    return out


def snapshot_diff(source: str, base: Plan, new: Plan) -> SnapshotDiff:
    """The decisions of two plans over one snapshot that differ: workloads and PodGroups."""
    return SnapshotDiff(source, new.snapshot_digest, len(new.workloads), tuple(diff_plans(base, new)),
                        tuple(diff_pod_groups(base, new)), len(new.pod_groups))


def _reasons(entry: WorkloadEntry | None) -> list[dict[str, Any]]:
    return [r.to_dict() for r in entry.reasons] if entry else []


def diff_policies(snapshots: Sequence[tuple[str, Snapshot]], base: Policy, new: Policy, *,
                  config: Config = Config(), limits: Limits | None = Limits(), now: int | None = None
                  ) -> list[SnapshotDiff]:
    """Run both policies on every snapshot, both at time ``now`` (what depends on time, such as
    a PodGroup's schedule timeout, is decided at it; None: nothing is), and diff the decisions.

    Raises:
        PolicyError, SolveError: either policy fails on a snapshot (or exceeds its limits).
    """
    out = []
    for source, snapshot in snapshots:
        before = guarded_cycle(snapshot, base, config, limits=limits, now=now)
        after = guarded_cycle(snapshot, new, config, limits=limits, now=now)
        out.append(snapshot_diff(source, before, after))
    return out


def _decision_text(side: dict[str, Any]) -> str:
    if side["state"] is None:
        return "(absent)"
    text = side["state"]
    for ps in side["admission"]:
        flavors = ", ".join(f"{r}={f}" for r, f in ps["flavors"].items())
        text += f" [{ps['name']} x{ps['count']}: {flavors}]"
    if side["actions"]:
        text += " + " + ", ".join(side["actions"])
    return text


def _group_text(side: dict[str, Any]) -> list[str]:
    """A PodGroup's side of a diff: its phase and what is done to it, then why."""
    if side["phase"] is None:
        return ["(absent)"]
    text = side["phase"]
    if side["release"]:
        text += f" + release (requeue {side['release']['requeues']})"
    if side["endBackoff"]:
        text += " + end of back-off"
    reason = side["reason"]
    return [text] + ([f"    {reason['code']}: {reason['message']}"] if reason else [])


def render_diff(diffs: list[SnapshotDiff], base_label: str, new_label: str) -> str:
    """The decision diff for people (``policy diff``, ``audit replay``)."""
    lines = [f"--- base: {base_label}", f"+++ new:  {new_label}"]
    changed = 0
    for d in diffs:
        groups = f", {len(d.pod_groups)} of {d.pod_group_count} PodGroups" if d.pod_group_count or d.pod_groups else ""
        lines.append(f"\nsnapshot {d.source} ({d.snapshot_digest}): "
                     f"{len(d.changes)} of {d.workloads} workloads{groups} change")
        for c in d.changes:
            changed += 1
            lines += [f"  {c.workload}  ({', '.join(c.changed)})",
                      f"    - {_decision_text(dict(c.base))}"]
            lines += [f"        {r['code']}: {r['message']}" for r in c.base["reasons"]]
            lines += [f"    + {_decision_text(dict(c.new))}"]
            lines += [f"        {r['code']}: {r['message']}" for r in c.new["reasons"]]
        for g in d.pod_groups:
            changed += 1
            base, new = _group_text(dict(g.base)), _group_text(dict(g.new))
            lines += [f"  PodGroup {g.pod_group}  ({', '.join(g.changed)})", f"    - {base[0]}"]
            lines += [f"    {line}" for line in base[1:]]
            lines += [f"    + {new[0]}"] + [f"    {line}" for line in new[1:]]
    lines.append(f"\n{changed} decision(s) change in {sum(1 for d in diffs if d.changed)} of {len(diffs)} snapshot(s).")
    return "\n".join(lines) + "\n"


def diff_document(diffs: list[SnapshotDiff], base: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The decision diff as data (``-o json|yaml``): ``base`` and ``new`` say what was compared."""
    return {"apiVersion": "clueue.dev/v1", "kind": "PolicyDiff", "base": base, "new": new,
            "snapshots": [d.to_dict() for d in diffs]}
