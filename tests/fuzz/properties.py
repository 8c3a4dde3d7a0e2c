"""What every cycle must guarantee, whatever its input, and how a fuzz case is run to check it.

:func:`check_case` runs one cycle over raw documents (or snapshot files) in a child process under
a hard wall-clock and memory limit, and fails with a :class:`FuzzFailure` when

1. the cycle neither returns a plan nor raises a :class:`~clueue.engine.ClueueError` (another
   exception, or no answer within the limit: a hang);
2. a node of a quota tree is over its quota after the plan: see :func:`quota_violations`;
3. a pod is ungated without an admission, or with a node selector that does not match the
   node labels of the flavors its pod set is admitted in: see :func:`action_violations`.

The failing case is written, as a corpus-ready YAML file, to ``$CLUEUE_FUZZ_FAILURES``
(default ``/tmp/clueue-fuzz-failures``), one file per kind of failure; Hypothesis replays the
minimal example last, so the file left holds the minimized case.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import traceback
from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import yaml

from clueue.engine import ClueueError, Config, Document, Plan, Policy, build_snapshot, run_cycle
from clueue.engine.policy import builtin_files
from clueue.engine.guard import LimitExceeded, Limits, guarded_cycle, run_limited
from clueue.engine.snapshot import Snapshot
from clueue.engine.workloads import Workload, build_workloads

#: Solver budget of a fuzz cycle, and the hard limit on the whole cycle (build, solve, explain,
#: checks): a cycle of a few dozen objects takes some 50 ms, so the limit only catches hangs.
CONFIG = Config(time_budget=1.0)
WALL_SECONDS = float(os.environ.get("CLUEUE_FUZZ_WALL_SECONDS", "20"))
MEMORY_MIB = 1024
#: The guard's wall-clock limit for a cycle with user policy files (``Limits.seconds``).
POLICY_SECONDS = 5.0

FAILURES = Path(os.environ.get("CLUEUE_FUZZ_FAILURES", "/tmp/clueue-fuzz-failures"))


class FuzzFailure(AssertionError):
    """A property failed. Subclassed per kind of failure (see :func:`_failure`), so that
    Hypothesis reports, and minimizes, distinct failures of one run separately."""


_FAILURE_TYPES: dict[str, type[FuzzFailure]] = {}


def _failure(signature: str, message: str) -> FuzzFailure:
    name = "FuzzFailure_" + re.sub(r"\W+", "_", signature)[:80]
    if name not in _FAILURE_TYPES:
        _FAILURE_TYPES[name] = type(name, (FuzzFailure,), {})
    return _FAILURE_TYPES[name](f"[{signature}] {message}")


@dataclass(frozen=True)
class Outcome:
    """What a cycle gave: a plan's violations of the properties, or the clueue error raised."""

    violations: tuple[str, ...] = ()
    error: str | None = None


# ------------------------------------------------------------------------------------------------
# Running a case
# ------------------------------------------------------------------------------------------------

def _documents(case: Sequence[Mapping[str, Any]] | Sequence[str]) -> list[Document]:
    if case and all(isinstance(c, str) for c in case):
        from clueue.adapters.files import read_documents  # corpus files: read as `clueue plan` reads them
        return read_documents(case)  # type: ignore[arg-type]
    return [Document(f"fuzz.yaml#{i + 1}", body) for i, body in enumerate(case)]


def _checked(snapshot: Snapshot, plan: Plan, config: Config, additive: bool) -> Outcome:
    json.dumps(plan.to_dict())  # every entry spelled out, and the plan prints as JSON
    if not additive:
        return Outcome()
    built = build_workloads(snapshot, config).by_key
    return Outcome(violations=tuple(action_violations(snapshot, built, plan))
                   + tuple(quota_violations(snapshot, built, plan)))


