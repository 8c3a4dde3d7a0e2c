"""The PodsReady condition clueue records on the Workloads it makes for plain pods, against a
real kube-apiserver (docs/pods-ready.md): WaitForStart while the pod is gated or waits, Started
once it runs Ready, written once; WaitForRecovery when it is no longer Ready (not evicted: no
recoveryTimeout), Recovered when it is again; evicted past a recoveryTimeout, WaitForStart again. Each cycle runs at a chosen time (the engine takes
``now`` from its caller), and the pod's status is set as the kubelet would set it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone

import pytest
from kubernetes import client

from clueue.adapters.kube.decide import Decided, decide_and_apply
from clueue.engine import Config, run_cycle
from clueue.engine.config import WaitForPodsReady
from tests.e2e.test_adapter import create, gated_pod, queue_setup, tag, workload_object
from tests.e2e.test_plain_pods_live import POLICY, conditions, only, pod

CONFIG = Config(wait_for_pods_ready=WaitForPodsReady(timeout_seconds=120, block_admission=False))


@pytest.fixture
def live(kube) -> Iterator[client.ApiClient]:
    with kube.api_client() as api:
        yield api


def cycle_at(api: client.ApiClient, ns: str, now: int, config: Config = CONFIG) -> Decided:
    """One controller cycle over namespace ``ns`` at time ``now`` with ``config``; no errors."""
    done = decide_and_apply(api, POLICY, config, lease_namespace=ns,
                            decide=lambda s: run_cycle(only(ns, s), POLICY, config, now=now))
    assert not done.applied.errors, done.applied.errors
    return done


def set_ready(api: client.ApiClient, ns: str, name: str, ready: bool) -> None:
    """The pod Running with its Ready condition as given, as the kubelet reports it."""
    client.CoreV1Api(api).patch_namespaced_pod_status(name, ns, {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}})


def pods_ready(api: client.ApiClient, ns: str, name: str) -> tuple[str, str]:
    return conditions(workload_object(api, ns, name))["PodsReady"]


def test_the_workload_of_a_pod_records_whether_its_pod_is_ready(live: client.ApiClient) -> None:
    ns = queue_setup(live, tag(), nominal=4)
    create(live, gated_pod(ns, "p", cpu="1"))
    create(live, gated_pod(ns, "q-big", cpu="4"))  # waits (ranked after p): the quota left is 3
    start = int(datetime.now(timezone.utc).timestamp())

    cycle_at(live, ns, start)
    assert not pod(live, ns, "p").spec.scheduling_gates  # admitted and ungated
    assert pods_ready(live, ns, "pod-p") == ("False", "WaitForStart")
    assert pods_ready(live, ns, "pod-q-big") == ("False", "WaitForStart")  # pending: as Kueue records it

    set_ready(live, ns, "p", True)
    ready = cycle_at(live, ns, start + 30)
    assert f"status Workload {ns}/pod-p" in ready.applied.writes
    assert pods_ready(live, ns, "pod-p") == ("True", "Started")
    again = cycle_at(live, ns, start + 31)  # in place: not written again
    assert not [w for w in again.applied.writes if w.endswith("/pod-p") or w.endswith("/pod-q-big")], again.applied.writes

    # no longer Ready, long after the admission timeout: waits for recovery, still admitted
    set_ready(live, ns, "p", False)
    cycle_at(live, ns, start + 600)
    wl = workload_object(live, ns, "pod-p")
    assert conditions(wl)["PodsReady"] == ("False", "WaitForRecovery") and wl["status"].get("admission")
    assert "Evicted" not in conditions(wl)

    set_ready(live, ns, "p", True)
    cycle_at(live, ns, start + 660)
    assert pods_ready(live, ns, "pod-p") == ("True", "Recovered")


def test_pods_that_stay_unready_past_the_recovery_timeout_are_evicted_waiting_to_start(live: client.ApiClient) -> None:
    recovery = Config(wait_for_pods_ready=WaitForPodsReady(timeout_seconds=120, recovery_timeout_seconds=60,
                                                           block_admission=False))
    ns = queue_setup(live, tag(), nominal=4)
    create(live, gated_pod(ns, "r", cpu="1"))
    start = int(datetime.now(timezone.utc).timestamp())
    cycle_at(live, ns, start, recovery)
    set_ready(live, ns, "r", True)
    cycle_at(live, ns, start + 30, recovery)
    set_ready(live, ns, "r", False)
    lost = cycle_at(live, ns, start + 600, recovery)
    assert pods_ready(live, ns, "pod-r") == ("False", "WaitForRecovery")
    assert lost.plan.wake_at == start + 660  # the recovery timeout runs from now
    # past it (counted from the condition's time): evicted; its pods must start again
    cycle_at(live, ns, start + 700, recovery)
    wl = workload_object(live, ns, "pod-r")
    assert "admission" not in wl["status"]
    assert conditions(wl)["Evicted"] == ("True", "PodsReadyTimeout")
    assert conditions(wl)["PodsReady"] == ("False", "WaitForStart")
