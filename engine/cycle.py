"""One decision cycle: a pure function of snapshot, policy and configuration.

Phases, each timed: build workloads -> compile facts -> decide -> explain -> assemble the plan.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import replace
from typing import Any, Mapping

from .compiler import Compiled, compile_facts
from .config import Config
from .explain import decode_reasons
from .prune import prune_candidates
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
    built = build_workloads(snapshot, config)
    pruned = prune_candidates(snapshot, built.workloads, policy)
    compiled = compile_facts(snapshot, pruned.kept, config)
    facts = render_facts(compiled.facts)
    t1 = time.monotonic()
    decision = decide(facts, policy, budget=config.time_budget)
    t2 = time.monotonic()
    proxy = {**pruned.stand_in, **pruned.explained_by(decision.assignments)}
    for key, target in proxy.items():  # a pruned one's stand-in may share another's explanation
        proxy[key] = proxy.get(target, target)
    explained_facts = render_facts(compiled.without(set(proxy))) if proxy else facts
    explanation = explain(explained_facts, policy, decision, budget=config.time_budget)
    t3 = time.monotonic()

    entries, actions = _assemble(snapshot, built.workloads, compiled, decision, explanation, config, proxy)
    actions += [Action("delete-pod", f"{a.pod.namespace}/{a.pod.name}", a.workload,
                       {"reason": a.reason.to_dict()}) for a in built.actions]
    stats = decision.stats
    solver = SolverInfo(
        compile_seconds=t1 - t0, ground_seconds=stats.ground_seconds, solve_seconds=stats.solve_seconds,
        explain_seconds=t3 - t2, total_seconds=time.monotonic() - t0, optimal=stats.optimal,
        budget_seconds=config.time_budget, budget_exhausted=stats.budget_exhausted,
        candidates=len(decision.ranked), pruned=len(pruned.stand_in), choices=stats.choices,
        conflicts=stats.conflicts,
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
              explanation: Explanation, config: Config, proxy: Mapping[str, str]) -> tuple[list[WorkloadEntry], list[Action]]:
    """Plan entries and actions. A workload in ``proxy`` shares the explanation of the one it
    maps to (same shape, same decision); reasons that depend on its own rank are its own."""
    rank = {w: i for i, w in enumerate(decision.ranked)}
    ahead = _AdmittedAhead(decision, explanation, rank, {w.key: w for w in workloads})
    entries: dict[str, WorkloadEntry] = {}
    actions: list[Action] = []
    for w in workloads:
        if w.key in proxy:
            continue
        cq = explanation.cluster_queues.get(w.key)
        base = dict(name=w.key, queue=w.queue, cluster_queue=cq, priority=w.priority, origin=w.origin,
                    rank=rank[w.key] + 1 if w.key in rank else None)
        if w.finished:
            entries[w.key] = WorkloadEntry(**base, state="finished", reasons=(make_reason("Finished"),))
            continue
        if w.admission is not None:
            admission = tuple(PodSetAssignment(a.name, a.count if a.count >= 0 else w.admitted_count(a.name), a.flavors)
                              for a in w.admission.pod_sets)
            entries[w.key] = WorkloadEntry(**base, state="admitted", admission=admission, reasons=(
                make_reason("AlreadyAdmitted", clusterQueue=w.admission.cluster_queue or cq),))
            actions += _ungate_actions(snapshot, w, admission)
            continue
        if w.key in decision.assignments:
            chosen = decision.assignments[w.key]
            admission = tuple(PodSetAssignment(ps.name, ps.count, {r: f for (p, r), f in sorted(chosen.items()) if p == ps.name})
                              for ps in w.pod_sets)
            flavors = sorted({f"{f} ({r})" for (_, r), f in chosen.items()})
            entries[w.key] = WorkloadEntry(**base, state="admitted", admission=admission,
                                           reasons=(make_reason("Admitted", clusterQueue=cq, flavors=flavors),))
            actions.append(Action("admit", w.key, w.key, {"clusterQueue": cq, "podSets": [a.to_dict() for a in admission]}))
            actions += _ungate_actions(snapshot, w, admission)
            continue
        reasons = list(w.held) + decode_reasons(explanation.reasons.get(w.key, ()), compiled)
        if w.key in decision.unevaluated:
            reasons.append(make_reason("BudgetExhausted", budgetSeconds=config.time_budget))
        if not reasons and w.key in rank:
            reasons.append(make_reason("NoCombinedFit"))
        entries[w.key] = WorkloadEntry(**base, state=_state(reasons), reasons=tuple(reasons))
    for w in workloads:
        if w.key in proxy:
            entries[w.key] = replace(entries[proxy[w.key]], name=w.key,
                                     rank=rank[w.key] + 1 if w.key in rank else None)
    for key, entry in entries.items():  # reasons that depend on the workload's own rank
        extra = []
        head = decision.fifo_blocked.get(key)
        if head is None and key not in rank and proxy.get(key) in decision.fifo_head_of:
            head = decision.fifo_blocked.get(proxy[key], proxy[key])
        elif head is None and key not in rank and proxy.get(key) in decision.fifo_blocked:
            head = decision.fifo_blocked[proxy[key]]
        if head is not None:
            extra.append(make_reason("StrictFIFOBlocked", head=head))
        if entry.state == "pending":
            behind = ahead.before(key, entry, proxy.get(key))
            if behind:
                extra.append(make_reason("WaitsBehind", workloads=behind))
        if extra:
            entries[key] = replace(entry, reasons=entry.reasons + tuple(extra))
    return [entries[w.key] for w in workloads], actions


class _AdmittedAhead:
    """Workloads admitted this cycle, by quota tree and rank, to name who a workload waits behind.

    Solved workloads compare by the solver's rank; a pruned one (only ever with the built-in
    ordering) by that ordering's key: priority, creation time, name.
    """

    def __init__(self, decision: Decision, explanation: Explanation, rank: Mapping[str, int],
                 workloads: Mapping[str, Workload]) -> None:
        self.rank = rank
        self.workloads = workloads
        self.by_tree: dict[Any, list[tuple[int, str, frozenset[tuple[str, str]]]]] = {}
        for w, chosen in decision.assignments.items():
            tree = explanation.tree_roots.get(explanation.cluster_queues.get(w, ""))
            used = frozenset((f, r) for (_, r), f in chosen.items())
            self.by_tree.setdefault(tree, []).append((rank.get(w, len(rank)), w, used))
        for admitted in self.by_tree.values():
            admitted.sort(reverse=True)
        self.tree_of = {w: explanation.tree_roots.get(q) for w, q in explanation.cluster_queues.items()}

    def _key(self, key: str) -> tuple[int, int, str]:
        w = self.workloads[key]
        return (-w.priority, w.created, w.key)

    def before(self, key: str, entry: WorkloadEntry, proxy: str | None) -> list[str]:
        """Up to three admitted workloads ranked just before ``key`` that use quota it lacks."""
        short = {(r.details["flavor"], r.details["resource"]) for r in entry.reasons if r.code == "InsufficientQuota"}
        if not short:
            return []
        admitted = self.by_tree.get(self.tree_of.get(proxy or key), ())
        if key in self.rank:
            ahead = (w for r, w, used in admitted if r < self.rank[key] and used & short)
        else:
            mine = self._key(key)
            ahead = (w for _, w, used in admitted if self._key(w) < mine and used & short)
        return list(itertools.islice(ahead, _WAITS_BEHIND_SHOWN))
