"""``clueue policy test``: policy unit tests, YAML files of ``kind: PolicyTest`` (documented in
docs/policies.md), each case a snapshot and the outcome its plan must show.

:func:`load_tests` and :func:`builtin_tests` read the cases (the files, and the snapshots they
name through the ``read_documents`` the caller gives); :func:`run_tests` decides each case
under its policy and :func:`compare` lists what differs from the expectation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from time import monotonic
from typing import Any, Callable, Iterable, Mapping, Sequence

from clueue.engine import ClueueError, Config, Document, Plan, Policy, SnapshotError, WorkloadEntry, build_snapshot
from clueue.engine.guard import Limits, guarded_cycle
from clueue.engine.parsing import parse_yaml
from clueue.engine.paths import expand_path, read_text
from clueue.engine.plan import STATES
from clueue.engine.policy import BUILTIN_PREFIX, load_policy

__all__ = ["PolicyTestError", "TestCase", "CaseResult", "load_tests", "builtin_tests", "run_tests", "compare"]


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
