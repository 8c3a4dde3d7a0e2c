"""The set of objects of each cycle's snapshot, stored as keyframes and deltas.

A cycle's set of object hashes (16 bytes each) would cost 240 kB per cycle on a cluster of
15,000 objects, though a cycle changes few of them. So a manifest is either a *keyframe* (every
hash) or a *delta* on the manifest before it (the hashes added and removed). A new keyframe is
written when the chain since the last one has grown long (:data:`CHAIN`) or its deltas add up to
the set's size, so reading a cycle's set reads at most about twice a keyframe. Cycles whose set did
not change share a manifest.
"""

from __future__ import annotations

import sqlite3
import zlib
from dataclasses import dataclass
from typing import Iterable

from .objects import HASH_BYTES

__all__ = ["pack", "unpack", "ManifestWriter", "resolve", "chain_of"]

CHAIN = 64  # deltas at most between two keyframes


def pack(hashes: Iterable[bytes]) -> bytes:
    """Hashes, sorted and concatenated (then compressed: deltas of few hashes stay small)."""
    return zlib.compress(b"".join(sorted(hashes)), 1)


def unpack(data: bytes) -> set[bytes]:
    raw = zlib.decompress(data)
    return {raw[i:i + HASH_BYTES] for i in range(0, len(raw), HASH_BYTES)}


@dataclass
class _Last:
    manifest: int
    hashes: frozenset[bytes]
    chain: int  # deltas since the keyframe
    drift: int  # hashes added and removed since the keyframe


class ManifestWriter:
    """Writes the manifest of each cycle, as a delta on the last one it wrote when it can."""

    def __init__(self) -> None:
        self._last: _Last | None = None

    def forget(self) -> None:
        """Start from a keyframe next time (another writer wrote, or a write failed)."""
        self._last = None

    def write(self, conn: sqlite3.Connection, hashes: frozenset[bytes]) -> tuple[int, int, int]:
        """Store the manifest of ``hashes`` (in the caller's transaction); returns its id and the
        numbers of hashes added and removed since the last cycle."""
        last = self._last if self._last is not None else _latest(conn)
        if last is not None:
            added, removed = hashes - last.hashes, last.hashes - hashes
            if not added and not removed:
                return last.manifest, 0, 0
            drift = last.drift + len(added) + len(removed)
            if last.chain < CHAIN and drift <= max(64, len(hashes)):
                cur = conn.execute("INSERT INTO manifests (base, added, removed, objects) VALUES (?, ?, ?, ?)",
                                   (last.manifest, pack(added), pack(removed), len(hashes)))
                self._last = _Last(int(cur.lastrowid or 0), hashes, last.chain + 1, drift)
                return self._last.manifest, len(added), len(removed)
        cur = conn.execute("INSERT INTO manifests (base, added, removed, objects) VALUES (NULL, ?, ?, ?)",
                           (pack(hashes), pack(()), len(hashes)))
        self._last = _Last(int(cur.lastrowid or 0), hashes, 0, 0)
        changed = (len(hashes - last.hashes), len(last.hashes - hashes)) if last else (len(hashes), 0)
        return self._last.manifest, changed[0], changed[1]


def _latest(conn: sqlite3.Connection) -> _Last | None:
    """The manifest of the log's last cycle, to write the next one as a delta on it (a new
    writer, or one that saw another write)."""
    row = conn.execute("SELECT manifest FROM cycles WHERE manifest IS NOT NULL ORDER BY id DESC LIMIT 1").fetchone()
    if row is None:
        return None
    chain = chain_of(conn, row[0])
    hashes = frozenset(resolve(conn, row[0]))
    drift = sum(len(unpack(added)) + len(unpack(removed)) for _, base, added, removed in chain if base is not None)
    return _Last(row[0], hashes, len(chain) - 1, drift)


def chain_of(conn: sqlite3.Connection, manifest: int) -> list[tuple[int, int | None, bytes, bytes]]:
    """The manifests from the keyframe of ``manifest`` to it: (id, base, added, removed)."""
    chain = []
    node: int | None = manifest
    while node is not None:
        row = conn.execute("SELECT id, base, added, removed FROM manifests WHERE id = ?", (node,)).fetchone()
        if row is None:
            raise KeyError(node)
        chain.append(row)
        node = row[1]
    return chain[::-1]


def resolve(conn: sqlite3.Connection, manifest: int) -> set[bytes]:
    """The set of object hashes of ``manifest``.

    Raises:
        KeyError: a manifest of the chain is missing.
    """
    hashes: set[bytes] = set()
    for _, _, added, removed in chain_of(conn, manifest):
        hashes -= unpack(removed)
        hashes |= unpack(added)
    return hashes
