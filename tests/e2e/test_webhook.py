"""The Pod webhook registered with a real kube-apiserver, on loopback, with certificates managed
by CertManager. A private control plane: cluster-wide webhooks would disturb the shared one."""

from __future__ import annotations

import base64
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from clueue.adapters.webhook.certs import CertManager
from clueue.adapters.webhook.configuration import (
    MUTATING_NAME,
    VALIDATING_NAME,
    register_configurations,
    webhook_configurations,
)
from clueue.adapters.webhook.server import WebhookServer
from clueue.engine import AdapterError, Config, Document, build_snapshot
from tests.testenv.build import ensure_binaries
from tests.testenv.control_plane import ControlPlane

CONTROLLER_NS = "clueue-system"
TEAM = "team-a"
QUEUE = "kueue.x-k8s.io/queue-name"
GATE = "kueue.x-k8s.io/admission"
ROLE_HASH = "kueue.x-k8s.io/role-hash"
#: Bounds the wait for the apiserver to see the registered webhook (its informer); not a speed claim.
READY_TIMEOUT_S = 60.0


@dataclass
class Env:
    plane: ControlPlane
    api: Any
    core: client.CoreV1Api
    certs: CertManager
    second: CertManager
    server: WebhookServer
    gated: list[int]
    tmp: Path


def pod(name: str, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
        queue: str | None = "main", image: str = "img:1", cpu: str = "1") -> dict[str, Any]:
    lab = dict(labels or {})
    if queue:
        lab[QUEUE] = queue
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": lab, "annotations": dict(annotations or {})},
            "spec": {"containers": [{"name": "c", "image": image, "resources": {"requests": {"cpu": cpu}}}]}}


def _as_dict(api: Any, obj: Any) -> dict[str, Any]:
    return dict(api.sanitize_for_serialization(obj))


