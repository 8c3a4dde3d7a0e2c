"""Kueue's visibility API served by ``clueue controller``, through a real kube-apiserver's
aggregation layer, as kubectl, KueueViz and kueuectl reach it (docs/visibility.md).

The control plane runs with a front proxy (``--requestheader-*``, ``--proxy-client-*``); the
APIServices and RBAC come from deploy/visibility.yaml, the Service is of type ExternalName
``127.0.0.1`` (no kube-proxy here) on the controller's port. Requests go through the API server
as ``kubectl get --raw`` sends them (the Python client's ``call_api``), and, to show that the
server authenticates and authorizes on its own, straight to it.
"""

from __future__ import annotations

import base64
import copy
import json
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.e2e.controller_harness import (
    CONTROLLER_NS, controller_log, free_port, start_controller, stop_controller, wait_until,
)
from tests.e2e.test_adapter import create, gated_pod
from tests.testenv.build import ensure_binaries
from tests.testenv.control_plane import ControlPlane
from tests.testenv.tools import ensure_tool

REPO = Path(__file__).resolve().parents[2]
GROUP = "visibility.kueue.x-k8s.io"
KUEUE = "kueue.x-k8s.io/v1beta2"
CQ = "cluster-queue"
TEAM_A, TEAM_B = "vis-team-a", "vis-team-b"
#: (namespace, pod, WorkloadPriorityClass) in the order the cycle ranks them: by priority
WAITING = [(TEAM_A, "first", "high"), (TEAM_B, "second", "mid"), (TEAM_A, "third", "low")]


def _deploy_objects() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((REPO / "deploy" / "visibility.yaml").read_text()) if doc]


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    with ControlPlane(ensure_binaries(), aggregation=True) as plane:
        plane.create_namespace(CONTROLLER_NS)
        yield plane


def _register(api: client.ApiClient, port: int) -> None:
    """deploy/visibility.yaml's APIServices and RBAC, with its Service replaced by one the API
    server reaches without kube-proxy: ExternalName 127.0.0.1, the APIServices on ``port``."""
    for obj in _deploy_objects():
        if obj["kind"] == "Service":
            obj = {"apiVersion": "v1", "kind": "Service", "metadata": obj["metadata"],
                   "spec": {"type": "ExternalName", "externalName": "127.0.0.1"}}
            client.CoreV1Api(api).create_namespaced_service(CONTROLLER_NS, obj)
            continue
        if obj["kind"] == "APIService":
            obj = copy.deepcopy(obj)
            obj["spec"]["service"]["port"] = port
        from kubernetes.dynamic import DynamicClient
        resource = DynamicClient(api).resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        resource.create(body=obj, namespace=obj["metadata"].get("namespace"))


def _available(api: client.ApiClient) -> bool:
    for version in ("v1beta1", "v1beta2"):
        service = client.ApiregistrationV1Api(api).read_api_service(f"{version}.{GROUP}")
        conditions = {c.type: c.status for c in (service.status and service.status.conditions) or []}
        if conditions.get("Available") != "True" or not service.spec.ca_bundle:
            return False
    return True


def _workloads_written(api: client.ApiClient) -> bool:
    objects = client.CustomObjectsApi(api)
    names = {(w["metadata"]["namespace"], w["metadata"]["name"])
             for ns in (TEAM_A, TEAM_B) for w in objects.list_namespaced_custom_object(
                 "kueue.x-k8s.io", "v1beta2", ns, "workloads")["items"]}
    return {(ns, f"pod-{pod}") for ns, pod, _ in WAITING} | {(TEAM_A, "pod-running")} <= names


