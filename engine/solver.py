"""The only module that talks to clingo.

It grounds the facts with a policy, admits candidates in rank order, optimizes the flavor
choices, and runs the explanation pass. clingo's errors, unsatisfiability and timeouts become
clueue's own exceptions or flags; models are decoded inside the callbacks into plain Python
values (a clingo ``Model`` must not outlive its callback).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import clingo

from .errors import PolicyError, SolveError
from .facts import defined_directives, value_text
from .policy import Policy

__all__ = ["Term", "Decision", "SolveStats", "Explanation", "decide", "explain"]


@dataclass(frozen=True)
class Term:
    """A decoded ASP function term ``name(args...)``; tuples decode to Python tuples."""

    name: str
    args: tuple[Any, ...] = ()

    def __str__(self) -> str:
        return f"{self.name}({','.join(map(str, self.args))})" if self.args else self.name


def to_python(symbol: clingo.Symbol) -> Any:
    if symbol.type == clingo.SymbolType.Number:
        return symbol.number
    if symbol.type == clingo.SymbolType.String:
        return symbol.string
    if symbol.type == clingo.SymbolType.Function:
        args = tuple(to_python(a) for a in symbol.arguments)
        return args if symbol.name == "" else Term(symbol.name, args)
    return str(symbol)  # #inf / #sup


@dataclass(frozen=True)
class SolveStats:
    ground_seconds: float = 0.0
    solve_seconds: float = 0.0
    checks: int = 0
    optimal: bool = False
    budget_exhausted: bool = False
    cost: tuple[int, ...] = ()


@dataclass(frozen=True)
class Decision:
    """What the decide pass chose.

    ``choices`` maps every admitted workload to its ``(pod set, group, flavor)`` choices;
    ``ranked`` lists the candidates in rank order; ``fifo_blocked`` maps a candidate left out
    by StrictFIFO to the workload that blocked it; ``unevaluated`` are the candidates the
    time budget did not reach.
    """

    choices: Mapping[str, tuple[tuple[str, int, str], ...]]
    assignments: Mapping[str, Mapping[tuple[str, str], str]]
    ranked: tuple[str, ...]
    fifo_blocked: Mapping[str, str]
    unevaluated: tuple[str, ...]
    stats: SolveStats


@dataclass(frozen=True)
class Explanation:
    reasons: Mapping[str, tuple[Any, ...]]  # workload -> decoded reason terms
    tree_roots: Mapping[str, Any]  # ClusterQueue -> root node of its quota tree
    cluster_queues: Mapping[str, str]  # workload -> its ClusterQueue


class _NoExternalCalls:
    """Grounding context without functions: ``@f(...)`` in a policy fails instead of running code."""


class _Messages:
    def __init__(self) -> None:
        self.items: list[str] = []

    def __call__(self, code: clingo.MessageCode, message: str) -> None:
        self.items.append(message.strip())


def _control(arguments: Sequence[str], messages: _Messages) -> clingo.Control:
    return clingo.Control(["--warn=none", "--seed=0", *arguments], logger=messages, message_limit=50)


def _load(ctl: clingo.Control, facts: str, policy: Policy, messages: _Messages) -> None:
    ctl.add("base", [], defined_directives())
    ctl.add("base", [], facts)
    for f in policy.files:
        before = len(messages.items)
        try:
            ctl.add("base", [], f.text)
        except RuntimeError:
            detail = "; ".join(m.replace("<block>", f.path) for m in messages.items[before:]) or "syntax error"
            raise PolicyError(detail) from None


def _ground(ctl: clingo.Control, parts: list[tuple[str, list[clingo.Symbol]]], messages: _Messages) -> None:
    try:
        ctl.ground(parts, context=_NoExternalCalls())
    except RuntimeError:
        raise PolicyError("grounding failed: " + "; ".join(messages.items[-5:])) from None


def _atoms(ctl: clingo.Control, name: str, arity: int) -> Iterable[clingo.SymbolicAtom]:
    return ctl.symbolic_atoms.by_signature(name, arity)


def _solve(ctl: clingo.Control, deadline: float, *, assumptions: Sequence[int] = (),
           on_model: Callable[[clingo.Model], None] | None = None) -> tuple[clingo.SolveResult | None, bool]:
    """Solve until ``deadline``; returns (result, finished). An unfinished solve is cancelled."""
    with ctl.solve(assumptions=list(assumptions), on_model=on_model, async_=True) as handle:
        finished = handle.wait(max(0.0, deadline - time.monotonic()))
        if not finished:
            handle.cancel()
        return handle.get(), finished


def decide(facts: str, policy: Policy, *, budget: float) -> Decision:
    """Admit candidates in rank order, then choose the best flavors for the admitted set.

    Each candidate, in increasing ``rank_key``, is admitted when the program stays satisfiable
    with it and every candidate admitted before it (their flavors may change); otherwise it is
    left out for good. This makes the admitted set lexicographically best in rank order. The
    weak constraints then pick the flavor assignment of that set.

    Raises:
        PolicyError: a policy file does not parse or ground.
        SolveError: the hard constraints fail even when nothing new is admitted.
    """
    start = time.monotonic()
    deadline = start + budget
    messages = _Messages()
    ctl = _control(["--opt-mode=ignore", "--models=1"], messages)
    _load(ctl, facts, policy, messages)
    _ground(ctl, [("base", []), ("decide", [])], messages)
    grounded = time.monotonic()

    keys = {a.symbol.arguments[0].string: a.symbol.arguments[1] for a in _atoms(ctl, "rank_key", 2)}
    candidates = [a.symbol.arguments[0].string for a in _atoms(ctl, "candidate", 1)]
    missing = [w for w in candidates if w not in keys]
    if missing:
        raise PolicyError(f"the policy gives no rank_key/2 to candidate {missing[0]!r}")
    ranked = sorted(candidates, key=lambda w: keys[w])
    groups: dict[str, list[str]] = {}
    for a in _atoms(ctl, "fifo_group", 2):
        groups.setdefault(a.symbol.arguments[0].string, []).append(str(a.symbol.arguments[1]))
    admit_literal = {a.symbol.arguments[0].string: a.literal for a in _atoms(ctl, "admit", 1)}

    result, finished = _solve(ctl, deadline)
    if finished and result is not None and result.unsatisfiable:
        raise SolveError("the policy's hard constraints fail even when nothing new is admitted: "
                         "check the integrity constraints of your policy files")

    blocked_groups: dict[str, str] = {}
    fifo_blocked: dict[str, str] = {}
    unevaluated: list[str] = []
    checks = 0
    exhausted = False
    for w in ranked:
        head = next((blocked_groups[g] for g in groups.get(w, ()) if g in blocked_groups), None)
        lit = admit_literal.get(w)
        if exhausted or time.monotonic() >= deadline:
            exhausted = True
            unevaluated.append(w)
            admitted = False
        elif head is not None or lit is None:
            if head is not None:
                fifo_blocked[w] = head
            admitted = False
        else:
            checks += 1
            result, finished = _solve(ctl, deadline, assumptions=[lit])
            if not finished:
                exhausted = True
                unevaluated.append(w)
            admitted = bool(finished and result is not None and result.satisfiable)
        if lit is not None:
            with ctl.backend() as backend:  # decided for good: later checks build on it
                backend.add_rule([], [-lit] if admitted else [lit])
        if not admitted:
            for g in groups.get(w, ()):
                blocked_groups.setdefault(g, w)

    # Final pass: optimize flavors for the admitted set. If the budget is spent, allow a short
    # grace period to find any model of the (already known satisfiable) admitted set.
    ctl.configuration.solve.opt_mode = "opt"
    ctl.configuration.solve.models = 0
    best: dict[str, Any] = {}

    def on_model(model: clingo.Model) -> None:
        best["symbols"] = [to_python(s) for s in model.symbols(shown=True)]
        best["cost"] = tuple(model.cost)
        best["proven"] = model.optimality_proven

    final_deadline = max(deadline, time.monotonic() + max(1.0, 0.1 * budget))
    result, finished = _solve(ctl, final_deadline, on_model=on_model)
    if "symbols" not in best:
        raise SolveError("no plan found within the time budget; raise --time-budget")
    optimal = finished and not exhausted and (bool(best["proven"]) or not best["cost"] or bool(result and result.exhausted))

    choices: dict[str, list[tuple[str, int, str]]] = {}
    assignments: dict[str, dict[tuple[str, str], str]] = {}
    for t in best["symbols"]:
        if t.name == "admit":
            choices.setdefault(t.args[0], [])
            assignments.setdefault(t.args[0], {})
        elif t.name == "choose":
            choices.setdefault(t.args[0], []).append((t.args[1], t.args[2], t.args[3]))
        elif t.name == "assign":
            assignments.setdefault(t.args[0], {})[(t.args[1], t.args[2])] = t.args[3]
    done = time.monotonic()
    stats = SolveStats(ground_seconds=grounded - start, solve_seconds=done - grounded, checks=checks,
                       optimal=optimal, budget_exhausted=exhausted, cost=best["cost"])
    return Decision({w: tuple(sorted(c)) for w, c in choices.items()}, assignments, tuple(ranked),
                    fifo_blocked, tuple(unevaluated), stats)


def explain(facts: str, policy: Policy, decision: Decision, *, budget: float) -> Explanation:
    """Run the explanation pass with the decision as facts and collect ``reason/2``."""
    messages = _Messages()
    ctl = _control(["--models=1"], messages)
    decided = []
    for w, choices in decision.choices.items():
        decided.append(f"admit({value_text(w)}).")
        decided += [f"choose({value_text(w)},{value_text(ps)},{g},{value_text(f)})." for ps, g, f in choices]
    _load(ctl, facts + "\n".join(decided) + "\n", policy, messages)
    _ground(ctl, [("base", []), ("explain", [])], messages)
    found: dict[str, Any] = {}

    def on_model(model: clingo.Model) -> None:
        found["atoms"] = [to_python(s) for s in model.symbols(atoms=True)
                          if s.name in ("reason", "tree_root", "workload_cq") and len(s.arguments) == 2]

    _solve(ctl, time.monotonic() + budget, on_model=on_model)
    reasons: dict[str, list[Any]] = {}
    roots: dict[str, Any] = {}
    queues: dict[str, str] = {}
    for t in found.get("atoms", []):
        if t.name == "reason":
            reasons.setdefault(t.args[0], []).append(t.args[1])
        elif t.name == "tree_root":
            roots[t.args[0]] = t.args[1]
        else:
            queues[t.args[0]] = t.args[1]
    return Explanation({w: tuple(sorted(r, key=str)) for w, r in reasons.items()}, roots, queues)
