"""A running controller decides by Kueue's ConfigMap `kueue-system/kueue-manager-config` as it
is now (docs/controller.md, docs/pods-ready.md): started before the ConfigMap (and its
namespace) exist, it picks the ConfigMap up when it is created, follows its updates, and leaves
out a malformed one whole, saying which field is wrong, while it goes on deciding.

The controller runs as deploy/'s ServiceAccount, with deploy/'s RBAC only (rendered as
test_deploy.py renders it), so the test also shows that the RBAC rule for that one ConfigMap
is what the cache's list and watch need.

The decision that shows which settings are in effect: a Workload whose pods are never ready
(nothing sets its PodsReady condition) is admitted; with waitForPodsReady's `blockAdmission`
nothing else is admitted while it is so, without it the next one is.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.dynamic import DynamicClient

from clueue.adapters.kube import read_cluster
from tests.e2e.controller_harness import (  # noqa: F401 - cluster and api are this module's fixtures
    CONTROLLER_NS, api, cluster, controller_log, start_controller, stop_controller, wait_until,
)
from tests.e2e.test_adapter import create, queue_setup, tag, workload_object
from tests.e2e.test_deploy import DEPLOY, render, service_account_kubeconfig
from tests.e2e.test_pods_ready_live import job
from tests.testenv.control_plane import ControlPlane

NAMESPACE, NAME, KEY = "kueue-system", "kueue-manager-config", "controller_manager_config.yaml"
RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}


def configuration(wait_for_pods_ready: str) -> dict[str, Any]:
    """Kueue's ConfigMap holding a Configuration with the ``waitForPodsReady`` section given."""
    text = f"apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nwaitForPodsReady:\n{wait_for_pods_ready}"
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": NAME, "namespace": NAMESPACE},
            "data": {KEY: text}}


BLOCKING = configuration("  enable: true\n  timeout: 1h\n  blockAdmission: true\n")
NOT_BLOCKING = configuration("  enable: true\n  timeout: 1h\n  blockAdmission: false\n")
# blockAdmission is valid, timeout is not: the whole ConfigMap is left out, blockAdmission too
MALFORMED = configuration("  enable: true\n  timeout: soon\n  blockAdmission: true\n")
BAD_FIELD = f"data[{KEY}].waitForPodsReady.timeout"