@pytest.fixture(scope="module")
def served(plane: ControlPlane) -> Iterator[dict[str, Any]]:
    """A ClusterQueue of 1 cpu, full, with three Pods waiting behind (two LocalQueues), and the
    controller serving the visibility API, its APIServices Available."""
    port = free_port()
    with plane.api_client() as api:
        for ns in (TEAM_A, TEAM_B):
            plane.create_namespace(ns)
        create(api, {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}})
        create(api, {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": CQ}, "spec": {
            "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}]}})
        for ns in (TEAM_A, TEAM_B):
            create(api, {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "main", "namespace": ns},
                         "spec": {"clusterQueue": CQ}})
        for name, value in (("high", 30), ("mid", 20), ("low", 10)):
            create(api, {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": name},
                         "value": value})
        create(api, gated_pod(TEAM_A, "running", cpu="1"))
        _register(api, port)
        proc = start_controller(plane, "--leader-elect", "--lease-duration", "5",
                                "--visibility-bind-address", f"127.0.0.1:{port}")
        try:
            wait_until(lambda: not client.CoreV1Api(api).read_namespaced_pod("running", TEAM_A).spec.scheduling_gates,
                       180, "the first Pod to be admitted", interval=0.5, proc=proc)
            for ns, pod, priority in WAITING:
                body = gated_pod(ns, pod, cpu="1")
                body["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = priority
                create(api, body)
            wait_until(lambda: _workloads_written(api), 180, "the controller to write the Workloads", proc=proc)
            wait_until(lambda: _available(api), 180, "the APIServices to be Available with the controller's CA",
                       interval=0.5, proc=proc)
            yield {"port": port, "proc": proc}
        finally:
            assert stop_controller(proc) == 0, controller_log(proc)[-3000:]


def _get(api: client.ApiClient, path: str, **query: Any) -> tuple[int, dict[str, Any]]:
    """``kubectl get --raw PATH``: a GET through the API server (and its aggregation layer), with
    the client's ``call_api`` (whose signature changed in kubernetes 37: both are served)."""
    params = [(k, str(v)) for k, v in query.items()]
    try:
        if hasattr(api, "param_serialize"):  # kubernetes >= 37
            method, url, headers, _, _ = api.param_serialize("GET", path, query_params=params,
                                                             header_params={"Accept": "application/json"},
                                                             auth_settings=["BearerToken"])
            response = api.call_api(method, url, header_params=headers)
            response.read()
            return response.status, json.loads(response.data)
        response = api.call_api(path, "GET", query_params=params, header_params={"Accept": "application/json"},
                                auth_settings=["BearerToken"], _preload_content=False,
                                _return_http_data_only=True)
        return response.status, json.loads(response.data)
    except client.ApiException as error:
        return error.status, json.loads(error.body) if error.body else {}


def _items(body: dict[str, Any]) -> list[tuple[str, str, int, int, str, int]]:
    return [(i["metadata"]["namespace"], i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"],
             i["localQueueName"], i["priority"]) for i in body["items"]]


ALL = [(TEAM_A, "pod-first", 0, 0, "main", 30), (TEAM_B, "pod-second", 1, 0, "main", 20),
       (TEAM_A, "pod-third", 2, 1, "main", 10)]


def _wait_listed(api: client.ApiClient, proc: Any) -> dict[str, Any]:
    """The ClusterQueue's summary once it lists the three (the cycle that wrote the Workloads has
    positioned them; a request before it may see fewer)."""
    def listed() -> dict[str, Any] | None:
        code, body = _get(api, f"/apis/{GROUP}/v1beta2/clusterqueues/{CQ}/pendingworkloads")
        assert code == 200, body
        return body if len(body["items"]) == 3 else None
    return wait_until(listed, 120, "the three waiting workloads to be listed", interval=0.5, proc=proc)


def test_a_cluster_queues_pending_workloads_with_positions_limit_and_offset(plane: ControlPlane, served: Any) -> None:
    with plane.api_client() as api:
        body = _wait_listed(api, served["proc"])
        assert (body["kind"], body["apiVersion"]) == ("PendingWorkloadsSummary", f"{GROUP}/v1beta2")
        assert _items(body) == ALL
        first = body["items"][0]["metadata"]
        assert first["ownerReferences"][0]["kind"] == "Pod" and first["ownerReferences"][0]["name"] == "first"
        code, page = _get(api, f"/apis/{GROUP}/v1beta2/clusterqueues/{CQ}/pendingworkloads", limit=1, offset=1)
        assert code == 200 and _items(page) == ALL[1:2]
        code, page = _get(api, f"/apis/{GROUP}/v1beta1/clusterqueues/{CQ}/pendingworkloads", offset=2)
        assert code == 200 and page["apiVersion"] == f"{GROUP}/v1beta1" and _items(page) == ALL[2:]
        code, missing = _get(api, f"/apis/{GROUP}/v1beta2/clusterqueues/no-such-queue/pendingworkloads")
        assert code == 404 and missing["reason"] == "NotFound", missing


def test_a_local_queues_pending_workloads_keep_their_positions(plane: ControlPlane, served: Any) -> None:
    with plane.api_client() as api:
        _wait_listed(api, served["proc"])
        path = f"/apis/{GROUP}/v1beta2/namespaces/{TEAM_A}/localqueues/main/pendingworkloads"
        code, body = _get(api, path)
        assert code == 200 and _items(body) == [ALL[0], ALL[2]]
        code, body = _get(api, path, limit=1, offset=1)
        assert code == 200 and _items(body) == [ALL[2]]
        code, body = _get(api, f"/apis/{GROUP}/v1beta1/namespaces/{TEAM_B}/localqueues/main/pendingworkloads")
        assert code == 200 and _items(body) == [ALL[1]]
        code, body = _get(api, f"/apis/{GROUP}/v1beta2/namespaces/{TEAM_B}/localqueues/absent/pendingworkloads")
        assert code == 404, body


def test_discovery_names_the_group_its_versions_and_resources(plane: ControlPlane, served: Any) -> None:
    with plane.api_client() as api:
        code, group = _get(api, f"/apis/{GROUP}")
        assert code == 200 and group["preferredVersion"]["version"] == "v1beta2"
        assert {v["version"] for v in group["versions"]} == {"v1beta1", "v1beta2"}
        code, resources = _get(api, f"/apis/{GROUP}/v1beta2")
        assert code == 200
        assert {r["name"]: r["verbs"] for r in resources["resources"]}["localqueues/pendingworkloads"] == ["get"]
        # the API server's own discovery of every group lists it too (what kubectl api-resources reads)
        code, groups = _get(api, "/apis")
        assert code == 200 and GROUP in {g["name"] for g in groups["groups"]}


def _as(api: client.ApiClient, user: str) -> client.ApiClient:
    """An admin client that impersonates ``user`` (in no group but system:authenticated)."""
    other = client.ApiClient(api.configuration)
    other.set_default_header("Impersonate-User", user)
    return other


def test_a_user_reads_only_what_rbac_grants(plane: ControlPlane, served: Any) -> None:
    """Through the API server: refused without a binding; deploy/'s LocalQueue viewer role bound
    in team A lets alice read team A's LocalQueue, not team B's, nor the ClusterQueue."""
    with plane.api_client() as admin:
        _wait_listed(admin, served["proc"])
        alice = _as(admin, "alice")
        lq_a = f"/apis/{GROUP}/v1beta2/namespaces/{TEAM_A}/localqueues/main/pendingworkloads"
        lq_b = f"/apis/{GROUP}/v1beta2/namespaces/{TEAM_B}/localqueues/main/pendingworkloads"
        cq = f"/apis/{GROUP}/v1beta2/clusterqueues/{CQ}/pendingworkloads"
        assert _get(alice, lq_a)[0] == 403
        client.RbacAuthorizationV1Api(admin).create_namespaced_role_binding(TEAM_A, {
            "metadata": {"name": "alice-pending"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "clueue-pending-workloads-lq-viewer"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]})
        def granted() -> dict[str, Any] | None:
            code, body = _get(alice, lq_a)
            return body if code == 200 else None
        body = wait_until(granted, 60, "alice's RoleBinding to take effect", interval=0.5)
        assert _items(body) == [ALL[0], ALL[2]]
        assert _get(alice, lq_b)[0] == 403
        assert _get(alice, cq)[0] == 403


def _direct(served: Any, plane: ControlPlane, path: str, *, user: str | None, group: str | None = None,
            proxy_cert: bool, port: int | None = None) -> tuple[int, dict[str, Any]]:
    """GET ``path`` straight from the controller's server, presenting the front proxy's client
    certificate or none, naming ``user`` and ``group`` in the headers the front proxy sets."""
    with plane.api_client() as api:
        ca = client.CoreV1Api(api).read_namespaced_secret("clueue-visibility-tls", CONTROLLER_NS).data["ca.crt"]
    context = ssl.create_default_context(cadata=base64.b64decode(ca).decode())
    front_proxy = plane.front_proxy
    assert front_proxy is not None
    if proxy_cert:
        context.load_cert_chain(str(front_proxy.client_cert), str(front_proxy.client_key))
    headers = {"X-Remote-User": user} if user else {}
    if group:
        headers["X-Remote-Group"] = group
    request = urllib.request.Request(f"https://127.0.0.1:{port or served['port']}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60, context=context) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_server_itself_believes_only_the_front_proxy_and_asks_rbac(plane: ControlPlane, served: Any) -> None:
    """Straight to the controller's server, past the API server's own checks: it answers whom the
    front proxy names if RBAC allows them, refuses whom RBAC does not, and believes no header
    from a client without the front proxy's certificate."""
    path = f"/apis/{GROUP}/v1beta2/clusterqueues/{CQ}/pendingworkloads"
    code, body = _direct(served, plane, path, user="root-like", group="system:masters", proxy_cert=True)
    assert code == 200 and len(body["items"]) == 3, body
    code, body = _direct(served, plane, path, user="mallory", proxy_cert=True)
    assert code == 403 and body["reason"] == "Forbidden" and '"mallory"' in body["message"], body
    code, body = _direct(served, plane, path, user="root-like", group="system:masters", proxy_cert=False)
    assert code == 401 and body["reason"] == "Unauthorized", body


def test_kueuectl_list_workloads_shows_the_position_in_queue(plane: ControlPlane, served: Any) -> None:
    """Kueue's own kueuectl (v0.19.2, built from the Go module proxy): `kueuectl list workload` lists
    the Workloads and asks the visibility API for the pending ones' positions; POSITION IN QUEUE
    is the position in the LocalQueue, blank for an admitted one."""
    kueuectl = ensure_tool()
    with plane.api_client() as api:
        _wait_listed(api, served["proc"])
    result = subprocess.run([str(kueuectl), "list", "workload", "-n", TEAM_A, "--kubeconfig", str(plane.kubeconfig)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "POSITION IN QUEUE" in lines[0], result.stdout
    start = lines[0].index("POSITION IN QUEUE")
    positions = {line.split()[0]: line[start:start + len("POSITION IN QUEUE")].strip() for line in lines[1:]}
    assert positions == {"pod-running": "", "pod-first": "0", "pod-third": "1"}, result.stdout


def _as_service_account(plane: ControlPlane, path: Path) -> Path:
    """deploy/'s ServiceAccount and RBAC applied (visibility.yaml's bindings are already), and a
    kubeconfig with a token of that ServiceAccount alone."""
    from kubernetes.dynamic import DynamicClient

    from tests.e2e.test_deploy import service_account_kubeconfig
    with plane.api_client() as api:
        dynamic = DynamicClient(api)
        for name in ("serviceaccount.yaml", "rbac.yaml"):
            for obj in (doc for doc in yaml.safe_load_all((REPO / "deploy" / name).read_text()) if doc):
                resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
                resource.create(body=obj, namespace=obj["metadata"].get("namespace"))
    return service_account_kubeconfig(plane, path)


def test_a_replica_that_does_not_lead_answers_from_a_plan_of_its_own(plane: ControlPlane, served: Any,
                                                                   tmp_path: Path) -> None:
    """Behind the Service every replica answers: one that waits for the leader's lease makes its
    plan from its own cache, and lists the same workloads at the same positions. It runs as
    deploy/'s ServiceAccount, whose RBAC is all the visibility API needs: its certificate, the
    APIServices, the front proxy's ConfigMap, the SubjectAccessReviews."""
    port = free_port()
    proc = start_controller(plane, "--leader-elect", "--lease-duration", "5",
                            "--visibility-bind-address", f"127.0.0.1:{port}",
                            kubeconfig=_as_service_account(plane, tmp_path / "kubeconfig"))
    try:
        path = f"/apis/{GROUP}/v1beta2/clusterqueues/{CQ}/pendingworkloads"

        def answered() -> dict[str, Any] | None:
            assert proc.poll() is None, controller_log(proc)[-3000:]
            try:
                code, body = _direct(served, plane, path, user="admin", group="system:masters", proxy_cert=True,
                                     port=port)
            except OSError:
                return None  # not listening yet
            return body if code == 200 else None
        body = wait_until(answered, 120, "the second replica to answer", interval=0.5, proc=proc)
        assert _items(body) == ALL
        code, body = _direct(served, plane, path, user="mallory", proxy_cert=True, port=port)
        assert code == 403, body
        log = controller_log(proc)
        assert "took the decider lease" not in log and "Forbidden" not in log and "forbidden" not in log, log
    finally:
        assert stop_controller(proc) == 0, controller_log(proc)[-3000:]


def test_an_api_server_without_a_front_proxy_is_one_clear_error() -> None:
    """Without --requestheader-client-ca-file the API server proxies to no aggregated API, and the
    visibility server could not tell who asks: the controller says so and exits 1."""
    with ControlPlane(ensure_binaries()) as bare:
        bare.create_namespace(CONTROLLER_NS)
        proc = start_controller(bare, "--visibility-bind-address", f"127.0.0.1:{free_port()}")
        assert proc.wait(120) == 1
        log = controller_log(proc)
        assert "ConfigMap kube-system/extension-apiserver-authentication: it has no requestheader-client-ca-file" \
            in log and "Traceback" not in log, log
