"""Controller metrics: values recorded from real decision cycles (the engine's plans) and the
apply results their writes would make."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from clueue.adapters.controller.metrics import Metrics, tally_cycle
from clueue.adapters.kube.apply import ApplyResult
from clueue.engine import Config, Document, build_snapshot, load_policy, run_cycle
from clueue.engine.snapshot import Snapshot
from clueue.engine.workloads import WORKLOAD_UID_ANNOTATION
from tests.builders import cluster_queue, flatten, flavor, group, local_queue, pod, quota, resource_group, workload

T0 = 1_795_248_000.0  # 2026-11-21T08:00:00Z, minute 0 of tests.builders.ts


@dataclass
class CycleResult:
    """The shape the controller loop hands to Metrics.record_cycle."""

    snapshot: Snapshot
    plan: Any
    applied: ApplyResult | None
    phases: dict[str, float] = field(default_factory=lambda: {"snapshot": 0.01, "decide": 0.2, "apply": 0.05})
    started: float = T0 + 600  # ten minutes into the test day
    error: str | None = None


def cycle(*objs: Any, writes: list[str] | None = None, **kw: Any) -> CycleResult:
    snapshot = build_snapshot([Document(f"test#{i}", o) for i, o in enumerate(flatten(objs))])
    plan = run_cycle(snapshot, load_policy(()), Config())
    applied = ApplyResult(writes=list(writes)) if writes is not None else None
    return CycleResult(snapshot, plan, applied, **kw)


def value(m: Metrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def queues(cpu: Any = 3) -> list[Any]:
    return [flavor("default"), cluster_queue("cq", {"default": {"cpu": cpu}}, cohort="co"), local_queue("cq")]


def test_timestamps_of_the_builders_match_the_epoch_used_here() -> None:
    snapshot = build_snapshot([Document("t", pod("p", minute=10))])
    assert snapshot.pods["default/p"].created == T0 + 600


def test_a_cycle_records_queues_quota_admissions_and_pods() -> None:
    result = cycle(queues(), group("g", 2, minute=1), pod("late", cpu="2", minute=5), pod("huge", cpu="10"),
                   workload("old", admitted_in=("cq", "default")), pod("lost", queue="nope"),
                   writes=["create Workload default/g", "status Workload default/g", "ungate Pod default/g-0",
                           "ungate Pod default/g-1", "status Workload default/pod-late"])
    m = Metrics()
    m.record_cycle(result)

    assert value(m, "clueue_pending_workloads", cluster_queue="cq", status="active") == 1
    assert value(m, "clueue_pending_workloads", cluster_queue="cq", status="inadmissible") == 1
    assert value(m, "clueue_unqueued_workloads") == 1  # its LocalQueue is missing: no ClusterQueue to count it in
    assert value(m, "clueue_admitted_active_workloads", cluster_queue="cq") == 2
    assert value(m, "clueue_admitted_workloads_total", cluster_queue="cq") == 1  # g is new; old held from before
    # g's pods were created at minute 1, the cycle started at minute 10.
    assert value(m, "clueue_admission_wait_time_seconds_count", cluster_queue="cq") == 1
    assert value(m, "clueue_admission_wait_time_seconds_sum", cluster_queue="cq") == 540
    labels = dict(cohort="co", cluster_queue="cq", flavor="default", resource="cpu")
    assert value(m, "clueue_cluster_queue_nominal_quota", **labels) == 3
    assert value(m, "clueue_cluster_queue_resource_usage", **labels) == 3  # old 1 + g 2
    assert value(m, "clueue_pods_ungated_total") == 2
    assert value(m, "clueue_pods_rejected_total") == 0
    assert value(m, "clueue_apply_writes_total", verb="status") == 2
    assert value(m, "clueue_apply_writes_total", verb="ungate") == 2
    assert value(m, "clueue_cycles_total", outcome="optimal") == 1
    assert value(m, "clueue_cycle_phase_duration_seconds_count", phase="decide") == 1
    assert value(m, "clueue_cycle_phase_duration_seconds_sum", phase="apply") == pytest.approx(0.05)
    assert value(m, "clueue_solver_rounds_count") == 1
    assert value(m, "clueue_last_cycle_timestamp_seconds") == pytest.approx(T0 + 600.26)
    assert value(m, "clueue_last_successful_cycle_timestamp_seconds") == pytest.approx(T0 + 600.26)


def test_only_what_apply_wrote_is_counted() -> None:
    m = Metrics()
    m.record_cycle(cycle(queues(), group("g", 2), writes=None))  # decided, not applied (e.g. a stopped apply)
    assert value(m, "clueue_admitted_workloads_total", cluster_queue="cq") is None
    assert value(m, "clueue_pods_ungated_total") == 0
    assert value(m, "clueue_admitted_active_workloads", cluster_queue="cq") == 1  # what the plan holds


def test_evictions_and_excess_pods() -> None:
    off = workload("off", admitted_in=("cq", "default"))
    off["spec"]["active"] = False
    result = cycle(queues(), group("x", 3, total=2, minute=1), off,
                   writes=["preempt Workload default/off", "create Workload default/x", "status Workload default/x",
                           "ungate Pod default/x-0", "delete Pod default/x-2"])
    m = Metrics()
    counted = m.record_cycle(result)
    assert value(m, "clueue_evicted_workloads_total", cluster_queue="cq", reason="Deactivated") == 1
    assert value(m, "clueue_pods_rejected_total") == 1
    assert value(m, "clueue_pods_ungated_total") == 1  # x-1's write did not happen
    assert counted.evicted == {"default/off": ("cq", "Deactivated")}


def test_pods_of_a_group_whose_workload_was_deleted_are_not_rejected_pods() -> None:
    ended = pod("g-0", group="g", total=1, gated=False, phase="Running")
    ended["metadata"].update(uid="uid-g-0", finalizers=["kueue.x-k8s.io/managed"])
    ended["metadata"]["annotations"][WORKLOAD_UID_ANNOTATION] = "uid-of-a-deleted-workload"
    result = cycle(queues(), ended, writes=["delete Pod default/g-0"])
    assert [a.kind for a in result.plan.actions] == ["delete-pod"]  # deleted: its group ended
    m = Metrics()
    m.record_cycle(result)
    assert value(m, "clueue_pods_rejected_total") == 0


def test_queue_gauges_follow_the_last_cycle() -> None:
    m = Metrics()
    two = [flavor("default"), cluster_queue("a", {"default": {"cpu": 1}}), cluster_queue("b", {"default": {"cpu": 2}})]
    m.record_cycle(cycle(two, writes=[]))
    assert value(m, "clueue_cluster_queue_nominal_quota", cohort="", cluster_queue="b", flavor="default",
                 resource="cpu") == 2
    m.record_cycle(cycle(two[:2], writes=[]))  # b deleted
    assert value(m, "clueue_cluster_queue_nominal_quota", cohort="", cluster_queue="b", flavor="default",
                 resource="cpu") is None
    assert value(m, "clueue_pending_workloads", cluster_queue="b", status="active") is None
    assert value(m, "clueue_pending_workloads", cluster_queue="a", status="active") == 0


def test_borrowing_and_lending_limits() -> None:
    cq = cluster_queue("cq", groups=[resource_group({"default": {"cpu": quota(4, borrowing=2, lending="500m")}})],
                       cohort="co")
    m = Metrics()
    m.record_cycle(cycle(flavor("default"), cq, writes=[]))
    labels = dict(cohort="co", cluster_queue="cq", flavor="default", resource="cpu")
    assert value(m, "clueue_cluster_queue_borrowing_limit", **labels) == 2
    assert value(m, "clueue_cluster_queue_lending_limit", **labels) == 0.5


def test_failed_and_budget_exhausted_cycles() -> None:
    m = Metrics()
    ok = cycle(queues(), writes=[])
    m.record_cycle(CycleResult(ok.snapshot, None, None, phases={"snapshot": 0.01}, error="boom"))
    assert value(m, "clueue_cycles_total", outcome="failed") == 1
    assert value(m, "clueue_last_successful_cycle_timestamp_seconds") == 0
    exhausted = ok.plan.solver.__class__(**{**vars(ok.plan.solver), "optimal": False, "budget_exhausted": True})
    plan = ok.plan.__class__(**{**vars(ok.plan), "solver": exhausted})
    assert tally_cycle(CycleResult(ok.snapshot, plan, None)).outcome == "budget_exhausted"


def test_webhook_counter_leader_and_two_instances_apart() -> None:
    a, b = Metrics(), Metrics()
    a.pod_gated()
    a.pod_gated()
    a.set_leader(True)
    assert value(a, "clueue_pods_gated_total") == 2
    assert value(b, "clueue_pods_gated_total") == 0
    assert value(a, "clueue_leader") == 1
    a.set_leader(False)
    assert value(a, "clueue_leader") == 0


def test_render_is_parseable_text_exposition() -> None:
    m = Metrics()
    m.record_cycle(cycle(queues(), group("g", 2), writes=["status Workload default/g"]))
    families = {f.name: f for f in text_string_to_metric_families(m.render().decode())}
    assert families["clueue_pending_workloads"].type == "gauge"
    assert families["clueue_admitted_workloads"].type == "counter"
    assert families["clueue_admission_wait_time_seconds"].type == "histogram"
    assert all(name.startswith("clueue_") for name in families)


def test_a_reservation_awaiting_admission_checks_is_counted_admitted_only_once_every_check_is_ready() -> None:
    """Kueue's two counters: quota reserved when the admission is written, admitted when every
    admission check is Ready (a later cycle's ``complete-admission``)."""
    from tests.scenarios.test_admission_checks import BASE, check, checked_queue, reserved

    m = Metrics()
    m.record_cycle(cycle(BASE, checked_queue("prov"), check("prov"), pod("p", minute=1),
                         writes=["create Workload default/pod-p", "status Workload default/pod-p"]))
    assert value(m, "clueue_quota_reserved_workloads_total", cluster_queue="cq") == 1
    assert value(m, "clueue_quota_reserved_wait_time_seconds_sum", cluster_queue="cq") == 540
    assert value(m, "clueue_admitted_workloads_total", cluster_queue="cq") is None

    m.record_cycle(cycle(BASE, checked_queue("prov"), check("prov"), reserved("pod-p", {"prov": "Ready"}),
                         pod("p", minute=1),
                         writes=["admit Workload default/pod-p: every admission check is Ready",
                                 "ungate Pod default/p"]))
    assert value(m, "clueue_quota_reserved_workloads_total", cluster_queue="cq") == 1
    assert value(m, "clueue_admitted_workloads_total", cluster_queue="cq") == 1
    assert value(m, "clueue_admission_wait_time_seconds_sum", cluster_queue="cq") == 540


def test_a_deactivated_workload_is_not_a_pending_one() -> None:
    # Issue 34: as in the queues' status, a stopped workload (spec.active: false) waits in no queue.
    stopped = workload("stopped", cpu="1", minute=2)
    stopped["spec"]["active"] = False
    m = Metrics()
    m.record_cycle(cycle(queues(cpu=1), workload("runs", cpu="1", minute=0), stopped,
                         workload("next", cpu="1", minute=3)))
    assert value(m, "clueue_pending_workloads", cluster_queue="cq", status="active") == 1  # next only
    assert (value(m, "clueue_pending_workloads", cluster_queue="cq", status="inadmissible") or 0) == 0
