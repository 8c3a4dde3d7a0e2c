"""Retention: the log keeps at most ``maxAge`` of history and stays under ``maxBytes``.

Enforced after a write, in batches so that a steady stream of cycles does not pay a deletion
each: cycles are deleted once the oldest is older than ``maxAge`` by a tenth of it (then all
older than ``maxAge`` go), or once the log's pages exceed ``maxBytes`` (then the oldest cycles
go until it holds at most nine tenths of it). The newest cycle is always kept.

Deleting a cycle keeps, for each workload, the last state recorded before the oldest cycle
kept (its state as that cycle began), unless that state is ``deleted``. The oldest kept cycle's
manifest becomes a keyframe; manifests no kept cycle needs, and objects no kept manifest holds,
are deleted with them; the freed pages go back to
the file system (``PRAGMA incremental_vacuum``).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from .manifests import pack, resolve, unpack
from .records import DELETED
from .store import DecisionLog

__all__ = ["Retention", "enforce"]


@dataclass(frozen=True)
class Retention:
    max_age: float | None = None  # seconds
    max_bytes: int | None = None


def _due(log: DecisionLog, retention: Retention, now: float) -> float | None:
    """The time before which cycles must go now (None: nothing to delete)."""
    oldest = log.conn.execute("SELECT time FROM cycles ORDER BY id LIMIT 1").fetchone()
    if oldest is None:
        return None
    if retention.max_age is not None and oldest[0] < now - retention.max_age * 1.1:
        return now - retention.max_age
    return None


def enforce(log: DecisionLog, retention: Retention, now: float) -> int:
    """Delete what the retention bounds exclude; returns how many cycles were deleted."""
    deleted = 0
    cutoff = _due(log, retention, now)
    if cutoff is not None:
        deleted += _delete_before(log.conn, "time < ?", cutoff)
    if retention.max_bytes is not None and log.used_bytes() > retention.max_bytes:
        for _ in range(20):  # each round deletes a share of what is left, so this ends
            total = log.conn.execute("SELECT count(*), max(id) FROM cycles").fetchone()
            if total[0] <= 1 or log.used_bytes() <= retention.max_bytes * 0.9:
                break
            used = log.used_bytes()
            # the share of cycles to delete: as much as the log is over its target, a tenth at least
            share = max(1, total[0] // 10, int(total[0] * (1 - retention.max_bytes * 0.9 / used)))
            first_kept = log.conn.execute("SELECT id FROM cycles ORDER BY id LIMIT 1 OFFSET ?",
                                          (min(share, total[0] - 1),)).fetchone()[0]
            deleted += _delete_before(log.conn, "id < ?", first_kept)
    if deleted:
        log.conn.execute("PRAGMA incremental_vacuum")
        log.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return deleted


def _delete_before(conn: sqlite3.Connection, where: str, bound: float) -> int:
    """Delete the cycles matching ``where`` (never the newest) and what only they needed."""
    newest = conn.execute("SELECT max(id) FROM cycles").fetchone()[0]
    gone = [r[0] for r in conn.execute(f"SELECT id FROM cycles WHERE {where} AND id < ?", (bound, newest))]
    if not gone:
        return 0
    first_kept = max(gone) + 1
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("DELETE FROM cycles WHERE id < ?", (first_kept,))
        # Each workload's state as the oldest kept cycle began stays (unless it was deleted).
        conn.execute("DELETE FROM states WHERE cycle < ? AND id NOT IN "
                     "(SELECT max(id) FROM states WHERE cycle < ? GROUP BY workload)", (first_kept, first_kept))
        conn.execute("DELETE FROM states WHERE cycle < ? AND state = ?", (first_kept, DELETED))
        _rebase(conn)
        _sweep(conn)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return len(gone)


def _rebase(conn: sqlite3.Connection) -> None:
    """Make the oldest kept cycle's manifest a keyframe (in place), so that the deleted cycles'
    manifests and the objects only they held can go: the kept cycles' chains start there."""
    row = conn.execute("SELECT manifest FROM cycles WHERE manifest IS NOT NULL ORDER BY id LIMIT 1").fetchone()
    if row is None:
        return
    base = conn.execute("SELECT base FROM manifests WHERE id = ?", (row[0],)).fetchone()
    if base is not None and base[0] is not None:
        conn.execute("UPDATE manifests SET base = NULL, added = ?, removed = ? WHERE id = ?",
                     (pack(resolve(conn, row[0])), pack(()), row[0]))


def _sweep(conn: sqlite3.Connection) -> None:
    """Delete the manifests no cycle needs (directly or as the base of one it needs) and the
    objects and blobs no remaining manifest or cycle refers to."""
    needed: set[int] = set()
    bases = dict(conn.execute("SELECT id, base FROM manifests").fetchall())
    for (manifest,) in conn.execute("SELECT DISTINCT manifest FROM cycles WHERE manifest IS NOT NULL"):
        node = manifest
        while node is not None and node not in needed:
            needed.add(node)
            node = bases.get(node)
    conn.executemany("DELETE FROM manifests WHERE id = ?", [(m,) for m in bases if m not in needed])
    held: set[bytes] = set()
    for (added,) in conn.execute("SELECT added FROM manifests"):
        held |= unpack(added)
    stale = [(h,) for (h,) in conn.execute("SELECT hash FROM objects") if h not in held]
    conn.executemany("DELETE FROM objects WHERE hash = ?", stale)
    for kind, column in (("policy", "policy_digest"), ("config", "config_digest")):
        conn.execute(f"DELETE FROM blobs WHERE kind = ? AND digest NOT IN (SELECT DISTINCT {column} FROM cycles)",
                     (kind,))
