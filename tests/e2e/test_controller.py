"""``clueue controller`` as a process against a real kube-apiserver: it admits gated pods up to
the quota with nobody running apply, follows finished pods, shuts down cleanly on SIGTERM, and
with leader election only the leader decides and a killed leader is replaced.

The module has its own control plane: a controller decides over the whole cluster. Pods are
created gated, labelled and finalized as the webhook would make them (the webhook is tested on
its own); their phases are set through the status subresource, as a kubelet would.
"""

from __future__ import annotations

import json
import re
import signal
import time
import urllib.request

import pytest
from kubernetes import client

from clueue.adapters.kube.apply import GATE
from clueue.adapters.webhook.configuration import MUTATING_NAME
from tests.e2e.controller_harness import (  # noqa: F401 - cluster and api are this module's fixtures
    DECIDER_LEASE, LEADER_LEASE, api, cluster, controller_log, free_port, lease_holder, metrics_port,
    start_controller, stop_controller, unregister_webhooks, wait_until,
)
from tests.e2e.test_adapter import create, gated_pod, queue_setup, tag, workload_object
from tests.e2e.test_preemption import preempting_queue
from tests.e2e.test_preemption import workload as preemption_workload

FAST = ("--batch-window", "0.05", "--max-delay", "0.5", "--lease-duration", "4")


def gated(api: client.ApiClient, ns: str) -> set[str]:
    """The pods of ``ns`` that still carry the admission gate."""
    pods = client.CoreV1Api(api).list_namespaced_pod(ns).items
    return {p.metadata.name for p in pods if any(g.name == GATE for g in p.spec.scheduling_gates or [])}


def ungated(api: client.ApiClient, ns: str) -> set[str]:
    pods = client.CoreV1Api(api).list_namespaced_pod(ns).items
    return {p.metadata.name for p in pods} - gated(api, ns)


def waiting_recorded(api: client.ApiClient, ns: str, name: str) -> bool:
    """Whether pod ``name``'s Workload records that it waits (QuotaReserved=False)."""
    try:
        wl = client.CustomObjectsApi(api).get_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta1", ns, "workloads", f"pod-{name}")
    except client.ApiException:
        return False
    return any(c["type"] == "QuotaReserved" and c["status"] == "False"
               for c in (wl.get("status") or {}).get("conditions", []))


def webhook_calls(api: client.ApiClient, url: str) -> bool:
    """Whether clueue's mutating webhook configuration is registered calling ``url``."""
    try:
        hook = client.AdmissionregistrationV1Api(api).read_mutating_webhook_configuration(MUTATING_NAME).webhooks[0]
    except client.ApiException:
        return False
    return bool(hook.client_config.url and hook.client_config.url.startswith(url))


def finish(api: client.ApiClient, ns: str, name: str) -> None:
    """Mark a pod Succeeded, as its kubelet would."""
    core = client.CoreV1Api(api)
    pod = core.read_namespaced_pod(name, ns)
    pod.status.phase = "Succeeded"
    core.replace_namespaced_pod_status(name, ns, pod)


def test_the_controller_admits_up_to_the_quota_and_follows_finished_pods(cluster, api):
    t = tag()
    ns = queue_setup(api, t, nominal=2)
    for i in range(3):
        create(api, gated_pod(ns, f"p{i}"))
    proc = start_controller(cluster, *FAST)
    try:
        wait_until(lambda: len(ungated(api, ns)) == 2, 60, "two of three pods ungated", proc=proc)
        waiting = gated(api, ns)
        assert len(waiting) == 1
        (last,) = waiting
        wait_until(lambda: waiting_recorded(api, ns, last), 30, f"{last} recorded as waiting", proc=proc)
        assert gated(api, ns) == {last}  # the quota is full: it stays gated

        finish(api, ns, sorted(ungated(api, ns))[0])  # frees 1 cpu
        wait_until(lambda: not gated(api, ns), 30, f"{last} ungated once a pod finished", proc=proc)

        port = metrics_port(proc)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as ready:
            assert ready.status == 200

        def ungated_total() -> float:  # recorded once the cycle that ungated has ended
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
                found = re.search(r"^clueue_pods_ungated_total (\S+)$", answer.read().decode(), re.M)
            return float(found.group(1)) if found else 0.0
        wait_until(lambda: ungated_total() == 3.0, 30, "clueue_pods_ungated_total 3", proc=proc)

        create(api, gated_pod(ns, "late"))  # a pod created while the controller runs
        wait_until(lambda: waiting_recorded(api, ns, "late"), 30, "the late pod decided", proc=proc)
        assert gated(api, ns) == {"late"}
        assert proc.poll() is None
    finally:
        code = stop_controller(proc)
    assert code == 0, controller_log(proc)[-3000:]
    assert lease_holder(api, DECIDER_LEASE) == ""  # released at the end
    assert "cycle" in controller_log(proc)