def _wait_until_gating(core: client.CoreV1Api) -> None:
    """The apiserver picks registered webhooks (and a patched caBundle) up asynchronously: dry-run
    a queued Pod until it comes back gated."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    last = ""
    while time.monotonic() < deadline:
        try:
            created = core.create_namespaced_pod(TEAM, pod("probe"), dry_run="All")
            if any(g.name == GATE for g in created.spec.scheduling_gates or []):
                return
            last = "not gated yet"
        except ApiException as e:
            last = f"{e.status}: {e.body}"
        time.sleep(0.2)
    raise AssertionError(f"the webhook never gated a probe Pod: {last}")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("webhook")
    with ControlPlane(ensure_binaries(), crd_dir=None) as plane:
        plane.create_namespace(CONTROLLER_NS)
        plane.create_namespace(TEAM)
        api = plane.api_client()
        core = client.CoreV1Api(api)
        certs = CertManager(api, CONTROLLER_NS, "clueue-webhook", directory=tmp / "one", extra_sans=("127.0.0.1",))
        cert, key = certs.ensure()  # creates the Secret; no configuration to patch yet
        gated: list[int] = []
        server = WebhookServer(Config(controller_namespace=CONTROLLER_NS), cert, key, host="127.0.0.1", port=0,
                               on_gated=lambda: gated.append(1), api=api).start()
        # Registered without a caBundle: the second replica's CertManager patches it in.
        register_configurations(api, webhook_configurations(CONTROLLER_NS, url=f"https://127.0.0.1:{server.port}"))
        second = CertManager(api, CONTROLLER_NS, "clueue-webhook", directory=tmp / "two", extra_sans=("127.0.0.1",))
        second.ensure()
        _wait_until_gating(core)
        try:
            yield Env(plane, api, core, certs, second, server, gated, tmp)
        finally:
            server.stop()
            api.close()


# -- certificates -----------------------------------------------------------------------------
def test_certificates_are_kept_in_a_secret_shared_by_the_replicas(env: Env) -> None:
    secret = env.core.read_namespaced_secret("clueue-webhook-tls", CONTROLLER_NS)
    assert secret.type == "kubernetes.io/tls"
    assert set(secret.data) == {"tls.crt", "tls.key", "ca.crt", "ca.key"}
    assert (env.tmp / "one" / "tls.crt").read_bytes() == (env.tmp / "two" / "tls.crt").read_bytes()
    assert base64.b64decode(secret.data["tls.crt"]) == (env.tmp / "one" / "tls.crt").read_bytes()
    admission = client.AdmissionregistrationV1Api(env.api)
    for config in (admission.read_mutating_webhook_configuration(MUTATING_NAME),
                   admission.read_validating_webhook_configuration(VALIDATING_NAME)):
        assert {base64.b64decode(w.client_config.ca_bundle) for w in config.webhooks} == {env.certs.ca_bundle}
    cert = x509.load_pem_x509_certificate((env.tmp / "one" / "tls.crt").read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "clueue-webhook.clueue-system.svc" in names.get_values_for_type(x509.DNSName)
    assert "clueue-webhook.clueue-system.svc.cluster.local" in names.get_values_for_type(x509.DNSName)


def test_a_replica_losing_the_race_to_create_the_secret_uses_the_winners(env: Env) -> None:
    late = CertManager(env.api, CONTROLLER_NS, "clueue-webhook", directory=env.tmp / "late", extra_sans=("127.0.0.1",))
    theirs = late._create(late._generate(None))  # the create answers 409: the Secret exists
    assert theirs["tls.crt"] == (env.tmp / "one" / "tls.crt").read_bytes()


def test_a_missing_namespace_or_permission_is_a_clear_error(env: Env, tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match="namespace nowhere does not exist"):
        CertManager(env.api, "nowhere", "clueue-webhook", directory=tmp_path).ensure()
    nobody = env.plane.api_client()
    nobody.set_default_header("Impersonate-User", "nobody")
    try:
        with pytest.raises(AdapterError, match="Secret clueue-system/clueue-webhook-tls: forbidden.*secrets in "
                                               "namespace clueue-system"):
            CertManager(nobody, CONTROLLER_NS, "clueue-webhook", directory=tmp_path).ensure()
    finally:
        nobody.close()


# -- mutating ---------------------------------------------------------------------------------
def test_a_queued_pod_is_gated_labelled_and_finalized(env: Env) -> None:
    before = len(env.gated)
    created = _as_dict(env.api, env.core.create_namespaced_pod(TEAM, pod("single", labels={"app": "a"})))
    assert created["spec"]["schedulingGates"] == [{"name": GATE}]
    assert created["metadata"]["labels"] == {"app": "a", QUEUE: "main", "kueue.x-k8s.io/managed": "true"}
    assert created["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"]
    assert len(env.gated) == before + 1


def test_group_pods_get_the_engines_role_hash(env: Env) -> None:
    group = {"kueue.x-k8s.io/pod-group-name": "g1"}
    count = {"kueue.x-k8s.io/pod-group-total-count": "2"}
    driver = _as_dict(env.api, env.core.create_namespaced_pod(TEAM, pod("g1-driver", labels=group, annotations=count)))
    worker = _as_dict(env.api, env.core.create_namespaced_pod(
        TEAM, pod("g1-worker", labels=group, annotations=count, image="worker:1", cpu="2")))
    hashes = [p["metadata"]["annotations"][ROLE_HASH] for p in (driver, worker)]
    assert hashes[0] != hashes[1]
    # The engine, reading the stored Pods without the annotation, puts them in the same roles.
    for stored, expected in zip((driver, worker), hashes):
        del stored["metadata"]["annotations"][ROLE_HASH]
        snap = build_snapshot([Document("api", stored)])
        assert snap.pods[f"{TEAM}/{stored['metadata']['name']}"].role_hash == expected


def test_a_podgroup_pod_without_a_queue_is_gated_for_clueue_to_gang_schedule(env: Env) -> None:
    """Issue 33: the apiserver sends it to the second mutating webhook (PodGroup label, no
    queue name), which gates it as a queued Pod; the PodGroup label is then immutable."""
    member = pod("mpi-0", queue=None, labels={"scheduling.x-k8s.io/pod-group": "mpi"})
    created = _as_dict(env.api, env.core.create_namespaced_pod(TEAM, member))
    assert created["spec"]["schedulingGates"] == [{"name": GATE}]
    assert created["metadata"]["labels"] == {"scheduling.x-k8s.io/pod-group": "mpi", "kueue.x-k8s.io/managed": "true"}
    assert created["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"]
    with pytest.raises(ApiException) as refused:
        env.core.patch_namespaced_pod("mpi-0", TEAM, {"metadata": {"labels": {"scheduling.x-k8s.io/pod-group": "h"}}})
    assert refused.value.status == 403 and "field is immutable" in refused.value.body


@pytest.mark.parametrize("namespace, body", [
    (TEAM, pod("no-queue", queue=None)),
    ("kube-system", pod("system-group", queue=None, labels={"scheduling.x-k8s.io/pod-group": "g"})),
    ("kube-system", pod("system")),
    (CONTROLLER_NS, pod("controllers-own")),
])
def test_pods_not_subject_to_queueing_are_untouched(env: Env, namespace: str, body: dict[str, Any]) -> None:
    created = env.core.create_namespaced_pod(namespace, body)
    assert not created.spec.scheduling_gates
    assert not created.metadata.finalizers
    assert "kueue.x-k8s.io/managed" not in (created.metadata.labels or {})


# -- validating -------------------------------------------------------------------------------
def test_changing_a_managed_pods_queue_is_refused(env: Env) -> None:
    env.core.create_namespaced_pod(TEAM, pod("moving"))
    with pytest.raises(ApiException) as refused:
        env.core.patch_namespaced_pod("moving", TEAM, {"metadata": {"labels": {QUEUE: "other"}}})
    assert refused.value.status == 403
    assert f"metadata.labels[{QUEUE}]: Forbidden: field is immutable" in refused.value.body
    # Other changes go through: the controller ungates and relabels managed Pods.
    env.core.patch_namespaced_pod("moving", TEAM, {"metadata": {"labels": {"app": "b"}}})


def test_a_group_pod_with_an_unparseable_count_is_refused(env: Env) -> None:
    body = pod("bad-count", labels={"kueue.x-k8s.io/pod-group-name": "g2"},
               annotations={"kueue.x-k8s.io/pod-group-total-count": "two"})
    with pytest.raises(ApiException) as refused:
        env.core.create_namespaced_pod(TEAM, body)
    assert "pod-group-total-count]: Invalid value 'two'" in refused.value.body


# -- the server -------------------------------------------------------------------------------
def _peer_certificate(env: Env) -> bytes:
    context = ssl.create_default_context(cadata=env.certs.ca_bundle.decode())
    with socket.create_connection(("127.0.0.1", env.server.port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            return tls.getpeercert(binary_form=True) or b""


def test_health_and_malformed_requests(env: Env) -> None:
    context = ssl.create_default_context(cadata=env.certs.ca_bundle.decode())
    base = f"https://127.0.0.1:{env.server.port}"
    with urllib.request.urlopen(f"{base}/healthz", context=context, timeout=10) as answer:
        assert answer.status == 200
    with pytest.raises(urllib.error.HTTPError) as bad:
        urllib.request.urlopen(urllib.request.Request(f"{base}/mutate-pods", data=b"{not json", method="POST"),
                               context=context, timeout=10)
    assert bad.value.code == 400


def test_a_failing_decision_refuses_the_pod_and_the_server_goes_on(env: Env) -> None:
    def broken(name: str) -> dict[str, str]:
        raise RuntimeError(f"no labels for {name}")

    server = WebhookServer(Config(), env.certs.cert_file, env.certs.key_file, namespace_labels=broken)
    request = {"uid": "u", "operation": "CREATE", "namespace": TEAM, "object": pod("p")}
    answer = server.review("/mutate-pods", request)
    assert answer["allowed"] is False and answer["status"]["code"] == 500
    assert "RuntimeError: no labels for team-a" in answer["status"]["message"]
    assert "not created" in answer["status"]["message"]
    assert server.review("/mutate-pods", {**request, "object": pod("p", queue=None)}) == {"allowed": True}


def test_rotation_renews_and_the_server_reloads_without_restart(env: Env) -> None:
    old = x509.load_pem_x509_certificate(env.certs.cert_file.read_bytes())
    assert not env.certs.rotate_if_due()  # a year left: not due
    assert env.certs.rotate_if_due(before=timedelta(days=400))  # a year is less than 400 days: renewed
    new = x509.load_pem_x509_certificate(env.certs.cert_file.read_bytes())
    assert new.serial_number != old.serial_number
    assert _peer_certificate(env) == new.public_bytes(Encoding.DER)
    assert env.second.rotate_if_due()  # the other replica takes the renewal up from the Secret
    assert env.second.cert_file.read_bytes() == env.certs.cert_file.read_bytes()
    created = env.core.create_namespaced_pod(TEAM, pod("after-rotation"))  # the apiserver still trusts it
    assert [g.name for g in created.spec.scheduling_gates] == [GATE]


def test_replicas_registering_together_all_succeed(env: Env) -> None:
    """Two controllers started together outside a cluster (--webhook-url) both register the
    configurations: the one whose create or replace meets the other's write (409) reads again
    and replaces, rather than exiting. Configurations of other names, gating no namespace."""
    import threading

    bodies = webhook_configurations(CONTROLLER_NS, url=f"https://127.0.0.1:{env.server.port}")
    for body in bodies:
        body["metadata"]["name"] = "race-" + body["metadata"]["name"]
        body["webhooks"][0]["namespaceSelector"] = {"matchLabels": {"clueue.dev/race-test": "no-namespace"}}
    admission = client.AdmissionregistrationV1Api(env.api)
    replicas = 6
    for _ in range(10):  # rounds from nothing registered, each a race to create, then to replace
        start, failures = threading.Barrier(replicas), []

        def replica() -> None:
            with env.plane.api_client() as api:
                client.VersionApi(api).get_code()  # connected before the race starts
                start.wait()
                try:
                    register_configurations(api, bodies)
                except AdapterError as e:
                    failures.append(str(e))

        threads = [threading.Thread(target=replica) for _ in range(replicas)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == []
        assert admission.read_mutating_webhook_configuration("race-" + MUTATING_NAME).webhooks[0].client_config.url
        admission.delete_mutating_webhook_configuration("race-" + MUTATING_NAME)
        admission.delete_validating_webhook_configuration("race-" + VALIDATING_NAME)


def test_with_the_webhook_down_queued_pods_are_refused_and_others_created(env: Env) -> None:
    """Last in this module: it stops the server."""
    env.server.stop()
    with pytest.raises(ApiException) as refused:
        env.core.create_namespaced_pod(TEAM, pod("while-down"))
    assert "gate-pods.clueue.dev" in refused.value.body  # failurePolicy Fail: never created ungated
    created = env.core.create_namespaced_pod(TEAM, pod("unqueued-while-down", queue=None))
    assert not created.spec.scheduling_gates
