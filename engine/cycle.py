"""One decision cycle: a pure function of snapshot, policy and configuration.

Phases, each timed: build workloads -> select candidates -> compile facts -> decide -> actions.
Deciding repeats, on a longer prefix of the candidates, only if the first prefix could not be
shown to decide the whole backlog (prune.py). The explanation pass and the plan's entries are
made when the entries are first read, unless showing that needed the explanation already.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import operator
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Iterable, Mapping

from .admission_usage import next_sample
from .checks import pod_set_changes, ready, required_checks
from .compiler import Compiled, Units, compile_facts, resource_units
from .config import Config
from .explain import decode_reasons
from .facts import render_facts
from .memo import Memo
from .objects import CheckState, PodSetSpec
from .plan import Action, Entries, Plan, PodSetAssignment, SolverInfo, WorkloadEntry
from .placement import (Assignment, Pins, NodeClasses, assign_nodes, eligible_shapes, first_fit,
                        free_shapes, node_classes, packing_shortage, per_node, shortage)
from .coscheduling import with_coscheduling_queue
from .podgroups import COSCHEDULING_QUEUE, holds, plan_entries
from .podsready import pods_ready_condition, wait_for_pods_ready
from .policy import Policy
from .preemption import Victims
from .fairsharing import with_settings
from .prune import Selection, select_candidates
from .reasons import INADMISSIBLE_CODES, Reason, make_reason
from .kueue_api import ADMISSION_GATE, ROLE_HASH_ANNOTATION
from .snapshot import Snapshot
from .dispatch import Dispatch, dispatch_targets, run_dispatch
from .solver import Decision, Explanation, SolveStats, decide, explain
from .topology import topology_assignment, topology_unfit, unusable
from .workloads import Workload, Workloads, build_workloads

__all__ = ["run_cycle", "Session", "compile_snapshot"]

_WAITS_BEHIND_SHOWN = 3
#: Reasons that rule a flavor out by quota, whatever the nodes (NodesUnfit looks at the others).
_QUOTA_CODES = ("InsufficientQuota", "ExceedsCapacity", "FlavorUnfit")
#: Evictions an admission check calls for (checks.py): only the pods that run are stopped.
_CHECK_EVICTIONS = ("AdmissionCheckRetry", "AdmissionCheckRejected")
_KEY = operator.attrgetter("key")


def compile_snapshot(snapshot: Snapshot, config: Config = Config()) -> tuple[Compiled, Workloads]:
    """The workloads of the snapshot and all their facts (what ``clueue facts`` prints)."""
    snapshot = with_coscheduling_queue(with_settings(snapshot, config))
    built = build_workloads(snapshot, config)
    return compile_facts(snapshot, built.workloads), built


@dataclass(frozen=True)
class _Round:
    """One round over a prefix of the ranked candidates: its decision, and its explanation."""

    decision: Decision
    explained: Callable[[], tuple[Compiled, Explanation]]  # the explanation pass, run once when first called
    proxy: Mapping[str, str]  # ranked candidate -> the workload whose explanation it shares
    stand_in: Mapping[str, str]  # dropped shape member -> the ranked one it shares a decision with
    unsolved: tuple[str, ...]  # ranked candidates beyond the cut, in rank order
    complete: bool  # no candidate beyond the cut could have been admitted
    placed: Assignment | None = None  # the pods of the decision on their nodes (only with Nodes)

    def explainer(self, key: str) -> str:
        """The workload whose explanation ``key`` shares (itself if none)."""
        key = self.stand_in.get(key, key)
        return self.proxy.get(key, key)


def _round(snapshot: Snapshot, selection: Selection, units: Units, cut: Mapping[str, int],
           policy: Policy, deadline: float, memo: Memo, nodes: NodeClasses | None = None) -> _Round:
    solved, beyond = selection.split(cut)
    unsolved = tuple(w.key for w in beyond)
    decision, policy, placed = _placed_decision(snapshot, selection.fixed + tuple(solved), units, policy,
                                                selection.idle_rule_groups, deadline, memo, nodes)

    # Members of a shape share their explanation: a left-out solved one explains the others of
    # its shape; a shape with none left out is explained by its first unsolved member.
    explainer: dict[int, str] = {}
    proxy: dict[str, str] = {}
    for w in solved:
        if w.key not in decision.assignments:
            shape = selection.shape[w.key]
            if shape in explainer:
                proxy[w.key] = explainer[shape]
            else:
                explainer[shape] = w.key
    for key in unsolved:
        shape = selection.shape[key]
        if shape in explainer:
            proxy[key] = explainer[shape]
        else:
            explainer[shape] = key
    explaining = [w for w in selection.fixed + selection.ranked if w.key not in proxy]

    @functools.cache
    def explained() -> tuple[Compiled, Explanation]:
        compiled = compile_facts(snapshot, explaining, units, memo, nodes=nodes)
        # Never less than a grace period: an explanation asked for after the cycle still gets made.
        budget = max(deadline - time.monotonic(), _EXPLAIN_GRACE_SECONDS)
        return compiled, explain(render_facts(compiled.lines), policy, decision, budget=budget)

    # Whether a candidate beyond the cut might have fit: the quota trees' nominal totals
    # usually settle it at once; otherwise the explanation pass knows (might_fit/1): it sees
    # what the others admitted now fit beside, this cycle's victims and what their preemptors
    # will hold (preemption.lp), and a candidate beyond the cut never preempts (prune.py).
    if not selection.unsettled(decision.assignments, decision.preempting, cut):
        return _Round(decision, explained, proxy, selection.stand_in, unsolved, True, placed)
    complete = not {proxy.get(k, k) for k in unsolved} & explained()[1].might_fit
    return _Round(decision, explained, proxy, selection.stand_in, unsolved, complete, placed)


#: Solves of one round at most, each after the node-by-node check refused some (workload, class):
#: beyond them, the workloads whose pods still do not fit are left out of the decision.
_PLACEMENT_SOLVES = 4


def _placed_decision(snapshot: Snapshot, workloads: tuple[Workload, ...], units: Units, policy: Policy,
                     idle: Any, deadline: float, memo: Memo,
                     nodes: NodeClasses | None) -> tuple[Decision, Policy, Assignment | None]:
    """Decide, and with Nodes pack the placed pods node by node (placement.py): where a class
    cannot hold what the solver put there, that class is forbidden to the lowest-ranked workload
    placed there (a nogood, unplaceable/2) and the round solves again; after
    ``_PLACEMENT_SOLVES`` solves, or when the budget left would not hold another solve twice
    over, the lowest-ranked workloads of such classes are left out until the rest fit."""
    refused: list[tuple[str, int]] = []
    by_key = {w.key: w for w in workloads}
    while True:
        started = time.monotonic()
        decided = compile_facts(snapshot, workloads, units, memo, nodes=nodes, unplaceable=refused)
        chosen = policy.for_facts(decided.lines, idle)
        decision = decide(render_facts(decided.lines), chosen, budget=max(0.0, deadline - time.monotonic()))
        if nodes is None:
            return decision, chosen, None
        rank = {w: i for i, w in enumerate(decision.ranked)}
        placed = assign_nodes(nodes, decision.placements, by_key, rank)
        if not placed.failed:
            return decision, chosen, placed
        refused += placed.failed
        # another solve only if the budget holds it twice over: it costs as much as this one did
        if len(refused) >= _PLACEMENT_SOLVES or deadline - time.monotonic() < 2 * (time.monotonic() - started):
            break
    while placed.failed:  # out of solves: leave out the workloads that do not fit, lowest-ranked first
        out = {w for w, _ in placed.failed}
        decision = dataclasses.replace(
            decision, choices={w: c for w, c in decision.choices.items() if w not in out},
            assignments={w: a for w, a in decision.assignments.items() if w not in out},
            placements={w: p for w, p in decision.placements.items() if w not in out})
        placed = assign_nodes(nodes, decision.placements, by_key, rank)
    return decision, chosen, placed


_EXPLAIN_GRACE_SECONDS = 1.0

#: The decision of a cycle in which selection proves that nothing can be admitted or evicted.
_NOTHING = Decision({}, {}, (), {}, {}, (), SolveStats(optimal=True))


def _solve(snapshot: Snapshot, selection: Selection, units: Units, policy: Policy,
           deadline: float, memo: Memo, nodes: NodeClasses | None = None) -> tuple[_Round, int, frozenset[str]]:
    """Solve longer and longer prefixes of the ranked candidates until no candidate beyond
    the cut could have been admitted, or the budget ends. Returns the last round, the number
    of rounds, and the candidates the budget cut short (beyond the cut, and might have fit)."""
    cut, rounds = selection.prefix(), 0
    while True:
        rounds += 1
        # nodes only when there are any: a round without them keeps its original arguments
        done = _round(snapshot, selection, units, cut, policy, deadline, memo, *(() if nodes is None else (nodes,)))
        if done.complete or not done.unsolved or time.monotonic() >= deadline:
            return done, rounds, frozenset() if done.complete else frozenset(done.unsolved)
        cut = selection.grown(cut, 4 ** rounds)


def run_cycle(snapshot: Snapshot, policy: Policy, config: Config = Config(), *, now: int | None = None) -> Plan:
    """Run one decision cycle and return its plan. ``now`` (seconds since the epoch, given by
    the adapter) times what depends on time, such as Incremental dispatch rounds (dispatch.py).

    Raises:
        PolicyError: the policy does not parse or ground.
        SolveError: no plan could be found.
    """
    return _cycle(snapshot, policy, config, Memo(remember=False), now)


class Session:
    """Decision cycles over successive snapshots of one cluster, as a controller runs them.

    ``session.run(snapshot)`` returns the same plan as ``run_cycle(snapshot, policy, config)``,
    but keeps what it derived from the backlog and updates it by the objects that changed since
    the previous cycle (memo.py), so that a cycle over a large, slowly changing backlog costs
    little more than its changes and its solve.

    >>> session = Session(load_policy())                  # doctest: +SKIP
    >>> for snapshot in snapshots: plan = session.run(snapshot)  # doctest: +SKIP
    """

    def __init__(self, policy: Policy, config: Config = Config()) -> None:
        self.policy = policy
        self.config = config
        self._memo = Memo()

    def run(self, snapshot: Snapshot, *, now: int | None = None) -> Plan:
        """Run one decision cycle; see :func:`run_cycle`."""
        self._memo.start(snapshot.configuration())
        try:
            return _cycle(snapshot, self.policy, self.config, self._memo, now)
        except BaseException:
            # A cycle that fails midway may have brought some of what is kept up to date and
            # not the rest: the next cycle starts from nothing rather than from a mix.
            self._memo = Memo()
            raise


def _cycle(snapshot: Snapshot, policy: Policy, config: Config, memo: Memo, now: int | None = None) -> Plan:
    t0 = time.monotonic()
    deadline = t0 + config.time_budget
    snapshot = with_settings(snapshot, config)  # the fair sharing sections in effect (fairsharing.py)
    given = snapshot  # what the plan's digest is of: the built-in queue below is the cycle's own
    snapshot = with_coscheduling_queue(snapshot)  # the queue of PodGroups without one (coscheduling.py)
    built = build_workloads(snapshot, config, memo)
    built, wake_at = wait_for_pods_ready(built, snapshot, now)  # evictions and holds by time (podsready.py)
    selection = select_candidates(snapshot, built, policy, memo)
    units = resource_units(snapshot, selection.fixed + selection.ranked)
    nodes = node_classes(snapshot, selection.fixed + selection.ranked) if snapshot.nodes else None
    held: dict[tuple[str, str], tuple[str, ...]] = {}
    stranded: dict[str, list[tuple[PodSetSpec, dict[str, dict[str, str]]]]] = {}
    if nodes is not None:  # pods admitted before, still gated, take their nodes first
        held, reserved, stranded = _place_held(snapshot, nodes, selection.fixed)
        if reserved:
            nodes = node_classes(snapshot, selection.fixed + selection.ranked, reserved)
    t1 = time.monotonic()

    cut_short: frozenset[str] = frozenset()
    if selection.admits_nothing():
        # Nothing can be admitted or evicted, so the actions need no solve; a controller that
        # only applies them never pays for one. The entries, which say why each workload
        # waits, solve when first read, with a budget of their own.
        def solved_entries() -> tuple[WorkloadEntry, ...]:
            done, _, short = _solve(snapshot, selection, units, policy, time.monotonic() + config.time_budget, memo,
                                    nodes)
            return _entries(built, done, config, short, _unfit(snapshot, nodes, done, stranded), snapshot)
        entries = Entries(solved_entries)
        decision, rounds, unsolved = _NOTHING, 0, len(selection.ranked)
        pinned: Mapping[tuple[str, str], tuple[str, ...]] | None = None if nodes is None else held
    else:
        done, rounds, cut_short = _solve(snapshot, selection, units, policy, deadline, memo, nodes)
        # the node shortages too are worked out only when the entries are read
        entries = Entries(lambda: _entries(built, done, config, cut_short, _unfit(snapshot, nodes, done, stranded),
                                          snapshot))
        decision, unsolved = done.decision, len(done.unsolved)
        pinned = None if done.placed is None else {**held, **done.placed.nodes}
    t2 = time.monotonic()

    # Only these can have actions: the dropped pending workloads are neither admitted nor evicted.
    actions = _actions(snapshot, sorted(selection.fixed + selection.ranked, key=_KEY), decision, pinned)
    actions += _finish_actions(snapshot, built)
    # MultiKueue: the workers each dispatched workload's copies go to (dispatch.py)
    dispatched = _dispatch(snapshot, selection.fixed + selection.ranked, decision, policy, config, now, deadline)
    actions += dispatched.actions
    actions += [Action(a.kind, f"{a.pod.namespace}/{a.pod.name}", a.workload,
                       {"uid": a.pod.uid, "reason": a.reason.to_dict()}) for a in built.actions]
    stats = decision.stats
    solver = SolverInfo(
        compile_seconds=t1 - t0, ground_seconds=stats.ground_seconds, solve_seconds=stats.solve_seconds,
        explain_seconds=t2 - t1 - stats.ground_seconds - stats.solve_seconds,
        total_seconds=time.monotonic() - t0,
        optimal=stats.optimal and not cut_short and dispatched.optimal,
        budget_seconds=config.time_budget,
        budget_exhausted=stats.budget_exhausted or bool(cut_short) or not dispatched.optimal,
        candidates=len(decision.ranked), pruned=len(selection.stand_in) + unsolved,
        rounds=rounds, choices=stats.choices, conflicts=stats.conflicts,
    )
    plan = Plan(entries, tuple(actions), solver, given.digest(memo), policy.digest(),
                snapshot.notices + built.notices + units.notices, snapshot.rejected, dispatch=dispatched.entries,
                wake_at=_earliest(wake_at, next_sample(snapshot, now) if now is not None else None), decided_at=now)
    if not snapshot.pod_groups:
        return plan
    # coscheduling PodGroups: their phases follow from what the plan admits and ungates (podgroups.py)
    groups, due = plan_entries(snapshot, plan, now)
    return dataclasses.replace(plan, pod_groups=groups, wake_at=_earliest(plan.wake_at, due))


def _earliest(*times: int | None) -> int | None:
    """The earliest of ``times`` that are set (None: none is)."""
    return min((t for t in times if t is not None), default=None)


def _dispatch(snapshot: Snapshot, workloads: Iterable[Workload], decision: Decision, policy: Policy,
              config: Config, now: int | None, deadline: float) -> Dispatch:
    """Dispatch what holds quota with a MultiKueue check Pending, reserved now or before; the
    dispatch pass gets what is left of the budget, and never less than a grace period."""
    if not snapshot.multikueue_configs:
        return Dispatch()
    reserved = {w: (decision.cluster_queues.get(w, ""), frozenset(a.values()))
                for w, a in decision.assignments.items() if w not in decision.preempting}
    targets = dispatch_targets(snapshot, workloads, reserved, decision.evicted)
    return run_dispatch(snapshot, targets, policy, config, now=now,
                        budget=max(deadline - time.monotonic(), _EXPLAIN_GRACE_SECONDS))


def _place_held(snapshot: Snapshot, nodes: NodeClasses, workloads: Iterable[Workload]
                ) -> tuple[dict[tuple[str, str], tuple[str, ...]], list[tuple[str, Mapping[str, Fraction]]],
                           dict[str, list[tuple[PodSetSpec, dict[str, dict[str, str]]]]]]:
    """Nodes for the gated pods of workloads admitted before this cycle (an apply interrupted
    between admitting and ungating, docs/placement.md): they hold their quota already, so they
    are placed before anything new, first fit on what the nodes have free, a workload's gated
    pods all or none (those that do not fit stay gated until some do). Returns (workload, pod
    set) -> a node per gated pod, (node, what a pod takes) per pod placed, and for each workload
    whose gated pods found no nodes, its pod sets (as many pods as are gated) and the flavors they
    were admitted in (name -> node labels), for its NodesUnfit reasons."""
    pinned: dict[tuple[str, str], tuple[str, ...]] = {}
    reserved: list[tuple[str, Mapping[str, Fraction]]] = []
    stranded: dict[str, list[tuple[PodSetSpec, dict[str, dict[str, str]]]]] = {}
    free: Mapping[str, Mapping[str, Fraction]] = nodes.node_free
    for w in sorted(workloads, key=lambda w: (-w.priority, w.created, w.key)):
        if w.admission is None or w.finished or w.evict or not ready(w.checks) or w.multikueue:
            continue  # (a MultiKueue workload's pods run in a worker: they take no node here)
        sets = {ps.name: nodes.placed(ps, w.namespace) for ps in w.pod_sets}
        asks = []
        for a in w.held_admission():
            gated = sum(1 for p in w.pods.get(a.name, ()) if ADMISSION_GATE in p.scheduling_gates
                        and p.phase not in ("Succeeded", "Failed"))
            labels = _node_selector(snapshot, a.flavors)
            if gated and labels is not None and a.name in sets:
                asks.append((", ".join(sorted(set(a.flavors.values()))), (sets[a.name], labels, gated)))
        if not asks:
            continue
        found, after = first_fit(nodes, free, [ask for _, ask in asks])
        if all(len(on) == ask[2] for on, (_, ask) in zip(found, asks)):
            free = after
            for on, (_, (ps, _, _)) in zip(found, asks):
                pinned[w.key, ps.name] = tuple(on)
                reserved += [(n, ps.requests) for n in on]
        else:
            stranded[w.key] = [(dataclasses.replace(ps, count=n), {flavor: labels}) for flavor, (ps, labels, n) in asks]
    return pinned, reserved, stranded


def _node_selector(snapshot: Snapshot, flavors: Mapping[str, str]) -> dict[str, str] | None:
    """The node labels of every flavor of a pod set; None when two of them set one label apart,
    so that no node is of all of them."""
    selector: dict[str, str] = {}
    for flavor in sorted(set(flavors.values())):
        for k, v in snapshot.flavors[flavor].node_labels.items() if flavor in snapshot.flavors else ():
            if selector.setdefault(k, v) != v:
                return None
    return selector


def _ungate_actions(snapshot: Snapshot, w: Workload, admission: tuple[PodSetAssignment, ...],
                    pinned: Mapping[tuple[str, str], tuple[str, ...]] | None = None,
                    pins: Pins | None = None) -> list[Action]:
    """Ungate the gated pods of ``w`` with the node labels of their flavors, and each on its node
    (``node``, pinned as :class:`~.placement.Pins` says: by the Node's ``kubernetes.io/hostname``
    label, else ``matchFields`` on its name): ``pinned`` maps (workload, pod set) to a node per
    pod, as placement chose them (None without Nodes: no pod is pinned). With Nodes, a pod
    placement found no node for stays gated."""
    out = []
    pins = pins or (Pins(snapshot) if pinned else None)
    for a in admission:
        selector = _node_selector(snapshot, a.flavors)
        if selector is None:  # an admission inferred from pods started elsewhere: nowhere to start the others
            continue
        # what its Ready admission checks add to its pods (podSetUpdates); a clash keeps them gated
        changes, _ = pod_set_changes(w.checks, a.name, selector)
        if changes is None:
            continue
        extra = changes.details()
        selector = {**selector, **extra.pop("nodeSelector", {})}
        nodes = iter((pinned or {}).get((w.key, a.name), ()))
        for pod in w.pods.get(a.name, ()):
            if ADMISSION_GATE in pod.scheduling_gates and pod.phase not in ("Succeeded", "Failed"):
                node = next(nodes, None)
                if node is None and pinned is not None:
                    continue
                details: dict[str, Any] = {"uid": pod.uid, "nodeSelector": selector, **extra}
                if node is not None and pins is not None:
                    details["node"] = node
                    details["nodeSelector"] = {**selector, **pins.selector(node)}
                    fields = pins.match_fields(node)
                    if fields:  # the Node's hostname label does not name it alone
                        details["matchFields"] = fields
                if pod.role_hash == a.name and ROLE_HASH_ANNOTATION not in pod.annotations:
                    # The pod set is named by the pod's role hash, which covers the nodeSelector
                    # this action extends: record it, or the pod would leave its admitted pod set.
                    details["annotations"] = {**extra.get("annotations", {}), ROLE_HASH_ANNOTATION: a.name}
                out.append(Action("ungate", f"{pod.namespace}/{pod.name}", w.key, details))
    return out


def _new_checks(snapshot: Snapshot, cluster_queue: str | None,
                admission: tuple[PodSetAssignment, ...]) -> tuple[str, ...]:
    """The admission checks a new admission in ``cluster_queue`` with ``admission`` requires:
    with any, the plan only reserves its quota (checks.py)."""
    cq = snapshot.cluster_queues.get(cluster_queue or "")
    return required_checks(cq, {f for a in admission for f in a.flavors.values()})


def _check_reasons(snapshot: Snapshot, w: Workload) -> tuple[Reason, ...]:
    """Why a workload holding quota is not running yet because of its admission checks: one
    not Ready, or Ready checks asking to change its pods in ways that clash."""
    assert w.admission is not None
    waiting = [] if w.confirmed else [c for c in w.checks if c.state != "Ready"]
    if waiting:
        return (make_reason("WaitingForAdmissionChecks", clusterQueue=w.admission.cluster_queue,
                            checks=[c.name for c in waiting], states=[c.state for c in waiting],
                            messages=[c.message for c in waiting]),)
    out = []
    for a in w.admission.pod_sets:
        selector = _node_selector(snapshot, a.flavors)
        _, why = pod_set_changes(w.checks, a.name, selector or {})
        if why:
            out.append(make_reason("PodSetUpdateConflict", why=why))
    return tuple(out)


def _remote_reasons(w: Workload) -> tuple[Reason, ...]:
    """``RunsInWorker`` for a MultiKueue workload admitted in a worker (its check Ready, the
    worker in ``status.clusterName``): its pods here stay gated."""
    if not (w.multikueue and w.cluster_name and (w.confirmed or ready(w.checks))):
        return ()
    return (make_reason("RunsInWorker", worker=w.cluster_name, admissionCheck=w.multikueue),)


def _state(reasons: tuple[Reason, ...]) -> str:
    return "inadmissible" if any(r.code in INADMISSIBLE_CODES for r in reasons) else "pending"


def _admission(w: Workload, chosen: Mapping[tuple[str, str], str], snapshot: Snapshot | None = None,
               pinned: Mapping[tuple[str, str], tuple[str, ...]] | None = None) -> tuple[PodSetAssignment, ...]:
    """The pod sets of ``w`` with the flavors chosen for them: (pod set, resource) -> flavor; with
    the ``snapshot`` and the node of each pod (``pinned``: placement), the topology assignment of
    each pod set in a flavor with a Topology (topology.py)."""
    out = []
    for ps in w.pod_sets:
        flavors = {r: f for (p, r), f in sorted(chosen.items()) if p == ps.name}
        topology = topology_assignment(snapshot, flavors, pinned.get((w.key, ps.name), ())) \
            if snapshot is not None and pinned else None
        out.append(PodSetAssignment(ps.name, ps.count, flavors, topology))
    return tuple(out)


def _preempting(decision: Decision, key: str) -> Reason:
    """Why ``key``, admitted in the decision, waits: the victims it counts on."""
    return make_reason("Preempting", clusterQueue=decision.cluster_queues.get(key),
                       victims=sorted(v for p, v in decision.preempts if p == key))


def _finish_actions(snapshot: Snapshot, built: Workloads) -> list[Action]:
    """``finish`` for each finished workload of pods whose Workload object exists and is not
    ``Finished`` yet (a Workload someone else made is theirs to finish, but for the prebuilt
    Workload its pods name: Kueue's pod integration finishes that one too)."""
    out = []
    for w in built.by_key.values():  # not built.workloads: a controller never pays for sorting them all
        obj = snapshot.workloads.get(w.key) if w.finished and (w.origin != "workload" or w.prebuilt) else None
        # KEP-976 ties Finished to the admitted count: a group never admitted did not run as a
        # workload, whatever its pods' phases say (a stop by retriable-in-group: false still ends it)
        never = obj is not None and w.origin == "pod-group" and obj.admission is None \
            and w.finish.get("succeeded", 0) >= w.finish.get("total", 0)
        if obj is not None and not obj.finished and not never:
            out.append(Action("finish", w.key, w.key, {"reason": make_reason("Finished", **w.finish).to_dict()}))
    return sorted(out, key=lambda a: a.target)


def _actions(snapshot: Snapshot, workloads: Iterable[Workload], decision: Decision,
             pinned: Mapping[tuple[str, str], tuple[str, ...]] | None = None) -> list[Action]:
    """What to do in the cluster, in workload order: evict the victims of preemption, admit what
    was decided (but the workloads waiting for those victims) and ungate the pods of every
    admitted workload."""
    actions: list[Action] = []
    workloads = list(workloads)
    victims = Victims(snapshot, workloads, decision)
    pins = Pins(snapshot) if pinned else None  # how a pod is pinned to each node (placement.py)
    for w in workloads:
        if w.finished:
            continue
        if w.key in decision.evicted or w.evict:
            reason = w.evict or victims.reason(w.key)
            by = sorted(p for p, v in decision.preempts if v == w.key)  # Kueue's Preempted reason needs their queues
            pods = w.pod_refs
            # as Kueue stops pods: those still gated stay, queued again (a MultiKueue workload's
            # pods here are all gated: they run in a worker, whose copy MultiKueue deletes)
            if reason.code in _CHECK_EVICTIONS or w.multikueue:
                pods = tuple(sorted((p.name, p.uid) for ps in w.pods.values() for p in ps
                                    if ADMISSION_GATE not in p.scheduling_gates and p.phase not in ("Succeeded", "Failed")))
            actions.append(Action("preempt", w.key, w.key, {"reason": reason.to_dict(),
                                                            "pods": [{"name": n, "uid": u} for n, u in pods],
                                                            "preemptorClusterQueues": {
                                                                p: decision.cluster_queues.get(p) for p in by},
                                                            "borrowing": [p for p in by if p in victims.borrowing]}))
        elif w.admission is not None:
            if not (w.confirmed or ready(w.checks)):
                continue  # quota reserved: its pods wait for its admission checks
            if w.checks and not w.confirmed:  # every check Ready: admitted, then its pods ungated
                actions.append(Action("complete-admission", w.key, w.key, {
                    "clusterQueue": w.admission.cluster_queue, "admissionChecks": [c.name for c in w.checks]}))
            if not w.multikueue:  # a MultiKueue workload's pods run in its worker: here they stay gated
                actions += _ungate_actions(snapshot, w, w.held_admission(), pinned, pins)
        elif w.key in decision.assignments and w.key not in decision.preempting:
            admission = _admission(w, decision.assignments[w.key], snapshot, pinned)
            details = {"clusterQueue": decision.cluster_queues.get(w.key), "podSets": [a.to_dict() for a in admission]}
            nodes = {ps.name: list(pinned[w.key, ps.name]) for ps in w.pod_sets if (w.key, ps.name) in (pinned or {})}
            if nodes:  # placement on nodes (docs/placement.md): pod set -> a node per pod
                details["nodes"] = nodes
            checks = _new_checks(snapshot, details["clusterQueue"], admission)
            if checks:  # only its quota is reserved: its checks start Pending, its pods stay gated
                details["admissionChecks"] = list(checks)
            actions.append(Action("admit", w.key, w.key, details))
            if not checks:
                actions += _ungate_actions(snapshot, w, admission, pinned, pins)
    return actions


def _unfit(snapshot: Snapshot, nodes: NodeClasses | None, done: _Round,
           stranded: Mapping[str, list[tuple[PodSetSpec, dict[str, dict[str, str]]]]] = {}) -> Callable[[Workload, tuple[Reason, ...]], tuple[Reason, ...]] | None:
    """With Nodes: why a pending workload's pods do not fit on the nodes left free by this
    cycle's placements: a ``NodesUnfit`` reason per pod set that fits with none of its
    ClusterQueue's flavors that quota does not already rule out (by the reasons given so far),
    or, if each fits alone, for the one that does not fit beside the others; for a workload
    admitted before, why its gated pods found no nodes (``stranded``: :func:`_place_held`);
    None without Nodes."""
    if nodes is None or done.placed is None:
        return None
    shapes = free_shapes(nodes, done.placed.free)
    # what InQueue PodGroups hold of the nodes (podgroups.py), said beside every node shortage
    text = holds(snapshot).nodes_text()
    held = {"reserved": text} if text else {}

    def unfit(w: Workload, reasons: tuple[Reason, ...] = ()) -> tuple[Reason, ...]:
        if w.admission is not None:
            return tuple(make_reason("NodesUnfit", **d) for ps, flavor in stranded.get(w.key, ())
                         for d in [shortage(shapes, ps, flavor)] if d is not None)
        lq = snapshot.local_queues.get(f"{w.namespace}/{w.queue}")
        cq = snapshot.cluster_queues.get(lq.cluster_queue) if lq else None
        names = {fq.flavor for g in cq.resource_groups for fq in g.flavors} if cq else set()
        flavors = {f: snapshot.flavors[f].node_labels for f in names if f in snapshot.flavors} or {"": {}}
        # a flavor quota rules out is explained by that: the nodes of the others are why it waits
        ruled_out = {r.details.get("flavor") for r in reasons if r.code in _QUOTA_CODES}
        flavors = {f: labels for f, labels in flavors.items() if f not in ruled_out}
        if not flavors:
            return ()
        out = []
        pod_sets = [nodes.placed(ps, w.namespace) for ps in w.pod_sets if ps.count > 0]
        for ps in pod_sets:
            # topology-aware scheduling (topology.py): only the flavors the pod set may use count
            usable = {f: labels for f, labels in flavors.items() if unusable(snapshot, ps, f) is None}
            details = shortage(shapes, ps, usable) if usable else None
            if details is not None:
                out.append(make_reason("NodesUnfit", **_shown(details), **held))
                continue
            fits = {f: [(c.labels, per_node(ps.requests, free, ps.count), k)
                        for c, free, k in eligible_shapes(shapes, ps, labels)] for f, labels in flavors.items()}
            details = topology_unfit(snapshot, ps, fits)
            if details is not None:
                out.append(make_reason("TopologyUnfit", **_shown(details)))
        if not out and len(pod_sets) > 1:  # each fits alone: do they fit together?
            details = packing_shortage(nodes, done.placed.free, pod_sets, flavors)
            if details is not None:
                out.append(make_reason("NodesUnfit", **_shown(details), **held))
        return tuple(out)
    return unfit


def _shown(details: dict[str, Any]) -> dict[str, Any]:
    """A node shortage's ``details``, naming no flavor where it is the built-in queue's
    (coscheduling.py): that is no flavor a user chose."""
    return {**details, "flavor": ""} if details.get("flavor") == COSCHEDULING_QUEUE else details


def _entries(built: Workloads, done: _Round, config: Config, cut_short: frozenset[str],
             unfit: Callable[[Workload, tuple[Reason, ...]], tuple[Reason, ...]] | None = None, snapshot: Snapshot = Snapshot()) -> tuple[WorkloadEntry, ...]:
    """Every plan entry, in workload order. A workload shares the explanation of its
    ``done.explainer`` (same shape, same decision); reasons that depend on its own rank are its own."""
    decision = done.decision
    compiled, explanation = done.explained()
    rank = {w: i for i, w in enumerate(decision.ranked)}
    shared: dict[str, tuple[str, tuple[Reason, ...]]] = {}  # explained workload -> (state, reasons)
    entries: dict[str, WorkloadEntry] = {}
    victims = Victims(snapshot, built.workloads, decision)
    for w in built.workloads:
        if w.key in done.proxy or w.key in done.stand_in:
            continue
        cq = explanation.cluster_queues.get(w.key)
        base = dict(name=w.key, queue=w.queue, cluster_queue=cq, priority=w.priority, origin=w.origin,
                    rank=rank[w.key] + 1 if w.key in rank else None, pod_sets=w.requests, pods=w.pod_refs)
        if w.finished:
            entries[w.key] = WorkloadEntry(**base, state="finished", reasons=(make_reason("Finished", **w.finish),))
        elif w.key in decision.evicted or w.evict:
            reason = w.evict or victims.reason(w.key)
            entries[w.key] = WorkloadEntry(**base, state=_state((reason,)), reasons=(reason,))
        elif w.admission is not None:
            waiting = _check_reasons(snapshot, w) if w.checks else ()
            already = () if waiting and waiting[0].code == "WaitingForAdmissionChecks" else (
                make_reason("AlreadyAdmitted", clusterQueue=w.admission.cluster_queue or cq),)
            entries[w.key] = WorkloadEntry(**base, state="admitted", admission=w.held_admission(),
                reasons=already + waiting + _remote_reasons(w) + w.kept_gated
                + (unfit(w) if unfit is not None else ()),
                reclaimable=w.succeeded() if w.origin != "workload" else (), admission_checks=w.checks,
                confirmed=w.confirmed)
        elif w.key in decision.preempting:
            entries[w.key] = WorkloadEntry(**base, state="pending", reasons=(_preempting(decision, w.key),))
        elif w.key in decision.assignments:
            chosen = decision.assignments[w.key]
            flavors = sorted({f"{f} ({r})" for (_, r), f in chosen.items()})
            admission = _admission(w, chosen, snapshot, done.placed.nodes if done.placed is not None else None)
            checks = _new_checks(snapshot, cq, admission)
            reason = make_reason("QuotaReserved", clusterQueue=cq, flavors=flavors, checks=list(checks)) if checks \
                else make_reason("Admitted", clusterQueue=cq, flavors=flavors)
            entries[w.key] = WorkloadEntry(**base, state="admitted", admission=admission, reasons=(reason,),
                                           admission_checks=tuple(CheckState(c, "Pending") for c in checks))
        else:
            reasons = tuple(w.held) + tuple(decode_reasons(explanation.reasons.get(w.key, ()), compiled))
            if unfit is not None and not w.held and _state(reasons) == "pending":
                reasons += unfit(w, reasons)
            if w.key in decision.unevaluated or (w.key in cut_short and w.key in explanation.might_fit):
                reasons += (make_reason("BudgetExhausted", budgetSeconds=config.time_budget),)
            shared[w.key] = (_state(reasons), reasons)

    ahead = _AdmittedAhead(decision, explanation, rank, built.by_key)
    fifo = _FifoHeads(decision, explanation, done.proxy, done.unsolved)
    for w in built.workloads:
        if w.key in entries:
            continue
        explainer = done.explainer(w.key)
        state, reasons = shared[explainer]
        extra = []
        head = fifo.head(w.key, explainer)
        if head is not None:
            extra.append(make_reason("StrictFIFOBlocked", head=head))
        if state == "pending":
            behind = ahead.before(w.key, explainer, reasons)
            if behind:
                extra.append(ahead.reason(behind))
            reasons, eviction = ahead.eviction(explainer, reasons)
            if eviction is not None:
                extra.append(eviction)
        if not reasons and not extra and explainer in explanation.might_fit:
            extra.append(make_reason("NoCombinedFit"))  # nothing else explains it
        entries[w.key] = WorkloadEntry(
            name=w.key, queue=w.queue, cluster_queue=explanation.cluster_queues.get(explainer), priority=w.priority,
            origin=w.origin, rank=rank[w.key] + 1 if w.key in rank else None, pod_sets=w.requests,
            pods=w.pod_refs, state=state, reasons=reasons + tuple(extra) if extra else reasons)
    return _with_pods_ready(tuple(entries[w.key] for w in built.workloads), built, snapshot)


def _with_pods_ready(entries: tuple[WorkloadEntry, ...], built: Workloads, snapshot: Snapshot
                     ) -> tuple[WorkloadEntry, ...]:
    """``entries`` with the PodsReady condition apply records under waitForPodsReady (podsready.py)."""
    if snapshot.kueue_settings.wait_for_pods_ready is None:
        return entries
    return tuple(dataclasses.replace(e, pods_ready=pods_ready_condition(
        built.by_key[e.name], snapshot.workloads.get(e.name), e.state == "admitted")) if e.name in built.by_key else e
        for e in entries)


class _FifoHeads:
    """For StrictFIFO queues: the left-out workload that blocks the ones ranked after it."""

    def __init__(self, decision: Decision, explanation: Explanation, proxy: Mapping[str, str],
                 unsolved: tuple[str, ...]) -> None:
        self.decision = decision
        self.solved = set(decision.ranked)
        self.groups = explanation.fifo_groups
        self.proxy = proxy
        self.head_of_group = {group: head for head, group in decision.fifo_head_of.items()}
        for key in unsolved:  # no solved member left out: the first unsolved one is the head
            group = self.groups.get(proxy.get(key, key))
            if group is not None:
                self.head_of_group.setdefault(group, key)

    def head(self, key: str, explainer: str) -> str | None:
        if key in self.decision.fifo_blocked:
            return self.decision.fifo_blocked[key]
        if key in self.solved:
            return None
        head = self.head_of_group.get(self.groups.get(explainer, ""))
        return None if head == key else head


class _AdmittedAhead:
    """Workloads admitted this cycle by quota tree and rank, to name who a workload waits behind,
    and the preemptions under way in each tree, to name what it waits for instead.

    Solved workloads compare by the solver's rank; others (only ever left out of the solve
    under the built-in ordering) by that ordering's key: priority, creation time, name.
    """

    def __init__(self, decision: Decision, explanation: Explanation, rank: Mapping[str, int],
                 workloads: Mapping[str, Workload]) -> None:
        self.rank = rank
        self.workloads = workloads
        self.preempting = decision.preempting
        self.by_tree: dict[Any, list[tuple[int, str, frozenset[tuple[str, str]], tuple[int, int, str]]]] = {}
        # preemptions under way, by tree: (preemptor, its victims, the quota it takes); a preemptor
        # is not admitted yet, so no one waits behind it: they wait for the eviction (issue 24)
        self.evicting: dict[Any, list[tuple[str, list[str], frozenset[tuple[str, str]]]]] = {}
        for w, chosen in decision.assignments.items():
            tree = explanation.tree_roots.get(explanation.cluster_queues.get(w, ""))
            used = frozenset((f, r) for (_, r), f in chosen.items())
            if w in decision.preempting:
                victims = sorted(v for p, v in decision.preempts if p == w)
                self.evicting.setdefault(tree, []).append((w, victims, used))
                continue
            self.by_tree.setdefault(tree, []).append((rank.get(w, len(rank)), w, used, self._key(w)))
        for admitted in self.by_tree.values():
            admitted.sort(reverse=True)
        self.tree_of = {w: explanation.tree_roots.get(q) for w, q in explanation.cluster_queues.items()}
        self.closest: dict[str, tuple[str, ...]] = {}  # explainer -> who all its followers wait behind
        self.short: dict[str, frozenset[tuple[str, str]]] = {}
        self.reasons: dict[tuple[str, ...], Reason] = {}

    def _key(self, key: str) -> tuple[int, int, str]:
        w = self.workloads[key]
        return (-w.priority, w.created, w.key)

    def before(self, key: str, explainer: str, reasons: tuple[Reason, ...]) -> tuple[str, ...]:
        """Up to three admitted workloads ranked just before ``key`` that use quota it lacks."""
        if explainer not in self.short:
            self.short[explainer] = frozenset((r.details["flavor"], r.details["resource"])
                                              for r in reasons if r.code == "InsufficientQuota")
        short = self.short[explainer]
        if not short:
            return ()
        admitted = self.by_tree.get(self.tree_of.get(explainer), ())
        if key in self.rank:
            ahead = (w for r, w, used, _ in admitted if r < self.rank[key] and used & short)
        else:
            mine = self._key(key)
            if admitted and admitted[0][3] < mine:  # ranked after every admitted one: a common answer
                return self._after_all(explainer, short)
            ahead = (w for _, w, used, theirs in admitted if theirs < mine and used & short)
        return tuple(itertools.islice(ahead, _WAITS_BEHIND_SHOWN))

    def eviction(self, explainer: str, reasons: tuple[Reason, ...]) -> tuple[tuple[Reason, ...], Reason | None]:
        """With a preemption under way in the tree of ``explainer``: its reasons without the
        shortages of quota the preemptors take (what is free there is decided again once the
        victims are gone), and the PreemptionInProgress reason; else ``reasons`` and None."""
        evicting = self.evicting.get(self.tree_of.get(explainer))
        if not evicting:
            return reasons, None
        taken = frozenset().union(*(used for _, _, used in evicting))
        kept = tuple(r for r in reasons if r.code != "InsufficientQuota"
                     or (r.details["flavor"], r.details["resource"]) not in taken)
        return kept, make_reason("PreemptionInProgress", preemptors=[p for p, _, _ in evicting],
                                 victims=sorted({v for _, vs, _ in evicting for v in vs}))

    def reason(self, behind: tuple[str, ...]) -> Reason:
        """The WaitsBehind reason naming ``behind``: one object for all who wait behind them."""
        if behind not in self.reasons:
            self.reasons[behind] = make_reason("WaitsBehind", workloads=list(behind),
                                               preempting=[w for w in behind if w in self.preempting])
        return self.reasons[behind]

    def _after_all(self, explainer: str, short: frozenset[tuple[str, str]]) -> tuple[str, ...]:
        if explainer not in self.closest:
            ahead = (w for _, w, used, _ in self.by_tree.get(self.tree_of.get(explainer), ()) if used & short)
            self.closest[explainer] = tuple(itertools.islice(ahead, _WAITS_BEHIND_SHOWN))
        return self.closest[explainer]
