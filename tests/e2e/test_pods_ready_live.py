"""waitForPodsReady against a real kube-apiserver (docs/pods-ready.md): a Workload whose pods
never become ready (nothing ever sets its PodsReady condition) is evicted at the timeout,
requeued with ``status.requeueState`` written, kept out until its back-off ends, admitted again,
and deactivated once it exceeds ``backoffLimitCount``. Each cycle runs at a chosen time (the
engine takes ``now`` from its caller), so the test waits for no clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from kubernetes import client

from clueue.adapters.kube.decide import Decided, decide_and_apply
from clueue.engine import Config, run_cycle
from clueue.engine.config import WaitForPodsReady
from tests.e2e.test_adapter import KUEUE, create, queue_setup, tag, workload_object
from tests.e2e.test_plain_pods_live import POLICY, conditions, only
from tests.testenv.control_plane import ControlPlane

WAIT = WaitForPodsReady(timeout_seconds=120, block_admission=True, backoff_limit_count=1,
                        backoff_base_seconds=60, backoff_max_seconds=600)


@pytest.fixture
def live(kube: ControlPlane) -> Iterator[client.ApiClient]:
    with kube.api_client() as api:
        yield api


def cycle_at(api: client.ApiClient, ns: str, now: int) -> Decided:
    """One controller cycle over namespace ``ns`` at time ``now``, with waitForPodsReady."""
    config = Config(wait_for_pods_ready=WAIT)
    done = decide_and_apply(api, POLICY, config, lease_namespace=ns,
                            decide=lambda s: run_cycle(only(ns, s), POLICY, config, now=now))
    assert not done.applied.errors, done.applied.errors
    return done


def epoch(stamp: str) -> int:
    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())


def reserved_at(wl: dict[str, Any]) -> int:
    return epoch(next(c["lastTransitionTime"] for c in wl["status"]["conditions"] if c["type"] == "QuotaReserved"))


def report_ready(api: client.ApiClient, ns: str, name: str) -> None:
    """Set the Workload's PodsReady condition True, as the integration that runs its pods does
    (through the status subresource; on a conflict read again and retry)."""
    objects = client.CustomObjectsApi(api)
    for _ in range(10):
        wl = workload_object(api, ns, name)
        wl["status"]["conditions"] = [c for c in wl["status"]["conditions"] if c["type"] != "PodsReady"] + [{
            "type": "PodsReady", "status": "True", "reason": "PodsReady", "message": "All pods are ready",
            "lastTransitionTime": "2026-11-21T09:00:00Z"}]
        try:
            objects.replace_namespaced_custom_object_status("kueue.x-k8s.io", "v1beta1", ns, "workloads", name, wl)
            return
        except client.ApiException as e:
            if e.status != 409:
                raise
    raise AssertionError(f"Workload {ns}/{name} kept changing: PodsReady was not written")


def job(ns: str, name: str, cpu: str = "1") -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": name, "namespace": ns},
            "spec": {"queueName": "main", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}]}}


def test_pods_never_ready_are_evicted_requeued_with_back_off_then_deactivated(live: client.ApiClient) -> None:
    ns = queue_setup(live, tag(), nominal=4)
    create(live, job(ns, "slow"))
    first = cycle_at(live, ns, int(datetime.now().timestamp()))
    wl = workload_object(live, ns, "slow")
    assert wl["status"].get("admission"), first.applied.writes
    start = reserved_at(wl)

    # blockAdmission: a newcomer waits while slow's pods are not ready; the controller would wake at the timeout
    create(live, job(ns, "next"))
    waiting = cycle_at(live, ns, start + 60)
    assert waiting.plan.wake_at == start + 120
    assert "admission" not in workload_object(live, ns, "next")["status"]
    assert waiting.plan.workload(f"{ns}/next").reasons[0].code == "WaitingForPodsReady"

    # the timeout: evicted, its quota released, requeued once with a back-off of 60 s
    evicted = cycle_at(live, ns, start + 120)
    wl = workload_object(live, ns, "slow")
    assert "admission" not in wl["status"], evicted.applied.writes
    assert conditions(wl)["Evicted"] == ("True", "PodsReadyTimeout")
    assert conditions(wl)["Requeued"] == ("False", "PodsReadyTimeout")
    assert wl["status"]["requeueState"]["count"] == 1
    assert epoch(wl["status"]["requeueState"]["requeueAt"]) == start + 180
    message = next(c["message"] for c in wl["status"]["conditions"] if c["type"] == "Evicted")
    assert "pods not ready within 2m" in message and "(1 of 1)" in message

    # next is admitted in slow's place (the block gone with slow's admission); its pods run
    assert workload_object(live, ns, "next")["status"].get("admission")
    report_ready(live, ns, "next")  # so it neither times out nor blocks admission

    # in back-off: not admitted
    held = cycle_at(live, ns, start + 150)
    assert held.plan.workload(f"{ns}/slow").reasons[0].code == "RequeueBackoff"
    assert "admission" not in workload_object(live, ns, "slow")["status"]

    # the back-off over: admitted again; its pods again not ready in time: beyond the limit, deactivated
    cycle_at(live, ns, start + 180)
    wl = workload_object(live, ns, "slow")
    assert wl["status"].get("admission")
    assert conditions(wl)["Requeued"] == ("True", "BackoffFinished")
    again = reserved_at(wl)
    cycle_at(live, ns, again + 120)
    wl = workload_object(live, ns, "slow")
    assert "admission" not in wl["status"] and wl["spec"]["active"] is False
    assert conditions(wl)["Evicted"] == ("True", "DeactivatedDueToRequeuingLimitExceeded")
