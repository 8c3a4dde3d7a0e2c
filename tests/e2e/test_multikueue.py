"""MultiKueue against real control planes: one manager and two workers, each its own etcd and
kube-apiserver, shared by the module's tests (each test works in a namespace of its own).

The manager runs clueue's MultiKueue controllers (adapters/multikueue) in this process, with
short intervals, and the test writes the manager Workload's quota reservation and its MultiKueue
check (Pending) through the status subresource, as the manager's admission would, so that it
chooses when; the last two tests run ``clueue controller`` on the manager, whose engine does
that. In the workers, the first test and the last run ``clueue controller`` (real admission; in
the last, of plain pods under their prebuilt Workload); the others act as the worker's admission
themselves, writing ``Admitted`` on a copy, so that they choose who admits when.

Seed (KEP-693) integration list, in order: admitted in one (worker running clueue, the other
without a usable ClusterQueue), admitted at the same time by two (exactly one copy survives),
rejected by one, a worker without the namespace, a worker that deletes its copy, finished,
frequent status changes and finished with an error, garbage collection of an orphan, and (it
stops an apiserver) an unresponsive worker (Active False and an Event), lost-worker timeout, a
kubeconfig Secret change that reconnects it, and the duplicate left there removed; then the
whole manager, and plain pods run by clueue in the manager and a worker.
"""

from __future__ import annotations

import base64
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from clueue.adapters.controller.metrics import Metrics
from clueue.adapters.multikueue import MultiKueue
from clueue.engine.config import ALL_AT_ONCE, MultiKueue as Settings
from clueue.adapters.multikueue.api import now
from tests.e2e.controller_harness import (CONTROLLER_NS, controller_log, metric, metrics_port, start_controller,
                                          stop_controller, wait_until)
from tests.testenv.build import ensure_binaries
from tests.testenv.control_plane import ControlPlane

G, V = "kueue.x-k8s.io", "v1beta1"
CHECK = "multikueue"
WORKERS = ("worker1", "worker2")
LOST_AFTER = 4.0  # workerLostTimeout of the module's MultiKueue (seconds)
GC_EVERY = 2.0
WAIT = 60.0  # a guard against hanging, not a measure of speed


@dataclass
class Clusters:
    manager: ControlPlane
    workers: dict[str, ControlPlane]
    api: client.ApiClient  # the manager's admin
    multikueue: MultiKueue
    metrics: Metrics

    def worker_api(self, name: str) -> client.ApiClient:
        return self.workers[name].api_client()


def _secret(plane: ControlPlane) -> dict[str, str]:
    return {"kubeconfig": base64.b64encode(plane.kubeconfig.read_bytes()).decode()}


def put_kubeconfig_secret(api: client.ApiClient, name: str, plane: ControlPlane) -> None:
    core = client.CoreV1Api(api)
    body = {"metadata": {"name": name, "namespace": CONTROLLER_NS}, "data": _secret(plane)}
    try:
        core.create_namespaced_secret(CONTROLLER_NS, body)
    except client.ApiException as e:
        if e.status != 409:
            raise
        core.patch_namespaced_secret(name, CONTROLLER_NS, {"data": _secret(plane)})


@pytest.fixture(scope="module")
def clusters() -> Iterator[Clusters]:
    binaries = ensure_binaries()
    with ControlPlane(binaries) as manager, ControlPlane(binaries) as w1, ControlPlane(binaries) as w2:
        manager.create_namespace(CONTROLLER_NS)
        api = manager.api_client()
        custom = client.CustomObjectsApi(api)
        for name, plane in (("worker1", w1), ("worker2", w2)):
            put_kubeconfig_secret(api, f"{name}-kubeconfig", plane)
        # worker1 as v1beta1 writes it, worker2 as v1beta2 does (clusterSource).
        custom.create_cluster_custom_object(G, "v1beta1", "multikueueclusters", {
            "apiVersion": f"{G}/v1beta1", "kind": "MultiKueueCluster", "metadata": {"name": "worker1"},
            "spec": {"kubeConfig": {"location": "worker1-kubeconfig", "locationType": "Secret"}}})
        custom.create_cluster_custom_object(G, "v1beta2", "multikueueclusters", {
            "apiVersion": f"{G}/v1beta2", "kind": "MultiKueueCluster", "metadata": {"name": "worker2"},
            "spec": {"clusterSource": {"kubeConfig": {"location": "worker2-kubeconfig"}}}})
        custom.create_cluster_custom_object(G, V, "multikueueconfigs", {
            "apiVersion": f"{G}/{V}", "kind": "MultiKueueConfig", "metadata": {"name": "two-workers"},
            "spec": {"clusters": list(WORKERS)}})
        custom.create_cluster_custom_object(G, V, "admissionchecks", {
            "apiVersion": f"{G}/{V}", "kind": "AdmissionCheck", "metadata": {"name": CHECK},
            "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                     "parameters": {"apiGroup": G, "kind": "MultiKueueConfig", "name": "two-workers"}}})
        metrics = Metrics()
        settings = Settings(gc_interval=GC_EVERY, worker_lost_timeout=LOST_AFTER, sync_period=0.2,
                            dispatcher_name=ALL_AT_ONCE)
        multikueue = MultiKueue(api, CONTROLLER_NS, settings, metrics=metrics).start()
        try:
            yield Clusters(manager, {"worker1": w1, "worker2": w2}, api, multikueue, metrics)
        finally:
            multikueue.stop()
            api.close()


# -- helpers ------------------------------------------------------------------------------------

def namespace_in(clusters: Clusters, *, workers: tuple[str, ...] = WORKERS) -> str:
    name = f"mk-{uuid.uuid4().hex[:6]}"
    clusters.manager.create_namespace(name)
    for worker in workers:
        clusters.workers[worker].create_namespace(name)
    return name


def get(api: client.ApiClient, plural: str, name: str, namespace: str = "") -> dict[str, Any] | None:
    custom = client.CustomObjectsApi(api)
    try:
        if namespace:
            return dict(custom.get_namespaced_custom_object(G, V, namespace, plural, name))
        return dict(custom.get_cluster_custom_object(G, V, plural, name))
    except client.ApiException as e:
        if e.status == 404:
            return None
        raise


def cond(obj: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    for c in ((obj or {}).get("status") or {}).get("conditions") or ():
        if c["type"] == type_:
            return dict(c)
    return {}


def submit(clusters: Clusters, namespace: str, name: str = "job") -> dict[str, Any]:
    """A Workload in the manager, its quota reserved and its MultiKueue check Pending."""
    custom = client.CustomObjectsApi(clusters.api)
    custom.create_namespaced_custom_object(G, V, namespace, "workloads", {
        "apiVersion": f"{G}/{V}", "kind": "Workload", "metadata": {"name": name, "namespace": namespace},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}]}})
    return reserve(clusters, namespace, name)


