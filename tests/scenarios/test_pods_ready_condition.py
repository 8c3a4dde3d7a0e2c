"""The PodsReady condition clueue records on the Workloads it makes for pods under
waitForPodsReady (docs/pods-ready.md), with Kueue's reasons: WaitForStart until the pods are
first ready, Started once they are, WaitForRecovery when ready pods are no longer, Recovered
once they are again; and the timeouts that follow from it. One decision cycle per test."""

from __future__ import annotations

from typing import Any

import pytest

from clueue.adapters.kube.apply import desired_status
from clueue.engine import Config, Document, Session, build_snapshot, load_policy
from clueue.engine.config import WaitForPodsReady
from tests.builders import pod, ts
from tests.scenarios.test_pods_ready import T0, WAIT, admitted, cluster, evictions, run_at


def running(name: str, ready: bool) -> dict[str, Any]:
    p = pod(name, gated=False, phase="Running")
    p["metadata"]["uid"] = f"uid-{name}"
    p["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return p


def pods_workload(ready: bool | None = None, reason: str = "WaitForStart", since: str = ts(0)) -> dict[str, Any]:
    """The Workload clueue made for pod p, admitted at 08:00, with the PodsReady condition given."""
    w = admitted("pod-p", ready=ready, reason=reason, since=since)
    w["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-p"}]
    return w


def condition(plan, name: str = "default/pod-p") -> tuple[str, str] | None:
    got = plan.workload(name).pods_ready
    return None if got is None else got[:2]


@pytest.mark.parametrize("recorded, pod_ready, expected", [
    (None, False, ("False", "WaitForStart")),             # admitted, its pod not ready yet
    (None, True, ("True", "Started")),                    # ready: started
    ((False, "WaitForStart"), True, ("True", "Started")),
    ((True, "Started"), True, ("True", "Started")),       # stays
    ((True, "Started"), False, ("False", "WaitForRecovery")),   # was ready, no longer
    ((False, "WaitForRecovery"), False, ("False", "WaitForRecovery")),
    ((False, "WaitForRecovery"), True, ("True", "Recovered")),  # ready again
    ((True, "Recovered"), True, ("True", "Recovered")),
])
def test_an_admitted_workload_of_pods_records_its_pods_readiness(recorded, pod_ready, expected):
    w = pods_workload() if recorded is None else pods_workload(ready=recorded[0], reason=recorded[1])
    plan = run_at(T0 + 60, *cluster(), w, running("p", pod_ready), wait_for_pods_ready=WAIT)
    assert plan.workload("default/pod-p").state == "admitted"
    assert condition(plan) == expected


def test_pending_and_newly_admitted_workloads_wait_for_start():
    plan = run_at(T0, *cluster(cpu=1), pod("a", cpu="1"), pod("b", cpu="1", minute=1), wait_for_pods_ready=WAIT)
    assert plan.workload("default/pod-a").state == "admitted" and plan.workload("default/pod-b").state == "pending"
    assert condition(plan, "default/pod-a") == condition(plan, "default/pod-b") == ("False", "WaitForStart")


def test_only_workloads_of_pods_and_only_with_the_section():
    # a Workload of another integration has its PodsReady from that integration's controller
    assert condition(run_at(T0, *cluster(), admitted("job"), wait_for_pods_ready=WAIT), "default/job") is None
    assert condition(run_at(T0, *cluster(), pods_workload(), running("p", True))) is None


def test_pods_that_were_ready_are_timed_by_the_recovery_timeout_only():
    # ready since 08:00, no longer at 09:00: the admission timeout long passed, yet nothing is evicted
    was_ready = [*cluster(), pods_workload(ready=True, reason="Started"), running("p", False)]
    plan = run_at(T0 + 3600, *was_ready, wait_for_pods_ready=WAIT)
    assert evictions(plan) == {} and condition(plan) == ("False", "WaitForRecovery")
    # with recoveryTimeout the clock starts now (when clueue records WaitForRecovery) ...
    wait = WaitForPodsReady(timeout_seconds=300, recovery_timeout_seconds=120, block_admission=False)
    plan = run_at(T0 + 3600, *was_ready, wait_for_pods_ready=wait)
    assert evictions(plan) == {} and plan.wake_at == T0 + 3600 + 120
    # ... and from the recorded condition's time on the next cycles
    lost = [*cluster(), pods_workload(ready=False, reason="WaitForRecovery", since=ts(60)), running("p", False)]
    assert evictions(run_at(T0 + 3600 + 119, *lost, wait_for_pods_ready=wait)) == {}
    assert set(evictions(run_at(T0 + 3600 + 120, *lost, wait_for_pods_ready=wait))) == {"default/pod-p"}


def test_apply_writes_the_condition_only_when_its_status_or_reason_changes():
    plan = run_at(T0 + 60, *cluster(), pods_workload(), running("p", True), wait_for_pods_ready=WAIT)
    entry = plan.workload("default/pod-p")
    status = pods_workload()["status"]
    wanted = desired_status(entry, status)
    assert wanted is not None
    [ready] = [c for c in wanted["conditions"] if c["type"] == "PodsReady"]
    assert (ready["status"], ready["reason"]) == ("True", "Started")
    assert desired_status(entry, wanted) is None  # in place: nothing to write
    # a pending entry: its QuotaReserved=False and PodsReady written together, then nothing
    pending = run_at(T0, *cluster(cpu=1), pod("a", cpu="1"), pod("b", cpu="1", minute=1),
                     wait_for_pods_ready=WAIT).workload("default/pod-b")
    first = desired_status(pending, {})
    assert first is not None and {c["type"] for c in first["conditions"]} == {"PodsReady", "QuotaReserved"}
    assert desired_status(pending, first) is None


def test_a_session_sees_a_pod_become_ready():
    # a controller's Session keeps what did not change from cycle to cycle: the pod's readiness did

    def snapshot(ready: bool):
        objs = [*cluster(), pods_workload(), running("p", ready)]
        return build_snapshot([Document(f"test#{i + 1}", o) for i, o in enumerate(objs)])
    session = Session(load_policy(()), Config(wait_for_pods_ready=WAIT))
    assert condition(session.run(snapshot(False), now=T0 + 60)) == ("False", "WaitForStart")
    assert condition(session.run(snapshot(True), now=T0 + 61)) == ("True", "Started")
