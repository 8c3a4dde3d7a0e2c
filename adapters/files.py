"""Reading snapshots and configuration from files, directories and standard input.

YAML (multi-document) and JSON both load; ``kind: List`` documents, as ``kubectl get -o yaml``
prints them, are unpacked by the engine. Each document is labelled ``path#N`` so that errors
name the file and the document.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from clueue.engine import AdapterError, Config, Document, SnapshotError
from clueue.engine.config import ALL_AT_ONCE, Limits, MultiKueue, PodGroups
from clueue.engine.kueueconfig import parse_admission_fair_sharing, parse_fair_sharing, parse_wait_for_pods_ready
from clueue.engine.objects import LabelSelector
from clueue.engine.parsing import parse_documents
from clueue.engine.paths import expand_path, read_text
from clueue.engine.fields import Fields
from clueue.engine.snapshot import Snapshot, WorkerView, parse_selector, build_snapshot

from .decisionlog.config import parse_decision_log

__all__ = ["read_documents", "load_snapshot", "load_config", "parse_config"]

_SUFFIXES = (".yaml", ".yml", ".json")


def _parse(text: str, source: str) -> Iterator[Document]:
    for i, body in enumerate(b for b in parse_documents(text, source) if b is not None):
        yield Document(f"{source}#{i + 1}", body)


def read_documents(paths: Iterable[str]) -> list[Document]:
    """Every document of the given files, directories (recursively, sorted) and ``-`` (stdin).

    Raises:
        AdapterError: a path does not exist or cannot be read.
        SnapshotError: a file is not valid YAML or JSON, or is nested too deeply.
    """
    docs: list[Document] = []
    for raw in paths:
        if raw == "-":
            docs += _parse(sys.stdin.read(), "<stdin>")
            continue
        for f in expand_path(raw, suffixes=_SUFFIXES, recursive=True, what="file", error=AdapterError):
            docs += _parse(read_text(f, error=AdapterError), str(f))
    return docs


def load_snapshot(paths: Iterable[str], read: list[Document] | None = None,
                  worker_read: dict[str, list[Document]] | None = None) -> Snapshot:
    """Read and validate a snapshot from files.

    A directory may hold MultiKueue worker clusters (docs/dispatch.md): each subdirectory
    ``workers/<cluster>/`` holds that worker's own objects, in the same layout, and optionally a
    ``clueue.dev/v1 WorkerView`` document whose ``ageSeconds`` says how long ago they were read
    (0 if absent). They become :attr:`Snapshot.workers`, not objects of the manager.

    ``read`` and ``worker_read``, if given, receive the documents the snapshot is built from:
    the manager's, and each worker's (for the decision log).
    """
    docs: list[Document] = [] if read is None else read
    workers: dict[str, WorkerView] = {}
    for raw in paths:
        held = Path(raw) / WORKERS_DIR
        if raw != "-" and held.is_dir():
            docs += [d for d in read_documents([raw]) if not Path(d.source.rpartition("#")[0]).is_relative_to(held)]
            for sub in sorted(held.iterdir()):
                if sub.is_dir():
                    into = worker_read.setdefault(sub.name, []) if worker_read is not None else None
                    workers[sub.name] = _worker_view(sub, into)
        else:
            docs += read_documents([raw])
    snapshot = build_snapshot(docs)
    return dataclasses.replace(snapshot, workers=workers) if workers else snapshot


#: The subdirectory of a snapshot directory that holds its worker clusters, one directory each.
WORKERS_DIR = "workers"


def _worker_view(directory: Path, read: list[Document] | None = None) -> WorkerView:
    """One worker's objects (also put in ``read``, if given), and the age of its ``WorkerView``
    document."""
    age = 0
    docs = [] if read is None else read
    for doc in read_documents([str(directory)]):
        if isinstance(doc.body, Mapping) and doc.body.get("kind") == "WorkerView":
            f = Fields(Document(doc.source, {**doc.body, "metadata": {"name": directory.name}}), "WorkerView")
            age = f.count("ageSeconds", 0)
        else:
            docs.append(doc)
    return WorkerView(directory.name, build_snapshot(docs), age)


def load_config(path: str | None, *, time_budget: float | None = None) -> Config:
    """Read a ``clueue.dev/v1 Configuration`` file; ``None`` gives the defaults.

    Fields: ``controllerNamespace``, ``podIntegration.namespaceSelector``,
    ``podIntegration.podSelector``, ``podIntegration.managedOwners``, ``solver.timeBudgetSeconds``,
    ``limits.seconds`` and ``limits.memoryMiB`` (0: no memory limit), ``decisionLog``
    (docs/decision-log.md), and Kueue's ``fairSharing``, ``admissionFairSharing`` and
    ``waitForPodsReady`` sections, which override those of Kueue's ConfigMap in the snapshot
    (docs/fair-sharing.md, docs/pods-ready.md), and ``podGroups.gangScheduleWithoutQueue`` and
    ``podGroups.podSelector`` (docs/podgroups.md).
    """
    config = Config()
    if path is not None:
        docs = read_documents([path])
        if len(docs) != 1 or not isinstance(docs[0].body, Mapping) or docs[0].body.get("kind") != "Configuration":
            raise SnapshotError("expected one document of kind Configuration", source=path)
        config = parse_config(docs[0])
    if time_budget is not None:
        config = Config(**{**config.__dict__, "time_budget": time_budget})
    return config


def parse_config(doc: Document) -> Config:
    """A ``Configuration`` document as a :class:`Config` (see :func:`load_config` for its fields);
    a decision log replays a recorded cycle's Configuration with it.

    Raises:
        SnapshotError: a field has a wrong type or value, naming the document and field.
    """
    default = Config()
    f = Fields(doc, "Configuration") if doc.body.get("metadata") else Fields(
        Document(doc.source, {**doc.body, "metadata": {"name": "config"}}), "Configuration")
    pod_selector = parse_selector(f, "podIntegration.podSelector") or LabelSelector()
    owners = [f.typed(f"podIntegration.managedOwners[{i}]", o, str, "a group/Kind string")
              for i, o in enumerate(f.items("podIntegration.managedOwners"))] or list(default.managed_owners)
    budget = f.get("solver.timeBudgetSeconds", default.time_budget)
    if not isinstance(budget, (int, float)) or isinstance(budget, bool) or budget <= 0:
        raise f.fail("solver.timeBudgetSeconds", f"expected a positive number of seconds, got {budget!r}")
    return Config(
        controller_namespace=f.string("controllerNamespace", default.controller_namespace) or default.controller_namespace,
        namespace_selector=parse_selector(f, "podIntegration.namespaceSelector"),
        pod_selector=pod_selector, managed_owners=tuple(owners), time_budget=float(budget),
        limits=_limits(f), decision_log=parse_decision_log(f), multikueue=_multikueue(f),
        fair_sharing=parse_fair_sharing(f), admission_fair_sharing=parse_admission_fair_sharing(f),
        wait_for_pods_ready=parse_wait_for_pods_ready(f), pod_groups=_pod_groups(f))


def _pod_groups(f: Fields) -> PodGroups:
    """The ``podGroups`` section: ``gangScheduleWithoutQueue`` (true or false) and
    ``podSelector`` (docs/podgroups.md)."""
    default = PodGroups()
    f.mapping("podGroups")
    return PodGroups(gang_schedule_without_queue=f.flag("podGroups.gangScheduleWithoutQueue",
                                                        default.gang_schedule_without_queue),
                     pod_selector=parse_selector(f, "podGroups.podSelector") or default.pod_selector)


def _multikueue(f: Fields) -> MultiKueue:
    """The ``multiKueue`` section: Kueue's fields ``gcInterval``, ``origin``, ``workerLostTimeout``
    and ``dispatcherName`` (docs/multikueue.md), and clueue's: ``syncPeriod``, and the dispatch
    fields (docs/dispatch.md) ``clustersPerRound``, ``roundSeconds``, ``staleAfterSeconds``,
    ``copiesWhenUncertain`` (positive whole numbers) and ``copiesWhenNoFit`` (0 or more)."""
    default = MultiKueue()
    numbers = {}
    for key, attr, least in (("clustersPerRound", "clusters_per_round", 1), ("roundSeconds", "round_seconds", 1),
                             ("staleAfterSeconds", "stale_after_seconds", 1),
                             ("copiesWhenUncertain", "copies_when_uncertain", 1),
                             ("copiesWhenNoFit", "copies_when_no_fit", 0)):
        value = f.integer(f"multiKueue.{key}", getattr(default, attr))
        if value is None or value < least:
            raise f.fail(f"multiKueue.{key}", f"expected a whole number of at least {least}, got {value!r}")
        numbers[attr] = value
    dispatcher = f.string("multiKueue.dispatcherName", default.dispatcher_name) or default.dispatcher_name
    if "/" not in dispatcher or len(dispatcher) > 63:
        raise f.fail("multiKueue.dispatcherName", "expected a domain-prefixed name of at most 63 characters "
                     f"(e.g. {ALL_AT_ONCE}), got {dispatcher!r}")
    origin = f.string("multiKueue.origin", default.origin)
    if not origin or not _LABEL_VALUE.match(origin):
        raise f.fail("multiKueue.origin", "expected a label value (letters, digits, '-', '_', '.'; at most 63), "
                     f"got {origin!r}")
    sync = f.duration("multiKueue.syncPeriod", default.sync_period)
    if sync <= 0:
        raise f.fail("multiKueue.syncPeriod", "expected a positive duration")
    return MultiKueue(dispatcher_name=dispatcher, origin=origin, sync_period=sync,
                      gc_interval=f.duration("multiKueue.gcInterval", default.gc_interval),
                      worker_lost_timeout=f.duration("multiKueue.workerLostTimeout", default.worker_lost_timeout),
                      **numbers)


_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def _limits(f: Fields) -> Limits:
    """``limits.seconds`` (a positive number) and ``limits.memoryMiB`` (a whole number; 0: none)."""
    default = Limits()
    seconds = f.get("limits.seconds", default.seconds)
    if seconds is not None and (not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds <= 0):
        raise f.fail("limits.seconds", f"expected a positive number of seconds, got {seconds!r}")
    memory = f.get("limits.memoryMiB", default.memory_mib)
    if not isinstance(memory, int) or isinstance(memory, bool) or memory < 0:
        raise f.fail("limits.memoryMiB", f"expected a whole number of MiB (0: no limit), got {memory!r}")
    return Limits(seconds=None if seconds is None else float(seconds), memory_mib=memory or None)