def reserve(clusters: Clusters, namespace: str, name: str) -> dict[str, Any]:
    """Act as the manager's admission: quota reserved, the check Pending (again)."""
    custom = client.CustomObjectsApi(clusters.api)
    wl = get(clusters.api, "workloads", name, namespace)
    assert wl is not None
    stamp = now()
    status = {k: v for k, v in (wl.get("status") or {}).items() if k != "clusterName"}
    status["conditions"] = [c for c in status.get("conditions") or () if c["type"] not in ("QuotaReserved",)] + [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "reserved by the test",
         "lastTransitionTime": stamp}]
    status["admission"] = {"clusterQueue": "manager-cq", "podSetAssignments": [
        {"name": "main", "count": 1, "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}}]}
    status["admissionChecks"] = [{"name": CHECK, "state": "Pending", "message": "", "lastTransitionTime": stamp}]
    wl["status"] = status
    return dict(custom.replace_namespaced_custom_object_status(G, V, namespace, "workloads", name, wl))


def check_of(clusters: Clusters, namespace: str, name: str = "job") -> dict[str, Any]:
    wl = get(clusters.api, "workloads", name, namespace) or {}
    return next((c for c in (wl.get("status") or {}).get("admissionChecks") or () if c["name"] == CHECK), {})


def copy_in(clusters: Clusters, worker: str, namespace: str, name: str = "job") -> dict[str, Any] | None:
    with clusters.worker_api(worker) as api:
        return get(api, "workloads", name, namespace)


def set_copy_status(clusters: Clusters, worker: str, namespace: str, *conditions: tuple[str, str, str],
                    checks: list[dict[str, Any]] | None = None, name: str = "job") -> None:
    """Act as the worker: write conditions (type, status, reason) on its copy."""
    with clusters.worker_api(worker) as api:
        copy = get(api, "workloads", name, namespace)
        assert copy is not None, f"no copy in {worker}"
        status = dict(copy.get("status") or {})
        kept = [c for c in status.get("conditions") or () if c["type"] not in {t for t, _, _ in conditions}]
        status["conditions"] = kept + [{"type": t, "status": s, "reason": r, "message": f"{r} by the test",
                                        "lastTransitionTime": now()} for t, s, r in conditions]
        if checks is not None:
            status["admissionChecks"] = checks
        copy["status"] = status
        client.CustomObjectsApi(api).replace_namespaced_custom_object_status(G, V, namespace, "workloads", name, copy)


def admit_copy(clusters: Clusters, worker: str, namespace: str, name: str = "job") -> None:
    set_copy_status(clusters, worker, namespace, ("QuotaReserved", "True", "QuotaReserved"),
                    ("Admitted", "True", "Admitted"), name=name)


def events_of(clusters: Clusters, namespace: str, name: str) -> list[str]:
    listed = client.CoreV1Api(clusters.api).list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}")
    return [f"{e.type} {e.reason}: {e.message}" for e in listed.items]


def wait_ready_on(clusters: Clusters, namespace: str, name: str = "job") -> str:
    def ready() -> str:
        wl = get(clusters.api, "workloads", name, namespace) or {}
        state = check_of(clusters, namespace, name)
        return str((wl.get("status") or {}).get("clusterName") or "") if state.get("state") == "Ready" else ""
    return wait_until(ready, WAIT, f"the MultiKueue check of {namespace}/{name} to be Ready")


def running_on(clusters: Clusters, worker: str) -> str:
    """A new namespace with a Workload submitted there and admitted by ``worker`` (the check Ready)."""
    ns = namespace_in(clusters)
    submit(clusters, ns)
    wait_until(lambda: copy_in(clusters, worker, ns), WAIT, f"the copy in {worker}")
    admit_copy(clusters, worker, ns)
    assert wait_ready_on(clusters, ns) == worker
    return ns


def delete_workload(clusters: Clusters, namespace: str, name: str = "job") -> None:
    client.CustomObjectsApi(clusters.api).delete_namespaced_custom_object(G, V, namespace, "workloads", name)


# -- clusters and the check ------------------------------------------------------------------------

def test_workers_and_the_check_become_active(clusters: Clusters) -> None:
    for worker in WORKERS:
        wait_until(lambda w=worker: cond(get(clusters.api, "multikueueclusters", w), "Active").get("status") == "True",
                   WAIT, f"MultiKueueCluster {worker} Active")
    wait_until(lambda: cond(get(clusters.api, "admissionchecks", CHECK), "Active").get("reason") == "Active",
               WAIT, "the AdmissionCheck Active")
    active = cond(get(clusters.api, "admissionchecks", CHECK), "Active")
    assert (active["status"], active["message"]) == ("True", "The admission check is active")
    assert set(clusters.multikueue.registry.active()) == set(WORKERS)


def test_bad_configs_make_the_check_and_cluster_inactive(clusters: Clusters) -> None:
    custom = client.CustomObjectsApi(clusters.api)
    custom.create_cluster_custom_object(G, V, "multikueueclusters", {
        "apiVersion": f"{G}/{V}", "kind": "MultiKueueCluster", "metadata": {"name": "nowhere"},
        "spec": {"kubeConfig": {"location": "no-such-secret", "locationType": "Secret"}}})
    custom.create_cluster_custom_object(G, V, "multikueueconfigs", {
        "apiVersion": f"{G}/{V}", "kind": "MultiKueueConfig", "metadata": {"name": "nowhere"},
        "spec": {"clusters": ["nowhere", "missing"]}})
    for name, config in (("mk-nowhere", "nowhere"), ("mk-no-config", "absent")):
        custom.create_cluster_custom_object(G, V, "admissionchecks", {
            "apiVersion": f"{G}/{V}", "kind": "AdmissionCheck", "metadata": {"name": name},
            "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                     "parameters": {"apiGroup": G, "kind": "MultiKueueConfig", "name": config}}})
    try:
        inactive = wait_until(lambda: cond(get(clusters.api, "multikueueclusters", "nowhere"), "Active"), WAIT,
                              "the Active condition of MultiKueueCluster nowhere")
        assert (inactive["status"], inactive["reason"]) == ("False", "BadKubeConfig")
        assert "no-such-secret" in inactive["message"]
        events = wait_until(lambda: events_of(clusters, "default", "nowhere"), WAIT, "a Warning Event")
        assert any(e.startswith("Warning BadKubeConfig") for e in events), events
        unusable = wait_until(lambda: cond(get(clusters.api, "admissionchecks", "mk-nowhere"), "Active"), WAIT, "it")
        assert (unusable["status"], unusable["reason"]) == ("False", "NoUsableClusters")
        assert unusable["message"] == "Missing clusters: [missing], Inactive clusters: [nowhere]"
        bad = wait_until(lambda: cond(get(clusters.api, "admissionchecks", "mk-no-config"), "Active"), WAIT, "it")
        assert (bad["status"], bad["reason"]) == ("False", "BadConfig")
    finally:
        for plural, name in (("admissionchecks", "mk-nowhere"), ("admissionchecks", "mk-no-config"),
                             ("multikueueconfigs", "nowhere"), ("multikueueclusters", "nowhere")):
            custom.delete_cluster_custom_object(G, V, plural, name)


def test_a_kubeconfig_file_connects(clusters: Clusters) -> None:
    """locationType Path: a kubeconfig file on the controller's machine."""
    custom = client.CustomObjectsApi(clusters.api)
    custom.create_cluster_custom_object(G, V, "multikueueclusters", {
        "apiVersion": f"{G}/{V}", "kind": "MultiKueueCluster", "metadata": {"name": "by-path"},
        "spec": {"kubeConfig": {"location": str(clusters.workers["worker2"].kubeconfig), "locationType": "Path"}}})
    try:
        active = wait_until(lambda: cond(get(clusters.api, "multikueueclusters", "by-path"), "Active"), WAIT, "it")
        assert (active["status"], active["reason"], active["message"]) == ("True", "Active", "Connected")
    finally:
        custom.delete_cluster_custom_object(G, V, "multikueueclusters", "by-path")
    wait_until(lambda: "by-path" not in clusters.multikueue.registry.workers, WAIT, "the worker forgotten")


# -- the seed's integration list ------------------------------------------------------------------

def _queues(api: client.ApiClient, namespace: str, *, cluster_queue: str, with_cluster_queue: bool) -> None:
    custom = client.CustomObjectsApi(api)
    for plural, body in (
            ("resourceflavors", {"metadata": {"name": "default"}, "spec": {}}),
            ("clusterqueues", {"metadata": {"name": cluster_queue}, "spec": {
                "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                    {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}})):
        if plural == "clusterqueues" and not with_cluster_queue:
            continue
        try:
            custom.create_cluster_custom_object(G, V, plural, {"apiVersion": f"{G}/{V}", "kind": {
                "resourceflavors": "ResourceFlavor", "clusterqueues": "ClusterQueue"}[plural], **body})
        except client.ApiException as e:
            if e.status != 409:
                raise
    custom.create_namespaced_custom_object(G, V, namespace, "localqueues", {
        "apiVersion": f"{G}/{V}", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue}})


def test_admitted_in_one_worker_running_clueue(clusters: Clusters, tmp_path: Path) -> None:
    """worker1 runs clueue controller with room; worker2 runs it too, but its LocalQueue points
    to a ClusterQueue it does not have: worker1 admits, worker2's copy is removed."""
    ns = namespace_in(clusters)
    with clusters.worker_api("worker1") as w1, clusters.worker_api("worker2") as w2:
        _queues(w1, ns, cluster_queue="cq", with_cluster_queue=True)
        _queues(w2, ns, cluster_queue="missing-cq", with_cluster_queue=False)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for worker in WORKERS:
            clusters.workers[worker].create_namespace(CONTROLLER_NS)
            procs.append(start_controller(clusters.workers[worker], "--batch-window", "0.05"))
        submit(clusters, ns)
        assert wait_ready_on(clusters, ns) == "worker1"
        copy = copy_in(clusters, "worker1", ns)
        assert copy is not None and cond(copy, "Admitted").get("status") == "True"
        assert copy["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"] == "multikueue"
        assert copy["spec"]["queueName"] == "lq"
        assert copy_in(clusters, "worker2", ns) is None, "the copy in the worker that did not admit is removed"
        wl = get(clusters.api, "workloads", "job", ns) or {}
        assert "nominatedClusterNames" not in wl["status"]
        assert check_of(clusters, ns)["message"] == 'The workload was admitted on "worker1"'
        events = events_of(clusters, ns, "job")
        assert any("dispatched the workload to worker worker2" in e for e in events), events
        assert any('admitted on "worker1"' in e for e in events), events
        assert clusters.metrics.registry.get_sample_value("clueue_multikueue_admitted_total",
                                                          {"cluster": "worker1"}) >= 1
        # The job finishes in the worker: finished in the manager, the copy removed.
        set_copy_status(clusters, "worker1", ns, ("Finished", "True", "Succeeded"))
        wait_until(lambda: cond(get(clusters.api, "workloads", "job", ns), "Finished").get("reason") == "Succeeded",
                   WAIT, "the manager Workload Finished")
        wait_until(lambda: copy_in(clusters, "worker1", ns) is None, WAIT, "the finished copy removed")
    finally:
        for proc in procs:
            assert stop_controller(proc) == 0, controller_log(proc)[-2000:]


def test_admitted_at_the_same_time_by_two(clusters: Clusters) -> None:
    """Both workers admit between two passes: the copy admitted first (the earliest Admitted
    transition, then the worker's name) wins and the other is deleted before the check is Ready."""
    ns = namespace_in(clusters)
    clusters.multikueue.stop()  # the next pass, run here, sees both admissions at once
    try:
        submit(clusters, ns)
        clusters.multikueue.run_once()
        assert copy_in(clusters, "worker1", ns) is not None and copy_in(clusters, "worker2", ns) is not None
        admit_copy(clusters, "worker2", ns)
        admit_copy(clusters, "worker1", ns)
        admitted = sorted((cond(copy_in(clusters, w, ns), "Admitted")["lastTransitionTime"], w) for w in WORKERS)
        clusters.multikueue.run_once()
    finally:
        clusters.multikueue.start()
    assert wait_ready_on(clusters, ns) == admitted[0][1]
    survivors = [w for w in WORKERS if copy_in(clusters, w, ns) is not None]
    assert survivors == [admitted[0][1]], f"exactly one copy survives: {survivors}"
    delete_workload(clusters, ns)
    wait_until(lambda: copy_in(clusters, admitted[0][1], ns) is None, WAIT, "the copy deleted with its Workload")


def nominate(clusters: Clusters, namespace: str, *workers: str, name: str = "job") -> None:
    """Act as a dispatcher: write ``status.nominatedClusterNames``."""
    custom = client.CustomObjectsApi(clusters.api)
    wl = get(clusters.api, "workloads", name, namespace)
    assert wl is not None
    wl.setdefault("status", {})["nominatedClusterNames"] = list(workers)
    custom.replace_namespaced_custom_object_status(G, V, namespace, "workloads", name, wl)


def test_copies_follow_the_nominated_clusters(clusters: Clusters) -> None:
    """Copies exist in the nominated workers only, as the dispatcher changes its mind."""
    ns = namespace_in(clusters)
    client.CustomObjectsApi(clusters.api).create_namespaced_custom_object(G, V, ns, "workloads", {
        "apiVersion": f"{G}/{V}", "kind": "Workload", "metadata": {"name": "job", "namespace": ns},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "image": "busybox"}]}}}]}})
    nominate(clusters, ns, "worker1")
    reserve(clusters, ns, "job")
    for chosen, other in (("worker1", "worker2"), ("worker2", "worker1"), ("worker1", "worker2")):
        nominate(clusters, ns, chosen)
        wait_until(lambda: copy_in(clusters, chosen, ns) is not None and copy_in(clusters, other, ns) is None, WAIT,
                   f"a copy in {chosen} only")
    admit_copy(clusters, "worker1", ns)
    assert wait_ready_on(clusters, ns) == "worker1"
    wl = get(clusters.api, "workloads", "job", ns) or {}
    assert "nominatedClusterNames" not in wl["status"], "cleared once clusterName is set"
    delete_workload(clusters, ns)


