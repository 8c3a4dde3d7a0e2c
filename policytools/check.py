"""``clueue policy check``: a policy's files checked as ``--policy`` would load them.

:func:`check_policy` reports syntax errors and clingo's warnings with ``file:line:column``,
predicates a rule reads that nothing defines (usually a typo) or uses with a wrong arity,
unsafe variables, forbidden constructs, and predicates the engine needs but no file derives.
Parsing and grounding go through the engine (:func:`clueue.engine.guard.guarded_outline`).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from clueue.engine.facts import PREDICATES
from clueue.engine.guard import Limits, guarded_outline
from clueue.engine.policy import BUILTIN_PREFIX, ENGINE_PREDICATES, PARTS, Policy, forbidden_constructs, read_policy
from clueue.engine.solver import PolicyOutline

__all__ = ["Diagnostic", "check_policy"]


@dataclass(frozen=True)
class Diagnostic:
    """One finding of ``clueue policy check``; ``file`` is empty for the policy as a whole."""

    file: str
    line: int
    column: int
    severity: str  # "error" or "warning"
    code: str  # syntax, unsafe, undefined, arity, forbidden, required, part, or a clingo warning
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}: " if self.file else "policy: "
        return f"{where}{self.severity}: {self.message} [{self.code}]"

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file or None, "line": self.line, "column": self.column,
                "severity": self.severity, "code": self.code, "message": self.message}


_LOCATED = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+)(?:-\d+(?::\d+)?)?: "
                      r"(?P<sev>error|warning|info|note): (?P<text>.*)$")
_INC = re.compile(r"\[#inc_\w+\];")
_CLINGO_CODES = {"OperationUndefined": "operation-undefined", "GlobalVariable": "global-variable",
                 "VariableUnbounded": "variable-unbounded", "FileIncluded": "file-included",
                 "GroundingLimit": "limit"}
_ERROR_CODES = ("RuntimeError", "GroundingLimit")  # the codes of clingo's errors without a location


def _from_message(code: str, text: str) -> Diagnostic | None:
    """A clingo message (``path:L:C-C: error: text`` plus indented lines and notes) as a diagnostic."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return None
    first = _LOCATED.match(lines[0])
    if first is None:
        return Diagnostic("", 0, 0, "error" if code in _ERROR_CODES else "warning", _CLINGO_CODES.get(code, "clingo"),
                          " ".join(lines).removeprefix("error: "))
    body: list[str] = []
    notes: list[re.Match[str]] = []
    for ln in lines[1:]:
        m = _LOCATED.match(ln)
        if m:
            notes.append(m)
        else:
            body.append(_INC.sub("", ln.strip()))
    severity = "error" if first["sev"] == "error" else "warning"
    head = first["text"].rstrip(":")
    at = first
    if head.startswith("unsafe variables"):
        names = [n["text"].replace(" is unsafe", "").strip("'") for n in notes if "unsafe" in n["text"]]
        message = f"unsafe variable{'s' if len(names) > 1 else ''} {', '.join(names)} in: {' '.join(body)}"
        at = notes[0] if notes else first
        kind = "unsafe"
    elif "syntax error" in head or "lexer error" in head:
        message, kind = head, "syntax"
    else:
        message = head + (": " + " ".join(body) if body else "")
        kind = _CLINGO_CODES.get(code, "clingo")
    return Diagnostic(at["file"], int(at["line"]), int(at["col"]), severity, kind, message)


def _signature(name: str, arity: int) -> str:
    return f"{name}/{arity}"


def _described(name: str, arity: int) -> str:
    """``workload_priority(W,P)`` for a schema predicate, else ``name/arity``."""
    p = PREDICATES.get(name) or (ENGINE_PREDICATES[name].predicate if name in ENGINE_PREDICATES else None)
    if p is not None and len(p.args) == arity:
        return p.signature
    return _signature(name, arity)


