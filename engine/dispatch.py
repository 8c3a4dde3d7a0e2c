"""Dispatch to MultiKueue's worker clusters: who each workload's copies go to.

A workload of a ClusterQueue with a MultiKueue admission check is *dispatched* once it holds
the manager's quota (reserved before, or by this cycle's decision) while that check is Pending
and no worker has admitted it yet (``status.clusterName`` unset): the dispatcher sets its
``status.nominatedClusterNames`` (at most 10), and the MultiKueue adapter keeps copies in exactly
those workers; the first worker to admit one wins. Dispatchers (``multiKueue.dispatcherName``):

- Optimized (clueue's default): ``policies/dispatch.lp`` predicts, from each worker's free
  quota and nodes (dispatch_workers.py), where the workload will be admitted, and nominates that
  worker alone; workloads dispatched together share each worker's room. When the prediction is
  uncertain (some worker's data is stale or unread) it nominates a few; a workload that fits
  nowhere, as fresh data tell, waits (``copiesWhenNoFit``, 0 by default).
- AllAtOnce: every Active worker of the workload's MultiKueueConfig.
- Incremental: the Active workers by name, ``clustersPerRound`` more each ``roundSeconds``,
  counted from when the workload's quota was reserved (its own status): so the engine stays a
  function of the snapshot and the time the adapter passes in.
- any other name: an external controller nominates; clueue writes nothing.

Each dispatched workload gets a :class:`~clueue.engine.plan.DispatchEntry` that says, for every
worker of its config, why it was or was not nominated, with the numbers (``clueue explain``).
The Optimized pass is a clingo solve of its own (``solver.nominate``), over the ``dispatch`` part of the policy's
files, after the admission decision (docs/dispatch.md says why).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from math import ceil, floor
from typing import Any, Iterable, Mapping

from .checks import required_checks
from .kueue_api import MULTIKUEUE_CONTROLLER
from .config import ALL_AT_ONCE, INCREMENTAL, OPTIMIZED, Config
from .dispatch_workers import QueueRoom, WorkerCapacity, worker_capacity
from .facts import fact_text
from .plan import Action, DispatchEntry, WorkerNote
from .policy import Policy
from .quantity import common_divisor, format_quantity
from .snapshot import Snapshot
from .solver import nominate
from .workloads import Workload

__all__ = ["MAX_NOMINATED", "DispatchTarget", "Dispatch", "dispatch_targets", "run_dispatch"]

#: ``status.nominatedClusterNames`` holds at most this many names (Kueue's API: MaxItems=10).
MAX_NOMINATED = 10
# Amounts in the dispatch facts stay below this, so that sums over a few thousand workloads
# stay within clingo's 32-bit integers.
_MAX_AMOUNT = 2**20


@dataclass(frozen=True)
class DispatchTarget:
    """A workload to dispatch this cycle, and what its Workload object records."""

    workload: Workload
    cluster_queue: str
    clusters: tuple[str, ...]  # the clusters of its MultiKueueConfig, in the config's order
    nominated: tuple[str, ...] = ()  # status.nominatedClusterNames now
    reserved_at: int = 0  # when its quota was reserved (0: by this cycle)
    labels: Mapping[str, str] = field(default_factory=dict)  # its Workload's labels, or those its pods share


@dataclass(frozen=True)
class Dispatch:
    """What the dispatcher decided: the ``nominate`` actions, and why, per workload."""

    actions: tuple[Action, ...] = ()
    entries: tuple[DispatchEntry, ...] = ()
    optimal: bool = True  # False: the time budget cut Optimized's search before it proved its choice best


def dispatch_targets(snapshot: Snapshot, workloads: Iterable[Workload],
                     reserved_now: Mapping[str, tuple[str, frozenset[str]]],
                     evicted: Iterable[str] = ()) -> list[DispatchTarget]:
    """The workloads to dispatch, by key: those ``reserved_now`` (workload -> its ClusterQueue
    and the flavors of its admission, reserved by this cycle) and those that held their quota
    before, with their MultiKueue check Pending and no ``status.clusterName``; all of them in a
    ClusterQueue whose MultiKueue check names a MultiKueueConfig. ``evicted`` ones are not."""
    out = []
    gone = set(evicted)
    for w in workloads:
        if w.finished or w.evict or w.key in gone:
            continue
        obj = snapshot.workloads.get(w.key)
        if obj is not None and obj.cluster_name:
            continue
        if w.key in reserved_now:
            cq, flavors = reserved_now[w.key]
            states: dict[str, str] = {}
        elif w.admission is not None:
            cq = w.admission.cluster_queue
            flavors = frozenset(f for a in w.admission.pod_sets for f in a.flavors.values())
            states = {c.name: c.state for c in w.checks}
        else:
            continue
        for name in required_checks(snapshot.cluster_queues.get(cq), flavors):
            check = snapshot.admission_checks.get(name)
            if check is None or check.controller != MULTIKUEUE_CONTROLLER or states.get(name, "Pending") != "Pending":
                continue
            config = check.parameters[2] if check.parameters and check.parameters[1] == "MultiKueueConfig" else ""
            out.append(DispatchTarget(w, cq, tuple(snapshot.multikueue_configs.get(config, ())),
                                      obj.nominated_clusters if obj else (),
                                      0 if w.key in reserved_now or obj is None else obj.reserved_at,
                                      obj.labels if obj else _pod_labels(w)))
    return sorted(out, key=lambda t: (-t.workload.priority, t.workload.created, t.workload.key))


def run_dispatch(snapshot: Snapshot, targets: list[DispatchTarget], policy: Policy, config: Config, *,
                 now: int | None, budget: float) -> Dispatch:
    """Nominate workers for ``targets`` (in rank order) with the configured dispatcher.

    ``now`` (seconds since the epoch, from the adapter) times Incremental's rounds (None
    counts every workload in its first round) and the workers' views' ages.
    """
    settings = config.multikueue
    if not targets or settings.dispatcher_name not in (OPTIMIZED, ALL_AT_ONCE, INCREMENTAL):
        return Dispatch()
    if settings.dispatcher_name == OPTIMIZED:
        asking = [t.workload for t in targets]
        capacities = {name: worker_capacity(view, config, asking, now=now) for name, view in snapshot.workers.items()}
        chosen, optimal = _optimized(targets, snapshot, capacities, policy, config, budget)
    else:
        active = {name for name, c in snapshot.multikueue_clusters.items() if c.active}
        chosen, optimal = {t.workload.key: _simple(t, active, config, now) for t in targets}, True
    actions, entries = [], []
    for t in targets:
        nominated, notes = chosen[t.workload.key]
        # none is never written: a workload that waits for room keeps the copies it has
        nominated = nominated[:MAX_NOMINATED] or t.nominated
        entries.append(DispatchEntry(t.workload.key, _short_name(settings.dispatcher_name), nominated, notes))
        if nominated and nominated != t.nominated:
            actions.append(Action("nominate", t.workload.key, t.workload.key, {
                "clusterNames": list(nominated), "dispatcher": settings.dispatcher_name}))
    return Dispatch(tuple(actions), tuple(entries), optimal)


def _short_name(dispatcher: str) -> str:
    return {OPTIMIZED: "Optimized", ALL_AT_ONCE: "AllAtOnce", INCREMENTAL: "Incremental"}[dispatcher]


# ---------------------------------------------------------------------------------------------
# AllAtOnce and Incremental
# ---------------------------------------------------------------------------------------------

def _simple(t: DispatchTarget, active: set[str], config: Config,
            now: int | None) -> tuple[tuple[str, ...], tuple[WorkerNote, ...]]:
    """AllAtOnce: every Active worker; Incremental: the Active workers by name, a round's worth
    more each round since the quota was reserved."""
    settings = config.multikueue
    eligible = [k for k in sorted(t.clusters) if k in active]
    if settings.dispatcher_name == INCREMENTAL:
        rounds = 1 if now is None or not t.reserved_at else 1 + max(0, now - t.reserved_at) // settings.round_seconds
        eligible = eligible[:settings.clusters_per_round * rounds]
        why = f"round {rounds}: the first {settings.clusters_per_round * rounds} Active workers by name"
    else:
        why = "every Active worker of its MultiKueueConfig"
    notes = []
    for k in t.clusters:
        if k not in active:
            notes.append(_inactive(k))
        elif k in eligible:
            notes.append(WorkerNote(k, True, "Nominated", {"why": why}, f"nominated: {why}"))
        else:
            notes.append(WorkerNote(k, False, "LaterRound", {"why": why}, f"not yet: {why}"))
    return tuple(eligible), tuple(notes)


def _inactive(k: str) -> WorkerNote:
    return WorkerNote(k, False, "Inactive", {}, "inactive: its MultiKueueCluster is not Active")


# ---------------------------------------------------------------------------------------------
# Optimized: facts, the solve, and the notes
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Ask:
    """What one target asks: per resource, in all and for its largest pod."""

    total: Mapping[str, Fraction]
    pod: Mapping[str, Fraction]


def _ask(w: Workload) -> _Ask:
    total: dict[str, Fraction] = {}
    pod: dict[str, Fraction] = {}
    for ps in w.pod_sets:
        for r, v in ps.requests.items():
            if v > 0 and ps.count > 0:
                total[r] = total.get(r, Fraction(0)) + v * ps.count
                pod[r] = max(pod.get(r, Fraction(0)), v)
    return _Ask(total, pod)


def _units(asks: Iterable[_Ask], capacities: Iterable[WorkerCapacity]) -> dict[str, Fraction]:
    """Per resource, the quantity one integer of the dispatch facts stands for: the largest that
    divides every amount, made coarser (by tens) while the largest amount would exceed
    ``_MAX_AMOUNT``. Free amounts are then rounded down and requests up: never a fit too many."""
    amounts: dict[str, list[Fraction]] = {}
    for a in asks:
        for r, v in [*a.total.items(), *a.pod.items()]:
            amounts.setdefault(r, []).append(v)
    for c in capacities:
        for q in c.queues.values():
            for (_, r), v in q.free.items():
                amounts.setdefault(r, []).append(v)
        for r, (total, largest) in c.nodes.items():
            amounts.setdefault(r, []).extend((total, largest))
    units = {}
    for r, values in amounts.items():
        unit = common_divisor(values)
        while max(values) / unit > _MAX_AMOUNT:
            unit *= 10
        units[r] = unit
    return units


def _facts(targets: list[DispatchTarget], asks: Mapping[str, _Ask], snapshot: Snapshot,
           capacities: Mapping[str, WorkerCapacity], units: Mapping[str, Fraction], config: Config) -> str:
    settings = config.multikueue
    lines = [fact_text("dispatch_copies", [settings.copies_when_uncertain]),
             fact_text("dispatch_no_fit_copies", [settings.copies_when_no_fit])]
    lines += [fact_text("dispatch_unit", [r, format_quantity(u)]) for r, u in sorted(units.items())]
    workers = sorted({k for t in targets for k in t.clusters})

    def down(r: str, v: Fraction) -> int:
        return floor(v / units[r])

    def up(r: str, v: Fraction) -> int:
        return ceil(v / units[r])

    for order, k in enumerate(workers):
        lines += [fact_text("worker", [k]), fact_text("worker_order", [k, order])]
        cluster = snapshot.multikueue_clusters.get(k)
        if cluster is not None:
            lines += [fact_text("worker_label", [k, key, v]) for key, v in sorted(cluster.labels.items())]
            if cluster.active:
                lines.append(fact_text("worker_active", [k]))
        c = capacities.get(k)
        if c is None:
            continue
        lines.append(fact_text("worker_age", [k, c.age]))
        if c.age > settings.stale_after_seconds:
            lines.append(fact_text("worker_stale", [k]))
        for q in c.queues.values():
            if q.stopped:
                continue
            for g, (flavors, resources) in enumerate(q.groups):
                lines += [fact_text("worker_flavor", [k, q.name, g, f, pos]) for pos, f in enumerate(flavors)]
                lines += [fact_text("worker_resource", [k, q.name, g, r]) for r in resources]
            lines += [fact_text("worker_free", [k, q.name, f, r, down(r, v)]) for (f, r), v in q.free.items()
                      if r in units]
        if c.nodes:
            lines.append(fact_text("worker_nodes", [k]))
            for r, (total, largest) in c.nodes.items():
                if r in units:
                    lines += [fact_text("worker_nodes_free", [k, r, down(r, total)]),
                              fact_text("worker_node_largest", [k, r, down(r, largest)])]
    for rank, t in enumerate(targets):
        w = t.workload
        lines += [fact_text("dispatch", [w.key]), fact_text("dispatch_rank", [w.key, rank])]
        lines += [fact_text("dispatch_to", [w.key, k]) for k in t.clusters]
        lines += [fact_text("nominated_before", [w.key, k]) for k in t.nominated]
        lines += [fact_text("dispatch_label", [w.key, key, v]) for key, v in sorted(t.labels.items())]
        a = asks[w.key]
        lines += [fact_text("dispatch_need", [w.key, r, up(r, v)]) for r, v in a.total.items()]
        lines += [fact_text("dispatch_pod", [w.key, r, up(r, v)]) for r, v in a.pod.items()]
        for k in t.clusters:
            q = capacities[k].queue_for(w.namespace, w.queue) if k in capacities else None
            if q is not None:
                lines.append(fact_text("dispatch_cq", [w.key, k, q.name]))
    return "\n".join(lines) + "\n"


def _pod_labels(w: Workload) -> Mapping[str, str]:
    """The labels all pods of a workload of pods share."""
    pods = [p for ps in w.pods.values() for p in ps]
    if not pods:
        return {}
    shared = dict(pods[0].labels)
    for p in pods[1:]:
        shared = {k: v for k, v in shared.items() if p.labels.get(k) == v}
    return shared


def _optimized(targets: list[DispatchTarget], snapshot: Snapshot, capacities: Mapping[str, WorkerCapacity],
               policy: Policy, config: Config,
               budget: float) -> tuple[dict[str, tuple[tuple[str, ...], tuple[WorkerNote, ...]]], bool]:
    asks = {t.workload.key: _ask(t.workload) for t in targets}
    units = _units(asks.values(), capacities.values())
    facts = _facts(targets, asks, snapshot, capacities, units, config)
    active = {name for name, c in snapshot.multikueue_clusters.items() if c.active}
    # a fifth of the cycle's budget at most: dispatch must not hold up the next cycle's admissions
    nominated, predicted, optimal = nominate(facts, policy,
                                             budget=min(budget, _BUDGET_SHARE * config.time_budget))
    order = {k: i for i, k in enumerate(sorted({k for t in targets for k in t.clusters}))}
    by_worker: dict[str, list[str]] = {}
    for w, k in sorted(predicted.items()):
        by_worker.setdefault(k, []).append(w)
    out = {}
    for t in targets:
        key = t.workload.key
        mine = tuple(sorted(nominated.get(key, ()), key=lambda k: order[k]))
        notes = tuple(_note(t, k, asks[key], active, capacities.get(k), config, k in mine, predicted.get(key),
                            [w for w in by_worker.get(k, ()) if w != key]) for k in t.clusters)
        out[key] = (mine, notes)
    return out, optimal


_BUDGET_SHARE = 0.2


def _room_text(q: QueueRoom, flavor: str, r: str, lq: str, need: Fraction) -> str:
    return f"{lq} (ClusterQueue {q.name}) has {format_quantity(q.free.get((flavor, r), Fraction(0)))} {r} " \
           f"free in flavor {flavor}, needs {format_quantity(need)}"


def _note(t: DispatchTarget, k: str, ask: _Ask, active: set[str], c: WorkerCapacity | None, config: Config,
          chosen: bool, predicted: str | None, sharing: list[str]) -> WorkerNote:
    """Why worker ``k`` was or was not nominated for ``t``, with the numbers."""
    w = t.workload
    if k not in active:
        return _inactive(k)
    if c is None:
        return WorkerNote(k, chosen, "NotRead", {}, ("nominated: uncertain, " if chosen else "") +
                          "nothing has been read from it yet")
    stale = c.age > config.multikueue.stale_after_seconds
    age = {"ageSeconds": c.age} if stale else {}
    stale_text = f"stale data {c.age} s old"
    fit = _fit(c, w, ask)
    if chosen and predicted == k:
        code, text = ("PredictedStale", f"nominated: predicted to admit it, but on {stale_text}") if stale else (
            "Predicted", "nominated: predicted to admit it")
        return WorkerNote(k, True, code, {**fit[1], **age}, f"{text} ({fit[2]})")
    if chosen:
        why = "it is predicted only on stale data" if predicted else "no worker is predicted to admit it"
        extra = f"; {stale_text}" if stale else ""
        return WorkerNote(k, True, "Uncertain", {**fit[1], **age},
                          f"nominated as one of several: {why} ({fit[2]}{extra})")
    if not fit[0]:
        return WorkerNote(k, False, fit[1].get("code", "NoFit"), {**fit[1], **age},
                          fit[2] + (f"; {stale_text}" if stale else ""))
    if stale:
        return WorkerNote(k, False, "Stale", {**fit[1], **age}, f"{stale_text}; {fit[2]}")
    if sharing:
        return WorkerNote(k, False, "RoomTaken", {**fit[1], "dispatched": sharing[:3]},
                          f"{fit[2]}, but {', '.join(sharing[:3])} dispatched this cycle take that room")
    return WorkerNote(k, False, "NotPreferred", {**fit[1], "preferred": predicted or ""},
                      f"{fit[2]}; {predicted} was preferred" if predicted else fit[2])


def _fit(c: WorkerCapacity, w: Workload, ask: _Ask) -> tuple[bool, dict[str, Any], str]:
    """Whether ``w`` fits worker ``c`` on its own, the numbers that say so (or the first that
    says not), and them as text. The policy decides; this only words it."""
    lq = f"{w.namespace}/{w.queue}"
    q = c.queue_for(w.namespace, w.queue)
    if q is None:
        return False, {"code": "NoLocalQueue", "localQueue": lq}, \
            f"no LocalQueue {lq} leading to a ClusterQueue there"
    if q.stopped:
        return False, {"code": "QueueStopped", "clusterQueue": q.name}, f"ClusterQueue {q.name} is stopped"
    said = []
    for r, need in sorted(ask.total.items()):
        groups = [flavors for flavors, resources in q.groups if r in resources]
        if not groups:
            return False, {"code": "ResourceNotCovered", "clusterQueue": q.name, "resource": r}, \
                f"ClusterQueue {q.name} covers no {r}"
        best = max(groups[0], key=lambda f: q.free.get((f, r), Fraction(0)))
        free = q.free.get((best, r), Fraction(0))
        details = {"localQueue": lq, "clusterQueue": q.name, "flavor": best, "resource": r,
                   "free": format_quantity(free), "need": format_quantity(need)}
        text = _room_text(q, best, r, lq, need)
        if free < need:
            return False, {"code": "InsufficientQuota", **details}, text
        said.append((free / need, details, text))
    for r, need in sorted(ask.total.items()):
        if c.nodes:
            total, largest = c.nodes.get(r, (Fraction(0), Fraction(0)))
            if total < need:
                return False, {"code": "NodesShort", "resource": r, "free": format_quantity(total),
                               "need": format_quantity(need)}, \
                    f"its nodes have {format_quantity(total)} {r} free in all, needs {format_quantity(need)}"
            if largest < ask.pod[r]:
                return False, {"code": "NodesShort", "resource": r, "largestNode": format_quantity(largest),
                               "podNeeds": format_quantity(ask.pod[r])}, \
                    f"its roomiest node has {format_quantity(largest)} {r} free, a pod needs {format_quantity(ask.pod[r])}"
    if not said:
        return True, {}, "it asks no resources"
    _, details, text = min(said, key=lambda s: s[0])  # the tightest resource says most
    return True, details, text