def test_a_priority_change_reaches_the_copies(clusters: Clusters) -> None:
    ns = namespace_in(clusters)
    submit(clusters, ns)
    wait_until(lambda: copy_in(clusters, "worker1", ns) and copy_in(clusters, "worker2", ns), WAIT, "two copies")
    client.CustomObjectsApi(clusters.api).patch_namespaced_custom_object(G, V, ns, "workloads", "job",
                                                                         {"spec": {"priority": 7}})
    for worker in WORKERS:
        wait_until(lambda w=worker: (copy_in(clusters, w, ns) or {}).get("spec", {}).get("priority") == 7, WAIT,
                   f"the priority in {worker}'s copy")
    delete_workload(clusters, ns)


def test_rejected_by_one(clusters: Clusters) -> None:
    ns = namespace_in(clusters)
    submit(clusters, ns)
    wait_until(lambda: copy_in(clusters, "worker1", ns) and copy_in(clusters, "worker2", ns), WAIT, "two copies")
    set_copy_status(clusters, "worker1", ns, checks=[{"name": "prov", "state": "Rejected", "message": "no GPUs",
                                                      "lastTransitionTime": now()}])
    wait_until(lambda: copy_in(clusters, "worker1", ns) is None, WAIT, "the rejected copy removed")
    admit_copy(clusters, "worker2", ns)
    assert wait_ready_on(clusters, ns) == "worker2"
    assert copy_in(clusters, "worker1", ns) is None, "a worker that rejected is not given the workload again"
    assert any("worker worker1 rejected the workload" in e for e in events_of(clusters, ns, "job"))
    delete_workload(clusters, ns)