def _examine(case: Sequence[Any], policy: Policy, config: Config, additive: bool) -> Outcome:
    """In the child: build, decide, spell the plan out, and check it."""
    try:
        snapshot = build_snapshot(_documents(case))
        return _checked(snapshot, run_cycle(snapshot, policy, config), config, additive)
    except ClueueError as e:
        return Outcome(error=f"{type(e).__name__}: {e}")


class _Hang(Exception):
    pass


@contextlib.contextmanager
def _watchdog(seconds: float) -> Iterator[None]:
    def expired(signum: int, frame: Any) -> None:
        raise _Hang()

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _examine_guarded(case: Sequence[Any], policy: Policy, config: Config, additive: bool) -> Outcome:
    """As ``clueue plan --policy`` runs a cycle: in this process, the cycle in the guard's child
    under the guard's limits; the watchdog catches a guard that does not keep them."""
    limits = Limits(seconds=POLICY_SECONDS, memory_mib=MEMORY_MIB)
    try:
        with _watchdog(WALL_SECONDS + 2 * POLICY_SECONDS):  # a cycle over the limit is probed once more
            snapshot = build_snapshot(_documents(case))
            return _checked(snapshot, guarded_cycle(snapshot, policy, config, limits=limits), config, additive)
    except ClueueError as e:
        return Outcome(error=f"{type(e).__name__}: {e}")
    except _Hang:
        raise _failure("hang", f"no plan and no error after {WALL_SECONDS + 2 * POLICY_SECONDS:g}s") from None
    except Exception:  # noqa: BLE001 - any other exception is the failure this reports
        trace = traceback.format_exc()
        raise _failure(_crash_signature(trace), trace) from None


def run_case(case: Sequence[Any], policy: Policy, config: Config = CONFIG, *, additive: bool = True,
             guarded: bool = False) -> Outcome:
    """Run one case under the hard limits; ``additive``: the policy only adds constraints to
    the built-in rules, so the quota and ungate properties must hold; ``guarded``: through
    ``guarded_cycle`` with a user policy's limits (else ``run_cycle`` in a child of this test).

    Raises:
        FuzzFailure: an exception other than a clueue error, or a limit exceeded.
    """
    if guarded:
        return _examine_guarded(case, policy, config, additive)
    try:
        return run_limited(_examine, case, policy, config, additive, seconds=WALL_SECONDS,  # type: ignore[no-any-return]
                           memory_mib=MEMORY_MIB)
    except LimitExceeded as e:
        if e.kind == "time":
            raise _failure("hang", f"no plan and no error after {WALL_SECONDS:g}s") from None
        if e.kind == "memory":
            raise _failure("memory", f"more than {MEMORY_MIB} MiB") from None
        raise _failure(_crash_signature(e.detail), e.detail) from None
    except Exception as e:  # noqa: BLE001 - the child's own exception, re-raised by the guard with its traceback
        raise _failure(_crash_signature(str(e)), str(e)) from None


def replaces_builtin(policy: Policy) -> bool:
    """Whether a user file replaces a built-in rule group: then only plan-or-error must hold."""
    return any(f.name in _BUILTIN_NAMES for f in policy.user_files)


_BUILTIN_NAMES = frozenset(f.name for f in builtin_files())


def _crash_signature(trace: str) -> str:
    """``crash <Exception> at <file:line>``: the innermost frame of clueue's code, and the type."""
    frames = re.findall(r'File "([^"]+)", line (\d+)', trace)
    ours = [(f, n) for f, n in frames if "/tests/fuzz/" not in f and "/multiprocessing/" not in f]
    where = f"{Path(ours[-1][0]).name}:{ours[-1][1]}" if ours else "?"
    last = trace.strip().splitlines()[-1] if trace.strip() else "?"
    return f"crash {last.split(':')[0]} at {where}"


