"""Snapshot objects by content: each stored once, compressed, named by the hash of its content.

A recorded object is the document a snapshot was built from: where it was read (``source``,
which the snapshot keeps for errors and rejected objects) and its ``body``; an object of a
MultiKueue worker's view also names its ``worker`` (first, so that the same object of two
workers, or of a worker and the manager, is two objects). Its hash is the first 16 bytes of the
SHA-256 of its JSON; two cycles that saw the same object store it once.
The JSON keeps the object's own key order (the snapshot's digest hashes the typed objects,
whose mappings keep that order), so a replayed snapshot has the recorded digest.

Hashing every object of a large cluster each cycle would cost more than deciding it, so an
:class:`ObjectHasher` remembers each object's hash by its name and ``resourceVersion``
(which the API server changes on every write): a cycle hashes only the objects that changed.
An object the cache hands over again as the same body (it replaces a body that changes, never
edits one) is known by that alone, without looking up its version. Objects without a
resourceVersion (read from files) are hashed every time.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable, Mapping, Sequence

from clueue.engine import Document

from .codec import dumps

__all__ = ["HASH_BYTES", "ObjectHasher", "Hashed", "document_of", "worker_of"]

HASH_BYTES = 16


def _version(doc: Document) -> str:
    """The resourceVersion of an object read from the API; "" when it has none."""
    try:
        return str(doc.body["metadata"]["resourceVersion"] or "")
    except (KeyError, TypeError, AttributeError):  # not an object with metadata: hashed each time
        return ""


Hashed = tuple[str, Document]  # (the worker whose view holds it, "" for the manager's own; the document)


class ObjectHasher:
    """Content hashes of documents, remembered by worker, name and resourceVersion across cycles."""

    def __init__(self) -> None:
        # worker ("" the manager) -> source -> (the body last seen, its resourceVersion, its hash)
        self._known: dict[str, dict[str, tuple[Any, str, bytes]]] = {}

    def hashes(self, documents: Iterable[Document], workers: Mapping[str, Sequence[Document]] | None = None
               ) -> tuple[dict[bytes, Hashed], dict[bytes, bytes]]:
        """The hash of each document (the manager's ``documents`` and each worker's of
        ``workers``), and the JSON of those hashed anew.

        Returns ``(by_hash, encoded)``: every document by its hash, with its worker; and, for the
        documents that were not known at their version, their record's JSON (to store if the
        store lacks it).
        """
        by_hash: dict[bytes, Hashed] = {}
        encoded: dict[bytes, bytes] = {}
        known: dict[str, dict[str, tuple[Any, str, bytes]]] = {}
        for worker, docs in [("", documents), *sorted((workers or {}).items())]:
            before, after = self._known.get(worker, {}), known.setdefault(worker, {})
            for doc in docs:
                hit = before.get(doc.source)
                if hit is not None and hit[0] is doc.body:  # the very body hashed before
                    after[doc.source] = hit
                    by_hash[hit[2]] = (worker, doc)
                    continue
                version = _version(doc)
                if hit is not None and version and hit[1] == version:
                    digest = hit[2]
                else:
                    text = dumps({"worker": worker, "source": doc.source, "body": doc.body} if worker
                                 else {"source": doc.source, "body": doc.body})
                    digest = hashlib.sha256(text).digest()[:HASH_BYTES]
                    encoded[digest] = text
                if version:
                    after[doc.source] = (doc.body, version, digest)
                by_hash[digest] = (worker, doc)
        self._known = known  # objects gone from the cluster are forgotten
        return by_hash, encoded

    def forget(self) -> None:
        """Hash everything again next time (after a failed write: the store may lack objects)."""
        self._known = {}


def document_of(record: Mapping[str, Any]) -> Document:
    """A stored object record back as the document it was."""
    return Document(str(record["source"]), record["body"])


def worker_of(record: Mapping[str, Any]) -> str:
    """The worker whose view a stored object belongs to ("": the manager's own)."""
    return str(record.get("worker", ""))
