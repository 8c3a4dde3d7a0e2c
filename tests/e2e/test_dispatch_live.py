"""Optimized dispatch against real control planes (docs/dispatch.md): a manager and two workers,
each its own etcd and kube-apiserver. ``clueue controller`` on the manager reads what each
worker has free (adapters/kube/dispatch_workers.py, through the MultiKueue adapter's clients)
and nominates exactly the worker with room; its MultiKueue adapter copies the Workload there
alone. Also: the worker reader on its own against a real worker."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from clueue.adapters.kube.dispatch_workers import WorkerReader
from clueue.engine import Config
from clueue.engine.dispatch_workers import worker_capacity
from tests.e2e.controller_harness import (CONTROLLER_NS, controller_log, metric, metrics_port, start_controller,
                                          stop_controller, wait_until)
from tests.e2e.test_multikueue import get
from tests.testenv.build import ensure_binaries
from tests.testenv.control_plane import ControlPlane

G, V = "kueue.x-k8s.io", "v1beta1"
WAIT = 90.0  # a guard against hanging, not a measure of speed
ROOM = {"worker1": "1", "worker2": "8"}  # cpu quota of each worker's ClusterQueue


def _queues(api: client.ApiClient, ns: str, cpu: str, *, check: bool = False) -> None:
    """ResourceFlavor default, ClusterQueue ``ns`` of ``cpu`` (with the MultiKueue check on the
    manager), LocalQueue ``ns``/lq."""
    custom = client.CustomObjectsApi(api)
    try:  # shared by the module's tests
        custom.create_cluster_custom_object(G, V, "resourceflavors", {
            "apiVersion": f"{G}/{V}", "kind": "ResourceFlavor", "metadata": {"name": "default"}, "spec": {}})
    except client.ApiException as e:
        if e.status != 409:
            raise
    custom.create_cluster_custom_object(G, V, "clusterqueues", {
        "apiVersion": f"{G}/{V}", "kind": "ClusterQueue", "metadata": {"name": ns}, "spec": {
            "namespaceSelector": {}, **({"admissionChecks": ["multikueue"]} if check else {}),
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}]}})
    custom.create_namespaced_custom_object(G, V, ns, "localqueues", {
        "apiVersion": f"{G}/{V}", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": ns},
        "spec": {"clusterQueue": ns}})


@pytest.fixture(scope="module")
def planes() -> Iterator[tuple[ControlPlane, dict[str, ControlPlane]]]:
    binaries = ensure_binaries()
    with ControlPlane(binaries) as manager, ControlPlane(binaries) as w1, ControlPlane(binaries) as w2:
        yield manager, {"worker1": w1, "worker2": w2}


def _free(reader: WorkerReader, clients: dict[str, client.ApiClient], worker: str, ns: str) -> int | None:
    """The cpu ``worker``'s view has free in ``ns``/lq (None: no view or no such queue yet)."""
    view = reader.views(clients).get(worker)
    room = worker_capacity(view).queue_for(ns, "lq") if view is not None else None
    return room.free.get(("default", "cpu")) if room is not None else None


def _set_quota(api: client.ApiClient, ns: str, cpu: str) -> None:
    client.CustomObjectsApi(api).patch_cluster_custom_object(G, V, "clusterqueues", ns, {"spec": {"resourceGroups": [
        {"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [
            {"name": "cpu", "nominalQuota": cpu}]}]}]}})


