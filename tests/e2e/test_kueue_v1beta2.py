"""``clueue controller`` in a cluster whose kueue.x-k8s.io CRDs serve and store v1beta2 only, as a
Kueue v1beta2 installation serves its clients: every object is written and read in v1beta2's
field names, and the controller finds the version by discovery.

Kueue's own CRDs are not installed (their schemas are not ours to copy, and a multi-version Kueue
CRD needs Kueue's conversion webhook): clueue's CRDs are transformed here to keep only v1beta2,
served and storage. A "tool" creates a Workload directly, as tools written for Kueue's API do,
and marks it Finished through the status subresource; plain pods are created gated, labelled and
finalized as the webhook would make them (the webhook is tested on its own).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from clueue.adapters.kube.apply import GATE
from tests.e2e.controller_harness import (  # noqa: F401 - api is this module's fixture
    CONTROLLER_NS, api, controller_log, start_controller, stop_controller, wait_until,
)
from tests.testenv.build import ensure_binaries
from tests.testenv.control_plane import DEFAULT_CRD_DIR, ControlPlane

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
MANIFEST = Path(__file__).parent / "manifests" / "kueue-v1beta2.yaml"
NS = "tools"
FAST = ("--batch-window", "0.05", "--max-delay", "0.5")


def v1beta2_only(crd: dict[str, Any]) -> dict[str, Any]:
    """A kueue.x-k8s.io CRD reduced to its v1beta2 version, served and storage (other groups'
    CRDs unchanged): no other version, so no conversion is ever asked for."""
    if crd["spec"]["group"] != GROUP:
        return crd
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == VERSION]
    crd["spec"]["versions"] = [{**version, "served": True, "storage": True}]
    crd["spec"].pop("conversion", None)
    return crd


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane of this module's own (a controller decides over the whole cluster) with
    the v1beta2-only CRDs."""
    crds = tmp_path_factory.mktemp("crds-v1beta2")
    for path in sorted(DEFAULT_CRD_DIR.glob("*.yaml")):
        docs = [v1beta2_only(d) for d in yaml.safe_load_all(path.read_text()) if d]
        (crds / path.name).write_text(yaml.safe_dump_all(docs))
    with ControlPlane(ensure_binaries(), crd_dir=crds) as plane:
        plane.create_namespace(CONTROLLER_NS)
        plane.create_namespace(NS)
        yield plane


def plurals(api: client.ApiClient) -> dict[str, str]:
    """kind -> plural of kueue.x-k8s.io, as the cluster serves it (and only in v1beta2)."""
    served = client.ApisApi(api).get_api_versions().groups
    (kueue,) = [g for g in served if g.name == GROUP]
    assert [v.version for v in kueue.versions] == [VERSION]
    resources = client.CustomObjectsApi(api).get_api_resources(GROUP, VERSION).resources
    return {r.kind: r.name for r in resources if "/" not in r.name}


def create(api: client.ApiClient, body: dict[str, Any]) -> None:
    """Create a kueue.x-k8s.io/v1beta2 object (namespaced ones in NS) or a Pod, as kubectl would."""
    if body["kind"] == "Pod":
        client.CoreV1Api(api).create_namespaced_pod(NS, body)
        return
    assert body["apiVersion"] == f"{GROUP}/{VERSION}", body
    objects, plural = client.CustomObjectsApi(api), plurals(api)[body["kind"]]
    if body["kind"] in ("LocalQueue", "Workload"):
        objects.create_namespaced_custom_object(GROUP, VERSION, NS, plural, body)
    else:
        objects.create_cluster_custom_object(GROUP, VERSION, plural, body)


def get(api: client.ApiClient, plural: str, name: str, namespaced: bool = True) -> dict[str, Any]:
    objects = client.CustomObjectsApi(api)
    if namespaced:
        return objects.get_namespaced_custom_object(GROUP, VERSION, NS, plural, name)
    return objects.get_cluster_custom_object(GROUP, VERSION, plural, name)


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions", []) if c["type"] == kind), {})