def check_case(case: Sequence[Any], policy: Policy, config: Config = CONFIG, *, additive: bool = True,
               guarded: bool = False, save: bool = True) -> Outcome:
    """:func:`run_case`, failing on any violation; with ``save``, a failing case of documents is
    saved to :data:`FAILURES`."""
    try:
        outcome = run_case(case, policy, config, additive=additive, guarded=guarded)
        if outcome.violations:
            raise _failure(outcome.violations[0].split(":")[0], "\n".join(outcome.violations))
    except FuzzFailure as failure:
        if save and case and not isinstance(case[0], str):
            save_case(type(failure).__name__, case, str(failure), policy)
        raise
    return outcome


def save_case(name: str, documents: Sequence[Mapping[str, Any]], failure: str, policy: Policy,
              directory: Path = FAILURES) -> Path:
    """Write a failing case as a corpus case: ``name.yaml``, headed by the failure as a comment,
    or, with user policy files, a folder ``name/`` of ``snapshot.yaml`` and those files."""
    head = "".join(f"# {line}\n".replace("# \n", "#\n") for line in failure.strip().splitlines()[-12:])
    text = head + yaml.safe_dump_all(documents, sort_keys=False, width=120)
    if not policy.user_files:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"{name}.yaml").write_text(text)
        return directory / f"{name}.yaml"
    folder = directory / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "snapshot.yaml").write_text(text)
    for f in policy.user_files:
        (folder / f.name).write_text(f.text)
    return folder


# ------------------------------------------------------------------------------------------------
# Property 3: no ungate without an admission; admissions only where the queue has quota
# ------------------------------------------------------------------------------------------------

def action_violations(snapshot: Snapshot, built: Mapping[str, Workload], plan: Plan) -> Iterable[str]:
    """Every ``ungate`` is of a gated pod of an admitted workload (admitted before, or by an
    ``admit`` of this plan, and not preempted by it), with a node selector holding the node
    labels of every flavor its pod set is admitted in; every ``admit`` is of a workload not
    admitted before, into flavors its ClusterQueue lists for each resource."""
    admits = {a.workload: a for a in plan.actions if a.kind == "admit"}
    preempted = {a.workload for a in plan.actions if a.kind == "preempt"}
    entries = {e.name: e for e in plan.workloads}
    for a in plan.actions:
        if a.kind == "admit":
            yield from _admit_violations(snapshot, built, entries, a.workload, a.details)
    for a in plan.actions:
        if a.kind != "ungate":
            continue
        w, entry = built.get(a.workload), entries.get(a.workload)
        if w is None or entry is None:
            yield f"ungate-unknown: {a.target} for unknown workload {a.workload}"
            continue
        if entry.state != "admitted" or (w.admission is None and a.workload not in admits) or a.workload in preempted:
            yield (f"ungate-without-admission: {a.target} of {a.workload} (state {entry.state}, admitted before: "
                   f"{w.admission is not None}, admit action: {a.workload in admits}, preempted: {a.workload in preempted})")
            continue
        pod_set = next((ps for ps, pods in w.pods.items() if any(f"{p.namespace}/{p.name}" == a.target for p in pods)), None)
        pod = next((p for p in w.pods.get(pod_set or "", ()) if f"{p.namespace}/{p.name}" == a.target), None)
        if pod is None:
            yield f"ungate-foreign-pod: {a.target} is not a pod of {a.workload}"
            continue
        if "kueue.x-k8s.io/admission" not in pod.scheduling_gates or a.details.get("uid") != pod.uid:
            yield f"ungate-not-gated: {a.target} (gates {pod.scheduling_gates}, uid {a.details.get('uid')!r})"
        assignment = next((x for x in entry.admission if x.name == pod_set), None)
        if assignment is None:
            yield f"ungate-pod-set-not-admitted: {a.target} of pod set {pod_set} of {a.workload}"
            continue
        selector = a.details.get("nodeSelector") or {}
        for flavor in sorted(set(assignment.flavors.values())):
            rf = snapshot.flavors.get(flavor)
            wrong = {k: v for k, v in (rf.node_labels.items() if rf else ()) if selector.get(k) != v}
            if wrong:
                yield (f"ungate-selector-mismatch: {a.target} of {a.workload} is admitted in flavor {flavor} "
                       f"(node labels {dict(rf.node_labels)}) but ungated with nodeSelector {selector}")


