"""The only module that talks to clingo.

It grounds the facts with a policy, admits candidates in rank order, optimizes the flavor
choices, and runs the explanation pass. clingo's errors, unsatisfiability and timeouts become
clueue's own exceptions or flags; models are decoded inside the callbacks into plain Python
values (a clingo ``Model`` must not outlive its callback).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import clingo
import clingo.ast as _ast

from .errors import PolicyError, SnapshotError, SolveError
from .facts import defined_directives, value_text
from .kueue_api import HOSTNAME_LABEL
from .line import given_back_facts, in_line
from .policy import Policy, PolicyFile

__all__ = ["Term", "Decision", "SolveStats", "Explanation", "decide", "explain", "nominate"]


@dataclass(frozen=True)
class Term:
    """A decoded ASP function term ``name(args...)``; tuples decode to Python tuples."""

    name: str
    args: tuple[Any, ...] = ()

    def __str__(self) -> str:
        return f"{self.name}({','.join(map(str, self.args))})" if self.args else self.name


# Reading a symbol goes through clingo's C API one property at a time (``type``, ``arguments``,
# ``string``, ...), each call costing about a microsecond of Python. The same workload, queue and
# flavor names recur in many atoms and in every model, so the decoders below memoize per symbol:
# a dict lookup costs one hash call. Symbols are immutable values, so a cached entry never goes stale.
_NUMBER, _STRING, _FUNCTION = clingo.SymbolType.Number, clingo.SymbolType.String, clingo.SymbolType.Function


class _Values(dict):
    """Memo of the Python value of symbols: an int, a str, a tuple or a :class:`Term` (#inf/#sup
    as text); arguments are memoized too."""

    def __missing__(self, symbol: clingo.Symbol) -> Any:
        kind = symbol.type  # read once: every read is a call into clingo
        if kind == _NUMBER:
            value: Any = symbol.number
        elif kind == _STRING:
            value = symbol.string
        elif kind == _FUNCTION:
            args = tuple(self[a] for a in symbol.arguments)
            name = symbol.name
            value = args if name == "" else Term(name, args)
        else:
            value = str(symbol)  # #inf / #sup
        self[symbol] = value
        return value


class _Strings(dict):
    """Memo of ``Symbol.string``: like it, fails on a symbol that is not a string."""

    def __missing__(self, symbol: clingo.Symbol) -> str:
        text = self[symbol] = symbol.string
        return text


class _FactSymbols(dict):
    """Memo of the symbol of a fact, by its text ``pred(args).``"""

    def __missing__(self, text: str) -> clingo.Symbol:
        try:
            symbol = self[text] = clingo.parse_term(text.rstrip().removesuffix("."))
        except (RuntimeError, UnicodeError):  # clingo reads C strings: no NUL, no lone surrogate
            raise SnapshotError(f"clingo cannot read a text of the snapshot (it holds a NUL character or an "
                                f"invalid code point): {text.strip()!r}") from None
        return symbol


_MEMOS = (_Strings(), _Values(), _FactSymbols())
_REMEMBERED_AT_MOST = 1 << 17  # symbols and facts remembered, across cycles


def _memos() -> tuple[_Strings, _Values, _FactSymbols]:
    """The decoders of symbols and the symbols of facts, shared by all cycles: clingo keeps
    symbols for the whole process, and a controller meets the same names and facts in cycle
    after cycle. Emptied when they grow large."""
    if sum(map(len, _MEMOS)) > _REMEMBERED_AT_MOST:
        for memo in _MEMOS:
            memo.clear()
    return _MEMOS


@dataclass(frozen=True)
class SolveStats:
    ground_seconds: float = 0.0
    solve_seconds: float = 0.0
    choices: int = 0
    conflicts: int = 0
    optimal: bool = False
    budget_exhausted: bool = False


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
    fifo_head_of: Mapping[str, str]  # the first left-out member of a StrictFIFO group -> the group
    unevaluated: tuple[str, ...]
    stats: SolveStats
    draws: tuple[str, ...] = ()  # draw/4 atoms of the decision, as ASP text, for the explanation
    cluster_queues: Mapping[str, str] = field(default_factory=dict)  # workload -> its ClusterQueue
    evicted: frozenset[str] = frozenset()  # admitted workloads preempted this cycle (evict/1)
    preempting: frozenset[str] = frozenset()  # admitted in the decision, but waiting for those victims
    preempts: frozenset[tuple[str, str]] = frozenset()  # (preempting, evicted) it counts on (preempts/2)
    # admitted workload -> (pod set, node class, pods) placed there (place/4; only with Nodes)
    placements: Mapping[str, tuple[tuple[str, int, int], ...]] = field(default_factory=dict)
    trees: Mapping[str, str] = field(default_factory=dict)  # ClusterQueue -> the root of its quota tree


@dataclass(frozen=True)
class Explanation:
    reasons: Mapping[str, tuple[Any, ...]]  # workload -> decoded reason terms
    tree_roots: Mapping[str, Any]  # ClusterQueue -> root node of its quota tree
    cluster_queues: Mapping[str, str]  # workload -> its ClusterQueue
    might_fit: frozenset[str] = frozenset()  # left-out workloads that might fit on their own
    fifo_groups: Mapping[str, str] = field(default_factory=dict)  # workload -> its StrictFIFO group


class _NoExternalCalls:
    """Grounding context without functions: ``@f(...)`` in a policy fails instead of running code."""


class _Messages:
    def __init__(self) -> None:
        self.items: list[str] = []

    def __call__(self, code: clingo.MessageCode, message: str) -> None:
        self.items.append(message.strip())


def _control(arguments: Sequence[str], messages: _Messages) -> clingo.Control:
    return clingo.Control(["--warn=none", "--seed=0", *arguments], logger=messages, message_limit=50)


# The parts each pass grounds (policy.PARTS): base with decide, or base with explain.
_DECIDE = ("base", "decide")
_EXPLAIN = ("base", "explain")
_DISPATCH = ("base", "dispatch")


def _load(ctl: clingo.Control, facts: str, policy: Policy, parts: tuple[str, ...]) -> None:
    """Give ``ctl`` the policy's statements of ``parts`` and the facts (one ``pred(args).``
    per line).

    The facts go in through the backend, as ground atoms: clingo's parser costs a few
    microseconds per statement, and a controller's cycles meet mostly the same facts, whose
    symbols are kept (:func:`_memos`). The grounder treats them as facts all the same.
    """
    ctl.add("base", [], defined_directives())
    with _ast.ProgramBuilder(ctl) as builder:
        for f in policy.files:
            for statement in _statements_in(f, parts):
                builder.add(statement)
    symbols = _memos()[2]
    with ctl.backend() as backend:
        for text in facts.splitlines():
            if text:
                backend.add_rule([backend.add_atom(symbols[text])])


@functools.lru_cache(maxsize=64)
def _parsed(f: PolicyFile) -> tuple[Any, ...]:
    """The statements of ``f``, parsed once: a cycle over a small backlog would otherwise spend
    as long parsing the built-in policy as grounding it.

    Raises:
        PolicyError: ``f`` does not parse; the message names the file, line and column.
    """
    errors: list[tuple[str, str]] = []
    statements = _statements(f, errors)
    if statements is None:
        raise PolicyError("; ".join(text.strip() for _, text in errors) or f"{f.path}: syntax error")
    return tuple(s for s in statements if s.ast_type != _ast.ASTType.Comment)


@functools.lru_cache(maxsize=64)
def _statements_in(f: PolicyFile, parts: tuple[str, ...]) -> tuple[Any, ...]:
    """The statements of ``f`` in ``parts``, with the ``#program`` directives that place them:
    clingo pays for every statement added, grounded or not."""
    out: list[Any] = []
    part = "base"
    for statement in _parsed(f):
        if statement.ast_type == _ast.ASTType.Program:
            part = statement.name
            out.append(statement)
        elif part in parts:
            out.append(statement)
    return tuple(out)


def _relocate(node: Any, path: str) -> Any:
    """``node`` with every location in file ``path`` (clingo says ``<string>`` for parsed text)."""
    changes: dict[str, Any] = {}
    for key in node.child_keys:
        value = getattr(node, key)
        if isinstance(value, _ast.AST):
            changes[key] = _relocate(value, path)
        elif isinstance(value, _ast.ASTSequence):
            changes[key] = [_relocate(v, path) for v in value]
    if "location" in node.keys():
        loc = node.location
        changes["location"] = _ast.Location(_ast.Position(path, loc.begin.line, loc.begin.column),
                                            _ast.Position(path, loc.end.line, loc.end.column))
    return node.update(**changes) if changes else node


def _statements(f: PolicyFile, messages: list[tuple[str, str]]) -> list[Any] | None:
    """The statements of ``f`` with real locations, or ``None`` if it does not parse.

    Parse errors are appended to ``messages`` as ``(MessageCode name, text)``.
    """
    out: list[Any] = []
    try:
        _ast.parse_string(f.text, lambda s: out.append(_relocate(s, f.path)),
                          logger=lambda code, text: messages.append((code.name, text.replace("<string>", f.path))),
                          message_limit=50)
    except RuntimeError:
        return None
    return out


def _ground(ctl: clingo.Control, parts: list[tuple[str, list[clingo.Symbol]]], messages: _Messages) -> None:
    try:
        ctl.ground(parts, context=_NoExternalCalls())
    except RuntimeError as e:
        raise PolicyError("grounding failed: " + _why(messages, e)) from None


def _why(messages: _Messages, error: RuntimeError) -> str:
    """What clingo said about a failure: its last messages, else the exception's own text
    (clingo does not log every failure)."""
    if messages.items:
        return "; ".join(messages.items[-5:])
    return f"clingo logged no message, only: {str(error) or type(error).__name__}"


def _arguments(ctl: clingo.Control, name: str, arity: int) -> list[list[clingo.Symbol]]:
    """The argument lists of the ground atoms ``name/arity``."""
    return [a.symbol.arguments for a in ctl.symbolic_atoms.by_signature(name, arity)]


def _literals(ctl: clingo.Control, name: str, arity: int) -> list[tuple[clingo.Symbol, int]]:
    """The ground atoms ``name/arity`` with their program literals."""
    return [(a.symbol, a.literal) for a in ctl.symbolic_atoms.by_signature(name, arity)]


def _named_atoms(ctl: clingo.Control, names: Iterable[str]) -> dict[clingo.Symbol, str]:
    """The ground atoms whose predicate has one of ``names`` (any arity or sign) -> their name.

    Filtering a model by membership in this dict costs a hash call per atom, where asking
    each atom its name costs a string conversion.
    """
    names = set(names)
    atoms = ctl.symbolic_atoms
    return {a.symbol: name for name, arity, positive in atoms.signatures if name in names
            for a in atoms.by_signature(name, arity, positive)}


def _solve(ctl: clingo.Control, deadline: float, *, assumptions: Sequence[int] = (),
           on_model: Callable[[clingo.Model], None] | None = None) -> tuple[clingo.SolveResult | None, bool]:
    """Solve until ``deadline``; returns (result, finished). An unfinished solve is cancelled."""
    if time.monotonic() >= deadline:
        return None, False
    with ctl.solve(assumptions=list(assumptions), on_model=on_model, async_=True) as handle:
        finished = handle.wait(max(0.0, deadline - time.monotonic()))
        if not finished:
            handle.cancel()
        return handle.get(), finished


def _order_decisions(ctl: clingo.Control, ranked: list[str], admit_atom: Mapping[str, int],
                     groups: Mapping[str, list[str]], keys: Mapping[str, clingo.Symbol],
                     choose_atoms: Sequence[tuple[clingo.Symbol, int]], queue_of: Mapping[str, str],
                     strings: _Strings, values: _Values) -> None:
    """Make the search decide admissions in rank order, then flavors in rank and flavor order.

    ``admit/1`` atoms get the highest levels, in rank order, sign true. ``choose/4`` atoms come
    after all of them: by the rank of their workload, then by the flavor's position in its
    resource group, sign true, so that among equally good plans the higher-ranked workload
    keeps the earlier flavor, as in Kueue. StrictFIFO groups are chained by constraints.
    ``choose_atoms`` are the ground ``choose/4`` atoms with their literals; ``queue_of`` maps
    workloads to their ClusterQueue.
    """
    position_of = {w: i for i, w in enumerate(ranked)}
    flavor_pos = {(strings[q], g.number, strings[f]): pos.number for q, g, f, pos in _arguments(ctl, "cq_flavor", 4)}
    width = max(flavor_pos.values(), default=0) + 1
    n = len(ranked)
    level, sign = clingo.backend.HeuristicType.Level, clingo.backend.HeuristicType.Sign
    with ctl.backend() as backend:
        for w, atom in admit_atom.items():
            if w in position_of:
                backend.add_heuristic(atom, level, (n + 1) * width + n - position_of[w], 1, [])
                backend.add_heuristic(atom, sign, 1, 1, [])
        for symbol, literal in choose_atoms:
            w, _, g, f = symbol.arguments
            w, g, f = values[w], values[g], values[f]
            pos = flavor_pos.get((queue_of.get(w, ""), g, f), width - 1)
            backend.add_heuristic(literal, level, (n - position_of.get(w, n)) * width + width - pos, 1, [])
            backend.add_heuristic(literal, sign, 1, 1, [])
        for members in groups.values():
            chain = [admit_atom[w] for w in sorted(members, key=lambda w: keys[w]) if w in admit_atom]
            for before, after in zip(chain, chain[1:]):
                backend.add_rule([], [after, -before])  # :- admit(after), not admit(before).


def decide(facts: str, policy: Policy, *, budget: float) -> Decision:
    """Admit candidates in rank order, then choose the best flavors for the admitted set.

    The admitted set is the lexicographically greatest one in rank order: a candidate is
    admitted whenever it fits together with every higher-ranked candidate admitted (whose
    flavors may change). One solve usually computes it: a domain heuristic makes the solver
    decide ``admit/1`` atoms first, in rank order, trying "admitted" first. With a static
    decision order and sign, the first model conflict-driven search finds is the
    lexicographically greatest over those atoms: if a greater model existed, the first atom
    where it differs was set to false by propagation from earlier decisions alone, all of which
    that model shares, so it could not be a model. The weak constraints then pick the flavors.

    When flavors are hard to pack, that search can take long; after a share of the budget the
    candidates are checked one by one instead (:func:`_rank_checks`), which is never worse than
    Kueue's greedy order and says when it could not prove more.

    StrictFIFO groups (``fifo_group/2``) are chained: a member is admitted only if the member
    ranked just before it is.

    Raises:
        PolicyError: a policy file does not parse or ground.
        SolveError: the hard constraints fail even when nothing new is admitted.
    """
    start = time.monotonic()
    deadline = start + budget
    messages = _Messages()
    ctl = _control(["--heuristic=Domain", "--opt-mode=ignore", "--models=1"], messages)
    _load(ctl, facts, policy, _DECIDE)
    _ground(ctl, [(part, []) for part in _DECIDE], messages)
    grounded = time.monotonic()

    strings, values, _ = _memos()
    keys = {strings[w]: key for w, key in _arguments(ctl, "rank_key", 2)}
    candidates = [strings[w] for w, in _arguments(ctl, "candidate", 1)]
    missing = [w for w in candidates if w not in keys]
    if missing:
        raise PolicyError(f"the policy gives no rank_key/2 to candidate {missing[0]!r}")
    ranked = sorted(candidates, key=keys.__getitem__)
    admit_atom = {strings[symbol.arguments[0]]: literal for symbol, literal in _literals(ctl, "admit", 1)}
    groups: dict[str, list[str]] = {}
    for w, group in _arguments(ctl, "fifo_group", 2):
        groups.setdefault(str(group), []).append(strings[w])
    choose_atoms = _literals(ctl, "choose", 4)
    queue_of = {strings[w]: strings[q] for w, q in _arguments(ctl, "workload_cq", 2)}
    trees = {strings[q]: str(t) for q, t in _arguments(ctl, "tree_root", 2)}

    _order_decisions(ctl, ranked, admit_atom, groups, keys, choose_atoms, queue_of, strings, values)
    placing = any(True for _ in ctl.symbolic_atoms.by_signature("node_count", 1))

    first: dict[str, Any] = {}
    # With Nodes, proving that a candidate fits nowhere is a packing proof over every placement
    # of those admitted before it, which conflict-driven search may take exponentially long to
    # find: candidates are then decided one by one, each placed beside the placements before it.
    result, finished = _solve(ctl, grounded if placing else min(deadline, grounded + _ONE_SHOT_SHARE * budget),
                              on_model=lambda m: first.update(_record(m, values)))
    if finished and result is not None and result.unsatisfiable:
        raise SolveError("the policy's hard constraints fail even when nothing new is admitted: "
                         "check the integrity constraints of your policy files")
    effort = _effort(ctl)
    if "symbols" in first:
        admitted = {t.args[0] for t in first["symbols"] if t.name == "admit"}
        checked = _Checked(admitted, first, (), False)
    else:
        if placing:
            checked = _rank_batches(ctl, ranked, admit_atom, deadline, values, _NodeRoom(ctl, values))
        else:
            checked = _rank_checks(ctl, ranked, admit_atom, deadline, dict(choose_atoms), values)
        admitted = checked.admitted
        effort = tuple(a + b for a, b in zip(effort, _effort(ctl)))  # type: ignore[assignment]
    with ctl.backend() as backend:  # the admitted set is decided: fix it, then optimize flavors
        for w, atom in admit_atom.items():
            backend.add_rule([], [-atom] if w in admitted else [atom])
        if placing and checked.model is not None:
            # The search starts from the checks' last plan (flavors and placements), so that its
            # first model comes at once and the optimization only improves on it.
            for s in checked.model["chosen"]:
                backend.add_heuristic(ctl.symbolic_atoms[s].literal, clingo.backend.HeuristicType.True_,
                                      _FIRST_PLAN_LEVEL, 3, [])

    ctl.configuration.solve.opt_mode = "opt"
    ctl.configuration.solve.models = 0
    best: dict[str, Any] = {}
    # Choosing among plans that admit the same set is a tie-break: it gets a share of the budget
    # (and a short grace period when the budget is spent, to find any plan of that set).
    now = time.monotonic()
    # With Nodes the search starts from the checks' plan, and improving on that is a packing
    # search of its own: it gets a smaller share.
    share = _PLACEMENT_OPTIMIZE_SHARE if placing else _OPTIMIZE_SHARE
    # (the grace period is for finding some plan: with Nodes, the checks' last model is one)
    grace = 0.0 if placing and checked.model is not None else _GRACE_SECONDS
    final_deadline = max(min(deadline, now + share * budget), now + grace)
    result, finished = _solve(ctl, final_deadline, on_model=lambda m: best.update(_record(m, values)))
    if "symbols" not in best:
        if checked.model is None:
            raise SolveError("no plan found within the time budget; raise --time-budget")
        best, finished = dict(checked.model), False
    proven = finished and (bool(best["proven"]) or not best["cost"] or bool(result and result.exhausted))
    optimal = proven and not checked.unevaluated and not checked.unsure

    choices: dict[str, list[tuple[str, int, str]]] = {}
    assignments: dict[str, dict[tuple[str, str], str]] = {}
    preemption: dict[str, set[str]] = {"evict": set(), "preempting": set()}
    preempts: set[tuple[str, str]] = set()
    placements: dict[str, list[tuple[str, int, int]]] = {}
    for t in best["symbols"]:
        if t.name in preemption:
            preemption[t.name].add(t.args[0])
        elif t.name == "preempts":
            preempts.add((t.args[0], t.args[1]))
        elif t.name == "admit":
            choices.setdefault(t.args[0], [])
            assignments.setdefault(t.args[0], {})
        elif t.name == "choose":
            choices.setdefault(t.args[0], []).append((t.args[1], t.args[2], t.args[3]))
        elif t.name == "assign":
            assignments.setdefault(t.args[0], {})[(t.args[1], t.args[2])] = t.args[3]
        elif t.name == "place":
            placements.setdefault(t.args[0], []).append((t.args[1], t.args[2], t.args[3]))
    fifo_blocked: dict[str, str] = {}
    fifo_head_of: dict[str, str] = {}
    for group, members in groups.items():
        head = None
        for w in sorted(members, key=lambda w: keys[w]):
            if head is not None and w not in admitted:
                fifo_blocked[w] = head
            elif head is None and w not in admitted:
                head = w
                fifo_head_of[w] = group
    last = _effort(ctl)
    stats = SolveStats(ground_seconds=grounded - start, solve_seconds=time.monotonic() - grounded,
                       choices=effort[0] + last[0], conflicts=effort[1] + last[1],
                       optimal=optimal, budget_exhausted=bool(checked.unevaluated))
    return Decision({w: tuple(sorted(c)) for w, c in choices.items()}, assignments, tuple(ranked),
                    fifo_blocked, fifo_head_of, checked.unevaluated, stats, best["draws"], queue_of,
                    frozenset(preemption["evict"]), frozenset(preemption["preempting"]), frozenset(preempts),
                    {w: tuple(sorted(p)) for w, p in placements.items()}, trees)


_ONE_SHOT_SHARE = 0.3  # of the budget for the one-shot search, before checking one by one
_OPTIMIZE_SHARE = 0.2  # of the budget for the flavor preferences among plans admitting the same set
_PLACEMENT_OPTIMIZE_SHARE = 0.01  # the same, with Nodes to place pods on (starting from the checks' plan)
_GRACE_SECONDS = 1.0  # beyond a spent budget, to find some plan of the admitted set
_FIRST_PLAN_LEVEL = 2**15 - 1  # the highest level clasp keeps (16 bits), above those of _order_decisions


def _record(model: clingo.Model, values: _Values) -> dict[str, Any]:
    """A model's decision, decoded (a Model must not outlive its callback; its Symbols may).

    ``symbols`` are the decoded shown atoms but ``draw/4``, ``draws`` those as ASP text, and
    ``chosen`` the ``choose/4`` and ``place/4`` symbols.
    """
    symbols: list[Any] = []
    draws: list[str] = []
    chosen: list[clingo.Symbol] = []
    for s in model.symbols(shown=True):
        name = s.name  # read once: every read is a call into clingo
        if name == "draw":
            draws.append(f"{s}.")
            continue
        symbols.append(values[s])
        if name == "choose" or name == "place":
            chosen.append(s)
    return {"symbols": symbols, "draws": tuple(draws), "chosen": chosen,
            "cost": tuple(model.cost), "proven": model.optimality_proven}


def _effort(ctl: clingo.Control) -> tuple[int, int]:
    """Choices and conflicts of the last solve."""
    solvers = ctl.statistics["solving"]["solvers"]
    return int(solvers["choices"]), int(solvers["conflicts"])


@dataclass(frozen=True)
class _Checked:
    admitted: set[str]
    model: dict[str, Any] | None  # the last model found, a fallback plan
    unevaluated: tuple[str, ...]  # candidates the budget did not reach
    unsure: bool  # some candidate was left out because its check ran out of time



# Two ways of choosing the classes a pod set's pods go to, among those of its flavor; both first
# take the classes whose nodes its pods fill exactly (as many as one node takes leave it nothing
# free). Then TIGHT takes nodes in use before wholly free ones, the fewest pods per node first
# (best fit: whole nodes stay whole for big pods); WIDE takes the most pods per node first (a gang
# on few nodes, wholly free ones among them, small holes kept for small gangs). Neither is better
# everywhere: on the placement benchmark WIDE admits more gangs, and leaves out some gangs of
# 8-GPU pods TIGHT admits. The rank-order loop plays both in Python first and goes the way whose
# admitted set is greater in rank order (_NodeRoom.choose_way).
_TIGHT, _WIDE = "tight", "wide"
_WAYS: dict[str, Callable[[tuple[bool, int, bool, int]], tuple[Any, ...]]] = {
    _TIGHT: lambda f: (f[0], f[2], f[1], f[3]),
    _WIDE: lambda f: (f[0], -f[1], f[2], f[3]),
}


class _NodeRoom:
    """Where a candidate's pods could go beside the placements admitted so far, by the bounds
    placement.lp puts on each node class (its total free, per resource that binds there, and the
    steps of requests that divide one another): checked in Python, so that the many candidates a
    full cluster leaves out cost no solve, and so that the solve of a batch is handed a
    placement that fits (:meth:`reserve`), which it only has to confirm.

    The bounds are read off the ground program (``binding/2``, ``step/3``), so they are the
    policy's own; without them (a policy replacing placement.lp) every resource binds, in
    totals only. Pods of a pod set go to the classes of its flavors in their ClusterQueue's
    order (``options``, below, says to which classes first)."""

    def __init__(self, ctl: clingo.Control, values: _Values) -> None:
        def facts(name: str, arity: int) -> list[tuple[Any, ...]]:
            # decoded whole through the memo: a controller's cycles meet the same facts again
            return [values[a.symbol].args for a in ctl.symbolic_atoms.by_signature(name, arity)]

        self.count = dict(facts("node_class", 2))
        self.free = {(c, r): f for c, r, f in facts("class_free", 3)}
        binding = set(facts("binding", 2)) or set(self.free)
        self.widest: dict[str, int] = {}  # resource -> the most one node has free
        for (c, r), f in self.free.items():
            self.widest[r] = max(self.widest.get(r, 0), f)
        self.steps: dict[tuple[int, str], tuple[int, ...]] = {cr: (1,) for cr in binding}
        for c, r, a in facts("step", 3):
            if (c, r) in binding:
                self.steps[c, r] += (a,)
        self.request: dict[tuple[str, str], dict[str, int]] = {}
        for w, ps, r, a in facts("node_request", 4):
            self.request.setdefault((w, ps), {})[r] = a
        idle = {c for c, in facts("class_idle", 1)}
        queue = dict(facts("workload_cq", 2))
        order: dict[tuple[str, str], int] = {}
        for q, _, f, pos in facts("cq_flavor", 4):
            order[q, f] = min(order.get((q, f), pos), pos)
        self.per_node: dict[tuple[str, str], dict[int, int]] = {}
        by_flavor: dict[tuple[str, str], dict[str, list[int]]] = {}
        for w, ps, f, c, n in facts("fits", 5):
            self.per_node.setdefault((w, ps), {})[c] = n
            by_flavor.setdefault((w, ps), {}).setdefault(f, []).append(c)
        # Topology (topology.lp): a pod set that asks for one goes only to flavors with a
        # Topology; one that requires a level, to the classes of one domain of it (one class, no
        # more pods than one node takes, for the hostname level).
        topology = {(w, ps): (mode, level) for w, ps, mode, level in facts("pod_set_topology", 4)}
        count = {(w, ps): n for w, ps, n in facts("pod_set", 3)}
        flavor_topology = dict(facts("flavor_topology", 2))
        levels = {(t, level) for t, level, _ in facts("topology_level", 3)}
        domain_of = {(t, level, c): d for t, level, c, d in facts("class_domain", 4)}
        # pod set -> where its pods may go, in order: its flavors in order, and within each the
        # classes of each domain it may use, in the order of both ways of placing (_WAYS)
        self.ways: dict[str, dict[tuple[str, str], list[list[int]]]] = {way: {} for way in _WAYS}
        for wps, flavors in by_flavor.items():
            fit, asks = self.per_node[wps], self.request.get(wps, {})
            mode, level = topology.get(wps, (None, None))
            for f, cs in sorted(flavors.items(), key=lambda i: (order.get((queue.get(wps[0]), i[0]), 1 << 30), i[0])):
                t = flavor_topology.get(f)
                if mode is not None and (t is None or (mode == "required" and (t, level) not in levels)):
                    continue
                facts_of = [(any(self.free.get((c, r), 0) - fit[c] * a for r, a in asks.items() if a > 0), fit[c], c in idle, c)
                            for c in cs]
                for way, key in _WAYS.items():
                    ordered = [fc[3] for fc in sorted(facts_of, key=key)]
                    if mode != "required":
                        groups = [ordered]
                    elif level == HOSTNAME_LABEL:  # one node: one class, of nodes that take them all
                        groups = [[c] for c in ordered if fit[c] >= count.get(wps, 0)]
                    else:
                        by_domain: dict[Any, list[int]] = {}  # in the order of their first class
                        for c in ordered:
                            if (t, level, c) in domain_of:
                                by_domain.setdefault(domain_of[t, level, c], []).append(c)
                        groups = list(by_domain.values())
                    self.ways[way].setdefault(wps, []).extend(groups)
        self.options = self.ways[_TIGHT]
        self.pod_sets: dict[str, list[tuple[str, int]]] = {}
        for w, ps, n in facts("pod_set", 3):
            if n > 0:
                self.pod_sets.setdefault(w, []).append((ps, n))
        self.used: dict[tuple[int, str, int], int] = {}  # (class, resource, step) -> placed
        self.big: dict[tuple[int, str], int] = {}  # (class, resource) -> pods taking over half a node

    def place(self, symbols: Iterable[clingo.Symbol], values: _Values) -> None:
        """Count the ``place/4`` atoms among ``symbols`` (a model's: the placements so far)."""
        self.used, self.big = {}, {}
        for s in symbols:
            if s.name == "place":
                w, ps, c, k = (values[a] for a in s.arguments)
                self._add((w, ps), c, k)

    def _add(self, wps: tuple[str, str], c: int, k: int) -> None:
        for r, a in self.request.get(wps, {}).items():
            steps = self.steps.get((c, r))
            if steps is None or a <= 0:
                continue
            for step in steps:
                if a % step == 0:
                    self.used[c, r, step] = self.used.get((c, r, step), 0) + k * a
            if 2 * a > self.free[c, r]:
                self.big[c, r] = self.big.get((c, r), 0) + k

    def _room(self, wps: tuple[str, str], c: int, count: int) -> int:
        """How many of ``count`` pods of pod set ``wps`` class ``c`` has room for, by its bounds."""
        n = self.count.get(c, 0)
        most = min(count, self.per_node[wps][c] * n)
        for r, a in self.request.get(wps, {}).items():
            steps = self.steps.get((c, r))
            if steps is None or a <= 0:
                continue
            f = self.free[c, r]
            for step in steps:
                if a % step == 0:
                    most = min(most, (n * (f // step) * step - self.used.get((c, r, step), 0)) // a)
            if 2 * a > f:
                most = min(most, n - self.big.get((c, r), 0))
        return max(most, 0)

    def reserve(self, w: str) -> list[tuple[str, int, int]] | None:
        """Where the pods of ``w`` fit beside what is placed and reserved, as (pod set, class,
        pods); they are then counted as placed, so that the next candidates are judged beside
        them. None (and nothing counted) if some pod set fits in none of its flavors (and, if it
        requires a topology level, in no domain of it)."""
        out: list[tuple[str, int, int]] = []
        for ps, count in self.pod_sets.get(w, ()):
            wps = (w, ps)
            for classes in self.options.get(wps, ()):
                mine: list[tuple[str, int, int]] = []
                left = count
                for c in classes:
                    k = self._room(wps, c, left)
                    if k > 0:
                        self._add(wps, c, k)
                        mine.append((ps, c, k))
                        left -= k
                        if left == 0:
                            break
                if left == 0:
                    out += mine
                    break
                self.release(w, mine)
            else:
                self.release(w, out)
                return None
        return out

    def release(self, w: str, placed: Iterable[tuple[str, int, int]]) -> None:
        """Forget the pods of ``w`` counted by :meth:`reserve`."""
        for ps, c, k in placed:
            self._add((w, ps), c, -k)

    def repack(self, reserved: Mapping[str, list[tuple[str, int, int]]], w: str
               ) -> dict[str, list[tuple[str, int, int]]] | None:
        """``w`` with the candidates ``reserved`` for (not yet solved: free to move), all
        placed anew, biggest pods first: their new places (and counted), or None with
        nothing changed. Where placing them one by one in rank order leaves a big pod no node,
        this finds one (a pod set of 4-GPU pods packed onto 8-GPU nodes leaving no room for a
        gang of 8-GPU pods that 4-GPU nodes would)."""
        for m, placed in reserved.items():
            self.release(m, placed)

        def biggest(m: str) -> float:  # its biggest pod, as a share of the most a node has free
            return max((a / max(self.widest.get(r, 1), 1) for ps, _ in self.pod_sets.get(m, ())
                        for r, a in self.request.get((m, ps), {}).items()), default=0.0)

        out: dict[str, list[tuple[str, int, int]]] = {}
        for m in sorted([*reserved, w], key=lambda m: -biggest(m)):
            placed = self.reserve(m)
            if placed is None:
                for n, p in out.items():
                    self.release(n, p)
                for n, p in reserved.items():
                    for ps, c, k in p:
                        self._add((n, ps), c, k)
                return None
            out[m] = placed
        return out

    def choose_way(self, ranked: Sequence[str], candidates: Mapping[str, Any]) -> str:
        """Play the rank-order loop in Python (each of ``ranked`` in ``candidates`` reserved in
        turn, no solve) each way (_WAYS) and go the way whose admitted set is greater in rank
        order: the first candidate one admits and the other does not decides (the same sets:
        TIGHT). Leaves nothing counted."""
        played: dict[str, list[bool]] = {}
        for way in _WAYS:
            self.options = self.ways[way]
            self.used, self.big = {}, {}
            played[way] = [w in candidates and self.reserve(w) is not None for w in ranked]
        self.used, self.big = {}, {}
        tight, wide = played[_TIGHT], played[_WIDE]
        first = next((i for i, (a, b) in enumerate(zip(tight, wide)) if a != b), None)
        way = _TIGHT if first is None or tight[first] else _WIDE
        self.options = self.ways[way]
        return way

    def place_symbol(self, w: str, ps: str, c: int, k: int) -> clingo.Symbol:
        """The atom ``place(w,ps,c,k)``."""
        return clingo.Function("place", [clingo.String(w), clingo.String(ps), clingo.Number(c), clingo.Number(k)])


def _later_stay_out(ctl: clingo.Control, admit_atom: Mapping[str, int]) -> None:
    """A check is about its candidates: make the search leave the ones after them out."""
    with ctl.backend() as backend:
        for atom in admit_atom.values():
            backend.add_heuristic(atom, clingo.backend.HeuristicType.Sign, -1, 2, [])


# Candidates admitted together by one solve, with Nodes: the first solve also prepares the whole
# program; batches then double while they fit. A batch comes with a placement that fits
# (_NodeRoom.reserve), so its solve is mostly propagation however large it is.
_FIRST_BATCH, _MOST_BATCH = 4, 1024
# A candidate with no room beside the batch's reservations is tried with the batch placed anew
# (_NodeRoom.repack) while the batch has at most this many members: repacking costs Python time
# in proportion, for every such candidate.
_MOST_REPACKED = 16


def _rank_batches(ctl: clingo.Control, ranked: list[str], admit_atom: Mapping[str, int], deadline: float,
                  values: _Values, room: _NodeRoom) -> _Checked:
    """Greedy in rank order, as :func:`_rank_checks` without rearranging, but in batches.

    The next candidates are reserved a placement in turn (``room``): beside the flavors and
    placements of those admitted before them, and of the batch's members before them. One that
    has no room is left out, one that has joins the batch; the batch is solved with its
    reservation as assumptions, and if that fits it is admitted whole (each member fits beside
    the ones before it, so rank order holds). If not (the policy says no to that placement:
    quota, a constraint of its own), the batch is halved, down to one candidate, which is then
    solved without its reservation, the solver placing it. Every solve costs the fixed price of
    propagating the whole program, and a cluster being filled admits most of what it tries."""
    _later_stay_out(ctl, admit_atom)
    room.choose_way(ranked, admit_atom)
    atoms = ctl.symbolic_atoms  # looked up by symbol when needed: a large cluster grounds many place/4 atoms
    admitted: set[str] = set()
    fixed: list[int] = []
    last: dict[str, Any] | None = None
    unsure = False
    size, position = _FIRST_BATCH, 0

    # Decisions so far, as assumptions of the next solves rather than rules (opening a backend
    # costs milliseconds on a large program); decide() fixes the admitted set as rules after.
    assumed: list[int] = []

    def decided(keys: Iterable[str], ok: bool) -> None:
        assumed.extend(admit_atom[w] if ok else -admit_atom[w] for w in keys if w in admit_atom)

    def solve(batch: list[str], extra: list[int], left: float) -> bool:
        nonlocal last, fixed, unsure
        found: dict[str, Any] = {}
        first = last is None and not admitted  # the first solve also prepares the whole program
        share = 4 * left * len(batch) / (len(ranked) - position + len(batch))
        limit = time.monotonic() + (left if first else min(left, max(0.5, min(share, 1.0))))
        result, finished = _solve(ctl, limit, assumptions=assumed + fixed + [admit_atom[w] for w in batch] + extra,
                                  on_model=lambda m: found.update(_record(m, values)))
        if finished and result is not None and result.satisfiable:
            decided(batch, True)
            admitted.update(batch)
            last = found
            fixed = [atoms[s].literal for s in found["chosen"]]
            room.place(found["chosen"], values)
            return True
        unsure = unsure or not finished
        room.place(last["chosen"] if last else (), values)  # forget what the batch reserved
        return False

    while position < len(ranked):
        left = deadline - time.monotonic()
        if left <= 0:
            return _Checked(admitted, last, tuple(ranked[position:]), unsure)
        start = position
        batch: list[str] = []
        out: list[str] = []  # left out beside the placements before them, those of the batch too
        reserved: dict[str, list[tuple[str, int, int]]] = {}
        while position < len(ranked) and len(batch) < size:
            w = ranked[position]
            position += 1
            placed = room.reserve(w) if w in admit_atom else None
            if placed is not None:
                reserved[w] = placed
            elif w in admit_atom and reserved and len(reserved) <= _MOST_REPACKED and (again := room.repack(reserved, w)):
                reserved = again  # the batch placed anew, with w
            else:
                out.append(w)
                continue
            batch.append(w)
        if not batch:
            decided(out, False)
            continue
        # a reservation the program has no atom for (a class made unplaceable for the workload
        # by an earlier solve of the cycle) is no hint: the solver places those pods itself
        hinted = (atoms[room.place_symbol(w, ps, c, k)] for w, placed in reserved.items() for ps, c, k in placed)
        hints = [a.literal for a in hinted if a is not None]
        if solve(batch, [-admit_atom[w] for w in out if w in admit_atom] + hints, left):
            decided(out, False)
            size = min(2 * size, _MOST_BATCH)
            continue
        # Those left out before the batch's first member were judged beside what was admitted
        # (room only shrinks); from it on, again, with half as many.
        decided(out[:ranked.index(batch[0]) - start], False)
        position = ranked.index(batch[0])
        if len(batch) > 1:
            size = max(1, len(batch) // 2)
            continue
        position += 1
        if not solve(batch, [], deadline - time.monotonic()):  # without the reservation: the solver places it
            decided(batch, False)
    return _Checked(admitted, last, (), unsure)


def _rank_checks(ctl: clingo.Control, ranked: list[str], admit_atom: Mapping[str, int],
                 deadline: float, choose_literal: Mapping[clingo.Symbol, int], values: _Values) -> _Checked:
    """Decide candidates one by one in rank order, each for good before the next.

    For each candidate, check (a) keeps the flavors of everything admitted so far and lets only
    the candidate choose: mostly propagation, and with the flavor heuristic exactly Kueue's
    first fit. If that fails, check (b) lets every admitted workload change flavor, within a
    short time limit. Until a (b) check first succeeds, the assignment evolves as greedy's does;
    a (b) success puts the admitted set ahead of greedy's in rank order. So the result is never
    worse than greedy, even when (b) checks run out of time (then ``unsure`` is set).
    ``choose_literal`` maps the ground ``choose/4`` atoms to their literals.
    """
    _later_stay_out(ctl, admit_atom)
    admitted: set[str] = set()
    flavors: list[int] = []
    last: dict[str, Any] | None = None
    unsure = False
    for position, w in enumerate(ranked):
        left = deadline - time.monotonic()
        if left <= 0:
            return _Checked(admitted, last, tuple(ranked[position:]), unsure)
        lit = admit_atom.get(w)
        ok = False
        if lit is not None:
            limit = time.monotonic() + max(0.02, min(left, 2 * left / (len(ranked) - position)))
            found: dict[str, Any] = {}
            for assumptions in (flavors + [lit], [lit]):
                result, finished = _solve(ctl, limit, assumptions=assumptions, on_model=lambda m: found.update(_record(m, values)))
                ok = bool(finished and result is not None and result.satisfiable)
                if ok:
                    break
                unsure = unsure or not finished
        with ctl.backend() as backend:
            if lit is not None:
                backend.add_rule([], [-lit] if ok else [lit])
        if ok:
            admitted.add(w)
            last = found
            flavors = [choose_literal[s] for s in found["chosen"]]
    return _Checked(admitted, last, (), unsure)


def nominate(facts: str, policy: Policy, *, budget: float
             ) -> tuple[dict[str, set[str]], dict[str, str], bool]:
    """Solve the ``dispatch`` part of ``policy`` over ``facts``; the best model found within
    ``budget``: workload -> nominated workers, workload -> the worker it is predicted on, and
    whether that model was proven optimal (False: the budget cut the optimization short).

    A pass of its own after ``decide`` (engine/dispatch.py builds its facts from the workloads
    whose quota that decision reserves): which workers a dispatched workload's copies go to does
    not change what the manager admits.
    """
    best: dict[str, list[Any]] = {}

    def on_model(model: Any) -> None:
        best["atoms"] = [(s.name, s.arguments[0].string, s.arguments[1].string) for s in model.symbols(shown=True)
                         if s.name in ("nominate", "predicted") and len(s.arguments) == 2]

    deadline = time.monotonic() + budget
    messages = _Messages()
    ctl = _control(["--heuristic=Domain", "--opt-mode=ignore", "--models=1"], messages)
    _load(ctl, facts, policy, _DISPATCH)
    _ground(ctl, [(part, []) for part in _DISPATCH], messages)
    # 1. The first plan, as dispatch.lp's domain heuristic leads the search: workloads predicted
    #    in rank order, each on the worker where it fits tightest (first fit in rank order).
    _solve(ctl, max(deadline, time.monotonic() + _DISPATCH_GRACE_SECONDS), on_model=on_model)
    if "atoms" not in best:
        raise SolveError("the dispatch pass found no nomination within its budget: check the integrity "
                         "constraints of your policy files' dispatch part, or raise --time-budget")
    # 2. Whoever it predicts stays predicted, so that optimizing never gives the room of a
    #    higher-ranked workload to lower-ranked ones; then the preferences choose among the plans
    #    left, core-guided (it proves small problems at once, where branch and bound may not).
    first = {w for name, w, _ in best["atoms"] if name == "predicted"}
    with ctl.backend() as backend:
        for atom in ctl.symbolic_atoms.by_signature("predicted_any", 1):
            if atom.symbol.arguments[0].string in first:
                backend.add_rule([], [-atom.literal])
    ctl.configuration.solve.opt_mode = "opt"
    ctl.configuration.solve.models = 0
    ctl.configuration.solver.opt_strategy = "usc"
    _, optimal = _solve(ctl, deadline, on_model=on_model)
    nominated: dict[str, set[str]] = {}
    predicted: dict[str, str] = {}
    for name, w, k in best["atoms"]:
        if name == "nominate":
            nominated.setdefault(w, set()).add(k)
        else:
            predicted[w] = k
    return nominated, predicted, optimal


_DISPATCH_GRACE_SECONDS = 0.5  # beyond a spent budget, to find some nomination


def explain(facts: str, policy: Policy, decision: Decision, *, budget: float) -> Explanation:
    """Run the explanation pass with the decision as facts and collect ``reason/2``."""
    messages = _Messages()
    ctl = _control(["--models=1"], messages)
    decided = list(decision.draws) + [f"evict({value_text(w)})." for w in sorted(decision.evicted)]
    for w, choices in decision.choices.items():
        decided.append(f"admit({value_text(w)}).")
        decided += [f"choose({value_text(w)},{value_text(ps)},{g},{value_text(f)})." for ps, g, f in choices]
    # what workloads ranked after each left-out one took, counted as given back (line.py)
    decided += given_back_facts(decision.ranked, decision.choices, decision.cluster_queues, decision.trees)
    _load(ctl, facts + "\n".join(decided) + "\n", policy, _EXPLAIN)
    _ground(ctl, [(part, []) for part in _EXPLAIN], messages)
    explained = _named_atoms(ctl, _EXPLAINED)  # the ground atoms to keep from the model -> their name
    found: dict[str, Any] = {}

    def on_model(model: clingo.Model) -> None:
        found["atoms"] = [s for s in model.symbols(atoms=True) if s in explained]  # in the model's order

    _solve(ctl, time.monotonic() + budget, on_model=on_model)
    strings, values, _ = _memos()
    reasons: dict[str, list[Any]] = {}
    roots: dict[str, Any] = {}
    queues: dict[str, str] = {}
    fits: set[str] = set()
    fifo: dict[str, str] = {}
    caps: dict[tuple[str, str, str], int] = {}
    for s in found.get("atoms", []):
        name, args = explained[s], s.arguments
        first = strings[args[0]]
        if name == "reason":
            reasons.setdefault(first, []).append(values[args[1]])
        elif name == "tree_root":
            roots[first] = values[args[1]]
        elif name == "workload_cq":
            queues[first] = strings[args[1]]
        elif name == "might_fit":
            fits.add(first)
        elif name == "line_cap":
            caps[first, strings[args[1]], strings[args[2]]] = values[args[3]]
        else:
            fifo[first] = str(args[1])
    # the shortfalls stated behind those ahead in line (line.py)
    # (candidates beyond the solve's cut come after every solved one of their tree, by rank_key/2)
    solved = set(decision.ranked)
    keys = {strings[w]: k for w, k in _arguments(ctl, "rank_key", 2) if strings[w] in reasons and strings[w] not in solved}
    in_line(reasons, (*decision.ranked, *sorted(keys, key=keys.__getitem__)), decision.choices, queues,
            {q: str(root) for q, root in roots.items()}, _shapes(ctl, reasons), caps, fifo)
    return Explanation({w: tuple(sorted(r, key=str)) for w, r in reasons.items()}, roots, queues,
                       frozenset(fits), fifo)


_EXPLAINED = {"reason", "tree_root", "workload_cq", "might_fit", "fifo_group", "line_cap"}


#: Facts of a workload that are part of its shape (prune.py): the ClusterQueue aside, what the
#: line (line.py) tells workloads apart by. Fewer than the shape's, so one shape is never split.
_SHAPE = (("workload_priority", 2), ("pod_set", 3), ("pod_request", 4))


def _shapes(ctl: clingo.Control, workloads: Mapping[str, Any]) -> dict[str, tuple[Any, ...]]:
    """Part of the shape of each of ``workloads`` (prune.py's shapes): :data:`_SHAPE`'s facts."""
    strings, values, _ = _memos()
    asks: dict[str, list[Any]] = {}
    for name, arity in _SHAPE:
        for args in _arguments(ctl, name, arity):
            w = strings[args[0]]
            if w in workloads:
                asks.setdefault(w, []).append((name, *(values[a] for a in args[1:])))
    return {w: tuple(sorted(a)) for w, a in asks.items()}


# =================================================================================================
# Policy tooling: outlines of policy files and probing their grounding, for `clueue policy
# check` and for guarded cycles (clueue.engine.guard). Everything below returns plain Python
# values; clingo's messages keep their text, with the real file of each location.
# =================================================================================================

from .policy import ENGINE_PREDICATES  # noqa: E402

__all__ += ["AtomUse", "PartHeader", "FileOutline", "PolicyOutline", "outline_policy", "probe_grounding", "parse_policy"]


@dataclass(frozen=True)
class AtomUse:
    """One occurrence of a predicate in a policy file.

    ``role`` is ``head`` (derived), ``body`` (read) or ``declared`` (``#defined``, ``#external``);
    ``part`` is the ``#program`` part the statement belongs to.
    """

    name: str
    arity: int
    role: str
    part: str
    line: int
    column: int


@dataclass(frozen=True)
class PartHeader:
    """A ``#program`` statement of a policy file."""

    name: str
    params: tuple[str, ...]
    line: int
    column: int


@dataclass(frozen=True)
class FileOutline:
    """What a policy file derives and reads; ``messages`` are clingo's parse errors, if any."""

    path: str
    parsed: bool
    atoms: tuple[AtomUse, ...] = ()
    parts: tuple[PartHeader, ...] = ()
    messages: tuple[tuple[str, str], ...] = ()  # (MessageCode name, text)


@dataclass(frozen=True)
class PolicyOutline:
    """Outlines of every file, and clingo's messages from grounding the whole policy without facts."""

    files: tuple[FileOutline, ...]
    messages: tuple[tuple[str, str], ...]
    grounded: bool


def _predicate(symbol: Any) -> tuple[str, int] | None:
    if symbol.ast_type == _ast.ASTType.UnaryOperation:  # classical negation: -p(X)
        inner = _predicate(symbol.argument)
        return ("-" + inner[0], inner[1]) if inner else None
    if symbol.ast_type == _ast.ASTType.Function and symbol.name:
        return symbol.name, len(symbol.arguments)
    if symbol.ast_type == _ast.ASTType.SymbolicTerm and symbol.symbol.type == clingo.SymbolType.Function:
        return symbol.symbol.name, len(symbol.symbol.arguments)
    return None


def _collect_atoms(node: Any, role: str, part: str, out: list[AtomUse]) -> None:
    """Every predicate occurrence below ``node``; conditions of head elements are read, not derived."""
    kind = node.ast_type
    if kind == _ast.ASTType.SymbolicAtom:
        symbols = node.symbol.arguments if node.symbol.ast_type == _ast.ASTType.Pool else [node.symbol]
        for s in symbols:
            found = _predicate(s)
            if found:
                out.append(AtomUse(found[0], found[1], role, part, s.location.begin.line,
                                   s.location.begin.column))
        return
    for key in node.child_keys:
        child_role = role
        if kind == _ast.ASTType.Rule:
            child_role = "head" if key == "head" else "body"
        elif kind == _ast.ASTType.ConditionalLiteral and key == "condition":
            child_role = "body"
        elif kind == _ast.ASTType.External:
            child_role = "declared" if key == "atom" else "body"
        elif kind in (_ast.ASTType.Minimize, _ast.ASTType.ShowTerm, _ast.ASTType.Heuristic, _ast.ASTType.Edge,
                      _ast.ASTType.ProjectAtom):
            child_role = "body"
        value = getattr(node, key)
        if isinstance(value, _ast.AST):
            _collect_atoms(value, child_role, part, out)
        elif isinstance(value, _ast.ASTSequence):
            for v in value:
                _collect_atoms(v, child_role, part, out)


def _outline(f: PolicyFile, statements: list[Any]) -> FileOutline:
    atoms: list[AtomUse] = []
    parts: list[PartHeader] = []
    part = "base"
    for s in statements:
        kind = s.ast_type
        loc = s.location.begin
        if kind == _ast.ASTType.Program:
            part = s.name
            if (loc.line, loc.column) != (1, 1) or s.name != "base" or s.parameters:
                parts.append(PartHeader(s.name, tuple(p.name for p in s.parameters), loc.line, loc.column))
        elif kind == _ast.ASTType.Defined:
            atoms.append(AtomUse(s.name, s.arity, "declared", part, loc.line, loc.column))
        elif kind != _ast.ASTType.Comment:
            _collect_atoms(s, "body", part, atoms)
    return FileOutline(f.path, True, tuple(atoms), tuple(parts))


def outline_policy(policy: Policy, *, ground: bool = True) -> PolicyOutline:
    """Parse every file of ``policy``; if all parse (and ``ground``), ground it without facts
    for clingo's messages.

    The policy must have passed :func:`clueue.engine.policy.check_safety`: parsing follows
    ``#include``. Grounding uses ``#defined`` for every input and for the decision given to the
    explain part, so that only the policy's own problems are reported: syntax errors, unsafe
    variables, undefined operations on constants, ...

    Returns:
        A :class:`PolicyOutline`; messages are ``(MessageCode name, text)`` with real paths.
    """
    files: list[FileOutline] = []
    parsed: list[Any] = []
    for f in policy.files:
        errors: list[tuple[str, str]] = []
        statements = _statements(f, errors)
        if statements is None:
            files.append(FileOutline(f.path, False, messages=tuple(errors)))
            continue
        files.append(_outline(f, statements))
        parsed.extend(s for s in statements if s.ast_type != _ast.ASTType.Comment)
    if len(parsed) == 0 or not all(f.parsed for f in files) or not ground:
        return PolicyOutline(tuple(files), (), False)

    seen: dict[str, str] = {}

    def logger(code: clingo.MessageCode, text: str) -> None:
        seen.setdefault(text, code.name)

    for part, extra in (("decide", ""), ("explain", _given_directives())):
        ctl = clingo.Control(["--seed=0"], logger=logger, message_limit=200)
        ctl.add("base", [], defined_directives() + extra)
        try:
            with _ast.ProgramBuilder(ctl) as builder:
                for s in parsed:
                    builder.add(s)
            ctl.ground([("base", []), (part, [])], context=_NoExternalCalls())
        except RuntimeError:
            pass  # the messages say why
    return PolicyOutline(tuple(files), tuple((code, text) for text, code in seen.items()), True)


def _given_directives() -> str:
    """``#defined`` for every predicate the engine gives the explain pass (the decision)."""
    return "".join(f"#defined {name}/{len(e.predicate.args)}.\n" for name, e in ENGINE_PREDICATES.items() if e.given)


def probe_grounding(facts: str, policy: Policy, *, progress: Callable[[str], None]) -> None:
    """Ground the decide pass, then the explain pass, statement by statement, announcing each.

    Every statement of every file, built-in or not, in the parts a pass grounds, is its own
    step, in file order, twice over: in the second round a statement also sees what the files
    after its own derived. Run in a process with a time or memory limit, the last announcement
    names the statement that blew up. Multi-shot grounding only approximates the single-shot
    one (a statement sees the atoms of the steps before it), which is enough to find an
    exploding rule. The explain pass gets no decision: what the engine gives it is declared
    empty, as ``clueue policy check`` grounds it.

    ``progress`` receives ``"path:line:column: statement"`` before each step.
    """
    for parts, declared in ((_DECIDE, ""), (_EXPLAIN, _given_directives())):
        messages = _Messages()
        ctl = _control([], messages)
        ctl.add("base", [], declared)
        _load(ctl, facts, Policy(()), parts)
        _ground(ctl, [("base", [])], messages)
        step = 0
        for again in (False, True):
            for f in policy.files:
                for s in _statements_in(f, parts):
                    if s.ast_type == _ast.ASTType.Program or (again and s.ast_type == _ast.ASTType.Definition):
                        continue  # a constant is defined once
                    step += 1
                    name = f"clueue_probe_{step}"
                    loc = s.location.begin
                    progress(f"{f.path}:{loc.line}:{loc.column}: {s}")
                    with _ast.ProgramBuilder(ctl) as builder:
                        builder.add(_ast.Program(s.location, name, []))
                        builder.add(s)
                    _ground(ctl, [(name, [])], messages)


def parse_policy(policy: Policy) -> None:
    """Parse every file of ``policy`` now, for every pass: the parses are kept for the process,
    and a child process forked afterwards (a guarded cycle) inherits them instead of parsing again.

    Raises:
        PolicyError: a file does not parse; the message names the file, line and column.
    """
    for f in policy.files:
        for parts in (_DECIDE, _EXPLAIN):
            _statements_in(f, parts)
