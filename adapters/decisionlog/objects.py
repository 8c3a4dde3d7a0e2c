"""Snapshot objects by content: each stored once, compressed, named by the hash of its content.

A recorded object is the document a snapshot was built from: where it was read (``source``,
which the snapshot keeps for errors and rejected objects) and its ``body``. Its hash is the
first 16 bytes of the SHA-256 of its JSON; two cycles that saw the same object store it once.
The JSON keeps the object's own key order (the snapshot's digest hashes the typed objects,
whose mappings keep that order), so a replayed snapshot has the recorded digest.

Hashing every object of a large cluster each cycle would cost more than deciding it, so an
:class:`ObjectHasher` remembers each object's hash by its name and ``resourceVersion``
(which the API server changes on every write): a cycle hashes only the objects that changed.
Objects without a resourceVersion (read from files) are hashed every time.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable, Mapping

from clueue.engine import Document

from .codec import dumps

__all__ = ["HASH_BYTES", "ObjectHasher", "document_of"]

HASH_BYTES = 16


def _identity(doc: Document) -> tuple[str, str] | None:
    """(source, resourceVersion) of an object read from the API; None when it has no version."""
    try:
        version = doc.body["metadata"]["resourceVersion"]
    except (KeyError, TypeError, AttributeError):  # not an object with metadata: hashed each time
        return None
    return (doc.source, str(version)) if version else None


class ObjectHasher:
    """Content hashes of documents, remembered by name and resourceVersion across cycles."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[str, bytes]] = {}  # source -> (resourceVersion, hash)

    def hashes(self, documents: Iterable[Document]) -> tuple[dict[bytes, Document], dict[bytes, bytes]]:
        """The hash of each document, and the JSON of those hashed anew.

        Returns ``(by_hash, encoded)``: every document by its hash; and, for the documents that
        were not known at their version, their record's JSON (to store if the store lacks it).
        """
        by_hash: dict[bytes, Document] = {}
        encoded: dict[bytes, bytes] = {}
        known: dict[str, tuple[str, bytes]] = {}
        for doc in documents:
            ident = _identity(doc)
            hit = self._known.get(ident[0]) if ident else None
            if ident and hit and hit[0] == ident[1]:
                digest = hit[1]
            else:
                text = dumps({"source": doc.source, "body": doc.body})
                digest = hashlib.sha256(text).digest()[:HASH_BYTES]
                encoded[digest] = text
            if ident:
                known[ident[0]] = (ident[1], digest)
            by_hash[digest] = doc
        self._known = known  # objects gone from the cluster are forgotten
        return by_hash, encoded

    def forget(self) -> None:
        """Hash everything again next time (after a failed write: the store may lack objects)."""
        self._known = {}


def document_of(record: Mapping[str, Any]) -> Document:
    """A stored object record back as the document it was."""
    return Document(str(record["source"]), record["body"])
