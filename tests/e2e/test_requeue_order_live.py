"""waitForPodsReady's ``requeuingStrategy.timestamp`` against a real kube-apiserver
(docs/pods-ready.md): the ``Evicted`` condition apply writes at a PodsReady timeout is what
orders the requeued workload when it competes again, by its eviction time (``Eviction``) or by
its creation (``Creation``).

One ClusterQueue of 1 cpu, Workloads of 1 cpu: ``slow`` is admitted and its pods are never
ready; ``rival`` is created after ``slow`` and before ``slow`` times out; ``first`` holds the
quota while ``slow`` backs off, then is deleted, and ``slow`` and ``rival`` compete for it.
Each cycle runs at a chosen time (the engine takes ``now`` from its caller); the real clock is
only waited on so that creation and eviction times differ by a second at least.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kubernetes import client

from clueue.adapters.kube.decide import decide_and_apply
from clueue.engine import Config, run_cycle
from clueue.engine.config import WaitForPodsReady
from tests.e2e.controller_harness import wait_until
from tests.e2e.test_adapter import KUEUE, create, queue_setup, tag, workload_object
from tests.e2e.test_plain_pods_live import POLICY, conditions, only
from tests.e2e.test_pods_ready_live import epoch, job, reserved_at
from tests.testenv.control_plane import ControlPlane


@pytest.fixture
def live(kube: ControlPlane) -> Iterator[client.ApiClient]:
    with kube.api_client() as api:
        yield api


def cycle_at(api: client.ApiClient, ns: str, now: int, config: Config) -> None:
    done = decide_and_apply(api, POLICY, config, lease_namespace=ns,
                            decide=lambda s: run_cycle(only(ns, s), POLICY, config, now=now))
    assert not done.applied.errors, done.applied.errors


def admitted(api: client.ApiClient, ns: str, name: str) -> bool:
    return bool(workload_object(api, ns, name)["status"].get("admission"))


def a_second_after(stamp: str) -> None:
    """Wait until the API server's clock (of whole seconds) is past ``stamp``."""
    wait_until(lambda: time.time() >= epoch(stamp) + 1.2, 5, f"a second after {stamp}")


@pytest.mark.parametrize("timestamp, ahead", [("Eviction", "rival"), ("Creation", "slow")])
def test_a_workload_requeued_after_the_timeout_competes_by_the_timestamp_chosen(
        live: client.ApiClient, timestamp: str, ahead: str) -> None:
    config = Config(wait_for_pods_ready=WaitForPodsReady(timeout_seconds=120, block_admission=False,
                                                         requeuing_timestamp=timestamp))
    ns = queue_setup(live, tag(), nominal=1)
    create(live, job(ns, "slow"))
    cycle_at(live, ns, int(time.time()), config)
    slow = workload_object(live, ns, "slow")
    assert slow["status"].get("admission")
    start = reserved_at(slow)
    a_second_after(slow["metadata"]["creationTimestamp"])
    create(live, job(ns, "first"))
    a_second_after(workload_object(live, ns, "first")["metadata"]["creationTimestamp"])
    create(live, job(ns, "rival"))
    a_second_after(workload_object(live, ns, "rival")["metadata"]["creationTimestamp"])

    # the timeout: slow is evicted (Evicted=True, PodsReadyTimeout, now) and backs off; first,
    # ahead of rival either way, takes the quota it released
    cycle_at(live, ns, start + 120, config)
    slow = workload_object(live, ns, "slow")
    assert conditions(slow)["Evicted"] == ("True", "PodsReadyTimeout") and not slow["status"].get("admission")
    evicted_at = next(c["lastTransitionTime"] for c in slow["status"]["conditions"] if c["type"] == "Evicted")
    assert epoch(evicted_at) > epoch(workload_object(live, ns, "rival")["metadata"]["creationTimestamp"])
    cycle_at(live, ns, start + 121, config)  # the quota its eviction released
    assert admitted(live, ns, "first") and not admitted(live, ns, "rival")

    # first ends; past slow's back-off, the one ahead by the timestamp chosen is admitted
    client.CustomObjectsApi(live).delete_namespaced_custom_object(KUEUE.split("/")[0], KUEUE.split("/")[1], ns,
                                                                 "workloads", "first")
    cycle_at(live, ns, start + 1000, config)
    behind = "slow" if ahead == "rival" else "rival"
    assert admitted(live, ns, ahead) and not admitted(live, ns, behind)
