"""Preemption within a ClusterQueue, applied to a real kube-apiserver cycle after cycle.

Cycle 1 admits a low-priority workload that fills the ClusterQueue; a high-priority one arrives;
cycle 2 evicts the low one (and deletes its pods) without admitting the high one; cycle 3 admits
the high one. Each cycle reads the live objects of its test only (the session's ``kube`` cluster
also holds other tests' objects), runs the policy and applies the plan.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from clueue.adapters.kube import apply_plan
from clueue.adapters.kube.read import snapshot_documents
from clueue.engine import Plan, build_snapshot, load_policy, run_cycle
from tests.e2e.test_adapter import KUEUE, create, gated_pod, queue_setup, tag, workload_object
from tests.testenv.control_plane import ControlPlane


@pytest.fixture
def api(kube: ControlPlane) -> Iterator[client.ApiClient]:
    with kube.api_client() as api:
        yield api


def cycle(api: client.ApiClient, t: str) -> Plan:
    """A cycle over the live objects whose names carry the test's tag ``t``."""
    documents, _ = snapshot_documents(api)
    return run_cycle(build_snapshot([d for d in documents if t in d.source]), load_policy())


def preempting_queue(api: client.ApiClient, t: str) -> str:
    """A namespace whose queue ``main`` feeds ClusterQueue ``cq-<t>``: 2 cpu, preemption of lower priorities."""
    ns = queue_setup(api, t, nominal=2)
    objects, where = client.CustomObjectsApi(api), ("kueue.x-k8s.io", "v1beta1", "clusterqueues", f"cq-{t}")
    cq = objects.get_cluster_custom_object(*where)
    cq["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    objects.replace_cluster_custom_object(*where, cq)
    for name, value in (("low", 1), ("high", 100)):
        create(api, {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": f"{name}-{t}"},
                     "value": value})
    return ns


def workload(ns: str, name: str, priority: int, cpu: str = "2") -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": name, "namespace": ns},
            "spec": {"queueName": "main", "priority": priority, "podSets": [{"name": "main", "count": 1, "template": {
                "spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": cpu}}}]}}}]}}


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status.get("conditions", [])}


def applied(api: client.ApiClient, t: str, **options: Any) -> list[str]:
    """Run a cycle and apply its plan; the writes it made."""
    result = apply_plan(api, cycle(api, t), **options)
    assert not result.errors, result.errors
    return result.writes


def test_a_higher_priority_workload_preempts_then_is_admitted(api: client.ApiClient) -> None:
    t = tag()
    ns = preempting_queue(api, t)
    create(api, workload(ns, "low", 1))
    applied(api, t)
    assert workload_object(api, ns, "low")["status"]["admission"]["clusterQueue"] == f"cq-{t}"

    create(api, workload(ns, "high", 100))
    writes = applied(api, t)
    assert f"preempt Workload {ns}/low" in writes
    low, high = (workload_object(api, ns, n)["status"] for n in ("low", "high"))
    assert "admission" not in low
    evicted = conditions(low)["Evicted"]
    assert (evicted["status"], evicted["reason"]) == ("True", "Preempted") and f"{ns}/high" in evicted["message"]
    # as Kueue records a preemption: Preempted with its variant, the quota released as Pending
    assert {k: (c["status"], c["reason"]) for k, c in conditions(low).items() if k != "Evicted"} == \
           {"Admitted": ("False", "NoReservation"), "QuotaReserved": ("False", "Pending"),
            "Preempted": ("True", "InClusterQueue")}
    assert f"{ns}/high" in conditions(low)["Preempted"]["message"]
    assert "admission" not in high
    waiting = conditions(high)["QuotaReserved"]
    assert waiting["status"] == "False" and f"{ns}/low" in waiting["message"]
    events = client.CoreV1Api(api).list_namespaced_event(ns).items
    assert ("low", "Preempted") in {(e.involved_object.name, e.reason) for e in events}

    applied(api, t)
    low, high = (workload_object(api, ns, n)["status"] for n in ("low", "high"))
    assert high["admission"]["clusterQueue"] == f"cq-{t}"
    assert "admission" not in low and conditions(low)["QuotaReserved"]["status"] == "False"
    assert not [w for w in applied(api, t) if w.startswith("preempt")]  # the evicted one does not preempt back

    client.CustomObjectsApi(api).delete_namespaced_custom_object("kueue.x-k8s.io", "v1beta1", ns, "workloads", "high")
    applied(api, t)
    low = workload_object(api, ns, "low")["status"]
    assert low["admission"]["clusterQueue"] == f"cq-{t}"
    evicted = conditions(low)["Evicted"]
    assert (evicted["status"], evicted["reason"]) == ("False", "QuotaReserved")
    assert evicted["message"].startswith("Previously: preempted")
    preempted = conditions(low)["Preempted"]
    assert (preempted["status"], preempted["reason"]) == ("False", "QuotaReserved")
    assert preempted["message"].startswith("Previously: Preempted to accommodate")


