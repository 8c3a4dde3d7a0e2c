"""Where a requeued workload stands in its queue (docs/pods-ready.md), translated from Kueue's
documentation of ``waitForPodsReady.requeuingStrategy.timestamp``: with ``Eviction`` (the
default) a workload evicted by the PodsReady timeout is ordered by the time of its eviction (the
``Evicted`` condition with reason ``PodsReadyTimeout``), behind those that came meanwhile; with
``Creation`` it keeps its place of before (its creationTimestamp). An eviction by an admission
check always orders it by its time, and any other eviction (preemption) keeps its creation.

Each test: one ClusterQueue of 2 cpu, two pending workloads of 2 cpu and the same priority:
``early``, created at 08:00 and evicted at 08:30, and ``later``, created at 08:10. Whichever is
ahead in the queue is admitted.
"""

from __future__ import annotations

from typing import Any

import pytest

from clueue.engine import Document, SnapshotError, build_snapshot
from clueue.engine.config import WaitForPodsReady
from tests.builders import ts, workload
from tests.scenarios.test_fair_sharing import kueue_config
from tests.scenarios.test_pods_ready import T0, cluster, run_at

NOW = T0 + 3600  # 09:00, after every back-off


def evicted(reason: str) -> dict[str, Any]:
    """``early``, evicted at 08:30 for ``reason`` and requeued (its back-off over)."""
    o = workload("early", cpu="2", minute=0)
    o["status"] = {"requeueState": {"count": 1}, "conditions": [
        {"type": "Evicted", "status": "True", "reason": reason, "lastTransitionTime": ts(30)},
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "lastTransitionTime": ts(30)}]}
    return o


def first_admitted(early: dict[str, Any], **config: Any) -> str:
    plan = run_at(NOW, *cluster(cpu=2), early, workload("later", cpu="2", minute=10), **config)
    (name,) = [k for k in ("default/early", "default/later") if plan.workload(k).state == "admitted"]
    return name.split("/")[1]


def wait(timestamp: str) -> WaitForPodsReady:
    return WaitForPodsReady(timeout_seconds=300, block_admission=False, requeuing_timestamp=timestamp)


@pytest.mark.parametrize("config, ahead", [
    ({}, "later"),  # Eviction is the default, with or without the section
    ({"wait_for_pods_ready": wait("Eviction")}, "later"),
    ({"wait_for_pods_ready": wait("Creation")}, "early"),
])
def test_a_workload_evicted_by_the_pods_ready_timeout_is_ordered_by_the_timestamp_chosen(config, ahead):
    assert first_admitted(evicted("PodsReadyTimeout"), **config) == ahead


def test_kueues_configmap_chooses_the_timestamp_and_clueues_config_wins():
    section = ("apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nwaitForPodsReady:\n  enable: true\n"
               "  blockAdmission: false\n  requeuingStrategy:\n    timestamp: Creation\n")
    assert first_admitted([evicted("PodsReadyTimeout"), kueue_config(section)]) == "early"
    assert first_admitted([evicted("PodsReadyTimeout"), kueue_config(section)],
                          wait_for_pods_ready=wait("Eviction")) == "later"


def test_an_admission_check_eviction_orders_by_its_time_and_a_preemption_keeps_the_creation():
    assert first_admitted(evicted("AdmissionCheck"), wait_for_pods_ready=wait("Creation")) == "later"
    assert first_admitted(evicted("Preempted")) == "early"


def test_an_evicted_condition_no_longer_true_orders_by_creation():
    early = evicted("PodsReadyTimeout")
    early["status"]["conditions"][0]["status"] = "False"
    assert first_admitted(early) == "early"


def test_a_timestamp_kueue_does_not_know_is_named_in_the_configmap():
    cm = kueue_config("waitForPodsReady:\n  requeuingStrategy:\n    timestamp: Admission\n")
    with pytest.raises(SnapshotError) as e:
        build_snapshot([Document("cm#1", cm)])
    assert "data[controller_manager_config.yaml].waitForPodsReady.requeuingStrategy.timestamp" in str(e.value)
    assert "expected Eviction or Creation, got 'Admission'" in str(e.value)
