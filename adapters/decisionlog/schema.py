"""The SQLite tables of the decision log, and their version (docs/decision-log.md).

``PRAGMA user_version`` holds the schema version. A log of an older version is migrated when
opened for writing (each migration a function from version N to N+1); one of a newer version
is refused with a clear error, never read as if it were this one. Records inside the tables
(JSON) evolve as the plan does: fields are only added within ``clueue.dev/v1``.
"""

from __future__ import annotations

import sqlite3
from typing import Callable

from clueue.engine import AdapterError

__all__ = ["SCHEMA_VERSION", "DecisionLogError", "create", "check_version"]

SCHEMA_VERSION = 1


class DecisionLogError(AdapterError):
    """The decision log cannot be opened, read or written (a missing file, a newer schema, an
    unknown cycle)."""


_TABLES = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- Preset zlib dictionaries, one per kind of row (codec.py). Every value below is a dictionary's
-- id in two bytes (0: none), then zlib of its JSON.
CREATE TABLE dictionaries (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, data BLOB NOT NULL);
-- Each snapshot object once, by the hash of its content: {"source": ..., "body": ...}.
CREATE TABLE objects (hash BLOB PRIMARY KEY, kind TEXT NOT NULL, name TEXT NOT NULL, data BLOB NOT NULL)
    WITHOUT ROWID;
-- The set of objects of a cycle's snapshot: a keyframe (base NULL: added holds every hash) or
-- the hashes added to and removed from its base's set. Hashes are 16 bytes each, concatenated.
CREATE TABLE manifests (id INTEGER PRIMARY KEY, base INTEGER REFERENCES manifests(id), added BLOB NOT NULL,
    removed BLOB NOT NULL, objects INTEGER NOT NULL);
-- Policies (kind "policy": the files) and Configurations (kind "config"), by digest.
CREATE TABLE blobs (digest TEXT NOT NULL, kind TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (kind, digest))
    WITHOUT ROWID;
-- One row per cycle; record is its record without "workloads" (those are in states).
CREATE TABLE cycles (id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, origin TEXT NOT NULL,
    snapshot_digest TEXT NOT NULL, policy_digest TEXT NOT NULL, config_digest TEXT NOT NULL,
    manifest INTEGER REFERENCES manifests(id), record BLOB NOT NULL);
CREATE INDEX cycles_time ON cycles(time);
-- A workload's state and reasons, recorded by the cycle in which they changed.
CREATE TABLE states (id INTEGER PRIMARY KEY, workload TEXT NOT NULL, cycle INTEGER NOT NULL, time REAL NOT NULL,
    state TEXT NOT NULL, data BLOB NOT NULL);
CREATE INDEX states_workload ON states(workload, cycle);
CREATE INDEX states_cycle ON states(cycle);
"""

#: Migrations from version N (the key) to N+1; none yet.
_MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {}


def create(conn: sqlite3.Connection) -> None:
    """Make the tables of a new, empty log."""
    # Set before the first table: space freed by retention goes back to the file system.
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    conn.executescript(_TABLES)
    conn.execute("INSERT INTO meta VALUES ('format', 'clueue decision log')")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.commit()


def check_version(conn: sqlite3.Connection, path: str, *, write: bool) -> None:
    """Refuse a log this clueue cannot read; migrate an older one when opening it for writing.

    Raises:
        DecisionLogError: the file is not a decision log, or its schema is newer than this
            clueue's (or older, when opened read-only).
    """
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "meta" not in tables or "cycles" not in tables:
        raise DecisionLogError(f"{path} is not a clueue decision log (it has no cycles table)")
    if version > SCHEMA_VERSION:
        raise DecisionLogError(f"{path} is a decision log of schema version {version}, newer than this clueue "
                               f"reads ({SCHEMA_VERSION}): use a newer clueue")
    if version < SCHEMA_VERSION:
        if not write:
            raise DecisionLogError(f"{path} is a decision log of schema version {version}; open it for writing "
                                   f"once (a newer clueue migrates it to {SCHEMA_VERSION})")
        while version < SCHEMA_VERSION:
            if version not in _MIGRATIONS:
                raise DecisionLogError(f"{path} is a decision log of schema version {version}, which this clueue "
                                       "cannot migrate")
            _MIGRATIONS[version](conn)
            version += 1
            conn.execute(f"PRAGMA user_version = {version}")
        conn.commit()
