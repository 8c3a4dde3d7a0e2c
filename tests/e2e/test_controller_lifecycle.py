"""The seed's plain-Pod lifecycle through the controller process and its webhook together.

One ``clueue controller --webhook --webhook-url`` on loopback decides over a control plane of
this module's own. Pods are created as a user creates them: a queue name (and a group name and
size) only; the webhook adds the gate, the managed label and the finalizer, and the running
controller (its cache, expectations, debounce and apply) does the rest. Phases are set through
the status subresource, as a kubelet would. The controller's /metrics are read along the way.
"""

from __future__ import annotations

import base64
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from clueue.adapters.kube.apply import GATE
from clueue.adapters.webhook.configuration import MUTATING_NAME
from clueue.adapters.webhook.mutate import MANAGED_LABEL
from tests.e2e.controller_harness import (  # noqa: F401 - cluster and api are this module's fixtures
    api, cluster, controller_log, free_port, metric, metrics_port, start_controller, stop_controller,
    unregister_webhooks, wait_until,
)
from tests.e2e.test_adapter import queue_setup, tag, workload_object
from tests.e2e.test_preemption import preempting_queue
from tests.testenv.control_plane import ControlPlane, serving_certificate_files

FAST = ("--batch-window", "0.05", "--max-delay", "0.5", "--lease-duration", "4")
FINALIZER = "kueue.x-k8s.io/managed"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
TOTAL = "kueue.x-k8s.io/pod-group-total-count"


@pytest.fixture(scope="module")
def controller(cluster: ControlPlane) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """The controller with its webhook on loopback, once the webhook gates; (process, metrics port)."""
    port = free_port()
    proc = start_controller(cluster, *FAST, "--webhook", "--webhook-bind-address", f"127.0.0.1:{port}",
                            "--webhook-url", f"https://127.0.0.1:{port}")
    try:
        with cluster.api_client() as admin:
            probe_ns = queue_setup(admin, tag())
            wait_until(lambda: _gates(admin, probe_ns), 60, "the webhook to gate queued pods", interval=0.2, proc=proc)
        yield proc, metrics_port(proc)
    finally:
        code = stop_controller(proc)
        with cluster.api_client() as admin:
            unregister_webhooks(admin)
    log = controller_log(proc)
    assert code == 0, log[-4000:]
    assert "no webhook configuration" not in log, log[-4000:]  # registered before any caBundle patch
    assert "the watch has not brought" not in log, log[-4000:]  # no cycle waited out a stale expectation


def user_pod(name: str, cpu: str = "1", group: str | None = None, total: int | None = None,
             priority_class: str | None = None) -> dict[str, Any]:
    """A Pod as a user writes it for LocalQueue ``main``: no gate, no managed label, no finalizer."""
    labels = {QUEUE_LABEL: "main", **({GROUP_LABEL: group} if group else {}),
              **({"kueue.x-k8s.io/priority-class": priority_class} if priority_class else {})}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels, "annotations": {TOTAL: str(total)} if total else {}},
            "spec": {"containers": [{"name": "main", "image": "registry.example/app:1",
                                     "resources": {"requests": {"cpu": cpu}}}]}}


def _gates(api: client.ApiClient, ns: str) -> bool:
    try:
        pod = client.CoreV1Api(api).create_namespaced_pod(ns, user_pod("probe"), dry_run="All")
    except client.ApiException:
        return False
    return any(g.name == GATE for g in pod.spec.scheduling_gates or [])


def pods(api: client.ApiClient, ns: str) -> dict[str, Any]:
    return {p.metadata.name: p for p in client.CoreV1Api(api).list_namespaced_pod(ns).items}


def ungated(api: client.ApiClient, ns: str) -> set[str]:
    return {name for name, p in pods(api, ns).items() if not p.spec.scheduling_gates}


def condition(api: client.ApiClient, ns: str, name: str, kind: str) -> str:
    """The status of condition ``kind`` of Workload ``name`` ("" if none or no Workload)."""
    try:
        wl = workload_object(api, ns, name)
    except client.ApiException:
        return ""
    return next((c["status"] for c in (wl.get("status") or {}).get("conditions", []) if c["type"] == kind), "")


