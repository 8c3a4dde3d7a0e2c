"""Reading MultiKueue's worker clusters for optimized dispatch (docs/dispatch.md).

:class:`WorkerReader` keeps one watch-fed :class:`~clueue.adapters.kube.cache.ClusterCache` per
active worker, narrowed to :data:`WORKER_KINDS`, and turns each into the engine's
:class:`~clueue.engine.snapshot.WorkerView`: the worker's ClusterQueues, LocalQueues,
ResourceFlavors, Cohorts, Workloads, Nodes and Pods as a snapshot of its own, with how long ago
the worker was last heard from. The manager's controller adds them to its snapshot
(``Snapshot.workers``), so that ``policies/dispatch.lp`` predicts where each dispatched
workload will be admitted.

The set of caches follows the worker clients it is given (:meth:`WorkerReader.track`, e.g. a
``WorkerRegistry`` listener, and each :meth:`WorkerReader.views`): a worker that becomes active
gets a cache; one that goes inactive, is deleted or gets a new client (its kubeconfig changed)
has its cache stopped and dropped, with its view. A view's ``observed_at`` is when its cache
last heard from the worker (a list, a watch event or bookmark, a watch the server ended at its
timeout); its age is worked out from the cycle's time (``WorkerView.age_at``), so that a view
that did not change keeps its snapshot's digest. A worker that stops answering keeps its last
view, ageing until it is stale (``staleAfterSeconds``) or reported inactive. A worker whose
cache has not listed every kind yet has no view ("nothing has been read from it yet"). A change
in a worker (a workload admitted there, its quota changed) is passed to ``on_change``, e.g. to
wake the decision loop.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Mapping

from kubernetes import client

from clueue.engine import ClueueError, Document
from clueue.engine.snapshot import WorkerView

from .cache import ClusterCache

__all__ = ["WORKER_KINDS", "WorkerReader"]

log = logging.getLogger(__name__)

#: What a worker's free quota and nodes are worked out from.
WORKER_KINDS = ("Namespace", "Node", "Pod", "ResourceFlavor", "ClusterQueue", "Cohort", "LocalQueue", "Workload")


class WorkerReader:
    """The workers' views, each fed by a cache of its own (see the module).

    ``watch_seconds``: each watch's length; the server ending it shows the worker answers, so
    below ``staleAfterSeconds`` a quiet worker is not taken for a stale one. ``on_change``:
    called with a worker's name when something dispatch reads changed there (from a watch
    thread: it must be quick and not block).
    """

    def __init__(self, *, watch_seconds: int = 30, on_change: Callable[[str], None] | None = None) -> None:
        self.watch_seconds = watch_seconds
        self.on_change = on_change
        self._caches: dict[str, ClusterCache] = {}
        self._lock = threading.Lock()  # track() runs in the MultiKueue thread, views() in the decision loop

    def track(self, clients: Mapping[str, client.ApiClient]) -> None:
        """Watch exactly the workers of ``clients``: start a cache for a new one (or a new
        client), stop and drop those no longer there. A worker that cannot be reached to start
        watching is tried again at the next call."""
        with self._lock:
            for name in [n for n, cache in self._caches.items() if clients.get(n) is not cache.api]:
                log.info("worker %s: no longer watched for dispatch", name)
                self._caches.pop(name).stop(timeout=0)  # its threads end with their watches (daemons)
            for name, api in sorted(clients.items()):
                if name in self._caches:
                    continue
                try:
                    self._caches[name] = ClusterCache(api, watch_seconds=self.watch_seconds, only=WORKER_KINDS,
                                                      on_change=self._notify(name)).start()
                except ClueueError as e:
                    log.warning("worker %s cannot be watched for dispatch yet: %s", name, e)

    def views(self, clients: Mapping[str, client.ApiClient],
              read: dict[str, list[Document]] | None = None) -> dict[str, WorkerView]:
        """The views of the workers of ``clients`` listed in full at least once (after
        :meth:`track`), each observed when its worker was last heard from. ``read``, if given,
        receives each view's documents by worker (a decision log records them)."""
        self.track(clients)
        with self._lock:
            caches = sorted(self._caches.items())
        views = {}
        for name, cache in caches:
            heard = cache.heard_at
            if heard is None or not cache.wait_synced(0):
                continue
            documents: list[Document] | None = None if read is None else read.setdefault(name, [])
            views[name] = WorkerView(name, cache.snapshot(documents), observed_at=heard)
        return views

    def cache(self, name: str) -> ClusterCache | None:
        """The cache watching worker ``name``, if any (e.g. to see how current it is)."""
        with self._lock:
            return self._caches.get(name)

    def stop(self) -> None:
        """Stop watching every worker."""
        self.track({})

    def _notify(self, name: str) -> Callable[[], None]:
        def changed() -> None:
            if self.on_change is not None:
                self.on_change(name)
        return changed