@pytest.fixture(scope="module")
def service_account(cluster: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """deploy/'s ServiceAccount and RBAC on the module's control plane; a kubeconfig with a
    token of that ServiceAccount."""
    with cluster.api_client() as admin:
        dynamic = DynamicClient(admin)
        for obj in render(DEPLOY):
            if obj["kind"] in RBAC_KINDS:
                resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
                dynamic.server_side_apply(resource, body=obj, name=obj["metadata"]["name"],
                                          namespace=obj["metadata"].get("namespace"), field_manager="kubectl")
    return service_account_kubeconfig(cluster, tmp_path_factory.mktemp("sa") / "kubeconfig")


def admitted(api: client.ApiClient, ns: str, name: str) -> bool:
    return bool((workload_object(api, ns, name).get("status") or {}).get("admission"))


def blocked(api: client.ApiClient, ns: str, name: str) -> bool:
    """Whether the Workload records that it waits for another's pods (blockAdmission)."""
    conditions = (workload_object(api, ns, name).get("status") or {}).get("conditions", [])
    return any(c["type"] == "QuotaReserved" and c["status"] == "False" and "blockAdmission" in c.get("message", "")
               for c in conditions)


def invalid_object_events(api: client.ApiClient) -> list[str]:
    """The messages of the Warning Events InvalidObject on Kueue's ConfigMap."""
    events = client.CoreV1Api(api).list_namespaced_event(NAMESPACE).items
    return [e.message for e in events if e.reason == "InvalidObject" and e.type == "Warning"
            and e.involved_object.kind == "ConfigMap" and e.involved_object.name == NAME]


def test_the_controller_follows_kueues_configmap_as_it_appears_changes_and_breaks(
        cluster: ControlPlane, api: client.ApiClient, service_account: Path) -> None:
    core = client.CoreV1Api(api)
    ns = queue_setup(api, tag(), nominal=4)
    proc = start_controller(cluster, "--namespace", CONTROLLER_NS, "--batch-window", "0.05", "--max-delay", "0.5",
                            kubeconfig=service_account)
    try:
        # No ConfigMap, no kueue-system namespace: no waitForPodsReady, both are admitted.
        create(api, job(ns, "first"))
        create(api, job(ns, "second"))
        wait_until(lambda: admitted(api, ns, "first") and admitted(api, ns, "second"), 60,
                   "both Workloads admitted without waitForPodsReady", proc=proc)

        # The namespace and the ConfigMap appear: blockAdmission holds the next one back, as
        # the pods of those admitted are not ready.
        cluster.create_namespace(NAMESPACE)
        core.create_namespaced_config_map(NAMESPACE, BLOCKING)
        create(api, job(ns, "third"))
        wait_until(lambda: blocked(api, ns, "third"), 60, "the third Workload held by blockAdmission", proc=proc)
        assert not admitted(api, ns, "third")

        # Updated without blockAdmission: the next cycle admits it.
        core.replace_namespaced_config_map(NAME, NAMESPACE, NOT_BLOCKING)
        wait_until(lambda: admitted(api, ns, "third"), 60, "the third Workload admitted once blockAdmission is off",
                   proc=proc)

        # Malformed: a Warning Event and a log line name the ConfigMap and the field; it is
        # left out whole (its valid blockAdmission too), and the controller goes on deciding.
        core.replace_namespaced_config_map(NAME, NAMESPACE, MALFORMED)
        events = wait_until(lambda: invalid_object_events(api), 60, "the InvalidObject Event on the ConfigMap",
                            proc=proc)
        assert any(BAD_FIELD in message and "'soon' is not a duration" in message for message in events), events
        create(api, job(ns, "fourth"))
        wait_until(lambda: admitted(api, ns, "fourth"), 60, "the fourth Workload admitted beside the bad ConfigMap",
                   proc=proc)
        wait_until(lambda: f"ConfigMap {NAMESPACE}/{NAME}: {BAD_FIELD}" in controller_log(proc), 30,
                   "the log line naming the ConfigMap and its field", proc=proc)

        # Fixed again: blockAdmission holds the next one back once more.
        core.replace_namespaced_config_map(NAME, NAMESPACE, BLOCKING)
        create(api, job(ns, "fifth"))
        wait_until(lambda: blocked(api, ns, "fifth"), 60, "the fifth Workload held by blockAdmission", proc=proc)
    finally:
        code = stop_controller(proc)
        try:
            core.delete_namespaced_config_map(NAME, NAMESPACE)
        except client.ApiException as e:  # never created: the failure above says why
            if e.status != 404:
                raise
    log = controller_log(proc)
    assert code == 0, log[-4000:]
    assert "forbidden" not in log.lower() and "watching ConfigMap failed" not in log, log[-4000:]
    assert log.count(BAD_FIELD) == 1, log[-4000:]  # said once while it lasts, not every cycle


def test_without_the_rbac_rule_the_controller_says_so_once_and_decides_without_it(
        cluster: ControlPlane, api: client.ApiClient, service_account: Path) -> None:
    """An older deploy/ without the ConfigMap rule: the cache may not list the ConfigMap; the
    controller logs that once (not at every retry), decides by clueue's own settings only, and
    is ready all the same."""
    rbac = client.RbacAuthorizationV1Api(api)
    role = rbac.read_cluster_role("clueue-controller")
    granted = list(role.rules)
    role.rules = [r for r in granted if "configmaps" not in (r.resources or [])]
    assert len(role.rules) == len(granted) - 1
    rbac.replace_cluster_role("clueue-controller", role)
    ns = queue_setup(api, tag(), nominal=4)
    proc = start_controller(cluster, "--namespace", CONTROLLER_NS, "--batch-window", "0.05", "--max-delay", "0.5",
                            kubeconfig=service_account)
    try:
        create(api, job(ns, "first"))
        wait_until(lambda: admitted(api, ns, "first"), 60, "a Workload admitted", proc=proc)
        wait_until(lambda: f"ConfigMap {NAMESPACE}/{NAME} could not be read (forbidden)" in controller_log(proc), 30,
                   "the log line saying the ConfigMap may not be read", proc=proc)
        with config.new_client_from_config(config_file=str(service_account)) as as_controller:
            notices = read_cluster(as_controller).notices  # a one-shot read (clueue plan) says the same
        assert any(f"ConfigMap {NAMESPACE}/{NAME} could not be read (forbidden)" in n for n in notices), notices
    finally:
        code = stop_controller(proc)
        role = rbac.read_cluster_role("clueue-controller")
        role.rules = granted
        rbac.replace_cluster_role("clueue-controller", role)
    log = controller_log(proc)
    assert code == 0, log[-4000:]
    assert log.count("could not be read (forbidden)") == 1 and "watching ConfigMap failed" not in log, log[-4000:]