def set_phase(api: client.ApiClient, ns: str, name: str, phase: str) -> None:
    core = client.CoreV1Api(api)
    pod = core.read_namespaced_pod(name, ns)
    pod.status.phase = phase
    core.replace_namespaced_pod_status(name, ns, pod)


def test_the_webhook_gates_labels_and_finalizes_a_users_pod(controller, api):
    ns = queue_setup(api, tag(), nominal=0)  # nothing admitted: the pod stays as the webhook made it
    created = client.CoreV1Api(api).create_namespaced_pod(ns, user_pod("p"))
    assert [g.name for g in created.spec.scheduling_gates] == [GATE]
    assert created.metadata.labels[MANAGED_LABEL] == "true"
    assert FINALIZER in created.metadata.finalizers
    plain = user_pod("plain")
    del plain["metadata"]["labels"][QUEUE_LABEL]
    created = client.CoreV1Api(api).create_namespaced_pod(ns, plain)
    assert not created.spec.scheduling_gates and not created.metadata.finalizers


def test_a_single_pod_is_queued_admitted_and_finished(controller, api):
    proc, port = controller
    t = tag()
    ns = queue_setup(api, t, nominal=1)
    client.CoreV1Api(api).create_namespaced_pod(ns, user_pod("solo"))
    wait_until(lambda: "solo" in ungated(api, ns), 60, "the pod admitted and ungated", proc=proc)
    assert workload_object(api, ns, "pod-solo")["status"]["admission"]["clusterQueue"] == f"cq-{t}"
    quota = {"cluster_queue": f"cq-{t}", "flavor": f"fl-{t}", "resource": "cpu"}
    wait_until(lambda: metric(port, "clueue_cluster_queue_resource_usage", **quota) == 1.0, 30,
               "the usage gauge", proc=proc)
    assert metric(port, "clueue_cluster_queue_nominal_quota", **quota) == 1.0
    assert metric(port, "clueue_admitted_workloads_total", cluster_queue=f"cq-{t}") == 1.0
    assert metric(port, "clueue_pods_gated_total") >= 1.0 and metric(port, "clueue_pods_ungated_total") >= 1.0
    assert metric(port, "clueue_cycles_total", outcome="optimal") >= 1.0

    set_phase(api, ns, "solo", "Succeeded")
    wait_until(lambda: condition(api, ns, "pod-solo", "Finished") == "True", 60, "the Workload Finished", proc=proc)
    wait_until(lambda: FINALIZER not in (pods(api, ns)["solo"].metadata.finalizers or []), 60,
               "the finalizer removed", proc=proc)
    wait_until(lambda: metric(port, "clueue_cluster_queue_resource_usage", **quota) == 0.0, 30,
               "the quota released", proc=proc)


def test_a_group_created_beforehand_is_queued_then_admitted(controller, api):
    proc, port = controller
    t = tag()
    ns = queue_setup(api, t, nominal=2)
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(ns, user_pod("blocker", cpu="2"))
    wait_until(lambda: "blocker" in ungated(api, ns), 60, "the blocker admitted", proc=proc)
    for i in range(2):
        core.create_namespaced_pod(ns, user_pod(f"g-{i}", group="g", total=2))
    core.create_namespaced_pod(ns, user_pod("huge", cpu="10"))  # more than the queue ever has
    wait_until(lambda: condition(api, ns, "g", "QuotaReserved") == "False", 60, "the group queued", proc=proc)
    assert ungated(api, ns) == {"blocker"}
    cq = f"cq-{t}"
    wait_until(lambda: (metric(port, "clueue_pending_workloads", cluster_queue=cq, status="active"),
                        metric(port, "clueue_pending_workloads", cluster_queue=cq, status="inadmissible"))
               == (1.0, 1.0), 30, "one active and one inadmissible pending workload", proc=proc)

    set_phase(api, ns, "blocker", "Succeeded")
    wait_until(lambda: {"g-0", "g-1"} <= ungated(api, ns), 60, "the group admitted once the blocker finished",
               proc=proc)
    admission = workload_object(api, ns, "g")["status"]["admission"]
    assert admission["clusterQueue"] == cq and admission["podSetAssignments"][0]["count"] == 2


