"""The MultiKueueCluster controller: one client per worker cluster, its ``Active`` condition
kept current, and the registry of workers the other parts use.

Each pass (:meth:`ClusterController.sync`) reads every MultiKueueCluster and its kubeconfig
(``spec.kubeConfig`` in v1beta1, ``spec.clusterSource.kubeConfig`` in v1beta2): from the Secret
named by ``location`` in the controller's namespace (key ``kubeconfig``), or from the file at
``location`` (``locationType: Path``). A kubeconfig that changed (its digest) gets a new client;
every worker is asked for its API groups each pass, which both shows it answers and that it
serves kueue.x-k8s.io. The condition ``Active`` says the outcome, with Kueue's reasons:

- ``Active`` / ``Connected``: the worker answered this pass;
- ``BadKubeConfig``: the Secret, its ``kubeconfig`` key or the file is missing, or the
  kubeconfig cannot be loaded;
- ``ClientConnectionFailed``: it did not answer (refused, timed out, TLS), or answered without
  kueue.x-k8s.io;
- ``MultiKueueClusterProfileFeatureDisabled``: ``clusterProfileRef`` (ClusterProfile API) is
  not supported by clueue.

A Warning Event with the same reason and message is recorded when a worker stops being active.
A worker that stops answering keeps its client: the next pass that gets an answer makes it
active again (a reconnection), so ``last_contact`` tells how long it has been out of reach.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from ..kube.connect import client_for
from ..kube.kinds import KUEUE_GROUP
from .api import EventRecorder, KueueObjects, setting_condition

__all__ = ["Worker", "WorkerRegistry", "ClusterController", "kubeconfig_source", "WORKER_TIMEOUT"]

log = logging.getLogger("clueue.multikueue")

#: (connect, read) seconds of every request to a worker: one that does not answer is reported
#: inactive, and retried next pass, rather than holding up the others.
WORKER_TIMEOUT = (3.0, 10.0)


@dataclass
class Worker:
    """What the controller knows of one worker cluster."""

    name: str
    digest: str = ""  # of the kubeconfig its client was made from
    api: client.ApiClient | None = None
    objects: KueueObjects | None = None  # set while it answers
    active: bool = False
    reason: str = ""
    message: str = ""
    last_contact: float | None = None  # epoch seconds of its last answer
    lost_at: float | None = None  # epoch seconds it was first seen out of reach since its last answer

    def close(self) -> None:
        if self.api is not None:
            try:
                self.api.close()
            except Exception:  # noqa: BLE001 - a pool that fails to close is left to the collector
                pass
        self.api = self.objects = None


@dataclass
class WorkerRegistry:
    """The workers by MultiKueueCluster name, as the last pass found them."""

    workers: dict[str, Worker] = field(default_factory=dict)
    #: Called after each pass with :meth:`clients` (e.g. to start or stop watching workers).
    listeners: list[Callable[[Mapping[str, client.ApiClient]], None]] = field(default_factory=list)

    def active(self) -> Mapping[str, KueueObjects]:
        """The workers that answered the last pass, with their clients."""
        # A copy first: other threads ask (the decision loop's dispatch) while a pass changes it.
        workers = sorted(list(self.workers.items()))
        return {name: w.objects for name, w in workers if w.active and w.objects is not None}

    def clients(self) -> Mapping[str, client.ApiClient]:
        """The API clients of the workers that answered the last pass (to read them further)."""
        return {name: objects.api for name, objects in self.active().items()}

    def last_contact(self, name: str) -> float | None:
        """When ``name`` last answered (epoch seconds); None: never, or no such worker."""
        worker = self.workers.get(name)
        return worker.last_contact if worker is not None else None

    def out_of_reach_for(self, name: str, at: float) -> float:
        """Seconds ``name`` has been out of reach at ``at`` (0 while active; unknown: since ever)."""
        worker = self.workers.get(name)
        if worker is None:
            return float("inf")
        if worker.active:
            return 0.0
        since = worker.lost_at if worker.lost_at is not None else worker.last_contact
        return at - since if since is not None else float("inf")


def kubeconfig_source(cluster: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """A MultiKueueCluster's kubeConfig (v1beta1 ``spec.kubeConfig`` or v1beta2
    ``spec.clusterSource.kubeConfig``), or None and why not."""
    spec = cluster.get("spec") or {}
    source = spec.get("clusterSource") or {}
    kube_config = spec.get("kubeConfig") or source.get("kubeConfig")
    if kube_config:
        return dict(kube_config), ""
    if spec.get("clusterProfileRef") or source.get("clusterProfileRef"):
        return None, "clusterProfileRef (the ClusterProfile API) is not supported by clueue: use kubeConfig"
    return None, "no kubeConfig in spec"


class ClusterController:
    """Keeps :attr:`registry` and the MultiKueueClusters' ``Active`` conditions current."""

    def __init__(self, manager: KueueObjects, namespace: str, events: EventRecorder,
                 registry: WorkerRegistry | None = None) -> None:
        self.manager = manager
        self.core = client.CoreV1Api(manager.api)
        self.namespace = namespace
        self.events = events
        self.registry = registry if registry is not None else WorkerRegistry()
        self.clusters: dict[str, dict[str, Any]] = {}  # the MultiKueueClusters of the last pass

    def sync(self) -> None:
        """One pass over every MultiKueueCluster.

        Raises:
            ApiException, urllib3 errors: the manager could not be read.
        """
        listed = {c["metadata"]["name"]: c for c in self.manager.list("multikueueclusters")}
        for name in set(self.registry.workers) - set(listed):
            self.registry.workers.pop(name).close()  # its MultiKueueCluster was deleted
        for name, cluster in sorted(listed.items()):
            worker = self.registry.workers.setdefault(name, Worker(name))
            self._connect(worker, cluster)
            self._write_status(worker, cluster)
        self.clusters = listed
        for listener in self.registry.listeners:
            listener(self.registry.clients())

    # -- one worker ----------------------------------------------------------------------------
    def _connect(self, worker: Worker, cluster: dict[str, Any]) -> None:
        was_active = worker.active
        content, reason, message = self._kubeconfig(cluster)
        if content is None:
            worker.close()
            worker.digest = ""
            self._inactive(worker, was_active, reason, message)
            return
        digest = hashlib.sha256(content).hexdigest()
        if digest != worker.digest or worker.api is None:
            worker.close()
            try:
                worker.api = _client(content)
            except (config.ConfigException, yaml.YAMLError, TypeError, ValueError, KeyError, OSError) as e:
                self._inactive(worker, was_active, "BadKubeConfig", f"load client config failed: {e}")
                return
            if worker.digest:
                log.info("the kubeconfig of worker %s changed: connecting again", worker.name)
            worker.digest = digest
        try:
            version = _kueue_version(worker.api)
        except Exception as e:  # noqa: BLE001 - any failure to answer (refused, timeout, TLS, HTTP) is the same news
            self._inactive(worker, was_active, "ClientConnectionFailed", _why(e))
            return
        if not version:
            self._inactive(worker, was_active, "ClientConnectionFailed",
                           f"the worker does not serve {KUEUE_GROUP} (install its CRDs there)")
            return
        if worker.objects is None or worker.objects.version != version:
            worker.objects = KueueObjects(worker.api, version)
        worker.active, worker.reason, worker.message = True, "Active", "Connected"
        worker.last_contact, worker.lost_at = time.time(), None
        if not was_active:
            log.info("worker %s is active", worker.name)

    def _inactive(self, worker: Worker, was_active: bool, reason: str, message: str) -> None:
        if was_active or (worker.reason, worker.message) != (reason, message):  # logged once while it lasts
            log.warning("worker %s is not active: %s: %s", worker.name, reason, message)
        worker.active, worker.reason, worker.message = False, reason, message
        if worker.lost_at is None:
            worker.lost_at = time.time()

    def _kubeconfig(self, cluster: dict[str, Any]) -> tuple[bytes | None, str, str]:
        """The kubeconfig's bytes, or None with a reason and message."""
        source, why = kubeconfig_source(cluster)
        if source is None:
            reason = "MultiKueueClusterProfileFeatureDisabled" if "clusterProfileRef" in why else "BadKubeConfig"
            return None, reason, why
        location, kind = str(source.get("location", "")), source.get("locationType") or "Secret"
        if kind == "Path":
            try:
                return Path(location).read_bytes(), "", ""
            except OSError as e:
                return None, "BadKubeConfig", f"load client config failed: {location}: {e.strerror or e}"
        try:
            secret = self.core.read_namespaced_secret(location, self.namespace)
        except ApiException as e:
            if e.status == 404:
                return None, "BadKubeConfig", f"load client config failed: secret {self.namespace}/{location} not found"
            return None, "BadKubeConfig", f"load client config failed: reading secret {self.namespace}/{location}: " \
                                          f"HTTP {e.status} {e.reason}"
        data = (secret.data or {}).get("kubeconfig")
        if not data:
            return None, "BadKubeConfig", f"load client config failed: secret {self.namespace}/{location} has no " \
                                          "key \"kubeconfig\""
        try:
            return base64.b64decode(data), "", ""
        except (binascii.Error, ValueError):
            return None, "BadKubeConfig", f"load client config failed: secret {self.namespace}/{location}: the " \
                                          "kubeconfig is not base64"

    def _write_status(self, worker: Worker, cluster: dict[str, Any]) -> None:
        change = setting_condition("Active", "True" if worker.active else "False", worker.reason, worker.message,
                                   (cluster.get("metadata") or {}).get("generation"))
        if self.manager.update_status("multikueueclusters", cluster, change) and not worker.active:
            self.events.record(cluster, "Warning", worker.reason, worker.message)
        if worker.active:
            self.events.forget(cluster)


def _client(content: bytes) -> client.ApiClient:
    loaded = yaml.safe_load(content)
    if not isinstance(loaded, dict):
        raise ValueError("the kubeconfig is not a YAML mapping")
    configuration = client.Configuration()
    config.load_kube_config_from_dict(loaded, client_configuration=configuration)
    return client_for(configuration, timeout=WORKER_TIMEOUT)


def _kueue_version(api: client.ApiClient) -> str:
    """kueue.x-k8s.io's preferred version on the worker ("" if not served); one attempt."""
    for group in client.ApisApi(api).get_api_versions().groups or ():
        if group.name == KUEUE_GROUP:
            return str(group.preferred_version.version)
    return ""


def _why(error: BaseException) -> str:
    if isinstance(error, ApiException):
        return f"HTTP {error.status} {error.reason}"
    reason = getattr(error, "reason", None)  # urllib3's MaxRetryError names the underlying failure
    return f"{type(reason or error).__name__}: {reason or error}"