def test_worker_without_the_namespace(clusters: Clusters) -> None:
    ns = namespace_in(clusters, workers=("worker2",))
    submit(clusters, ns)
    events = wait_until(lambda: [e for e in events_of(clusters, ns, "job") if "does not exist there" in e], WAIT,
                        "a Warning Event on the manager Workload")
    assert events[0].startswith("Warning MultiKueue: cannot dispatch the workload to worker worker1"), events
    wait_until(lambda: copy_in(clusters, "worker2", ns), WAIT, "the copy in worker2")
    admit_copy(clusters, "worker2", ns)
    assert wait_ready_on(clusters, ns) == "worker2"
    delete_workload(clusters, ns)


def test_a_worker_with_another_workload_of_that_name(clusters: Clusters) -> None:
    ns = namespace_in(clusters)
    with clusters.worker_api("worker1") as api:
        client.CustomObjectsApi(api).create_namespaced_custom_object(G, V, ns, "workloads", {
            "apiVersion": f"{G}/{V}", "kind": "Workload", "metadata": {"name": "job", "namespace": ns},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c", "image": "busybox"}]}}}]}})
    submit(clusters, ns)
    events = wait_until(lambda: [e for e in events_of(clusters, ns, "job") if "not this manager's copy" in e], WAIT,
                        "a Warning Event")
    assert events[0].startswith("Warning MultiKueue: cannot dispatch the workload to worker worker1")
    wait_until(lambda: copy_in(clusters, "worker2", ns), WAIT, "the copy in worker2")
    admit_copy(clusters, "worker2", ns)
    assert wait_ready_on(clusters, ns) == "worker2"
    mine = copy_in(clusters, "worker1", ns) or {}
    assert "kueue.x-k8s.io/multikueue-origin" not in (mine["metadata"].get("labels") or {}), "left alone"
    delete_workload(clusters, ns)


def test_worker_deletes_the_copy(clusters: Clusters) -> None:
    ns = running_on(clusters, "worker1")
    with clusters.worker_api("worker1") as api:
        client.CustomObjectsApi(api).delete_namespaced_custom_object(G, V, ns, "workloads", "job")
    state = wait_until(lambda: check_of(clusters, ns) if check_of(clusters, ns).get("state") == "Retry" else None,
                       WAIT, "the check Retry")
    assert state["message"] == "Admitting remote no longer exists"
    wl = get(clusters.api, "workloads", "job", ns) or {}
    assert "clusterName" not in wl["status"], "requeued globally: no cluster recorded"
    assert copy_in(clusters, "worker2", ns) is None
    # Requeued (the manager's admission reserves again): dispatched anew.
    reserve(clusters, ns, "job")
    wait_until(lambda: copy_in(clusters, "worker2", ns), WAIT, "a new copy in worker2")
    delete_workload(clusters, ns)


def test_evicted_in_the_manager_deletes_the_copy(clusters: Clusters) -> None:
    ns = running_on(clusters, "worker1")
    wl = get(clusters.api, "workloads", "job", ns) or {}
    stamp = now()
    wl["status"]["conditions"] = [c for c in wl["status"]["conditions"] if c["type"] != "QuotaReserved"] + [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "evicted",
         "lastTransitionTime": stamp},
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "by the test",
         "lastTransitionTime": stamp}]
    wl["status"].pop("admission", None)
    client.CustomObjectsApi(clusters.api).replace_namespaced_custom_object_status(G, V, ns, "workloads", "job", wl)
    wait_until(lambda: copy_in(clusters, "worker1", ns) is None, WAIT, "the copy deleted")
    wait_until(lambda: "clusterName" not in ((get(clusters.api, "workloads", "job", ns) or {}).get("status") or {}),
               WAIT, "clusterName cleared")
    assert any("removed the copy from worker worker1: the workload is evicted" in e
               for e in events_of(clusters, ns, "job"))
    delete_workload(clusters, ns)