def workload(name: str, cpu: str, count: int) -> dict[str, Any]:
    """A Workload as a tool writes it for v1beta2 (priorityClassRef, not priorityClassName)."""
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Workload", "metadata": {"name": name},
            "spec": {"queueName": "tools", "active": True,
                     "priorityClassRef": {"group": GROUP, "kind": "WorkloadPriorityClass", "name": "b2-batch-low"},
                     "priority": 10,
                     "podSets": [{"name": "main", "count": count, "template": {"spec": {
                         "restartPolicy": "Never",
                         "containers": [{"name": "main", "image": "registry.example/tool:1",
                                         "resources": {"requests": {"cpu": cpu}}}]}}}]}}


def gated_pod(name: str) -> dict[str, Any]:
    """A plain pod of LocalQueue ``ml`` (the manifest's), as the webhook leaves it."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "ml", "kueue.x-k8s.io/managed": "true"},
                         "finalizers": ["kueue.x-k8s.io/managed"]},
            "spec": {"schedulingGates": [{"name": GATE}],
                     "containers": [{"name": "main", "image": "registry.example/app:1",
                                     "resources": {"requests": {"cpu": "1"}}}]}}


def setup_queues(api: client.ApiClient) -> None:
    """The manifest's objects but its Workload, plus a ClusterQueue of 4 cpu for the tool."""
    for doc in yaml.safe_load_all(MANIFEST.read_text()):
        if doc and doc["kind"] != "Workload":
            create(api, doc)
    create(api, {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue", "metadata": {"name": "b2-tools"},
                 "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                     {"name": "b2-default", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}]}})
    create(api, {"apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue", "metadata": {"name": "tools"},
                 "spec": {"clusterQueue": "b2-tools"}})


def finish(api: client.ApiClient, name: str) -> None:
    """Set Finished=True through the status subresource, as a tool (or Kueue's job integration) would."""
    wl = get(api, "workloads", name)
    wl["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded",
                                       "message": "done", "lastTransitionTime": "2026-01-01T00:00:00Z"})
    client.CustomObjectsApi(api).replace_namespaced_custom_object_status(GROUP, VERSION, NS, "workloads", name, wl)


def usage(status: dict[str, Any], flavor: str, resource: str) -> str:
    """``flavorsUsage[flavor][resource].total`` of a queue's status ("" if absent)."""
    for f in status.get("flavorsUsage") or []:
        if f["name"] == flavor:
            return next((str(r["total"]) for r in f["resources"] if r["name"] == resource), "")
    return ""


def test_a_v1beta2_only_cluster_admits_tools_workloads_and_plain_pods(cluster, api):
    extensions = client.ApiextensionsV1Api(api)
    for crd in extensions.list_custom_resource_definition().items:
        if crd.spec.group == GROUP:  # served and stored in v1beta2 alone
            assert [v.name for v in crd.spec.versions] == [VERSION] and crd.status.stored_versions == [VERSION]
    setup_queues(api)
    create(api, workload("tool-first", "1", 3))   # 3 cpu of 4
    proc = start_controller(cluster, *FAST)
    try:
        def admitted(name: str) -> dict[str, Any]:
            wl = get(api, "workloads", name)
            return wl if condition(wl, "Admitted").get("status") == "True" else {}
        first = wait_until(lambda: admitted("tool-first"), 60, "the tool's Workload admitted", proc=proc)
        assert first["apiVersion"] == f"{GROUP}/{VERSION}"
        assert condition(first, "QuotaReserved")["status"] == "True"
        admission = first["status"]["admission"]
        assert admission["clusterQueue"] == "b2-tools"
        (assignment,) = admission["podSetAssignments"]
        assert assignment["name"] == "main" and assignment["count"] == 3
        assert assignment["flavors"] == {"cpu": "b2-default"}
        assert str(assignment["resourceUsage"]["cpu"]) == "3"

        create(api, workload("tool-second", "2", 1))  # 2 more cpu: does not fit beside the first
        def waiting() -> dict[str, Any]:
            reserved = condition(get(api, "workloads", "tool-second"), "QuotaReserved")
            return reserved if reserved.get("status") == "False" else {}
        reserved = wait_until(waiting, 30, "the second Workload recorded as waiting", proc=proc)
        assert reserved["reason"] in ("Pending", "Inadmissible"), reserved
        assert "admission" not in (get(api, "workloads", "tool-second").get("status") or {})

        def cq_status(pending: int, admitted_: int, cpu: str) -> dict[str, Any]:
            status = get(api, "clusterqueues", "b2-tools", namespaced=False).get("status") or {}
            return status if (status.get("pendingWorkloads"), status.get("admittedWorkloads"),
                              usage(status, "b2-default", "cpu")) == (pending, admitted_, cpu) else {}
        wait_until(lambda: cq_status(1, 1, "3"), 30, "ClusterQueue b2-tools: 1 pending, 1 admitted, 3 cpu used",
                   proc=proc)
        wait_until(lambda: usage(get(api, "localqueues", "tools").get("status") or {}, "b2-default", "cpu") == "3",
                   30, "LocalQueue tools: flavorsUsage 3 cpu", proc=proc)

        finish(api, "tool-first")  # releases its 3 cpu
        second = wait_until(lambda: admitted("tool-second"), 30, "the second Workload admitted once the first finished",
                            proc=proc)
        assert second["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"cpu": "b2-default"}
        wait_until(lambda: cq_status(0, 1, "2"), 30, "ClusterQueue b2-tools: 0 pending, 1 admitted, 2 cpu used",
                   proc=proc)

        for name in ("p0", "p1"):
            create(api, gated_pod(name))
        core = client.CoreV1Api(api)
        # As in Kueue, the manifest's b2-ml-team is inactive: its MultiKueue admission check is
        # limited to a flavor (onFlavors) and not Active (docs/admission-checks.md). Once the
        # strategy is removed it admits.
        def inactive() -> dict[str, Any]:
            active = condition(get(api, "clusterqueues", "b2-ml-team", namespaced=False), "Active")
            return active if active.get("status") == "False" and "b2-dispatch" in active.get("message", "") else {}
        wait_until(inactive, 30, "ClusterQueue b2-ml-team inactive because of its admission check", proc=proc)
        assert all(core.read_namespaced_pod(n, NS).spec.scheduling_gates for n in ("p0", "p1"))
        ml_team = get(api, "clusterqueues", "b2-ml-team", namespaced=False)
        del ml_team["spec"]["admissionChecksStrategy"]
        client.CustomObjectsApi(api).replace_cluster_custom_object(GROUP, VERSION, "clusterqueues", "b2-ml-team", ml_team)
        def pods_ungated() -> bool:
            return all(not core.read_namespaced_pod(n, NS).spec.scheduling_gates for n in ("p0", "p1"))
        wait_until(pods_ungated, 60, "the plain pods ungated", proc=proc)
        for name in ("p0", "p1"):
            wl = get(api, "workloads", f"pod-{name}")  # made through v1beta2
            assert condition(wl, "Admitted")["status"] == "True"
            assert wl["status"]["admission"]["clusterQueue"] == "b2-ml-team"
            assert wl["apiVersion"] == f"{GROUP}/{VERSION}" and wl["spec"]["queueName"] == "ml"
            assert wl["metadata"]["ownerReferences"][0]["name"] == name
        wait_until(lambda: usage(get(api, "localqueues", "ml").get("status") or {}, "b2-default", "cpu") == "2",
                   30, "LocalQueue ml: flavorsUsage 2 cpu", proc=proc)
        assert proc.poll() is None
    finally:
        code = stop_controller(proc)
    assert code == 0, controller_log(proc)[-3000:]
