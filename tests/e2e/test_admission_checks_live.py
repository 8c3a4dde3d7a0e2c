"""Kueue's two-phase admission with AdmissionChecks against a real kube-apiserver
(docs/admission-checks.md). The test plays the checks' controller: it reports its
AdmissionCheck Active and sets a Workload's check state through the status subresource, as a
check controller does; clueue reserves quota, waits, admits and ungates (or evicts, requeues,
deactivates), cycle by cycle through ``decide_and_apply`` as the controller runs it, and once
through the ``clueue controller`` process itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from clueue.adapters.kube.apply import GATE
from tests.e2e.controller_harness import (  # noqa: F401 - cluster and api are fixtures of the last test
    CONTROLLER_NS, cluster, start_controller, stop_controller, wait_until,
)
from tests.e2e.test_adapter import KUEUE, create, gated_pod, queue_setup, tag, workload_object
from tests.e2e.test_plain_pods_live import conditions, cycle
from tests.testenv.control_plane import ControlPlane

GROUP, VERSION = "kueue.x-k8s.io", "v1beta1"
PROV = "example.com/provisioning"


@pytest.fixture
def live(kube: ControlPlane) -> Iterator[client.ApiClient]:
    with kube.api_client() as api:
        yield api


def objects(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def admission_check(api: client.ApiClient, name: str, *, active: bool = True) -> None:
    """An AdmissionCheck, and its Active condition as its controller reports it."""
    objects(api).create_cluster_custom_object(GROUP, VERSION, "admissionchecks", {
        "apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": name},
        "spec": {"controllerName": PROV}})
    body = objects(api).get_cluster_custom_object(GROUP, VERSION, "admissionchecks", name)
    body["status"] = {"conditions": [{"type": "Active", "status": "True" if active else "False",
                                      "reason": "Active" if active else "NotReady", "message": "",
                                      "lastTransitionTime": "2026-11-21T08:00:00Z"}]}
    objects(api).replace_cluster_custom_object_status(GROUP, VERSION, "admissionchecks", name, body)


def checked_setup(api: client.ApiClient, *, nominal: int = 4, active: bool = True) -> tuple[str, str]:
    """A namespace whose ClusterQueue requires admission check ``prov-<tag>``; (namespace, check)."""
    t = tag()
    check = f"prov-{t}"
    admission_check(api, check, active=active)
    ns = queue_setup(api, t, nominal=nominal)
    cq = objects(api).get_cluster_custom_object(GROUP, VERSION, "clusterqueues", f"cq-{t}")
    cq["spec"]["admissionChecks"] = [check]
    objects(api).replace_cluster_custom_object(GROUP, VERSION, "clusterqueues", f"cq-{t}", cq)
    return ns, check


def set_check(api: client.ApiClient, ns: str, name: str, check: str, state: str, message: str = "",
              updates: list[dict[str, Any]] | None = None) -> None:
    """Write one check state, as the check's controller does: through the status subresource,
    with the resourceVersion read; on a conflict (clueue wrote meanwhile) read again and retry."""
    for _ in range(10):
        wl = workload_object(api, ns, name)
        states = [c for c in wl["status"].get("admissionChecks", []) if c["name"] != check]
        states.append({"name": check, "state": state, "message": message, "lastTransitionTime": "2026-11-21T09:00:00Z",
                       **({"podSetUpdates": updates} if updates else {})})
        wl["status"]["admissionChecks"] = sorted(states, key=lambda c: c["name"])
        try:
            objects(api).replace_namespaced_custom_object_status(GROUP, VERSION, ns, "workloads", name, wl)
            return
        except client.ApiException as e:
            if e.status != 409:
                raise
    raise AssertionError(f"Workload {ns}/{name} kept changing: its check state was not written")


def maybe_workload(api: client.ApiClient, ns: str, name: str) -> dict[str, Any]:
    """The Workload, or an empty object while it does not exist yet."""
    try:
        return workload_object(api, ns, name)
    except client.ApiException as e:
        if e.status != 404:
            raise
        return {}


def states(wl: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: c["state"] for c in (wl.get("status") or {}).get("admissionChecks", [])}


def pod(api: client.ApiClient, ns: str, name: str) -> client.V1Pod:
    return client.CoreV1Api(api).read_namespaced_pod(name, ns)


def gated(api: client.ApiClient, ns: str, name: str) -> bool:
    return any(g.name == GATE for g in pod(api, ns, name).spec.scheduling_gates or [])


def test_quota_is_reserved_then_admitted_once_the_check_is_ready(live: client.ApiClient) -> None:
    ns, check = checked_setup(live)
    create(live, gated_pod(ns, "solo", cpu="3"))
    cycle(live, ns)
    wl = workload_object(live, ns, "pod-solo")
    assert wl["status"]["admission"]["clusterQueue"].startswith("cq-")
    assert conditions(wl)["QuotaReserved"] == ("True", "QuotaReserved")
    assert conditions(wl)["Admitted"] == ("False", "UnsatisfiedAdmissionChecks")
    assert states(wl) == {check: "Pending"}
    assert gated(live, ns, "solo")

    # Held: another cycle writes nothing, and the quota stays reserved against a newcomer.
    create(live, gated_pod(ns, "late", cpu="2"))
    done = cycle(live, ns)
    assert not [w for w in done.applied.writes if "solo" in w], done.applied.writes
    assert gated(live, ns, "solo") and workload_object(live, ns, "pod-late")["status"].get("admission") is None

    set_check(live, ns, "pod-solo", check, "Ready", "provisioned", updates=[
        {"name": "main", "labels": {"provisioned-by": "test"}, "annotations": {"example.com/request": "r-1"},
         "nodeSelector": {"example.com/zone": "z1"},
         "tolerations": [{"key": "example.com/spot", "operator": "Exists", "effect": "NoSchedule"}]}])
    cycle(live, ns)
    wl = workload_object(live, ns, "pod-solo")
    assert conditions(wl)["Admitted"] == ("True", "Admitted")
    assert states(wl) == {check: "Ready"} and wl["status"]["admissionChecks"][0]["message"] == "provisioned"
    solo = pod(live, ns, "solo")
    assert not gated(live, ns, "solo")
    assert solo.spec.node_selector["example.com/zone"] == "z1" and solo.spec.node_selector["pool"].startswith("pool-")
    assert solo.metadata.labels["provisioned-by"] == "test"
    assert solo.metadata.annotations["example.com/request"] == "r-1"
    assert [t.key for t in solo.spec.tolerations or [] if t.key == "example.com/spot"] == ["example.com/spot"]


def test_retry_releases_the_quota_and_requeues_with_the_checks_pending_again(live: client.ApiClient) -> None:
    ns, check = checked_setup(live)
    create(live, gated_pod(ns, "solo", cpu="3"))
    cycle(live, ns)
    set_check(live, ns, "pod-solo", check, "Retry", "no capacity yet")
    cycle(live, ns)
    wl = workload_object(live, ns, "pod-solo")
    assert "admission" not in wl["status"]
    assert conditions(wl)["Evicted"] == ("True", "AdmissionCheck")
    assert conditions(wl)["Requeued"] == ("True", "AdmissionCheck")
    assert states(wl) == {check: "Pending"}
    assert gated(live, ns, "solo")  # its pod is kept, still gated

    cycle(live, ns)  # queued again: its quota reserved anew
    wl = workload_object(live, ns, "pod-solo")
    assert wl["status"].get("admission") and conditions(wl)["QuotaReserved"] == ("True", "QuotaReserved")
    assert conditions(wl)["Evicted"][0] == "False" and states(wl) == {check: "Pending"}


def test_rejected_deactivates_the_workload(live: client.ApiClient) -> None:
    ns, check = checked_setup(live)
    create(live, {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": "job", "namespace": ns},
                  "spec": {"queueName": "main", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                      "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}})
    cycle(live, ns)
    set_check(live, ns, "job", check, "Rejected", "will never fit")
    cycle(live, ns)
    wl = workload_object(live, ns, "job")
    assert wl["spec"]["active"] is False and "admission" not in wl["status"]
    assert conditions(wl)["Evicted"] == ("True", "DeactivatedDueToAdmissionCheck")
    cycle(live, ns)
    wl = workload_object(live, ns, "job")
    assert "admission" not in wl["status"] and conditions(wl)["QuotaReserved"] == ("False", "Inadmissible")


def test_an_inactive_check_keeps_its_queue_from_admitting(live: client.ApiClient) -> None:
    ns, check = checked_setup(live, active=False)
    create(live, gated_pod(ns, "solo"))
    cycle(live, ns)
    wl = workload_object(live, ns, "pod-solo")
    assert "admission" not in wl["status"]
    reserved = next(c for c in wl["status"]["conditions"] if c["type"] == "QuotaReserved")
    assert reserved["reason"] == "Inadmissible" and f"admission check {check} is not Active" in reserved["message"]


@pytest.fixture
def api(cluster: ControlPlane) -> Iterator[client.ApiClient]:  # noqa: F811 - the controller's own cluster
    with cluster.api_client() as admin:
        yield admin


def test_the_controller_reserves_waits_for_the_check_then_admits_and_ungates(cluster: ControlPlane,  # noqa: F811
                                                                            api: client.ApiClient) -> None:
    ns, check = checked_setup(api)
    proc = start_controller(cluster, "--batch-window", "0.05", "--max-delay", "0.5")
    try:
        create(api, gated_pod(ns, "solo"))
        wait_until(lambda: states(maybe_workload(api, ns, "pod-solo")) == {check: "Pending"}, 60,
                   "the quota reserved, the check Pending", proc=proc)
        assert gated(api, ns, "solo")
        set_check(api, ns, "pod-solo", check, "Ready")
        wait_until(lambda: not gated(api, ns, "solo"), 60, "the pod ungated", proc=proc)
        assert conditions(workload_object(api, ns, "pod-solo"))["Admitted"] == ("True", "Admitted")
    finally:
        assert stop_controller(proc) == 0


def test_a_v1beta2_strategy_applies_a_check_only_on_its_flavors(live: client.ApiClient) -> None:
    t = tag()
    check = f"prov-{t}"
    admission_check(live, check)
    ns = f"ns-{t}"
    create(live, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for name in (f"small-{t}", f"big-{t}"):
        objects(live).create_cluster_custom_object(GROUP, "v1beta2", "resourceflavors", {
            "apiVersion": f"{GROUP}/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {}})
    objects(live).create_cluster_custom_object(GROUP, "v1beta2", "clusterqueues", {
        "apiVersion": f"{GROUP}/v1beta2", "kind": "ClusterQueue", "metadata": {"name": f"cq-{t}"}, "spec": {
            "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": f"small-{t}", "resources": [{"name": "cpu", "nominalQuota": 1}]},
                {"name": f"big-{t}", "resources": [{"name": "cpu", "nominalQuota": 8}]}]}],
            "admissionChecksStrategy": {"admissionChecks": [{"name": check, "onFlavors": [f"big-{t}"]}]}}})
    create(live, {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "main", "namespace": ns},
                  "spec": {"clusterQueue": f"cq-{t}"}})
    create(live, gated_pod(ns, "small", cpu="1"))
    create(live, gated_pod(ns, "big", cpu="4"))
    cycle(live, ns)
    assert not gated(live, ns, "small") and "admissionChecks" not in workload_object(live, ns, "pod-small")["status"]
    assert gated(live, ns, "big") and states(workload_object(live, ns, "pod-big")) == {check: "Pending"}
