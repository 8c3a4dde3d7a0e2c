"""Reading MultiKueue's worker clusters for optimized dispatch (docs/dispatch.md).

:class:`WorkerReader` turns API clients of the workers (a ``Mapping[name, ApiClient]``, such as
the MultiKueue adapter's ``WorkerRegistry.clients()``) into the engine's
:class:`~clueue.engine.snapshot.WorkerView`: each worker's ClusterQueues, LocalQueues,
ResourceFlavors, Cohorts, Workloads, Nodes and Pods, as a snapshot of its own, with how long ago
it was read. The manager's controller adds them to its snapshot (``Snapshot.workers``), so that
``policies/dispatch.lp`` predicts where each dispatched workload will be admitted.

Reads are lists, at most one per worker every ``refresh_seconds``; between them the last view is
kept and ages (``WorkerView.age``; past ``staleAfterSeconds`` its predictions are uncertain). A
worker that cannot be read keeps its last view, ageing; one never read is left out (the engine
then cannot predict there: "nothing has been read from it yet"). Watches per worker, instead of
lists, are a later step: the view's shape stays the same.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Callable, Mapping

from kubernetes import client

from clueue.engine import ClueueError, Document, build_snapshot
from clueue.engine.snapshot import WorkerView

from .kinds import KINDS, kueue_version
from .read import to_document
from . import retry
from .errors import api_errors

__all__ = ["WORKER_KINDS", "read_worker", "WorkerReader"]

log = logging.getLogger(__name__)

#: What a worker's free quota and nodes are worked out from.
WORKER_KINDS = ("Namespace", "Node", "Pod", "ResourceFlavor", "ClusterQueue", "Cohort", "LocalQueue", "Workload")


def read_worker(name: str, api: client.ApiClient) -> WorkerView:
    """One worker's objects, read now (lenient: a malformed object is left out).

    Raises:
        ClueueError: the worker cannot be reached or refuses a list.
    """
    version = kueue_version(api) or ""
    documents: list[Document] = []
    for kind in KINDS:
        if kind.kind not in WORKER_KINDS or (kind.custom and not version):
            continue
        call, args = kind.list_call(api, version)
        with api_errors(api, f"listing {kind.plural} of worker {name}"):
            listed = retry.call(lambda: call(**args))
        items = listed["items"] if isinstance(listed, dict) else listed.items
        documents += [to_document(api, kind, version, item) for item in items]
    return WorkerView(name, build_snapshot(documents, lenient=True), 0)


class WorkerReader:
    """The workers' views, each re-read at most every ``refresh_seconds`` (see the module)."""

    def __init__(self, *, refresh_seconds: float = 10.0, clock: Callable[[], float] = time.time) -> None:
        self.refresh_seconds = refresh_seconds
        self.clock = clock
        self._views: dict[str, tuple[float, WorkerView]] = {}  # name -> (read at, view)

    def views(self, clients: Mapping[str, client.ApiClient]) -> dict[str, WorkerView]:
        """A view of every worker read so far, of those in ``clients`` re-read if due; their
        ``age`` is counted from their last successful read."""
        now = self.clock()
        for name, api in clients.items():
            read_at = self._views.get(name, (float("-inf"), None))[0]
            if now - read_at < self.refresh_seconds:
                continue
            try:
                self._views[name] = (now, read_worker(name, api))
            except ClueueError as e:  # kept as it was: its age tells the policy how far to trust it
                log.warning("worker %s could not be read for dispatch: %s", name, e)
        return {name: replace(view, age=int(now - read_at)) for name, (read_at, view) in sorted(self._views.items())}