def _admit_violations(snapshot: Snapshot, built: Mapping[str, Workload], entries: Mapping[str, Any], key: str,
                      details: Mapping[str, Any]) -> Iterable[str]:
    w, entry = built.get(key), entries.get(key)
    if w is None or entry is None or entry.state != "admitted":
        yield f"admit-not-admitted: {key} has an admit action but its entry is {entry and entry.state}"
        return
    if w.admission is not None:
        yield f"admit-twice: {key} was admitted before this cycle and is admitted again"
    cq = snapshot.cluster_queues.get(details.get("clusterQueue") or "")
    if cq is None:
        yield f"admit-unknown-queue: {key} admitted into ClusterQueue {details.get('clusterQueue')!r}"
        return
    if cq.stopped:
        yield f"admit-stopped-queue: {key} admitted into stopped ClusterQueue {cq.name}"
    listed = {(r, fq.flavor) for g in cq.resource_groups for r in g.covered for fq in g.flavors}
    for ps in details.get("podSets", ()):
        for resource, flavor in ps["flavors"].items():
            if (resource, flavor) not in listed or flavor not in snapshot.flavors:
                yield (f"admit-unlisted-flavor: {key} pod set {ps['name']} gets {resource} in flavor {flavor}, "
                       f"which ClusterQueue {cq.name} does not list for it (or which does not exist)")


# ------------------------------------------------------------------------------------------------
# Property 2: no node of a quota tree over its quota
# ------------------------------------------------------------------------------------------------

Node = tuple[str, str]  # ("cq" | "cohort", name)
Pair = tuple[str, str]  # (flavor, resource)


