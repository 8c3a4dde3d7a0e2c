"""Policy work as a product: check policy files, run policy unit tests, diff two policy versions.

Three tools, all returning data that the CLI renders (``clueue policy check|test|diff``):

- :func:`check_policy` reports syntax errors and clingo's warnings with ``file:line:column``,
  predicates a rule reads that nothing defines (usually a typo) or uses with a wrong arity,
  unsafe variables, forbidden constructs, and predicates the engine needs but no file derives.
- :func:`load_tests` / :func:`run_tests` run YAML test files (``kind: PolicyTest``, documented
  in ``docs/policies.md``): each case holds a snapshot and the expected outcome.
- :func:`diff_policies` runs two policy versions on the same snapshots and lists every workload
  whose decision changes.

This module does not import clingo: parsing and grounding go through :mod:`clueue.engine.solver`.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from time import monotonic
from typing import Any, Callable, Iterable, Mapping, Sequence

from .config import Config
from .errors import ClueueError, SnapshotError
from .facts import PREDICATES
from .guard import Limits, guarded_cycle, guarded_outline
from .plan import STATES, Action, Plan, PodGroupEntry, WorkloadEntry
from .policy import (
    BUILTIN_PREFIX, ENGINE_PREDICATES, PARTS, Policy, forbidden_constructs, load_policy, read_policy,
)
from .parsing import parse_yaml
from .paths import expand_path, read_text
from .snapshot import Document, Snapshot, build_snapshot
from .solver import PolicyOutline

__all__ = [
    "Diagnostic", "check_policy",
    "PolicyTestError", "TestCase", "CaseResult", "load_tests", "builtin_tests", "run_tests",
    "WorkloadChange", "PodGroupChange", "SnapshotDiff", "diff_plans", "diff_pod_groups", "diff_policies",
]


# =================================================================================================
# check
# =================================================================================================
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


# =================================================================================================
# test
# =================================================================================================
class PolicyTestError(ClueueError):
    """A policy test file is malformed; the message names the file and the field."""


@dataclass(frozen=True)
class ReasonMatch:
    """A reason expected (or not) among a workload's reasons: its code and some of its details."""

    code: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.code + (f" {dict(self.details)}" if self.details else "")


@dataclass(frozen=True)
class WorkloadExpectation:
    state: str | None = None
    cluster_queue: str | None = None
    flavors: Mapping[str, str] | None = None  # resource -> flavor, for every pod set requesting it
    pod_sets: Mapping[str, Mapping[str, str]] | None = None  # pod set -> resource -> flavor
    reasons: tuple[ReasonMatch, ...] = ()
    reasons_absent: tuple[ReasonMatch, ...] = ()


@dataclass(frozen=True)
class Expectation:
    workloads: Mapping[str, WorkloadExpectation] = field(default_factory=dict)
    actions: tuple[Mapping[str, Any], ...] = ()
    actions_absent: tuple[Mapping[str, Any], ...] = ()
    summary: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class TestCase:
    """One case: a snapshot, the policy files it adds, and what the plan must show."""

    __test__ = False  # not a pytest class

    file: str  # the test file, as given (or <builtin>/tests/name.yaml)
    name: str
    documents: tuple[Document, ...]
    policy: tuple[str, ...]  # policy paths of the file and the case, resolved
    expect: Expectation

    @property
    def title(self) -> str:
        return f"{self.file}: {self.name}"


@dataclass(frozen=True)
class CaseResult:
    case: TestCase
    status: str  # "pass", "fail" or "error"
    problems: tuple[str, ...] = ()  # the diff of a failure, line by line; the message of an error
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.case.file, "name": self.case.name, "status": self.status,
                "problems": list(self.problems), "seconds": round(self.seconds, 4)}


ReadDocuments = Callable[[Sequence[str]], list[Document]]

_FILE_KEYS = {"apiVersion", "kind", "policy", "snapshot", "objects", "cases"}
_CASE_KEYS = {"name", "policy", "snapshot", "objects", "expect"}
_EXPECT_KEYS = {"workloads", "actions", "actionsAbsent", "summary"}
_WORKLOAD_KEYS = {"state", "clusterQueue", "flavors", "podSets", "reasons", "reasonsAbsent"}
_IS_TEST = re.compile(r"^kind:\s*['\"]?PolicyTest['\"]?\s*$", re.M)


