"""Recording cycles: what the controller, ``clueue apply`` and ``clueue plan --record`` call.

A :class:`Recorder` turns one cycle (the documents its snapshot was built from, those of each
MultiKueue worker's view, its plan, its times) into a record, writes it to the SQLite store and
to the JSON-lines sink if one is set, and enforces retention. It keeps what it needs to make the
next cycle cheap: each object's hash by version (objects.py), each workload's last recorded
state (records.py), the last manifest (manifests.py).

Recording must never stop admissions: the controller records from a thread of its own and
catches what :meth:`Recorder.record` raises, logs it, counts it and goes on (observer.py).
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any, Mapping, Sequence

from clueue.engine import Config, Document, Plan, Policy
from clueue.engine.snapshot import WorkerView

from .config import config_digest, config_document
from .jsonlines import JsonLinesSink
from .objects import ObjectHasher
from .records import StateTracker, cycle_record
from .retention import Retention, enforce
from .schema import DecisionLogError
from .store import DecisionLog, NewObject

__all__ = ["Recorder", "ORIGINS", "record_once"]

ORIGINS = ("controller", "apply", "plan")


def _kind_and_name(worker: str, doc: Document) -> tuple[str, str]:
    body = doc.body
    meta = body.get("metadata") or {}
    name = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name", ""))
    return str(body.get("kind", "")), f"{worker}:{name}" if worker else name


def worker_entry(view: WorkerView) -> dict[str, Any]:
    """What a record keeps of a worker's view besides its objects: when it was observed (or,
    for a view without that time, its fixed age) and its snapshot's notices."""
    entry: dict[str, Any] = {"name": view.name}
    if view.observed_at is not None:
        entry["observedAt"] = view.observed_at
    else:
        entry["age"] = view.age
    if view.snapshot.notices:
        entry["snapshotNotices"] = list(view.snapshot.notices)
    return entry


def policy_files(policy: Policy) -> list[dict[str, str]]:
    """A policy as stored: its files' names, where they were read, and their text."""
    return [{"name": f.name, "path": f.path, "text": f.text} for f in policy.files]