def test_status_changes_frequently_then_finished_with_an_error(clusters: Clusters) -> None:
    ns = running_on(clusters, "worker2")
    for status in ("True", "False", "True", "False", "True"):  # faster than a pass: the last one is shown
        set_copy_status(clusters, "worker2", ns, ("PodsReady", status, "PodsReady" if status == "True" else "Waiting"))
    wait_until(lambda: cond(get(clusters.api, "workloads", "job", ns), "PodsReady").get("status") == "True", WAIT,
               "PodsReady copied back")
    set_copy_status(clusters, "worker2", ns, ("PodsReady", "False", "Waiting"))
    wait_until(lambda: cond(get(clusters.api, "workloads", "job", ns), "PodsReady").get("reason") == "Waiting", WAIT,
               "PodsReady False copied back")
    assert check_of(clusters, ns)["state"] == "Ready", "a status change in the winner is no requeue"
    set_copy_status(clusters, "worker2", ns, ("Finished", "True", "Failed"))
    finished = wait_until(lambda: cond(get(clusters.api, "workloads", "job", ns), "Finished"), WAIT, "Finished")
    assert (finished["status"], finished["reason"], finished["message"]) == ("True", "Failed", "Failed by the test")
    wait_until(lambda: copy_in(clusters, "worker2", ns) is None, WAIT, "the copy removed")


def _pod(namespace: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": namespace,
        "labels": {"kueue.x-k8s.io/queue-name": "lq", "kueue.x-k8s.io/managed": "true",
                   "kueue.x-k8s.io/pod-group-name": "group"},
        "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"}},
        "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}], "restartPolicy": "Never",
                 "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}


