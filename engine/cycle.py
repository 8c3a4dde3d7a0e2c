"""One decision cycle: a pure function of snapshot, policy and configuration.

Phases, each timed: build workloads -> compile facts -> decide -> explain -> assemble the plan.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from .compiler import Compiled, compile_facts
from .config import Config
from .explain import decode_reasons
from .facts import render_facts
from .plan import Action, Plan, PodSetAssignment, SolverInfo, WorkloadEntry
from .policy import Policy
from .reasons import INADMISSIBLE_CODES, Reason, make_reason
from .snapshot import Snapshot
from .solver import Decision, Explanation, decide, explain
from .workloads import ADMISSION_GATE, Workload, Workloads, build_workloads

__all__ = ["run_cycle", "compile_snapshot"]

_WAITS_BEHIND_SHOWN = 3


def compile_snapshot(snapshot: Snapshot, config: Config = Config()) -> tuple[Compiled, Workloads]:
    """Phases 1 and 2: the workloads of the snapshot and their facts."""
    built = build_workloads(snapshot, config)
    return compile_facts(snapshot, built.workloads, config), built


def run_cycle(snapshot: Snapshot, policy: Policy, config: Config = Config()) -> Plan:
    """Run one decision cycle and return its plan.

    Raises:
        PolicyError: the policy does not parse or ground.
        SolveError: no plan could be found.
    """
    t0 = time.monotonic()
    compiled, built = compile_snapshot(snapshot, config)
    facts = render_facts(compiled.facts)
    t1 = time.monotonic()
    decision = decide(facts, policy, budget=config.time_budget)
    t2 = time.monotonic()
    explanation = explain(facts, policy, decision, budget=config.time_budget)
    t3 = time.monotonic()

    entries, actions = _assemble(snapshot, built.workloads, compiled, decision, explanation, config)
    actions += [Action("delete-pod", f"{a.pod.namespace}/{a.pod.name}", a.workload,
                       {"reason": a.reason.to_dict()}) for a in built.actions]
    stats = decision.stats
    solver = SolverInfo(
        compile_seconds=t1 - t0, ground_seconds=stats.ground_seconds, solve_seconds=stats.solve_seconds,
        explain_seconds=t3 - t2, total_seconds=time.monotonic() - t0, optimal=stats.optimal,
        budget_seconds=config.time_budget, budget_exhausted=stats.budget_exhausted,
        candidates=len(decision.ranked), choices=stats.choices, conflicts=stats.conflicts,
    )
    return Plan(tuple(entries), tuple(actions), solver, snapshot.digest(), policy.digest(),
                snapshot.notices + built.notices)


def _node_selector(snapshot: Snapshot, flavors: Mapping[str, str]) -> dict[str, str]:
    selector: dict[str, str] = {}
    for flavor in sorted(set(flavors.values())):
        if flavor in snapshot.flavors:
            selector.update(snapshot.flavors[flavor].node_labels)
    return selector


def _ungate_actions(snapshot: Snapshot, w: Workload, admission: tuple[PodSetAssignment, ...]) -> list[Action]:
    out = []
    for a in admission:
        selector = _node_selector(snapshot, a.flavors)
        for pod in w.pods.get(a.name, ()):
            if ADMISSION_GATE in pod.scheduling_gates and pod.phase not in ("Succeeded", "Failed"):
                out.append(Action("ungate", f"{pod.namespace}/{pod.name}", w.key, {"nodeSelector": selector}))
    return out


def _state(reasons: list[Reason]) -> str:
    return "inadmissible" if any(r.code in INADMISSIBLE_CODES for r in reasons) else "pending"


def _assemble(snapshot: Snapshot, workloads: tuple[Workload, ...], compiled: Compiled, decision: Decision,
              explanation: Explanation, config: Config) -> tuple[list[WorkloadEntry], list[Action]]:
    rank = {w: i for i, w in enumerate(decision.ranked)}
    entries: list[WorkloadEntry] = []
    actions: list[Action] = []
    for w in workloads:
        cq = explanation.cluster_queues.get(w.key)
        base = dict(name=w.key, queue=w.queue, cluster_queue=cq, priority=w.priority, origin=w.origin,
                    rank=rank[w.key] + 1 if w.key in rank else None)
        if w.finished:
            entries.append(WorkloadEntry(**base, state="finished", reasons=(make_reason("Finished"),)))
            continue
        if w.admission is not None:
            admission = tuple(PodSetAssignment(a.name, a.count if a.count >= 0 else w.admitted_count(a.name), a.flavors)
                              for a in w.admission.pod_sets)
            entries.append(WorkloadEntry(**base, state="admitted", admission=admission,
                                         reasons=(make_reason("AlreadyAdmitted", clusterQueue=w.admission.cluster_queue or cq),)))
            actions += _ungate_actions(snapshot, w, admission)
            continue
        if w.key in decision.assignments:
            chosen = decision.assignments[w.key]
            admission = tuple(PodSetAssignment(ps.name, ps.count, {r: f for (p, r), f in sorted(chosen.items()) if p == ps.name})
                              for ps in w.pod_sets)
            flavors = sorted({f"{f} ({r})" for (_, r), f in chosen.items()})
            entries.append(WorkloadEntry(**base, state="admitted", admission=admission,
                                         reasons=(make_reason("Admitted", clusterQueue=cq, flavors=flavors),)))
            actions.append(Action("admit", w.key, w.key, {"clusterQueue": cq, "podSets": [a.to_dict() for a in admission]}))
            actions += _ungate_actions(snapshot, w, admission)
            continue
        reasons = list(w.held) + decode_reasons(explanation.reasons.get(w.key, ()), compiled)
        if w.key in decision.fifo_blocked:
            reasons.append(make_reason("StrictFIFOBlocked", head=decision.fifo_blocked[w.key]))
        if w.key in decision.unevaluated:
            reasons.append(make_reason("BudgetExhausted", budgetSeconds=config.time_budget))
        ahead = _waits_behind(w.key, reasons, decision, explanation, rank)
        if ahead:
            reasons.append(make_reason("WaitsBehind", workloads=ahead))
        if not reasons and w.key in rank:
            reasons.append(make_reason("NoCombinedFit"))
        entries.append(WorkloadEntry(**base, state=_state(reasons), reasons=tuple(reasons)))
    return entries, actions


def _waits_behind(key: str, reasons: list[Reason], decision: Decision, explanation: Explanation,
                  rank: Mapping[str, int]) -> list[str]:
    """Workloads admitted this cycle, ranked just before ``key``, that use the quota it lacks."""
    short = {(r.details["flavor"], r.details["resource"]) for r in reasons if r.code == "InsufficientQuota"}
    cq = explanation.cluster_queues.get(key)
    if not short or key not in rank or cq is None:
        return []
    root = explanation.tree_roots.get(cq)
    ahead = [w for w, chosen in decision.assignments.items()
             if rank.get(w, len(rank)) < rank[key]
             and explanation.tree_roots.get(explanation.cluster_queues.get(w, "")) == root
             and any((f, r) in short for (_, r), f in chosen.items())]
    return sorted(ahead, key=lambda w: rank[w], reverse=True)[:_WAITS_BEHIND_SHOWN]
