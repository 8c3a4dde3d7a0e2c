"""Reading a live cluster, read-only, into the same documents the file loader produces."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kubernetes import client

from clueue.engine import Document, Snapshot, build_snapshot

from .kinds import KUEUE_GROUP, Kind, kueue_version, served_kinds
from . import retry
from .errors import api_errors

__all__ = ["read_cluster", "snapshot_documents", "to_document", "clean", "unreadable"]


def clean(body: dict[str, Any]) -> dict[str, Any]:
    """Drop what only the API server cares about (managed fields), keep everything else."""
    body.get("metadata", {}).pop("managedFields", None)
    return body


def to_document(api: client.ApiClient, kind: Kind, version: str, item: Any) -> Document:
    """One listed object as a document: typed core objects become plain dicts."""
    body = item if isinstance(item, dict) else api.sanitize_for_serialization(item)
    body = clean(dict(body))
    body["apiVersion"] = kind.document_api_version(version)
    body["kind"] = kind.kind
    meta = body.get("metadata", {})
    name = f"{meta.get('namespace')}/{meta.get('name')}" if kind.namespaced else meta.get("name")
    return Document(f"api:{kind.kind} {name}", body)


def snapshot_documents(api: client.ApiClient) -> tuple[list[Document], list[str]]:
    """Every object of every kind clueue reads, and notices about what could not be read."""
    version = kueue_version(api)
    notices = [] if version else [f"{KUEUE_GROUP} is not installed: no queues, flavors or Workloads were read"]
    documents: list[Document] = []
    for kind in served_kinds(api, version):
        call, args = kind.list_call(api, version or "")
        with api_errors(api, f"listing {kind.plural}"):
            try:
                listed = retry.call(lambda: call(**args))
            except client.exceptions.ApiException as e:
                if not (kind.only and e.status == 403):
                    raise
                notices.append(unreadable(kind))
                continue
        items = listed["items"] if isinstance(listed, dict) else listed.items
        documents += [to_document(api, kind, version or "", item) for item in items]
    return documents, notices


def unreadable(kind: Kind) -> str:
    """The notice for the one object of ``kind`` (``Kind.only``: Kueue's ConfigMap) that RBAC
    forbids reading: a cycle decides without it (docs/fair-sharing.md), which it says."""
    return (f"{kind.kind} {kind.only} could not be read (forbidden): Kueue's fairSharing, admissionFairSharing "
            "and waitForPodsReady settings are not known; only clueue's own --config applies")


def read_cluster(api: client.ApiClient, read: list[Document] | None = None) -> Snapshot:
    """The cluster's current state as a snapshot (reads only); objects clueue cannot use are
    left out and listed in ``Snapshot.rejected``. ``read``, if given, receives the documents the
    snapshot is built from (a decision log records them)."""
    documents, notices = snapshot_documents(api)
    if read is not None:
        read.extend(documents)
    snapshot = build_snapshot(documents, lenient=True)  # one malformed object must not stop the others
    return replace(snapshot, notices=tuple(notices) + snapshot.notices)