def test_sigterm_exits_zero_and_releases_the_lease(cluster, api):
    proc = start_controller(cluster, *FAST, "--log-format", "json")
    wait_until(lambda: "cycle" in controller_log(proc), 60, "a first cycle", proc=proc)
    assert lease_holder(api, DECIDER_LEASE)
    started = time.monotonic()
    assert stop_controller(proc) == 0, controller_log(proc)[-3000:]
    print(f"\nSIGTERM to exit: {time.monotonic() - started:.2f} s")
    assert lease_holder(api, DECIDER_LEASE) == ""
    records = [json.loads(line) for line in controller_log(proc).splitlines() if line.strip()]
    assert any("cycle" in r and r["message"].startswith("cycle ") for r in records), records


def test_with_leader_election_only_the_leader_decides_and_a_killed_leader_is_replaced(cluster, api):
    t = tag()
    ns = queue_setup(api, t, nominal=10)
    procs = [start_controller(cluster, *FAST, "--leader-elect") for _ in range(2)]
    try:
        leader = wait_until(lambda: lease_holder(api, LEADER_LEASE), 60, "a leader", proc=procs[0])
        wait_until(lambda: lease_holder(api, DECIDER_LEASE) == leader, 60, "the leader to take the decider lease",
                   proc=procs[0])
        create(api, gated_pod(ns, "first"))
        wait_until(lambda: "first" in ungated(api, ns), 30, "the leader to admit a pod", proc=procs[0])

        logs = [controller_log(p) for p in procs]
        deciding = [i for i, log in enumerate(logs) if "took the decider lease" in log]
        assert len(deciding) == 1, logs  # only the leader ever took it
        (leading,) = deciding
        follower = procs[1 - leading]

        procs[leading].send_signal(signal.SIGKILL)
        procs[leading].wait()
        killed = time.monotonic()
        create(api, gated_pod(ns, "second"))
        new_leader = wait_until(lambda: (lease_holder(api, LEADER_LEASE) or leader) != leader and
                                lease_holder(api, LEADER_LEASE), 60, "another leader", proc=follower)
        elected = time.monotonic()
        wait_until(lambda: "second" in ungated(api, ns), 60, "the new leader to admit a pod", proc=follower)
        admitted = time.monotonic()
        print(f"\nleader killed: new leader elected after {elected - killed:.1f} s, deciding again after "
              f"{admitted - killed:.1f} s (lease duration 4 s)")
        assert lease_holder(api, DECIDER_LEASE) == new_leader
        assert stop_controller(follower) == 0, controller_log(follower)[-3000:]
        assert lease_holder(api, LEADER_LEASE) == "" and lease_holder(api, DECIDER_LEASE) == ""
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_missing_namespace_is_created(cluster, api):
    """`clueue controller --kubeconfig PATH` alone runs against a cluster deploy/ was never applied to."""
    ns = f"clueue-{tag()}"
    proc = start_controller(cluster, *FAST, "--namespace", ns)
    try:
        wait_until(lambda: lease_holder(api, DECIDER_LEASE, ns), 60, f"the decider lease in {ns}", proc=proc)
        created = client.CoreV1Api(api).read_namespace(ns).metadata
        assert created.name == ns
        # saved as `kubectl create --save-config` would: a later `kubectl apply -k deploy/` (its
        # namespace.yaml) merges into it instead of warning about a missing annotation
        saved = json.loads(created.annotations["kubectl.kubernetes.io/last-applied-configuration"])
        assert (saved["kind"], saved["metadata"]["name"]) == ("Namespace", ns)
    finally:
        assert stop_controller(proc) == 0, controller_log(proc)[-3000:]
    assert f"created namespace {ns}" in controller_log(proc)