def test_a_workers_quota_change_reaches_its_view_by_the_watch(planes: tuple[ControlPlane, dict[str, ControlPlane]]):
    _, workers = planes
    ns = f"d-{uuid.uuid4().hex[:6]}"
    plane = workers["worker2"]
    plane.create_namespace(ns)
    changed: list[str] = []
    reader = WorkerReader(on_change=changed.append)
    with plane.api_client() as api:
        clients = {"worker2": api}
        try:
            _queues(api, ns, ROOM["worker2"])
            wait_until(lambda: _free(reader, clients, "worker2", ns) == 8, WAIT, "the first view")
            cache = reader.cache("worker2")
            assert cache is not None and reader.views(clients)["worker2"].observed_at == cache.heard_at
            changed.clear()
            _set_quota(api, ns, "16")
            wait_until(lambda: _free(reader, clients, "worker2", ns) == 16, WAIT, "the new quota in the view")
            assert changed and set(changed) == {"worker2"}, "the change is told"
            assert cache.relists == 0 and reader.cache("worker2") is cache, "brought by the watch, not a list"
            reader.track({})  # inactive or deleted: its cache stops, its view goes
            assert reader.cache("worker2") is None and "worker2" not in reader.views({})
        finally:
            reader.stop()


def test_a_stopped_worker_becomes_stale(planes: tuple[ControlPlane, dict[str, ControlPlane]]):
    _, workers = planes
    plane = workers["worker1"]
    reader = WorkerReader(watch_seconds=1)
    api = plane.api_client()
    clients = {"worker1": api}
    try:
        wait_until(lambda: "worker1" in reader.views(clients), WAIT, "the first view")
        cache = reader.cache("worker1")
        assert cache is not None and cache.heard_at is not None
        heard = cache.heard_at
        wait_until(lambda: cache.heard_at > heard, WAIT, "a quiet worker heard from again (its watches end)")
        plane.stop_apiserver()
        wait_until(lambda: cache.relists >= 2, WAIT, "the watches failing")
        heard = cache.heard_at
        wait_until(lambda: cache.relists >= 2 * len(cache.kinds) + 2, WAIT, "lists failing again")
        assert cache.heard_at == heard, "nothing heard from a stopped worker"
        view = reader.views(clients)["worker1"]  # the last view is kept, ageing
        assert view.observed_at == heard
        later = int(time.time()) + Config().multikueue.stale_after_seconds + 1  # as if that long had passed
        assert view.age_at(later) > Config().multikueue.stale_after_seconds
        assert reader.cache("worker1") is cache
    finally:
        reader.stop()
        api.close()
        plane.restart_apiserver()


def test_the_controller_nominates_exactly_the_worker_with_room(planes: tuple[ControlPlane, dict[str, ControlPlane]],
                                                               tmp_path: Path):
    manager, workers = planes
    ns = connect_workers(manager, workers)
    api = manager.api_client()
    custom = client.CustomObjectsApi(api)
    core = client.CoreV1Api(api)
    config = tmp_path / "config.yaml"  # the default dispatcher: Optimized
    config.write_text("apiVersion: clueue.dev/v1\nkind: Configuration\nmultiKueue:\n  syncPeriod: 500ms\n")
    proc = start_controller(manager, "--config", str(config), "--batch-window", "0.05")
    try:
        port = metrics_port(proc)
        wait_until(lambda: all(metric(port, "clueue_multikueue_worker_active", cluster=w) == 1 for w in workers),
                   WAIT, "both workers active", proc=proc)
        _submit(custom, ns, cpu="4")
        wait_until(lambda: ((get(api, "workloads", "job", ns) or {}).get("status") or {}).get("nominatedClusterNames")
                   == ["worker2"], WAIT, "the Workload nominated to worker2 alone", proc=proc)
        with workers["worker2"].api_client() as w2:
            wait_until(lambda: get(w2, "workloads", "job", ns) is not None, WAIT, "its copy in worker2", proc=proc)
        with workers["worker1"].api_client() as w1:
            assert get(w1, "workloads", "job", ns) is None, "no copy where it does not fit"
        events = core.list_namespaced_event(ns).items
        assert any(e.reason == "Nominated" and "worker2" in e.message for e in events), controller_log(proc)[-2000:]

        # Room nowhere: reserved in the manager, nominated nowhere; then worker1 gains room, and
        # its watch wakes the controller, which nominates worker1 (nothing changes in the manager).
        late = f"d-{uuid.uuid4().hex[:6]}"
        manager.create_namespace(late)
        for plane in workers.values():
            plane.create_namespace(late)
            with plane.api_client() as worker_api:
                _queues(worker_api, late, "1")
        _queues(api, late, "16", check=True)
        _submit(custom, late, cpu="4")
        reserved = wait_until(lambda: _reserved(get(api, "workloads", "job", late)), WAIT, "quota reserved", proc=proc)
        assert not (reserved.get("status") or {}).get("nominatedClusterNames"), "it fits on no worker"
        with workers["worker1"].api_client() as w1:
            _set_quota(w1, late, "8")
        wait_until(lambda: ((get(api, "workloads", "job", late) or {}).get("status") or {}).get(
            "nominatedClusterNames") == ["worker1"], WAIT, "the Workload nominated to worker1, which gained room",
            proc=proc)
    finally:
        assert stop_controller(proc) == 0, controller_log(proc)[-2000:]
        api.close()


