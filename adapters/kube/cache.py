"""A cache of every object clueue reads, kept current by watches.

One thread per kind lists the kind, then watches from the list's resourceVersion. When the
watch expires (410 Gone) or fails, the kind is listed again, so the cache converges on the
cluster's state whatever it missed. ``changed`` is set whenever an object changes, so a
controller can run a cycle on events instead of on a timer.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from clueue.engine import Document, Snapshot, build_snapshot

from .kinds import KINDS, Kind, kueue_version
from .read import to_document

__all__ = ["ClusterCache"]

log = logging.getLogger(__name__)


class ClusterCache:
    """Objects by kind and name, current as of the last watch event.

    >>> cache = ClusterCache(api).start()          # doctest: +SKIP
    >>> cache.wait_synced(30); plan = run_cycle(cache.snapshot(), policy)  # doctest: +SKIP
    """

    def __init__(self, api: client.ApiClient, *, watch_seconds: int = 300) -> None:
        self.api = api
        self.watch_seconds = watch_seconds
        self.version = kueue_version(api) or ""
        self.kinds = [k for k in KINDS if not k.custom or self.version]
        self.changed = threading.Event()
        self.relists = 0  # how many times a kind was listed again after a watch ended badly
        self._objects: dict[str, dict[str, Document]] = {k.kind: {} for k in self.kinds}
        self._synced = {k.kind: threading.Event() for k in self.kinds}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> ClusterCache:
        for kind in self.kinds:
            thread = threading.Thread(target=self._run, args=(kind,), name=f"watch-{kind.kind}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=self.watch_seconds + 5)

    def wait_synced(self, timeout: float) -> bool:
        """True once every kind has been listed at least once."""
        return all(event.wait(timeout) for event in self._synced.values())

    def snapshot(self) -> Snapshot:
        with self._lock:
            documents = [doc for docs in self._objects.values() for doc in docs.values()]
        return build_snapshot(documents, lenient=True)  # malformed objects: left out, in .rejected

    def _key(self, kind: Kind, body: dict[str, Any]) -> str:
        meta = body.get("metadata", {})
        return f"{meta.get('namespace')}/{meta.get('name')}" if kind.namespaced else str(meta.get("name"))

    def _list(self, kind: Kind) -> str:
        call, args = kind.list_call(self.api, self.version)
        listed = call(**args)
        items = listed["items"] if isinstance(listed, dict) else listed.items
        version = listed["metadata"]["resourceVersion"] if isinstance(listed, dict) else listed.metadata.resource_version
        fresh = {}
        for item in items:
            doc = to_document(self.api, kind, self.version, item)
            fresh[self._key(kind, dict(doc.body))] = doc
        with self._lock:
            self._objects[kind.kind] = fresh
        self._synced[kind.kind].set()
        self.changed.set()
        return str(version)

    def _run(self, kind: Kind) -> None:
        version = ""
        while not self._stop.is_set():
            try:
                if not version:
                    version = self._list(kind)
                version = self._watch(kind, version)
            except ApiException as e:
                if e.status != 410:
                    log.warning("watching %s failed (%s); listing again", kind.kind, e.reason)
                    self._stop.wait(1.0)
                version = ""
                self.relists += 1
            except Exception as e:  # network errors and the like: back off, then list again
                log.warning("watching %s failed (%s); listing again", kind.kind, e)
                self._stop.wait(1.0)
                version = ""
                self.relists += 1

    def _watch(self, kind: Kind, version: str) -> str:
        """Follow the watch until it ends; returns the last resourceVersion seen."""
        call, args = kind.list_call(self.api, self.version)
        stream = watch.Watch().stream(call, resource_version=version, timeout_seconds=self.watch_seconds,
                                      allow_watch_bookmarks=True, **args)
        for event in stream:
            if self._stop.is_set():
                break
            kind_of_event = event["type"]
            obj = event["raw_object"]
            version = obj.get("metadata", {}).get("resourceVersion", version)
            if kind_of_event == "ERROR":
                raise ApiException(status=obj.get("code", 500), reason=obj.get("message", "watch error"))
            if kind_of_event == "BOOKMARK":
                continue
            doc = to_document(self.api, kind, self.version, obj)
            key = self._key(kind, dict(doc.body))
            with self._lock:
                if kind_of_event == "DELETED":
                    self._objects[kind.kind].pop(key, None)
                else:
                    self._objects[kind.kind][key] = doc
            self.changed.set()
        return version