def test_the_namespace_given_is_the_one_left_unqueued(cluster, api):
    """--namespace replaces the Configuration's controllerNamespace: the webhook excludes it."""
    ns = f"clueue-{tag()}"
    port = free_port()
    proc = start_controller(cluster, *FAST, "--namespace", ns, "--webhook", "--webhook-bind-address",
                            f"127.0.0.1:{port}", "--webhook-url", f"https://127.0.0.1:{port}")
    admission = client.AdmissionregistrationV1Api(api)

    def excluded() -> list[str]:
        try:
            hook = admission.read_mutating_webhook_configuration(MUTATING_NAME).webhooks[0]
        except client.ApiException:
            return []
        return [v for e in hook.namespace_selector.match_expressions or [] if e.operator == "NotIn" for v in e.values]
    try:
        assert wait_until(lambda: sorted(excluded()), 60, "the webhook registered", proc=proc) == sorted(
            ["kube-system", ns])
    finally:
        code = stop_controller(proc)
        unregister_webhooks(api)
    assert code == 0, controller_log(proc)[-3000:]


def test_outside_a_cluster_against_a_local_api_server_it_serves_its_own_webhook(cluster, api):
    """Issue 34: `clueue controller --kubeconfig K` alone ran without a webhook, so queued Pods
    started at once and were admitted over the quota. With no clueue webhook configuration
    registered and the API server on this machine, it now serves the webhook on loopback,
    registered by URL, so a queued Pod is gated as it is created; the registration goes with it."""
    unregister_webhooks(api)
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    proc = start_controller(cluster, *FAST, "--webhook-bind-address", f"127.0.0.1:{port}", gating=False)
    ns = f"local-{tag()}"
    core = client.CoreV1Api(api)
    try:
        wait_until(lambda: webhook_calls(api, url), 120, "the webhook registered", proc=proc)
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
        made = core.create_namespaced_pod(ns, client.V1Pod(
            metadata=client.V1ObjectMeta(name="queued", labels={"kueue.x-k8s.io/queue-name": "nowhere"}),
            spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")])))
        assert [g.name for g in made.spec.scheduling_gates or []] == [GATE]
    finally:
        code = stop_controller(proc)
        unregister_webhooks(api)
    assert code == 0, controller_log(proc)[-3000:]
    assert "serving the Pod webhook at " + url in controller_log(proc)
    assert "removed webhook configurations clueue-pod-mutating, clueue-pod-validating" in controller_log(proc)


def test_a_url_registration_is_removed_when_its_controller_stops(cluster, api):
    """Issue 34: a --webhook-url run's failurePolicy Fail configurations outlived it and refused
    every queued Pod; the configurations it created go with it (SIGTERM)."""
    unregister_webhooks(api)
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    proc = start_controller(cluster, *FAST, "--webhook", "--webhook-bind-address", f"127.0.0.1:{port}",
                            "--webhook-url", url)
    admission = client.AdmissionregistrationV1Api(api)
    try:
        wait_until(lambda: webhook_calls(api, url), 60, "the webhook registered", proc=proc)
    finally:
        code = stop_controller(proc)
    assert code == 0, controller_log(proc)[-3000:]
    for read in (admission.read_mutating_webhook_configuration, admission.read_validating_webhook_configuration):
        with pytest.raises(client.ApiException) as gone:
            read(MUTATING_NAME if read == admission.read_mutating_webhook_configuration else "clueue-pod-validating")
        assert gone.value.status == 404
    assert "removed webhook configurations clueue-pod-mutating, clueue-pod-validating" in controller_log(proc)


def test_a_higher_priority_workload_preempts_and_is_admitted_by_the_next_cycle(cluster, api):
    t = tag()
    ns = preempting_queue(api, t)
    create(api, preemption_workload(ns, "low", 1))
    proc = start_controller(cluster, *FAST)
    try:
        wait_until(lambda: admitted(api, ns, "low"), 60, "the low-priority Workload admitted", proc=proc)
        create(api, preemption_workload(ns, "high", 100))
        wait_until(lambda: admitted(api, ns, "high"), 60, "the high-priority one admitted", proc=proc)
        low = workload_object(api, ns, "low")["status"]
        assert "admission" not in low
        assert any(c["type"] == "Evicted" and c["status"] == "True" for c in low["conditions"])
    finally:
        assert stop_controller(proc) == 0, controller_log(proc)[-3000:]


def admitted(api: client.ApiClient, ns: str, name: str) -> bool:
    return bool((workload_object(api, ns, name).get("status") or {}).get("admission"))