def _definedness(outline: PolicyOutline) -> list[Diagnostic]:
    """Predicates read but never defined, read in a part that never sees them, or with a wrong arity."""
    inputs = {(p.name, len(p.args)): "an input fact" for p in PREDICATES.values()}
    defs: dict[str, dict[tuple[str, int], str]] = {part: {} for part in PARTS}
    for e in ENGINE_PREDICATES.values():
        if e.given:
            defs[e.given][(e.predicate.name, len(e.predicate.args))] = f"given by the engine to the {e.given} part"
    for f in outline.files:
        for a in f.atoms:
            if a.role in ("head", "declared") and a.part in defs:
                defs[a.part].setdefault((a.name, a.arity), f"derived at {f.path}:{a.line}:{a.column}")

    def available(part: str) -> dict[tuple[str, int], str]:
        parts = PARTS if part == "base" else ("base", part)
        return {**inputs, **{k: v for p in parts for k, v in defs[p].items()}}

    contexts = {part: available(part) for part in PARTS}
    everything = {**inputs, **{k: v for p in PARTS for k, v in defs[p].items()}}
    out: list[Diagnostic] = []
    for f in outline.files:
        for a in f.atoms:
            if a.part not in contexts:
                continue  # a part clueue never grounds: reported once, by its #program line
            key = (a.name, a.arity)
            known = contexts[a.part]
            other_arities = sorted({k for k in known if k[0] == a.name and k != key})
            if a.role == "head":
                schema = PREDICATES.get(a.name) or (ENGINE_PREDICATES[a.name].predicate
                                                    if a.name in ENGINE_PREDICATES else None)
                if schema is not None and len(schema.args) != a.arity:
                    out.append(Diagnostic(f.path, a.line, a.column, "error", "arity",
                                          f"{_signature(a.name, a.arity)} has {a.arity} argument(s), but "
                                          f"{schema.signature} has {len(schema.args)}: the engine and the "
                                          f"other rules read {_signature(a.name, len(schema.args))}"))
                continue
            if a.role != "body" or key in known:
                continue
            if key in everything:
                elsewhere = [p for p in ("decide", "explain") if key in defs[p]]
                out.append(Diagnostic(f.path, a.line, a.column, "error", "undefined",
                                      f"{_signature(*key)} is derived only in the {' and '.join(elsewhere)} "
                                      f"part ({everything[key]}), which is grounded without the {a.part} part: "
                                      f"here it is never true"))
            elif other_arities:
                have = ", ".join(f"{_described(*k)} ({known[k]})" for k in other_arities)
                out.append(Diagnostic(f.path, a.line, a.column, "error", "arity",
                                      f"{_signature(*key)} is used with {a.arity} argument(s), but only {have} exists"))
            else:
                names = sorted({_signature(*k) for k in known})
                close = difflib.get_close_matches(_signature(*key), names, n=1, cutoff=0.75)
                hint = f"; did you mean {close[0]}?" if close else \
                    f"; declare it with '#defined {_signature(*key)}.' if it is meant to be empty"
                out.append(Diagnostic(f.path, a.line, a.column, "error", "undefined",
                                      f"{_signature(*key)} is never defined: no input fact, no rule head, no "
                                      f"decision predicate{hint}"))
        for part in f.parts:
            if part.name not in PARTS:
                out.append(Diagnostic(f.path, part.line, part.column, "warning", "part",
                                      f"#program {part.name} is never grounded (clueue grounds {', '.join(PARTS)}): "
                                      f"its rules have no effect"))
            elif part.params:
                out.append(Diagnostic(f.path, part.line, part.column, "warning", "part",
                                      f"#program {part.name} takes no parameters in clueue; "
                                      f"'{', '.join(part.params)}' are never given"))
    for e in ENGINE_PREDICATES.values():
        key = (e.predicate.name, len(e.predicate.args))
        if e.required and key not in contexts[e.part]:
            out.append(Diagnostic("", 0, 0, "error", "required",
                                  f"the engine reads {e.predicate.signature} in the {e.part} pass, but no policy "
                                  f"file derives it (did a replaced rule group drop it?)"))
    return out


def check_policy(paths: Iterable[str | Path] = (), *, limits: Limits | None = Limits()) -> list[Diagnostic]:
    """Check the built-in policy extended by ``paths``, as :func:`load_policy` would load it.

    Grounding runs under ``limits`` (:func:`clueue.engine.guard.guarded_outline`); hitting one is
    an error diagnostic (code ``limit``) at the statement that was grounding.

    Warnings inside the built-in files are not reported (they are known and deliberate);
    errors are, wherever they are: a user file replacing a rule group can break another.

    Returns:
        The diagnostics, sorted by file, line and column; empty when all is well.

    Raises:
        PolicyError: a path does not exist or cannot be read (a usage error, not a finding).
    """
    policy = read_policy(paths)
    out: list[Diagnostic] = []
    safe = []
    for f in policy.files:
        found = forbidden_constructs(f)
        out += [Diagnostic(f.path, line, col, "error", "forbidden", why) for line, col, why in found]
        if not found:
            safe.append(f)
    outline = guarded_outline(Policy(tuple(safe)), limits)
    messages = [m for f in outline.files for m in f.messages] + \
               [m for m in outline.messages if m[0] != "AtomUndefined"]  # undefined: our own, finer check
    out += [d for d in (_from_message(code, text) for code, text in messages) if d is not None]
    if len(safe) == len(policy.files) and all(f.parsed for f in outline.files):
        out += _definedness(outline)
    kept = {d for d in out if d.severity == "error" or not d.file.startswith(BUILTIN_PREFIX)}
    return sorted(kept, key=lambda d: (d.file == "", d.file, d.line, d.column, d.code, d.message))