def test_excess_pods_before_admission_lose_the_youngest(controller, api):
    proc, port = controller
    ns = queue_setup(api, tag(), nominal=1)  # the group needs 2 cpu: it waits
    core = client.CoreV1Api(api)
    rejected = metric(port, "clueue_pods_rejected_total") or 0.0
    for i in range(2):
        core.create_namespaced_pod(ns, user_pod(f"x-{i}", group="x", total=2))
    wait_until(lambda: condition(api, ns, "x", "QuotaReserved") == "False", 60, "the group queued", proc=proc)
    time.sleep(1.1)  # creation times have whole seconds: the third pod is then the youngest for sure
    core.create_namespaced_pod(ns, user_pod("x-2", group="x", total=2))
    wait_until(lambda: set(pods(api, ns)) == {"x-0", "x-1"}, 60, "the youngest pod deleted", proc=proc)
    wait_until(lambda: metric(port, "clueue_pods_rejected_total") == rejected + 1, 30, "the rejection counted",
               proc=proc)


def test_preemption_deletes_every_pod_of_the_lower_priority_workload(controller, api):
    proc, port = controller
    t = tag()
    ns = preempting_queue(api, t)
    core = client.CoreV1Api(api)
    for i in range(2):
        core.create_namespaced_pod(ns, user_pod(f"low-{i}", group="low", total=2, priority_class=f"low-{t}"))
    wait_until(lambda: ungated(api, ns) == {"low-0", "low-1"}, 60, "the low group admitted", proc=proc)
    core.create_namespaced_pod(ns, user_pod("high", cpu="2", priority_class=f"high-{t}"))
    wait_until(lambda: set(pods(api, ns)) == {"high"}, 60, "the low group's pods deleted", proc=proc)
    wait_until(lambda: "high" in ungated(api, ns), 60, "the high-priority pod admitted", proc=proc)
    assert condition(api, ns, "low", "Evicted") == "True"
    wait_until(lambda: metric(port, "clueue_evicted_workloads_total", cluster_queue=f"cq-{t}") == 1.0, 30,
               "the eviction counted", proc=proc)
    assert metric(port, "clueue_evicted_workloads_total", cluster_queue=f"cq-{t}", reason="Preempted") == 1.0


def test_the_webhook_serves_external_certificates_from_cert_dir(controller, cluster, api, tmp_path):
    """Last in the module: this controller's registration replaces the module controller's."""
    ca = serving_certificate_files(tmp_path)
    port = free_port()
    proc = start_controller(cluster, *FAST, "--webhook", "--cert-dir", str(tmp_path), "--webhook-bind-address",
                            f"127.0.0.1:{port}", "--webhook-url", f"https://127.0.0.1:{port}")
    try:
        admission = client.AdmissionregistrationV1Api(api)

        def registered() -> bool:
            hook = admission.read_mutating_webhook_configuration(MUTATING_NAME).webhooks[0]
            return hook.client_config.url.startswith(f"https://127.0.0.1:{port}/")
        wait_until(registered, 60, "the webhook registered at the new address", proc=proc)
        hook = admission.read_mutating_webhook_configuration(MUTATING_NAME).webhooks[0]
        assert base64.b64decode(hook.client_config.ca_bundle) == ca  # the given CA, not one clueue made
        ns = queue_setup(api, tag(), nominal=1)
        wait_until(lambda: _gates(api, ns), 60, "the webhook to gate with the external certificate",
                   interval=0.2, proc=proc)
        client.CoreV1Api(api).create_namespaced_pod(ns, user_pod("ext"))
        wait_until(lambda: "ext" in ungated(api, ns), 60, "the pod admitted", proc=proc)
    finally:
        code = stop_controller(proc)
    log = controller_log(proc)
    assert code == 0, log[-4000:]
    assert "clueue-webhook-tls" not in log  # no Secret of its own with --cert-dir