def connect_workers(manager: ControlPlane, workers: dict[str, ControlPlane]) -> str:
    """The manager's MultiKueueClusters (kubeconfigs in Secrets of its controller's namespace),
    MultiKueueConfig ``two`` over them and AdmissionCheck ``multikueue``; and a new namespace in
    every plane, with (in each worker) ClusterQueue ns of ``ROOM`` cpu and (in the manager)
    ClusterQueue ns of 16 cpu with the MultiKueue check. Once per module's planes. Returns the
    namespace."""
    manager.create_namespace(CONTROLLER_NS)
    ns = f"d-{uuid.uuid4().hex[:6]}"
    manager.create_namespace(ns)
    with manager.api_client() as api:
        custom = client.CustomObjectsApi(api)
        for name, plane in workers.items():
            plane.create_namespace(ns)
            with plane.api_client() as worker_api:
                _queues(worker_api, ns, ROOM[name])
            client.CoreV1Api(api).create_namespaced_secret(CONTROLLER_NS, {
                "metadata": {"name": f"{name}-kubeconfig"},
                "data": {"kubeconfig": base64.b64encode(plane.kubeconfig.read_bytes()).decode()}})
            custom.create_cluster_custom_object(G, V, "multikueueclusters", {
                "apiVersion": f"{G}/{V}", "kind": "MultiKueueCluster", "metadata": {"name": name},
                "spec": {"kubeConfig": {"location": f"{name}-kubeconfig", "locationType": "Secret"}}})
        custom.create_cluster_custom_object(G, V, "multikueueconfigs", {
            "apiVersion": f"{G}/{V}", "kind": "MultiKueueConfig", "metadata": {"name": "two"},
            "spec": {"clusters": sorted(workers)}})
        custom.create_cluster_custom_object(G, V, "admissionchecks", {
            "apiVersion": f"{G}/{V}", "kind": "AdmissionCheck", "metadata": {"name": "multikueue"},
            "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                     "parameters": {"apiGroup": G, "kind": "MultiKueueConfig", "name": "two"}}})
        _queues(api, ns, "16", check=True)
    return ns


def _submit(custom: client.CustomObjectsApi, ns: str, *, cpu: str) -> None:
    """Workload ``ns``/job of one pod asking ``cpu``, in LocalQueue lq."""
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
    custom.create_namespaced_custom_object(G, V, ns, "workloads", {
        "apiVersion": f"{G}/{V}", "kind": "Workload", "metadata": {"name": "job", "namespace": ns},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "restartPolicy": "Never", "containers": [container]}}}]}})


def _reserved(workload: dict | None) -> dict | None:
    """``workload`` if its quota is reserved (QuotaReserved True)."""
    conditions = ((workload or {}).get("status") or {}).get("conditions") or []
    return workload if any(c.get("type") == "QuotaReserved" and c.get("status") == "True" for c in conditions) else None
