"""How the log's rows are compressed: zlib with a preset dictionary per kind of row.

Snapshot objects of one kind (Pods, Workloads) and workload states are much alike, and each
alone is small: compressed one by one they keep most of their size (a 530-byte Workload becomes
310 bytes). With a preset dictionary, zlib finds
the shared parts there (the same Workload becomes about 45 bytes). A kind's dictionary is made
of a few rows of the first batch of that kind the log stored. A stored value is the
dictionary's id in two bytes (0: none, as for policies and Configurations), then the zlib
stream of its JSON. Dictionaries are rows of the table ``dictionaries`` and never deleted.
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from typing import Any, Sequence

__all__ = ["Codec", "dumps"]

_LEVEL = 6  # zlib: most of the gain of 9 at a third of its time
_MAX_DICTIONARY = 32 * 1024  # zlib uses no more
_SAMPLES = 16  # rows a new dictionary is made of


def dumps(value: Any) -> bytes:
    """``value`` as compact JSON, keys in their order (a snapshot's digest depends on it)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


class Codec:
    """Encodes and decodes the values of one log, with its dictionaries (cached)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._by_kind: dict[str, tuple[int, bytes]] = {}
        self._by_id: dict[int, bytes] = {}

    def forget(self) -> None:
        """Read the dictionaries again (a transaction that may have added one was rolled back)."""
        self._by_kind, self._by_id = {}, {}

    def pack(self, kind: str | None, raws: Sequence[bytes]) -> list[bytes]:
        """Compress each JSON of ``raws`` with the dictionary of ``kind`` (None: none); a kind
        without one gets some of ``raws`` as its dictionary (in the caller's transaction)."""
        ident, zdict = self._dictionary(kind, raws) if kind and raws else (0, b"")
        out = []
        for raw in raws:
            compressor = zlib.compressobj(_LEVEL, zdict=zdict) if zdict else zlib.compressobj(_LEVEL)
            out.append(ident.to_bytes(2, "big") + compressor.compress(raw) + compressor.flush())
        return out

    def encode(self, kind: str | None, value: Any) -> bytes:
        return self.pack(kind, [dumps(value)])[0]

    def decode(self, data: bytes) -> Any:
        ident = int.from_bytes(data[:2], "big")
        zdict = self._zdict(ident) if ident else b""
        d = zlib.decompressobj(zdict=zdict) if zdict else zlib.decompressobj()
        return json.loads(d.decompress(data[2:]) + d.flush())

    def _dictionary(self, kind: str, samples: Sequence[bytes]) -> tuple[int, bytes]:
        held = self._by_kind.get(kind)
        if held is None:
            row = self.conn.execute("SELECT id, data FROM dictionaries WHERE kind = ? ORDER BY id DESC LIMIT 1",
                                    (kind,)).fetchone()
            if row is None:  # a few rows of the first batch, spread over it: more of what recurs
                step = max(1, len(samples) // _SAMPLES)
                zdict = b"".join(samples[::step][:_SAMPLES])[-_MAX_DICTIONARY:]
                cur = self.conn.execute("INSERT INTO dictionaries (kind, data) VALUES (?, ?)", (kind, zdict))
                row = (int(cur.lastrowid or 0), zdict)
            held = self._by_kind[kind] = (int(row[0]), bytes(row[1]))
            self._by_id[held[0]] = held[1]
        return held

    def _zdict(self, ident: int) -> bytes:
        zdict = self._by_id.get(ident)
        if zdict is None:
            row = self.conn.execute("SELECT data FROM dictionaries WHERE id = ?", (ident,)).fetchone()
            if row is None:
                raise KeyError(f"dictionary {ident}")
            zdict = self._by_id[ident] = bytes(row[0])
        return zdict