def test_a_pod_group_runs_in_the_winner_only(clusters: Clusters) -> None:
    """The Workload of a pod group is dispatched as a copy; its pods are created in the winner
    only once the other copy is gone, and their status comes back to the manager's pods."""
    ns = namespace_in(clusters)
    core = client.CoreV1Api(clusters.api)
    owners = []
    for name in ("group-0", "group-1"):
        pod = core.create_namespaced_pod(ns, _pod(ns, name))
        owners.append({"apiVersion": "v1", "kind": "Pod", "name": name, "uid": pod.metadata.uid})
    client.CustomObjectsApi(clusters.api).create_namespaced_custom_object(G, V, ns, "workloads", {
        "apiVersion": f"{G}/{V}", "kind": "Workload",
        "metadata": {"name": "group", "namespace": ns, "ownerReferences": owners},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 2, "template": {"spec": _pod(ns, "x")[
            "spec"]}}]}})
    reserve(clusters, ns, "group")
    wait_until(lambda: copy_in(clusters, "worker1", ns, "group") and copy_in(clusters, "worker2", ns, "group"), WAIT,
               "copies in both workers")

    def pods_in(worker: str) -> list[Any]:
        with clusters.worker_api(worker) as api:
            return list(client.CoreV1Api(api).list_namespaced_pod(ns).items)

    assert not pods_in("worker1") and not pods_in("worker2"), "no pod anywhere before a worker admits"
    admit_copy(clusters, "worker2", ns, name="group")
    assert wait_ready_on(clusters, ns, "group") == "worker2"
    remote = wait_until(lambda: len(pods_in("worker2")) == 2 and pods_in("worker2"), WAIT, "the pods in worker2")
    assert copy_in(clusters, "worker1", ns, "group") is None and not pods_in("worker1")
    for pod in remote:
        assert pod.metadata.labels["kueue.x-k8s.io/prebuilt-workload-name"] == "group"
        assert pod.metadata.labels["kueue.x-k8s.io/multikueue-origin"] == "multikueue"
        assert [g.name for g in pod.spec.scheduling_gates] == ["kueue.x-k8s.io/admission"]
    # Acting as the worker: the pods run, then succeed, and the copy finishes.
    with clusters.worker_api("worker2") as api:
        worker_core = client.CoreV1Api(api)
        for pod in remote:
            pod.status.phase = "Succeeded"
            worker_core.replace_namespaced_pod_status(pod.metadata.name, ns, pod)
    wait_until(lambda: all(core.read_namespaced_pod(n, ns).status.phase == "Succeeded" for n in ("group-0", "group-1")),
               WAIT, "the pods' phase copied to the manager's pods")
    assert core.read_namespaced_pod("group-0", ns).spec.scheduling_gates, "the manager's pods stay gated"
    set_copy_status(clusters, "worker2", ns, ("Finished", "True", "Succeeded"), name="group")
    wait_until(lambda: cond(get(clusters.api, "workloads", "group", ns), "Finished").get("status") == "True", WAIT,
               "the manager Workload Finished")
    wait_until(lambda: not pods_in("worker2") and copy_in(clusters, "worker2", ns, "group") is None, WAIT,
               "the copy and its pods removed from worker2")


