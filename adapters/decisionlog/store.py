"""The decision log's SQLite store: one writer appends cycles; anyone reads the history.

The file is in WAL mode, so ``clueue audit`` reads while a controller writes; writes are
``synchronous=NORMAL`` (a crash of the machine may lose the last cycles, never corrupt the
file). A cycle is written in one transaction: its new objects, its manifest (manifests.py), its
Configuration and policy when first seen, its row and the states that changed.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from clueue.engine import Document

from .manifests import ManifestWriter, resolve
from .codec import Codec, dumps
from .objects import document_of, worker_of
from .records import DELETED
from .schema import DecisionLogError, check_version, create

__all__ = ["DecisionLog", "NewObject"]

NewObject = tuple[bytes, str, str, bytes]  # hash, kind, name, the record's JSON


class DecisionLog:
    """One decision log file. Open it with :meth:`open` (reading) or :meth:`open` ``write=True``."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self.conn = conn
        self.path = path
        self.manifests = ManifestWriter()
        self.codec = Codec(conn)
        self._last_written: int | None = None  # the id of the last cycle this writer wrote
        self._blobs: set[tuple[str, str]] = set()  # (kind, digest) known to be stored

    @classmethod
    def open(cls, path: str | Path, *, write: bool = False) -> DecisionLog:
        """Open the log at ``path``; for writing it is created when missing.

        Raises:
            DecisionLogError: it does not exist (reading), is no decision log, is of a newer
                schema version, or cannot be opened.
        """
        p = Path(path)
        if not write and not p.is_file():
            raise DecisionLogError(f"no decision log at {p}: give --db PATH, or the Configuration's "
                                   "decisionLog.path (--config)")
        try:
            if write:
                p.parent.mkdir(parents=True, exist_ok=True)
            fresh = write and (not p.exists() or p.stat().st_size == 0)
            conn = sqlite3.connect(str(p), timeout=10.0, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout = 10000")
            if fresh:
                create(conn)
            if write:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute("PRAGMA journal_size_limit = 67108864")
            check_version(conn, str(p), write=write)
        except sqlite3.DatabaseError as e:
            raise DecisionLogError(f"cannot open decision log {p}: {e}") from None
        except OSError as e:
            raise DecisionLogError(f"cannot open decision log {p}: {e.strerror or e}") from None
        return cls(conn, str(p))

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> DecisionLog:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- writing -------------------------------------------------------------------------------
    def latest_states(self, cycle: int | None = None) -> dict[str, dict[str, Any]]:
        """Each workload's last recorded state (as of ``cycle``, default the last); those
        recorded as deleted are left out."""
        bound = "" if cycle is None else "WHERE cycle <= ?"
        rows = self.conn.execute(
            f"SELECT s.data FROM states s JOIN (SELECT max(id) AS id FROM states {bound} GROUP BY workload) m "
            "ON s.id = m.id", () if cycle is None else (cycle,))
        states = (self.codec.decode(data) for (data,) in rows)
        return {s["name"]: s for s in states if s["state"] != DELETED}

    def written_by_another(self) -> bool:
        """Whether a cycle was written since this writer's last one (another process writes too)."""
        last = self.conn.execute("SELECT max(id) FROM cycles").fetchone()[0]
        return last != self._last_written

    def write_cycle(self, record: Mapping[str, Any], states: Sequence[Mapping[str, Any]], *, time: float,
                    hashes: frozenset[bytes] | None, new_objects: Iterable[NewObject],
                    blobs: Iterable[tuple[str, str, Any]]) -> dict[str, Any]:
        """Append one cycle: ``record`` (without id and workloads), the ``states`` that changed,
        the snapshot's object ``hashes`` (None: no snapshot) with the objects perhaps not stored
        yet, and ``blobs`` (kind, digest, value) such as its policy and Configuration.

        Returns the record as stored: with its ``id`` and, with a snapshot, its ``objects``
        (how many, and how many were added and removed since the log's previous cycle).
        """
        conn = self.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            by_kind: dict[str, list[NewObject]] = {}
            for new in new_objects:
                by_kind.setdefault(new[1], []).append(new)
            for kind, news in by_kind.items():
                packed = self.codec.pack(kind, [raw for _, _, _, raw in news])
                conn.executemany("INSERT OR IGNORE INTO objects (hash, kind, name, data) VALUES (?, ?, ?, ?)",
                                 [(h, k, name, data) for (h, k, name, _), data in zip(news, packed)])
            for kind, digest, value in blobs:
                if (kind, digest) not in self._blobs:
                    conn.execute("INSERT OR IGNORE INTO blobs (digest, kind, data) VALUES (?, ?, ?)",
                                 (digest, kind, self.codec.encode(None, value)))
                    self._blobs.add((kind, digest))
            manifest, added, removed = (None, 0, 0) if hashes is None else self.manifests.write(conn, hashes)
            cur = conn.execute(
                "INSERT INTO cycles (time, origin, snapshot_digest, policy_digest, config_digest, manifest, record) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (time, record["origin"], record["snapshotDigest"], record["policyDigest"], record["configDigest"],
                 manifest, b""))
            cycle = int(cur.lastrowid or 0)
            full = {"apiVersion": record["apiVersion"], "kind": record["kind"], "id": cycle, **record}
            if hashes is not None:
                full["objects"] = {"total": len(hashes), "added": added, "removed": removed}
            conn.execute("UPDATE cycles SET record = ? WHERE id = ?", (self.codec.encode("cycle", full), cycle))
            packed = self.codec.pack("state", [dumps(s) for s in states])
            conn.executemany("INSERT INTO states (workload, cycle, time, state, data) VALUES (?, ?, ?, ?, ?)",
                             [(s["name"], cycle, time, s["state"], data) for s, data in zip(states, packed)])
            conn.execute("COMMIT")
        except BaseException as e:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self.manifests.forget()
            self.codec.forget()
            self._blobs.clear()
            if isinstance(e, sqlite3.Error):
                raise DecisionLogError(f"cannot write to decision log {self.path}: {e}") from e
            raise
        self._last_written = cycle
        return full

    # -- reading -------------------------------------------------------------------------------
    def cycle_ids(self) -> tuple[int, int] | None:
        """The first and last cycle ids, None when the log is empty."""
        row = self.conn.execute("SELECT min(id), max(id) FROM cycles").fetchone()
        return None if row[0] is None else (row[0], row[1])

    def last_time(self) -> float | None:
        row = self.conn.execute("SELECT time FROM cycles ORDER BY id DESC LIMIT 1").fetchone()
        return None if row is None else float(row[0])

    def cycles(self, *, since: float | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """The records of the cycles at or after ``since`` (epoch seconds), oldest first (the
        last ``limit`` of them), each with ``changes``: how many workload states it recorded;
        without their ``workloads`` and ``actions`` (counted in ``actionCount``)."""
        rows = self.conn.execute(
            "SELECT * FROM (SELECT id, record FROM cycles WHERE time >= ? ORDER BY id DESC LIMIT ?) ORDER BY id",
            (since if since is not None else float("-inf"), limit if limit is not None else -1)).fetchall()
        if not rows:
            return []
        counts = dict(self.conn.execute("SELECT cycle, count(*) FROM states WHERE cycle BETWEEN ? AND ? GROUP BY cycle",
                                        (rows[0][0], rows[-1][0])).fetchall())
        out = []
        for cycle, data in rows:
            record = self.codec.decode(data)
            record["actionCount"] = len(record.pop("actions", []))
            record["changes"] = counts.get(cycle, 0)
            out.append(record)
        return out

    def record(self, cycle: int) -> dict[str, Any]:
        """The full record of ``cycle``, with the workload states it recorded.

        Raises:
            DecisionLogError: no such cycle in the log.
        """
        row = self.conn.execute("SELECT record FROM cycles WHERE id = ?", (cycle,)).fetchone()
        if row is None:
            raise DecisionLogError(self._unknown(cycle))
        record = self.codec.decode(row[0])
        record["workloads"] = [self.codec.decode(d) for (d,) in self.conn.execute(
            "SELECT data FROM states WHERE cycle = ? ORDER BY id", (cycle,))]
        return record

    def _unknown(self, cycle: int) -> str:
        span = self.cycle_ids()
        held = f"it holds cycles {span[0]} to {span[1]}" if span else "it holds no cycle"
        return f"no cycle {cycle} in decision log {self.path}: {held} (clueue audit cycles lists them)"

    def documents(self, cycle: int) -> list[Document]:
        """The manager's objects of the snapshot ``cycle`` decided on, as the documents they were.

        Raises:
            DecisionLogError: no such cycle, or it recorded no snapshot.
        """
        return self.snapshot_documents(cycle)[0]

    def snapshot_documents(self, cycle: int) -> tuple[list[Document], dict[str, list[Document]]]:
        """The objects of the snapshot ``cycle`` decided on: the manager's, and those of each
        MultiKueue worker's view by worker.

        Raises:
            DecisionLogError: no such cycle, or it recorded no snapshot.
        """
        row = self.conn.execute("SELECT manifest FROM cycles WHERE id = ?", (cycle,)).fetchone()
        if row is None:
            raise DecisionLogError(self._unknown(cycle))
        if row[0] is None:
            raise DecisionLogError(f"cycle {cycle} recorded no snapshot (it failed before reading one)")
        try:
            hashes = resolve(self.conn, row[0])
        except KeyError as e:
            raise DecisionLogError(f"cycle {cycle}: manifest {e} is missing from {self.path}") from None
        docs: list[Document] = []
        workers: dict[str, list[Document]] = {}
        found = 0
        wanted = sorted(hashes)
        for i in range(0, len(wanted), 500):  # SQLite's bound on a statement's parameters
            part = wanted[i:i + 500]
            rows = self.conn.execute(f"SELECT data FROM objects WHERE hash IN ({','.join('?' * len(part))})", part)
            for (data,) in rows:
                stored = self.codec.decode(data)
                worker = worker_of(stored)
                (workers.setdefault(worker, []) if worker else docs).append(document_of(stored))
                found += 1
        if found != len(hashes):
            raise DecisionLogError(f"cycle {cycle}: {len(hashes) - found} of its objects are missing from {self.path}")
        return docs, workers

    def blob(self, kind: str, digest: str) -> Any:
        """A stored policy or Configuration by digest.

        Raises:
            DecisionLogError: it is not stored.
        """
        row = self.conn.execute("SELECT data FROM blobs WHERE kind = ? AND digest = ?", (kind, digest)).fetchone()
        if row is None:
            raise DecisionLogError(f"the {kind} {digest} is not in decision log {self.path}")
        return self.codec.decode(row[0])

    def history(self, workload: str) -> list[tuple[int, float, dict[str, Any]]]:
        """Every state recorded for ``workload``: (cycle, time, state), oldest first."""
        return [(c, t, self.codec.decode(d)) for c, t, d in self.conn.execute(
            "SELECT cycle, time, data FROM states WHERE workload = ? ORDER BY cycle, id", (workload,))]

    def workloads_like(self, name: str, limit: int = 10) -> list[str]:
        """Recorded workload names ending in ``name`` (to suggest one), at most ``limit``."""
        pattern = "%" + name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return [w for (w,) in self.conn.execute(
            "SELECT DISTINCT workload FROM states WHERE workload LIKE ? ESCAPE '\\' ORDER BY workload LIMIT ?",
            (pattern, limit))]

    def used_bytes(self) -> int:
        """Bytes the log's pages hold (free pages not counted), without its WAL file."""
        page = self.conn.execute("PRAGMA page_size").fetchone()[0]
        count = self.conn.execute("PRAGMA page_count").fetchone()[0]
        free = self.conn.execute("PRAGMA freelist_count").fetchone()[0]
        return int(page * (count - free))