class _Reader:
    """Typed access to one test file's YAML, every error naming file and field."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, message: str) -> PolicyTestError:
        return PolicyTestError(f"{self.source}: {where}: {message}" if where else f"{self.source}: {message}")

    def mapping(self, value: Any, where: str, keys: set[str]) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(where, f"expected a mapping, got {type(value).__name__}")
        unknown = sorted(set(map(str, value)) - keys)
        if unknown:
            raise self.fail(where, f"unknown field {unknown[0]!r} (known: {', '.join(sorted(keys))})")
        return value

    def strings(self, value: Any, where: str) -> list[str]:
        if value is None:
            return []
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
            raise self.fail(where, "expected a path or a list of paths")
        return items

    def string_map(self, value: Any, where: str) -> dict[str, str]:
        if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
            raise self.fail(where, "expected a mapping of resource names to flavor names")
        return {str(k): v for k, v in value.items()}

    def reasons(self, value: Any, where: str) -> tuple[ReasonMatch, ...]:
        out = []
        for i, r in enumerate(value or []):
            if isinstance(r, str):
                out.append(ReasonMatch(r))
            elif isinstance(r, Mapping) and isinstance(r.get("code"), str):
                self.mapping(r, f"{where}[{i}]", {"code", "details"})
                out.append(ReasonMatch(r["code"], dict(r.get("details") or {})))
            else:
                raise self.fail(f"{where}[{i}]", "expected a reason code or {code: ..., details: {...}}")
        return tuple(out)

    def actions(self, value: Any, where: str) -> tuple[Mapping[str, Any], ...]:
        if not isinstance(value or [], list) or not all(isinstance(a, Mapping) for a in value or []):
            raise self.fail(where, "expected a list of action patterns such as {kind: admit, target: ns/name}")
        return tuple(dict(a) for a in value or [])


def _expectation(r: _Reader, value: Any, where: str) -> Expectation:
    e = r.mapping(value, where, _EXPECT_KEYS)
    workloads = {}
    for name, raw in r.mapping(e.get("workloads"), f"{where}.workloads", set(map(str, e.get("workloads") or {}))).items():
        w = r.mapping(raw, f"{where}.workloads.{name}", _WORKLOAD_KEYS)
        at = f"{where}.workloads.{name}"
        state = w.get("state")
        if state is not None and state not in STATES:
            raise r.fail(f"{at}.state", f"expected one of {', '.join(STATES)}, got {state!r}")
        pod_sets = None
        if w.get("podSets") is not None:
            raw_sets = r.mapping(w["podSets"], f"{at}.podSets", set(map(str, w["podSets"])))
            pod_sets = {str(ps): r.string_map(fl, f"{at}.podSets.{ps}") for ps, fl in raw_sets.items()}
        workloads[str(name)] = WorkloadExpectation(
            state=state, cluster_queue=w.get("clusterQueue"),
            flavors=r.string_map(w["flavors"], f"{at}.flavors") if w.get("flavors") is not None else None,
            pod_sets=pod_sets, reasons=r.reasons(w.get("reasons"), f"{at}.reasons"),
            reasons_absent=r.reasons(w.get("reasonsAbsent"), f"{at}.reasonsAbsent"))
    summary = r.mapping(e.get("summary"), f"{where}.summary", set(STATES))
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in summary.values()):
        raise r.fail(f"{where}.summary", "expected counts per state")
    return Expectation(workloads, r.actions(e.get("actions"), f"{where}.actions"),
                       r.actions(e.get("actionsAbsent"), f"{where}.actionsAbsent"), dict(summary))


def _parse_test_file(text: str, source: str, base: Path | None, read_documents: ReadDocuments) -> list[TestCase]:
    r = _Reader(source)
    try:
        data = parse_yaml(text, source)
    except SnapshotError as e:
        raise r.fail("", e.detail) from None
    top = r.mapping(data, "", _FILE_KEYS)
    if top.get("kind") != "PolicyTest":
        raise r.fail("kind", f"expected kind: PolicyTest, got {top.get('kind')!r}")

    def resolve(paths: list[str], where: str) -> list[str]:
        if base is None and any(not Path(p).is_absolute() for p in paths):
            raise r.fail(where, "relative paths need a test file on disk")
        return [str(Path(p) if Path(p).is_absolute() else base / p) for p in paths]  # type: ignore[operator]

    def documents(scope: Mapping[str, Any], where: str) -> list[Document]:
        docs = read_documents(resolve(r.strings(scope.get("snapshot"), f"{where}snapshot"), f"{where}snapshot"))
        objects = scope.get("objects") or []
        if not isinstance(objects, list):
            raise r.fail(f"{where}objects", "expected a list of Kubernetes objects")
        return docs + [Document(f"{source}#{where}objects[{i}]", o) for i, o in enumerate(objects)]

    shared_policy = resolve(r.strings(top.get("policy"), "policy"), "policy")
    shared = documents(top, "")
    cases = top.get("cases")
    if not isinstance(cases, list) or not cases:
        raise r.fail("cases", "expected a non-empty list of cases")
    out, names = [], set()
    for i, raw in enumerate(cases):
        where = f"cases[{i}]"
        c = r.mapping(raw, where, _CASE_KEYS)
        name = c.get("name")
        if not isinstance(name, str) or not name:
            raise r.fail(f"{where}.name", "every case needs a name")
        if name in names:
            raise r.fail(f"{where}.name", f"another case is named {name!r}")
        names.add(name)
        out.append(TestCase(source, name, _overlaid(shared, documents(c, f"{where}.")),
                            tuple(shared_policy + resolve(r.strings(c.get("policy"), f"{where}.policy"), f"{where}.policy")),
                            _expectation(r, c.get("expect"), f"{where}.expect")))
    return out


def _identity(doc: Document) -> tuple[Any, ...]:
    body = doc.body if isinstance(doc.body, Mapping) else {}
    meta = body.get("metadata") if isinstance(body.get("metadata"), Mapping) else {}
    return body.get("kind"), meta.get("namespace"), meta.get("name")


def _overlaid(shared: list[Document], own: list[Document]) -> tuple[Document, ...]:
    """The file's documents and a case's: a case's object replaces the file's object of the same
    kind and name (a snapshot holds one of each)."""
    replaced = {_identity(d) for d in own}
    return tuple(d for d in shared if _identity(d) not in replaced) + tuple(own)


def load_tests(paths: Iterable[str | Path], *, read_documents: ReadDocuments) -> list[TestCase]:
    """The cases of the given test files and directories.

    A directory is searched recursively for ``*.yaml`` / ``*.yml`` files of ``kind: PolicyTest``
    (other YAML, such as the snapshots tests refer to, is skipped); a file named explicitly must
    be a test file. Paths inside a test file are relative to it; ``read_documents`` reads them.

    Raises:
        PolicyTestError: a path does not exist or a test file is malformed.
        SnapshotError, AdapterError: a snapshot a test refers to cannot be read.
    """
    out: list[TestCase] = []
    for raw in paths:
        files = expand_path(raw, suffixes=(".yaml", ".yml"), recursive=True, what="test file", error=PolicyTestError)
        if Path(raw).is_dir():
            files = [p for p in files if _IS_TEST.search(_read(p))]
            if not files:
                raise PolicyTestError(f"{raw}: no policy test files (kind: PolicyTest) in this directory")
        for p in files:
            out += _parse_test_file(_read(p), str(p), p.parent, read_documents)
    return out


def _read(path: Path) -> str:
    return read_text(path, error=PolicyTestError)


def builtin_tests(*, read_documents: ReadDocuments) -> list[TestCase]:
    """The suite of the built-in policies (``clueue.policies/tests/*.yaml``)."""
    root = resources.files("clueue.policies").joinpath("tests")
    out: list[TestCase] = []
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.endswith((".yaml", ".yml")):
            base = Path(str(entry)).parent if isinstance(entry, Path) else None
            out += _parse_test_file(entry.read_text(encoding="utf-8"), f"{BUILTIN_PREFIX}tests/{entry.name}",
                                    base, read_documents)
    return out


def _matches(expected: Any, actual: Any) -> bool:
    """Does ``actual`` contain ``expected``? Mappings match on the keys given; scalars as text."""
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(k in actual and _matches(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(expected) == len(actual) and \
            all(_matches(e, a) for e, a in zip(expected, actual))
    return bool(expected == actual or str(expected) == str(actual))


def _reason_found(match: ReasonMatch, entry: WorkloadEntry) -> bool:
    return any(r.code == match.code and _matches(dict(match.details), dict(r.details)) for r in entry.reasons)


def _show_reasons(entry: WorkloadEntry) -> list[str]:
    return [f"      {r.code}: {r.message}" for r in entry.reasons] or ["      (no reasons)"]


def _flavors_of(entry: WorkloadEntry) -> dict[str, dict[str, str]]:
    return {a.name: dict(a.flavors) for a in entry.admission}


def _check_workload(name: str, want: WorkloadExpectation, plan: Plan) -> list[str]:
    try:
        entry = plan.workload(name)
    except KeyError:
        names = ", ".join(w.name for w in plan.workloads) or "none"
        return [f"  {name}: no such workload in the plan (workloads: {names})"]
    lines: list[str] = []
    if want.state is not None and want.state != entry.state:
        lines += ["    state:", f"      - {want.state}", f"      + {entry.state}"]
    if want.cluster_queue is not None and want.cluster_queue != entry.cluster_queue:
        lines += ["    clusterQueue:", f"      - {want.cluster_queue}", f"      + {entry.cluster_queue}"]
    got = _flavors_of(entry)
    if want.flavors is not None:
        wrong = {r: f for r, f in want.flavors.items()
                 if not any(r in fl for fl in got.values()) or any(fl.get(r, f) != f for fl in got.values())}
        if wrong:
            lines += ["    flavors:", f"      - {_flat(want.flavors)}",
                      f"      + {'; '.join(f'{ps}: {_flat(fl)}' for ps, fl in got.items()) or '(not admitted)'}"]
    if want.pod_sets is not None:
        for ps, fl in want.pod_sets.items():
            have = got.get(ps)
            if have is None or any(have.get(r) != f for r, f in fl.items()):
                lines += [f"    podSets.{ps}:", f"      - {_flat(fl)}",
                          f"      + {_flat(have) if have is not None else '(no such admitted pod set: ' + (', '.join(got) or 'not admitted') + ')'}"]
    missing = [m for m in want.reasons if not _reason_found(m, entry)]
    unwanted = [m for m in want.reasons_absent if _reason_found(m, entry)]
    if missing or unwanted:
        lines += ["    reasons:"] + [f"      - {m}" for m in missing] + \
                 [f"      unexpected {m}" for m in unwanted] + ["    the plan's reasons:"] + _show_reasons(entry)
    elif lines:
        lines += ["    the plan's reasons:"] + _show_reasons(entry)
    return [f"  {entry.name}:"] + lines if lines else []


def _flat(flavors: Mapping[str, str]) -> str:
    return ", ".join(f"{r}={f}" for r, f in sorted(flavors.items())) or "(none)"


def _action_text(pattern: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in pattern.items()) + "}"


def compare(plan: Plan, expect: Expectation) -> list[str]:
    """The differences between a plan and what a test expects, as readable lines (empty: pass)."""
    lines: list[str] = []
    for name, want in expect.workloads.items():
        lines += _check_workload(name, want, plan)
    actions = [a.to_dict() for a in plan.actions]
    missing = [p for p in expect.actions if not any(_matches(p, a) for a in actions)]
    unwanted = [(p, a) for p in expect.actions_absent for a in actions if _matches(p, a)]
    if missing or unwanted:
        lines.append("  actions:")
        lines += [f"    - {_action_text(p)}" for p in missing]
        lines += [f"    unexpected {_action_text(p)}: {a['kind']} {a['target']}" for p, a in unwanted]
        if missing and actions:
            lines += ["    the plan's actions:"] + [f"      {a['kind']} {a['target']}" for a in actions]
        elif missing:
            lines.append("    the plan has no actions")
    summary = plan.summary()
    wrong = {s: n for s, n in expect.summary.items() if summary[s] != n}
    if wrong:
        lines += ["  summary:", f"    - {_flat({s: str(n) for s, n in expect.summary.items()})}",
                  f"    + {_flat({s: str(summary[s]) for s in expect.summary})}"]
    return lines


def run_tests(cases: Sequence[TestCase], *, policy: Sequence[str | Path] = (), pattern: str | None = None,
              config: Config = Config(), limits: Limits | None = Limits()) -> list[CaseResult]:
    """Run the cases whose title matches ``pattern`` (a regular expression, searched).

    ``policy`` paths extend the policy of every case (before the case's own files). Every case
    runs under ``limits`` (see :func:`clueue.engine.guard.guarded_cycle`).

    Raises:
        re.error: ``pattern`` is not a regular expression.
    """
    regex = re.compile(pattern) if pattern else None
    policies: dict[tuple[str, ...], Policy | ClueueError] = {}
    results = []
    for case in cases:
        if regex is not None and not regex.search(case.title):
            continue
        start = monotonic()
        key = tuple(map(str, policy)) + case.policy
        try:
            if key not in policies:
                try:
                    policies[key] = load_policy(key)
                except ClueueError as e:
                    policies[key] = e
            loaded = policies[key]
            if isinstance(loaded, ClueueError):
                raise loaded
            plan = guarded_cycle(build_snapshot(case.documents), loaded, config, limits=limits)
            problems = compare(plan, case.expect)
            results.append(CaseResult(case, "fail" if problems else "pass", tuple(problems), monotonic() - start))
        except ClueueError as e:
            results.append(CaseResult(case, "error", (str(e),), monotonic() - start))
    return results


# =================================================================================================
# diff
# =================================================================================================
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