@pytest.mark.parametrize("selector", [
    pytest.param(True, id="flavor-labels-preset"),
    # The role hash (the pod set's name) covers the nodeSelector, which ungating extends: the
    # group keeps its pod set only because ungating records the hash on each pod.
    pytest.param(False, id="flavor-labels-added-by-ungating"),
])
def test_preemption_deletes_every_pod_of_a_victim_group(api: client.ApiClient, selector: bool) -> None:
    t = tag()
    ns = preempting_queue(api, t)
    core = client.CoreV1Api(api)
    for i in range(2):
        pod = gated_pod(ns, f"low-{i}", cpu="1", group="low", total=2)
        pod["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = f"low-{t}"
        if selector:
            pod["spec"]["nodeSelector"] = {"pool": f"pool-{t}"}
        create(api, pod)
    applied(api, t)
    assert all(not core.read_namespaced_pod(f"low-{i}", ns).spec.scheduling_gates for i in range(2))

    high = gated_pod(ns, "high", cpu="2")
    high["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = f"high-{t}"
    create(api, high)
    writes = applied(api, t)
    assert {f"preempt Workload {ns}/low", f"delete Pod {ns}/low-0", f"delete Pod {ns}/low-1"} <= set(writes)
    assert {p.metadata.name for p in core.list_namespaced_pod(ns).items} == {"high"}
    # the whole group in one apply, and its Event says who preempted it and under which rule
    events = [e for e in core.list_namespaced_event(ns).items
              if (e.involved_object.kind, e.involved_object.name, e.reason) == ("Workload", "low", "Preempted")]
    assert events and all(f"{ns}/pod-high" in e.message and "InClusterQueue" in e.message for e in events)
    assert conditions(workload_object(api, ns, "low")["status"])["Preempted"]["reason"] == "InClusterQueue"
    assert "admission" not in workload_object(api, ns, "low")["status"]
    assert core.read_namespaced_pod("high", ns).spec.scheduling_gates  # not admitted in the same cycle

    applied(api, t)
    assert workload_object(api, ns, "pod-high")["status"]["admission"]["clusterQueue"] == f"cq-{t}"
    assert not core.read_namespaced_pod("high", ns).spec.scheduling_gates


def low_admitted_then_high(api: client.ApiClient) -> tuple[str, str]:
    """A preempting queue whose low-priority Workload is admitted, and a high-priority one
    created after it; returns (tag, namespace)."""
    t = tag()
    ns = preempting_queue(api, t)
    create(api, workload(ns, "low", 1))
    applied(api, t)
    create(api, workload(ns, "high", 100))
    return t, ns


def test_a_dry_run_preemption_keeps_the_victim_admitted(api: client.ApiClient) -> None:
    t, ns = low_admitted_then_high(api)
    before = workload_object(api, ns, "low")
    assert f"preempt Workload {ns}/low" in applied(api, t, dry_run=True)
    after = workload_object(api, ns, "low")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["status"]["admission"] == before["status"]["admission"]


def test_a_victim_that_lost_its_admission_meanwhile_is_skipped(api: client.ApiClient) -> None:
    t, ns = low_admitted_then_high(api)
    plan = cycle(api, t)
    assert f"preempt Workload {ns}/low" in apply_plan(api, plan).writes
    again = apply_plan(api, plan)  # the same plan, once the victim no longer holds its admission
    assert f"preempt Workload {ns}/low" in again.skipped and not again.writes and not again.errors