class _Tree:
    """The quota trees of a snapshot, per flavor and resource, as docs/semantics.md defines them:
    ``subtree_quota(N)`` is the nominal quota of N and all below it; ``guaranteed(N) =
    subtree_quota(N) - lendingLimit(N)`` (when positive, and N has a parent) is not lent; the
    usage of a cohort is the sum over its children of ``max(usage, guaranteed)``; a root may use
    its subtree quota, a node with a parent and a borrowingLimit its subtree quota plus it."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.parent: dict[Node, Node | None] = {}
        for c in snapshot.cohorts.values():
            self.parent[("cohort", c.name)] = ("cohort", c.parent) if c.parent else None
        for q in snapshot.cluster_queues.values():
            self.parent[("cq", q.name)] = ("cohort", q.cohort) if q.cohort else None
        for p in list(self.parent.values()):
            if p is not None:
                self.parent.setdefault(p, None)
        self.nominal: dict[tuple[Node, Pair], Fraction] = defaultdict(Fraction)
        self.borrowing: dict[tuple[Node, Pair], Fraction] = {}
        self.lending: dict[tuple[Node, Pair], Fraction] = {}
        owners = [(("cq", q.name), q.resource_groups) for q in snapshot.cluster_queues.values()]
        owners += [(("cohort", c.name), c.resource_groups) for c in snapshot.cohorts.values()]
        for node, groups in owners:
            for g in groups:
                for fq in g.flavors:
                    for r, q in fq.resources.items():
                        key = (node, (fq.flavor, r))
                        self.nominal[key] += q.nominal
                        if q.borrowing_limit is not None:
                            self.borrowing[key] = q.borrowing_limit
                        if q.lending_limit is not None:
                            self.lending[key] = q.lending_limit
        self.children: dict[Node, list[Node]] = defaultdict(list)
        for n, p in self.parent.items():
            if p is not None:
                self.children[p].append(n)

    def path(self, node: Node) -> list[Node]:
        out = [node]
        while (p := self.parent.get(out[-1])) is not None and p not in out:
            out.append(p)
        return out

    def subtree_quota(self, node: Node, pair: Pair) -> Fraction:
        return self.nominal.get((node, pair), Fraction(0)) + sum(
            (self.subtree_quota(c, pair) for c in self.children[node]), Fraction(0))

    def guaranteed(self, node: Node, pair: Pair) -> Fraction | None:
        lending = self.lending.get((node, pair))
        if lending is None or self.parent.get(node) is None:
            return None
        s = self.subtree_quota(node, pair)
        return s - lending if s > lending else None

    def limit(self, node: Node, pair: Pair) -> Fraction | None:
        if self.parent.get(node) is None:
            return self.subtree_quota(node, pair)
        b = self.borrowing.get((node, pair))
        return None if b is None else self.subtree_quota(node, pair) + b

    def usage(self, node: Node, pair: Pair, used: Mapping[tuple[Node, Pair], Fraction]) -> Fraction:
        total = used.get((node, pair), Fraction(0))
        for c in self.children[node]:
            u = self.usage(c, pair, used)
            g = self.guaranteed(c, pair)
            total += u if g is None else max(u, g)
        return total


def _usage(w: Workload, admission: Iterable[tuple[str, int, Mapping[str, str]]]) -> dict[Pair, Fraction]:
    """What pod sets ``(name, pods, resource -> flavor)`` of ``w`` use, per (flavor, resource)."""
    requests = {ps.name: ps.requests for ps in w.pod_sets}
    out: dict[Pair, Fraction] = defaultdict(Fraction)
    for name, pods, flavors in admission:
        for r, amount in requests.get(name, {}).items():
            if r in flavors:
                out[(flavors[r], r)] += pods * amount
    return out


def quota_violations(snapshot: Snapshot, built: Mapping[str, Workload], plan: Plan) -> Iterable[str]:
    """For every node of a quota tree and every (flavor, resource) that this plan's admissions
    add usage to below it: the node's usage stays within its limit, counting every workload
    admitted before the cycle, its victims included (the plan must fit while they still hold
    their quota), at the quantities of the snapshot, exactly (no units, no rounding).

    Usage of a workload admitted before counts in the ClusterQueue its ``status.admission``
    names, for the pods that hold quota (succeeded pods of a group do not); a new admission in
    the ClusterQueue of its ``admit`` action.
    """
    tree = _Tree(snapshot)
    used: dict[tuple[Node, Pair], Fraction] = defaultdict(Fraction)
    for w in built.values():
        if w.admission is None or w.finished or w.admission.cluster_queue not in snapshot.cluster_queues:
            continue
        held = [(a.name, w.admitted_count(a.name), a.flavors) for a in w.admission.pod_sets]
        for pair, amount in _usage(w, held).items():
            used[(("cq", w.admission.cluster_queue), pair)] += amount
    grows: set[tuple[Node, Pair]] = set()
    for a in plan.actions:
        if a.kind != "admit" or a.workload not in built or a.details.get("clusterQueue") not in snapshot.cluster_queues:
            continue
        node = ("cq", a.details["clusterQueue"])
        new = [(ps["name"], ps["count"], ps["flavors"]) for ps in a.details["podSets"]]
        for pair, amount in _usage(built[a.workload], new).items():
            used[(node, pair)] += amount
            grows |= {(n, pair) for n in tree.path(node)}
        for ps in a.details["podSets"]:  # a pod set asking nothing still grows its flavors' nodes
            grows |= {(n, (f, r)) for f, r in ((f, r) for r, f in ps["flavors"].items()) for n in tree.path(node)}
    for node, pair in sorted(grows):
        limit = tree.limit(node, pair)
        if limit is None:
            continue
        usage = tree.usage(node, pair, used)
        if usage > limit:
            yield (f"over-quota: {node[0]} {node[1]} uses {_q(usage)} of {pair[1]} in flavor {pair[0]}, over its limit "
                   f"{_q(limit)}, after admitting {sorted(w for w in {a.workload for a in plan.actions if a.kind == 'admit'})}")


def _q(value: Fraction) -> str:
    return str(value) if value.denominator == 1 or value.numerator < 10**30 else f"~{float(value):.4g}"