def test_garbage_collector_removes_an_orphan(clusters: Clusters) -> None:
    ns = namespace_in(clusters)
    with clusters.worker_api("worker1") as api:
        client.CustomObjectsApi(api).create_namespaced_custom_object(G, V, ns, "workloads", {
            "apiVersion": f"{G}/{V}", "kind": "Workload", "metadata": {
                "name": "orphan", "namespace": ns, "labels": {"kueue.x-k8s.io/multikueue-origin": "multikueue"},
                "annotations": {"kueue.x-k8s.io/multikueue-origin-uid": "gone"}},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c", "image": "busybox"}]}}}]}})
        client.CustomObjectsApi(api).create_namespaced_custom_object(G, V, ns, "workloads", {
            "apiVersion": f"{G}/{V}", "kind": "Workload", "metadata": {
                "name": "someone-elses", "namespace": ns, "labels": {"kueue.x-k8s.io/multikueue-origin": "other"}},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c", "image": "busybox"}]}}}]}})
    wait_until(lambda: copy_in(clusters, "worker1", ns, "orphan") is None, WAIT, "the orphan collected")
    assert copy_in(clusters, "worker1", ns, "someone-elses") is not None, "another origin's copy is left alone"


def test_the_winners_cluster_deleted(clusters: Clusters) -> None:
    """Its MultiKueueCluster deleted: the workload is requeued at once; made again, the worker
    is connected again and the stale copy there is removed."""
    ns = running_on(clusters, "worker2")
    custom = client.CustomObjectsApi(clusters.api)
    worker2 = custom.get_cluster_custom_object(G, "v1beta2", "multikueueclusters", "worker2")
    custom.delete_cluster_custom_object(G, V, "multikueueclusters", "worker2")
    try:
        retry = wait_until(lambda: check_of(clusters, ns) if check_of(clusters, ns).get("state") == "Retry" else None,
                           WAIT, "the check Retry")
        assert retry["message"] == 'Admitting remote lost: no MultiKueueCluster "worker2"'
    finally:
        custom.create_cluster_custom_object(G, "v1beta2", "multikueueclusters", {
            "apiVersion": f"{G}/v1beta2", "kind": "MultiKueueCluster", "metadata": {"name": "worker2"},
            "spec": worker2["spec"]})
    wait_until(lambda: cond(get(clusters.api, "multikueueclusters", "worker2"), "Active").get("status") == "True",
               WAIT, "worker2 connected again")
    wait_until(lambda: copy_in(clusters, "worker2", ns) is None, WAIT, "the stale copy removed")
    delete_workload(clusters, ns)


def test_unresponsive_worker_lost_then_back_with_a_duplicate(clusters: Clusters) -> None:
    """worker1 runs the workload and stops answering: inactive with an Event, the workload goes
    back to pending after workerLostTimeout and runs on worker2; worker1 comes back on a new
    address (its kubeconfig Secret changes: reconnected) and its stale copy is removed."""
    ns = running_on(clusters, "worker1")
    worker1 = clusters.workers["worker1"]
    worker1.stop_apiserver()
    try:
        inactive = wait_until(
            lambda: (c := cond(get(clusters.api, "multikueueclusters", "worker1"), "Active")).get("status") == "False"
            and c, WAIT, "worker1 inactive")
        assert inactive["reason"] == "ClientConnectionFailed"
        assert any(e.startswith("Warning ClientConnectionFailed") for e in events_of(clusters, "default", "worker1"))
        some = wait_until(lambda: cond(get(clusters.api, "admissionchecks", CHECK), "Active").get("reason")
                          == "SomeActiveClusters", WAIT, "the check partly active")
        assert some and cond(get(clusters.api, "admissionchecks", CHECK), "Active")["message"] == \
            "Inactive clusters: [worker1]"
        retry = wait_until(lambda: check_of(clusters, ns) if check_of(clusters, ns).get("state") == "Retry" else None,
                           WAIT, "the check Retry after workerLostTimeout")
        assert retry["message"].startswith('Admitting remote lost: worker "worker1"')
        assert clusters.metrics.registry.get_sample_value("clueue_multikueue_lost_total", {"cluster": "worker1"}) == 1
        reserve(clusters, ns, "job")  # requeued and reserved again in the manager
        wait_until(lambda: copy_in(clusters, "worker2", ns), WAIT, "the copy in worker2")
        admit_copy(clusters, "worker2", ns)
        assert wait_ready_on(clusters, ns) == "worker2"
    finally:
        worker1.restart_apiserver()  # a new port: the kubeconfig changes
    put_kubeconfig_secret(clusters.api, "worker1-kubeconfig", worker1)
    wait_until(lambda: cond(get(clusters.api, "multikueueclusters", "worker1"), "Active").get("status") == "True",
               WAIT, "worker1 reconnected after its Secret changed")
    wait_until(lambda: copy_in(clusters, "worker1", ns) is None, WAIT, "the duplicate in worker1 removed")
    assert copy_in(clusters, "worker2", ns) is not None
    wl = get(clusters.api, "workloads", "job", ns) or {}
    assert wl["status"]["clusterName"] == "worker2" and check_of(clusters, ns)["state"] == "Ready"


def test_clueue_controller_on_the_manager_reserves_dispatches_and_admits(clusters: Clusters, tmp_path: Path) -> None:
    """`clueue controller` on the manager, end to end: its engine reserves the global quota of a
    ClusterQueue with the MultiKueue check (check Pending), its MultiKueue dispatches the copies
    and makes the check Ready on the first admission, the engine then admits; a worker losing the
    copy requeues it (Retry, evicted and reserved again by the engine) and it runs on the other;
    the copy finishing in the worker finishes the Workload in the manager."""
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: clueue.dev/v1\nkind: Configuration\nmultiKueue:\n  syncPeriod: 500ms\n"
                      "  gcInterval: 1m\n  workerLostTimeout: 1m\n"
                      "  dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-all-at-once\n")
    ns = namespace_in(clusters)
    custom = client.CustomObjectsApi(clusters.api)
    custom.create_cluster_custom_object(G, V, "resourceflavors", {
        "apiVersion": f"{G}/{V}", "kind": "ResourceFlavor", "metadata": {"name": "default"}, "spec": {}})
    custom.create_cluster_custom_object(G, V, "clusterqueues", {
        "apiVersion": f"{G}/{V}", "kind": "ClusterQueue", "metadata": {"name": "global"}, "spec": {
            "namespaceSelector": {}, "admissionChecks": [CHECK], "resourceGroups": [{"coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}})
    custom.create_namespaced_custom_object(G, V, ns, "localqueues", {
        "apiVersion": f"{G}/{V}", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": ns},
        "spec": {"clusterQueue": "global"}})
    clusters.multikueue.stop()  # the controller's own MultiKueue alone, from its cache of Workloads
    proc = start_controller(clusters.manager, "--config", str(config), "--batch-window", "0.05")
    try:
        port = metrics_port(proc)
        for worker in WORKERS:
            wait_until(lambda w=worker: metric(port, "clueue_multikueue_worker_active", cluster=w) == 1, WAIT,
                       f"clueue_multikueue_worker_active{{cluster={worker}}} 1", proc=proc)
        custom.create_namespaced_custom_object(G, V, ns, "workloads", {
            "apiVersion": f"{G}/{V}", "kind": "Workload", "metadata": {"name": "job", "namespace": ns},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "restartPolicy": "Never", "containers": [
                    {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}]}})
        pending = wait_until(lambda: check_of(clusters, ns).get("state") == "Pending" and check_of(clusters, ns),
                             WAIT, "the engine to reserve quota with the check Pending", proc=proc)
        assert pending and cond(get(clusters.api, "workloads", "job", ns), "QuotaReserved").get("status") == "True"

        def dispatched_then_won_by(worker: str) -> None:
            wait_until(lambda: copy_in(clusters, "worker1", ns) and copy_in(clusters, "worker2", ns), WAIT,
                       "copies in both workers", proc=proc)
            admit_copy(clusters, worker, ns)
            assert wait_ready_on(clusters, ns) == worker
            wait_until(lambda: cond(get(clusters.api, "workloads", "job", ns), "Admitted").get("status") == "True",
                       WAIT, "the engine to admit the Workload in the manager", proc=proc)

        dispatched_then_won_by("worker1")
        assert copy_in(clusters, "worker2", ns) is None
        assert (get(clusters.api, "workloads", "job", ns) or {})["status"]["clusterName"] == "worker1", \
            "the engine's writes keep clusterName"
        assert metric(port, "clueue_multikueue_admitted_total", cluster="worker1") == 1
        # worker1 loses the copy: Retry, the engine evicts and requeues, it is dispatched again.
        with clusters.worker_api("worker1") as api:
            client.CustomObjectsApi(api).delete_namespaced_custom_object(G, V, ns, "workloads", "job")
        dispatched_then_won_by("worker2")  # after the requeue
        set_copy_status(clusters, "worker2", ns, ("Finished", "True", "Succeeded"))
        wait_until(lambda: cond(get(clusters.api, "workloads", "job", ns), "Finished").get("status") == "True",
                   WAIT, "Finished in the manager", proc=proc)
        wait_until(lambda: copy_in(clusters, "worker2", ns) is None, WAIT, "the copy removed", proc=proc)
    finally:
        assert stop_controller(proc) == 0


def test_plain_pods_run_in_a_worker_running_clueue_and_stay_gated_in_the_manager(clusters: Clusters,
                                                                                  tmp_path: Path) -> None:
    """`clueue controller` on the manager and in worker1, end to end for a pod group: the
    manager's engine makes its Workload and reserves the global quota; worker1's clueue admits
    the copy; the manager admits the Workload but never ungates its pods; the pods MultiKueue
    makes in worker1 (labelled prebuilt-workload-name) are ungated there by worker1's clueue
    under the copy, with no second Workload; their status comes back to the manager's pods;
    when they succeed worker1's clueue finishes the copy and the manager's Workload finishes."""
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: clueue.dev/v1\nkind: Configuration\nmultiKueue:\n  syncPeriod: 500ms\n"
                      "  dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-all-at-once\n")
    ns = namespace_in(clusters)
    custom = client.CustomObjectsApi(clusters.api)
    core = client.CoreV1Api(clusters.api)
    try:
        custom.create_cluster_custom_object(G, V, "clusterqueues", {
            "apiVersion": f"{G}/{V}", "kind": "ClusterQueue", "metadata": {"name": "global"}, "spec": {
                "namespaceSelector": {}, "admissionChecks": [CHECK], "resourceGroups": [{"coveredResources": ["cpu"],
                    "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}})
    except client.ApiException as e:
        if e.status != 409:  # made by the test before, with the same spec
            raise
    _queues(clusters.api, ns, cluster_queue="global", with_cluster_queue=False)
    with clusters.worker_api("worker1") as w1:
        _queues(w1, ns, cluster_queue="cq", with_cluster_queue=True)
    clusters.multikueue.stop()  # the manager controller's own MultiKueue alone
    clusters.workers["worker1"].create_namespace(CONTROLLER_NS)
    procs = [start_controller(clusters.manager, "--config", str(config), "--batch-window", "0.05"),
             start_controller(clusters.workers["worker1"], "--batch-window", "0.05")]
    manager_proc = procs[0]

    def worker_pods() -> list[Any]:
        with clusters.worker_api("worker1") as api:
            return list(client.CoreV1Api(api).list_namespaced_pod(ns).items)

    def manager_gates() -> dict[str, list[str]]:
        return {p.metadata.name: [g.name for g in p.spec.scheduling_gates or ()]
                for p in core.list_namespaced_pod(ns).items}

    try:
        for name in ("group-0", "group-1"):
            core.create_namespaced_pod(ns, _pod(ns, name))
        assert wait_ready_on(clusters, ns, "group") == "worker1"
        wait_until(lambda: cond(get(clusters.api, "workloads", "group", ns), "Admitted").get("status") == "True",
                   WAIT, "the manager's engine to admit the Workload", proc=manager_proc)
        ungated = wait_until(lambda: len(pods := worker_pods()) == 2 and all(not p.spec.scheduling_gates for p in pods)
                             and pods, WAIT, "worker1's clueue to ungate the pods made there", proc=procs[1])
        assert {p.metadata.labels["kueue.x-k8s.io/prebuilt-workload-name"] for p in ungated} == {"group"}
        with clusters.worker_api("worker1") as api:
            copies = client.CustomObjectsApi(api).list_namespaced_custom_object(G, V, ns, "workloads")["items"]
            assert [c["metadata"]["name"] for c in copies] == ["group"], "no second Workload for the pods"
            worker_core = client.CoreV1Api(api)
            for phase in ("Running", "Succeeded"):  # acting as worker1's kubelet
                for pod in ungated:
                    pod = worker_core.read_namespaced_pod(pod.metadata.name, ns)
                    pod.status.phase = phase
                    worker_core.replace_namespaced_pod_status(pod.metadata.name, ns, pod)
                wait_until(lambda ph=phase: {p.status.phase for p in core.list_namespaced_pod(ns).items} == {ph},
                           WAIT, f"the pods' phase {phase} copied to the manager's pods", proc=manager_proc)
                assert manager_gates() == {n: ["kueue.x-k8s.io/admission"] for n in ("group-0", "group-1")}, \
                    "the manager's pods stay gated: they run in worker1"
        finished = wait_until(lambda: cond(get(clusters.api, "workloads", "group", ns), "Finished"), WAIT,
                              "worker1's clueue to finish the copy, and the manager's Workload to finish",
                              proc=manager_proc)
        assert (finished["status"], finished["reason"]) == ("True", "Succeeded")
        wait_until(lambda: not worker_pods() and copy_in(clusters, "worker1", ns, "group") is None, WAIT,
                   "the copy and its pods removed from worker1", proc=manager_proc)
        assert copy_in(clusters, "worker2", ns, "group") is None
    finally:
        for proc in procs:
            assert stop_controller(proc) == 0, controller_log(proc)[-2000:]
