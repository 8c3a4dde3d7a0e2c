"""Policies: the built-in rule files and a user's own, as data.

A policy is a set of named ``.lp`` files. The built-in files ship in ``clueue.policies``; a
user's directory adds files, and a user file with the same name as a built-in one replaces that
rule group. Policy files are data, not code: ``#script``, ``#include`` and external function
calls (``@name(...)``) are refused with the file and line.

Besides the input facts (:data:`clueue.engine.facts.PREDICATES`), the engine and a policy share
the predicates of :data:`ENGINE_PREDICATES`: those the engine reads from the policy's answer and
those it gives back as facts to the explanation pass. ``docs/policies.md`` describes the
extension points; ``docs/facts.md`` is generated from both tables.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Collection, Container, Iterable

from .errors import PolicyError
from .paths import expand_path, read_text
from .facts import Predicate

__all__ = [
    "PolicyFile", "Policy", "load_policy", "read_policy", "builtin_files", "check_safety", "forbidden_constructs",
    "PARTS", "EnginePredicate", "ENGINE_PREDICATES", "IDLE_WITHOUT",
]

BUILTIN_PREFIX = "<builtin>/"

#: The ``#program`` parts the engine grounds: ``base`` with each of ``decide``, ``explain`` and
#: ``dispatch`` (the dispatch pass, docs/dispatch.md).
PARTS = ("base", "decide", "explain", "dispatch")


@dataclass(frozen=True)
class PolicyFile:
    name: str  # e.g. "quota.lp": the rule group it defines
    path: str  # where it was read from, for messages
    text: str

    @property
    def builtin(self) -> bool:
        """True for a file that ships with clueue (not replaced by a user's file)."""
        return self.path.startswith(BUILTIN_PREFIX)


@dataclass(frozen=True)
class Policy:
    files: tuple[PolicyFile, ...]

    @property
    def user_files(self) -> tuple[PolicyFile, ...]:
        """The files that do not ship with clueue: they extend or replace built-in rule groups."""
        return tuple(f for f in self.files if not f.builtin)

    def is_builtin(self, name: str) -> bool:
        """True if the rule group ``name`` (e.g. ``quota.lp``) is the one clueue ships."""
        return any(f.name == name and f.path.startswith("<builtin>/") for f in self.files)

    def for_facts(self, present: Container[str], idle: Collection[str] = ()) -> Policy:
        """The files a cycle whose facts have the predicates ``present`` needs to load.

        A built-in rule group of :data:`IDLE_WITHOUT` decides nothing when no fact of its
        predicate exists, so a cycle without one leaves it out: clingo prepares every rule it
        is given, every cycle, whether or not the rule can fire. ``idle`` names built-in rule
        groups the caller knows to decide nothing this cycle for another reason (candidate
        selection: no candidate might preempt). Only a policy of built-in files is trimmed: a
        user's file might give such a rule group something to work on.
        """
        if self.user_files:
            return self
        idle = {*idle, *(name for name, predicate in IDLE_WITHOUT.items() if predicate not in present)}
        kept = tuple(f for f in self.files if f.name not in idle)
        return self if len(kept) == len(self.files) else Policy(kept)

    def digest(self) -> str:
        h = hashlib.sha256()
        for f in self.files:
            h.update(f"{f.name}\0{f.text}\0".encode())
        return "sha256:" + h.hexdigest()[:16]


#: Built-in rule groups that decide nothing without some fact of the predicate named: without a
#: ``preemption/3`` fact no ClusterQueue preempts, so ``preemption.lp`` evicts nothing, and no
#: other rule group reads what it derives.
IDLE_WITHOUT = {"preemption.lp": "preemption"}


_COMMENT_OR_STRING = re.compile(r'%\*.*?\*%|%[^\n]*|"(?:\\.|[^"\\])*"', re.S)
_FORBIDDEN = (
    (re.compile(r"#script\b"), "#script runs code; policy files are data"),
    (re.compile(r"#include\b"), "#include reads other files; pass every policy file with --policy instead"),
    # An @ right after a term is the weight@level separator of a weak constraint; elsewhere it
    # starts an external function call, with or without arguments.
    (re.compile(r"(?<![\w)'\"\s])\s*@\s*[a-z_]"),
     "external function calls (@name(...)) run code; use ASP arithmetic"),
)


def _blank(match: re.Match[str]) -> str:
    # Keep newlines so that line numbers stay right; strings keep their quotes.
    return "".join(c if c == "\n" else " " for c in match.group(0))


def forbidden_constructs(file: PolicyFile) -> list[tuple[int, int, str]]:
    """Every construct of ``file`` that could run code or read files, as ``(line, column, why)``.

    Comments and strings are ignored, so ``% no #script here`` is fine.
    """
    stripped = _COMMENT_OR_STRING.sub(_blank, file.text)
    found = []
    for pattern, why in _FORBIDDEN:
        for m in pattern.finditer(stripped):
            start = m.start() + len(m.group(0)) - len(m.group(0).lstrip())  # where the construct begins
            line = stripped.count("\n", 0, start) + 1
            col = start - (stripped.rfind("\n", 0, start) + 1) + 1
            found.append((line, col, why))
    return sorted(found)


def check_safety(file: PolicyFile) -> None:
    """Refuse code execution and file access in a policy file.

    Raises:
        PolicyError: ``path:line:column: message`` for the first forbidden construct.
    """
    found = forbidden_constructs(file)
    if found:
        line, col, why = found[0]
        raise PolicyError(f"{file.path}:{line}:{col}: forbidden: {why}")


def builtin_files() -> list[PolicyFile]:
    """The policy files that ship with clueue, in name order."""
    root = resources.files("clueue.policies")
    return [PolicyFile(p.name, f"{BUILTIN_PREFIX}{p.name}", p.read_text(encoding="utf-8"))
            for p in sorted(root.iterdir(), key=lambda p: p.name) if p.name.endswith(".lp")]


def read_policy(paths: Iterable[str | Path] = ()) -> Policy:
    """Like :func:`load_policy` but without the safety check, for tools that report every problem.

    Never ground a policy read this way: use :func:`load_policy`.

    Raises:
        PolicyError: a path does not exist, holds no ``.lp`` file, or cannot be read.
    """
    files = {f.name: f for f in builtin_files()}
    for raw in paths:
        found = expand_path(raw, suffixes=(".lp",), recursive=False, what="policy file", error=PolicyError)
        if not found:
            raise PolicyError(f"{raw}: no .lp files in this directory")
        for p in found:
            files[p.name] = PolicyFile(p.name, str(p), read_text(p, error=PolicyError))
    return Policy(tuple(files[name] for name in sorted(files)))


def load_policy(paths: Iterable[str | Path] = ()) -> Policy:
    """The built-in policy extended (or overridden, file by file) by the given files and directories.

    Raises:
        PolicyError: a path does not exist, holds no ``.lp`` file, or a file is forbidden.
    """
    policy = read_policy(paths)
    for f in policy.files:
        check_safety(f)
    return policy


# ---------------------------------------------------------------------------------------------
# The interface between the engine and a policy, besides the input facts. A policy replacing a
# built-in rule group must keep deriving what the engine reads (``clueue policy check`` says so).
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EnginePredicate:
    """A predicate the engine reads from a policy's answer, or gives to the explanation pass.

    ``part`` is the pass in which the engine reads it (``decide`` or ``explain``); ``given``
    names the part to which the engine adds the decision as facts; ``required`` predicates must
    be derived by some policy file, the others may stay empty.
    """

    predicate: Predicate
    part: str
    required: bool
    given: str | None = None


def _e(signature: str, types: str, doc: str, example: str, *, part: str, required: bool = True,
       given: str | None = None) -> EnginePredicate:
    name, _, rest = signature.partition("(")
    names = [a.strip() for a in rest.rstrip(")").split(",")]
    kinds = types.split()
    assert len(names) == len(kinds), signature
    return EnginePredicate(Predicate(name, tuple(zip(names, kinds)), doc, example), part, required, given)


ENGINE_PREDICATES: dict[str, EnginePredicate] = {e.predicate.name: e for e in (
    _e("candidate(W)", "str", "W is pending and may be admitted this cycle (eligibility.lp). "
       "Only candidates are admitted.", 'candidate("team-a/pod-etl").', part="decide"),
    _e("rank_key(W,K)", "str term", "Candidates are tried in increasing K (clingo's term order, e.g. a tuple); "
       "every candidate needs one (ordering.lp).", 'rank_key("team-a/pod-etl",(-1000,1767225600,0)).', part="decide"),
    _e("fifo_group(W,G)", "str term", "Candidates sharing G follow StrictFIFO: once one is left out, the later "
       "ones of G are too (ordering.lp).", 'fifo_group("research/pod-eval",cq("research")).', part="decide",
       required=False),
    _e("admit(W)", "str", "The decision: candidate W is admitted this cycle (admission.lp, shown). "
       "Given as a fact to the explain part.", 'admit("team-a/pod-etl").', part="decide", given="explain"),
    _e("choose(W,PS,G,F)", "str str int str", "The decision: admitted W places resource group G of pod set PS "
       "in flavor F (admission.lp, shown). Given as a fact to the explain part.",
       'choose("team-a/pod-etl","main",0,"on-demand").', part="decide", given="explain"),
    _e("assign(W,PS,R,F)", "str str str str", "The decision per resource: resource R of pod set PS is admitted "
       "in flavor F (admission.lp, shown).", 'assign("team-a/pod-etl","main","cpu","on-demand").', part="decide"),
    _e("reason(W,Why)", "str term", "Why W got its decision; Why is a reason term (see the reason terms below; "
       "a term of a user's own becomes a reason whose code is the term's name).",
       'reason("team-a/pod-big",never_fits).', part="explain", required=False),
    _e("workload_cq(W,Q)", "str str", "W is queued, through its LocalQueue, in ClusterQueue Q (eligibility.lp).",
       'workload_cq("team-a/pod-etl","team-a").', part="explain"),
    _e("tree_root(Q,T)", "str node", "ClusterQueue Q belongs to the quota tree whose root is T (capacity.lp).",
       'tree_root("team-a",cohort("eng")).', part="explain"),
    _e("draw(M,F,R,K)", "node str str int", "The decision: guarded node M draws bit K (2**K) from its parent's "
       "pool (quota.lp, shown). Given as a fact to the explain part.",
       'draw(cq("team-b"),"on-demand","cpu",2).', part="decide", given="explain", required=False),
    _e("evict(V)", "str", "The decision: admitted V is preempted this cycle (preemption.lp, shown). Given as a "
       "fact to the explain part, where V still holds its quota (ueff/4: what the others admitted now fit "
       "beside) but not in the state once it is gone (demand/6).", 'evict("team-a/pod-batch").', part="decide",
       given="explain", required=False),
    _e("preempting(P)", "str", "The decision: admitted P waits for the workloads it preempts; the plan admits it "
       "in a later cycle (preemption.lp, shown).", 'preempting("team-a/pod-urgent").', part="decide", required=False),
    _e("place(W,PS,C,K)", "str str int int", "The decision: K pods of pod set PS of admitted W go to nodes of "
       "class C (placement.lp, shown; only when the snapshot has Nodes). The engine packs them onto the "
       "class's nodes and pins each pod to its node.", 'place("research/train","workers",0,8).',
       part="decide", required=False),
    _e("nominate(W,K)", "str str", "The decision of the dispatch pass: worker K is one of dispatched W's "
       "status.nominatedClusterNames (dispatch.lp, shown).", 'nominate("team-a/train","worker-a").',
       part="dispatch"),
    _e("predicted(W,K)", "str str", "Dispatched W is predicted to be admitted on worker K (dispatch.lp, shown); "
       "clueue explain words it.", 'predicted("team-a/train","worker-a").', part="dispatch", required=False),
    _e("might_fit(W)", "str", "Left-out W might fit on its own on top of the decision; the engine uses it to "
       "know that candidates it did not solve could not have been admitted (explain.lp).",
       'might_fit("team-a/pod-small").', part="explain", required=False),
)}