class Recorder:
    """Records cycles of one origin (``controller``, ``apply`` or ``plan``) into one log.

    >>> with Recorder.open("decisions.db", origin="plan", policy=policy, config=config) as r:  # doctest: +SKIP
    ...     r.record(started=t, documents=docs, plan=plan, snapshot_notices=snapshot.notices)
    """

    def __init__(self, log: DecisionLog, *, origin: str, policy: Policy, config: Config,
                 retention: Retention = Retention(), json_lines: str | None = None) -> None:
        if origin not in ORIGINS:
            raise ValueError(f"origin {origin!r} is not one of {ORIGINS}")
        self.log = log
        self.origin = origin
        self.policy = policy
        self.config_doc = config_document(config)
        self.config_digest = config_digest(self.config_doc)
        self.retention = retention
        self.sink = JsonLinesSink(json_lines) if json_lines else None
        self.hasher = ObjectHasher()
        self.tracker = StateTracker(log.latest_states())
        self._policy_digest = policy.digest()
        self._policy_files = policy_files(policy)

    @classmethod
    def open(cls, path: str, *, origin: str, policy: Policy, config: Config, json_lines: str | None = None,
             retention: Retention | None = None) -> Recorder:
        """A recorder writing to the log at ``path`` (created if missing); retention and the
        JSON-lines sink default to the Configuration's ``decisionLog``.

        Raises:
            DecisionLogError: the log cannot be opened (see :meth:`DecisionLog.open`).
        """
        settings = config.decision_log
        if retention is None:
            retention = Retention(settings.max_age_seconds, settings.max_bytes) if settings else Retention()
        if json_lines is None and settings is not None:
            json_lines = settings.json_lines
        return cls(DecisionLog.open(path, write=True), origin=origin, policy=policy, config=config,
                   retention=retention, json_lines=json_lines)

    def close(self) -> None:
        self.log.close()
        if self.sink is not None:
            self.sink.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def record(self, *, started: float, documents: Sequence[Document] | None, plan: Plan | None,
               snapshot_notices: Sequence[str] = (), error: str = "",
               phases: Mapping[str, float] | None = None, now: int | None = None,
               workers: Mapping[str, WorkerView] | None = None,
               worker_documents: Mapping[str, Sequence[Document]] | None = None) -> dict[str, Any]:
        """Record one cycle; returns its record (as the JSON-lines sink wrote it).

        ``documents`` are the objects its snapshot was built from (None: it read none);
        ``snapshot_notices`` the snapshot's notices (a replay restores them); ``now`` the time it
        decided at (epoch seconds; default: when it started); ``workers`` the snapshot's views of
        MultiKueue's workers, each recorded with its objects in ``worker_documents`` (a view
        whose objects are not given is not recorded).

        Raises:
            DecisionLogError: the log could not be written.
        """
        if self.log.written_by_another():  # another process wrote meanwhile: start from what it wrote
            self.tracker = StateTracker(self.log.latest_states())
            self.log.manifests.forget()
        hashes: frozenset[bytes] | None = None
        new_objects: list[NewObject] = []
        views = [v for name, v in sorted((workers or {}).items()) if name in (worker_documents or {})]
        if documents is not None:
            by_hash, encoded = self.hasher.hashes(
                documents, {v.name: (worker_documents or {})[v.name] for v in views})
            hashes = frozenset(by_hash)
            new_objects = [(h, *_kind_and_name(*by_hash[h]), data) for h, data in encoded.items()]
        states, memory = self.tracker.changes(plan.workloads) if plan is not None else ([], None)
        record = cycle_record(time=started, origin=self.origin, plan=plan,
                              snapshot_digest=plan.snapshot_digest if plan else "",
                              policy_digest=plan.policy_digest if plan else self._policy_digest,
                              config_digest=self.config_digest, phases=phases, error=error)
        if plan is not None or documents is not None:
            record["now"] = int(started) if now is None else now
        if documents is not None:
            record["snapshotNotices"] = list(snapshot_notices)
            if views:
                record["workers"] = [worker_entry(v) for v in views]
        blobs = [("policy", record["policyDigest"], self._policy_files),
                 ("config", self.config_digest, self.config_doc)]
        try:
            stored = self.log.write_cycle(record, states, time=started, hashes=hashes, new_objects=new_objects,
                                          blobs=blobs)
        except BaseException:
            self.hasher.forget()  # its new objects were not stored: hash (and store) them again
            raise
        if memory is not None:
            self.tracker.commit(memory)
        record = {**stored, "workloads": states}
        if self.sink is not None:
            self.sink.write(record)
        try:
            enforce(self.log, self.retention, time.time())
        except sqlite3.Error as e:
            raise DecisionLogError(f"enforcing the retention of {self.log.path}: {e}") from e
        return record


def record_once(path: str, *, origin: str, policy: Policy, config: Config, started: float,
                documents: Sequence[Document] | None, plan: Plan | None, snapshot_notices: Sequence[str] = (),
                phases: Mapping[str, float] | None = None, now: int | None = None,
                workers: Mapping[str, WorkerView] | None = None,
                worker_documents: Mapping[str, Sequence[Document]] | None = None) -> dict[str, Any]:
    """Record one cycle of a command (``apply``, ``plan --record``) and close the log; the
    arguments as :meth:`Recorder.record`'s.

    Raises:
        DecisionLogError: the log cannot be opened or written.
    """
    with Recorder.open(path, origin=origin, policy=policy, config=config) as recorder:
        return recorder.record(started=started, documents=documents, plan=plan, snapshot_notices=snapshot_notices,
                               phases=phases, now=now, workers=workers, worker_documents=worker_documents)
