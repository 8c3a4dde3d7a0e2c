"""The MultiKueue loop: the cluster, admission check and workload controllers and the garbage
collector, one pass every ``syncPeriod``, in one thread of ``clueue controller``.

Passes run only while this replica leads (``leading``), as decision cycles do: two replicas
never dispatch the same Workload. A pass that fails (the manager's API server unavailable, a
permission missing) is logged, once while the same failure lasts, and the next pass tries again.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Iterable, Mapping

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .api import EventRecorder, KueueObjects, key_of
from .checks import CheckController
from .clusters import ClusterController, WorkerRegistry
from .gc import collect_garbage
from clueue.engine.config import MultiKueue as Settings
from .workloads import WorkloadController

__all__ = ["MultiKueue"]

log = logging.getLogger("clueue.multikueue")


class MultiKueue:
    """MultiKueue's controllers on the manager cluster ``api``; :meth:`start` runs them in a
    thread until :meth:`stop`, :meth:`run_once` runs one pass in the caller's.

    >>> mk = MultiKueue(api, "clueue-system", Settings()).start()   # doctest: +SKIP
    >>> mk.registry.active()                                                  # doctest: +SKIP
    """

    def __init__(self, api: client.ApiClient, namespace: str, settings: Settings, *,
                 metrics: Any = None, leading: Callable[[], bool] = lambda: True,
                 workloads: Callable[[], Iterable[Mapping[str, Any]]] | None = None) -> None:
        """``workloads``: the manager's Workloads as a watch-fed cache holds them (the
        controller's); without it each pass lists them."""
        self.api = api
        self.workloads = workloads
        self.namespace = namespace
        self.settings = settings
        self.metrics = metrics
        self.leading = leading
        self.registry = WorkerRegistry()
        self.passes = 0
        self._parts: tuple[ClusterController, CheckController, WorkloadController] | None = None
        self._next_gc = time.monotonic() + settings.gc_interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._told = ""

    def start(self) -> MultiKueue:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="multikueue", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.is_set():
            if self.leading():
                try:
                    self.run_once()
                    self._told = ""
                except Exception as e:  # noqa: BLE001 - logged once while it lasts; the next pass tries again
                    said = _one_line(e)
                    if said != self._told:
                        # throttling (a fresh API server while every watch opens) is retried quietly
                        throttled = isinstance(e, ApiException) and e.status == 429
                        log.log(logging.DEBUG if throttled else logging.WARNING, "multikueue pass failed: %s", said)
                    self._told = said
            self._stop.wait(self.settings.sync_period)

    def _controllers(self) -> tuple[ClusterController, CheckController, WorkloadController]:
        if self._parts is None:  # kueue.x-k8s.io may be installed after the controller started
            manager = KueueObjects(self.api)
            events = EventRecorder(self.api, manager.version)
            self._parts = (ClusterController(manager, self.namespace, events, self.registry),
                           CheckController(manager),
                           WorkloadController(manager, self.registry, self.settings, events, self.metrics))
        return self._parts

    def run_once(self) -> None:
        """One pass: clusters, checks, workloads, and the garbage collector when due.

        Raises:
            ApiException, urllib3 errors: the manager could not be read or written.
        """
        clusters, checks, workloads = self._controllers()
        clusters.sync()
        checks.sync(clusters.clusters)
        if self.metrics is not None:
            self.metrics.set_multikueue_workers({n: w.active for n, w in self.registry.workers.items()})
        if self.registry.workers:
            listed = self.workloads() if self.workloads is not None else clusters.manager.list("workloads")
            manager_workloads = {key_of(w): dict(w) for w in listed}
            copies = workloads.list_copies()
            workloads.sync(manager_workloads, copies, checks.clusters_of)
            if self.settings.gc_interval > 0 and time.monotonic() >= self._next_gc:
                self._next_gc = time.monotonic() + self.settings.gc_interval
                collect_garbage(manager_workloads, copies, workloads)
        self.passes += 1


def _one_line(error: BaseException) -> str:
    """An error as one log line: an API error by its status and reason (its text holds the
    response's headers and body, many lines), anything else by its type and first line."""
    if isinstance(error, ApiException):
        return f"HTTP {error.status} {error.reason}"
    first = str(error).strip().splitlines()
    return f"{type(error).__name__}: {first[0] if first else ''}"
