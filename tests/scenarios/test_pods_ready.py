"""waitForPodsReady (docs/pods-ready.md), translated from Kueue's documentation: an admitted
workload whose pods are not ready within the timeout is evicted and requeued with back-off, up
to backoffLimitCount, then deactivated; with blockAdmission nothing new is admitted meanwhile.
One decision cycle per test, at a chosen time."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from clueue.adapters.files import parse_config
from clueue.engine import Config, Document, Session, SnapshotError, build_snapshot, load_policy, run_cycle
from clueue.engine.config import WaitForPodsReady
from clueue.engine.podsready import backoff_seconds
from tests.builders import cluster_queue, flatten, flavor, local_queue, pod, ts, workload
from tests.scenarios.test_fair_sharing import kueue_config

ADMITTED_AT = ts(0)  # 08:00
T0 = int(datetime(2026, 11, 21, 8, 0, tzinfo=timezone.utc).timestamp())


def run_at(now: int, *objs: Any, **config: Any):
    docs = [Document(f"test#{i + 1}", o) for i, o in enumerate(flatten(objs))]
    return run_cycle(build_snapshot(docs), load_policy(()), Config(**config), now=now)


def cluster(cpu: int = 4) -> list[dict[str, Any]]:
    return [flavor("f"), cluster_queue("cq", {"f": {"cpu": cpu}}), local_queue("cq")]


def admitted(name: str, *, ready: bool | None = None, requeues: int = 0, cpu: str = "2",
             reason: str = "WaitForStart", since: str = ADMITTED_AT) -> dict[str, Any]:
    o = workload(name, cpu=cpu, admitted_in=("cq", "f"))
    conditions = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "lastTransitionTime": ADMITTED_AT},
                  {"type": "Admitted", "status": "True", "reason": "Admitted", "lastTransitionTime": ADMITTED_AT}]
    if ready is not None:
        conditions.append({"type": "PodsReady", "status": "True" if ready else "False", "reason": reason,
                           "lastTransitionTime": since})
    o["status"]["conditions"] = conditions
    if requeues:
        o["status"]["requeueState"] = {"count": requeues}
    return o


WAIT = WaitForPodsReady(timeout_seconds=300, block_admission=False, backoff_limit_count=3)


def evictions(plan) -> dict[str, dict[str, Any]]:
    return {a.target: a.details["reason"] for a in plan.actions if a.kind == "preempt"}


def test_pods_not_ready_within_the_timeout_are_evicted_and_requeued_with_back_off():
    objs = [*cluster(), admitted("slow", requeues=1)]
    before = run_at(T0 + 299, *objs, wait_for_pods_ready=WAIT)
    assert evictions(before) == {}
    assert before.wake_at == T0 + 300  # a controller wakes at the timeout by itself
    plan = run_at(T0 + 300, *objs, wait_for_pods_ready=WAIT)
    reason = evictions(plan)["default/slow"]
    # the second requeue backs off base * 2: 120 s
    assert reason["code"] == "PodsReadyTimeout"
    assert reason["details"]["count"] == 2 and reason["details"]["requeueAt"] == "2026-11-21T08:07:00Z"
    assert reason["message"] == ("evicted: pods not ready within 5m; its quota is released and it is requeued "
                                 "(2 of 3), back-off until 2026-11-21T08:07:00Z")
    entry = plan.workload("default/slow")
    assert entry.state == "pending" and entry.reasons[0].message == reason["message"]


def test_ready_pods_and_no_section_evict_nothing():
    assert evictions(run_at(T0 + 3600, *cluster(), admitted("ok", ready=True), wait_for_pods_ready=WAIT)) == {}
    assert evictions(run_at(T0 + 3600, *cluster(), admitted("slow"))) == {}


def test_plain_pods_are_ready_by_their_pods_ready_condition():
    def running(ready: bool) -> dict[str, Any]:
        p = pod("p", gated=False, phase="Running")
        p["metadata"]["uid"] = "uid-p"
        p["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
        return p
    w = admitted("pod-p")
    w["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-p"}]
    for ready, evicted in ((True, {}), (False, {"default/pod-p"})):
        plan = run_at(T0 + 600, *cluster(), w, running(ready), wait_for_pods_ready=WAIT)
        assert set(evictions(plan)) == set(evicted)


def test_recovery_timeout_counts_from_losing_readiness():
    lost = admitted("lost", ready=False, reason="WaitForRecovery", since=ts(10))
    wait = WaitForPodsReady(timeout_seconds=60, recovery_timeout_seconds=120, block_admission=False)
    assert evictions(run_at(T0 + 600 + 119, *cluster(), lost, wait_for_pods_ready=wait)) == {}
    reason = evictions(run_at(T0 + 600 + 120, *cluster(), lost, wait_for_pods_ready=wait))["default/lost"]
    assert "within 2m of losing readiness" in reason["message"]


def test_back_off_keeps_a_requeued_workload_out_until_requeue_at():
    w = workload("back", cpu="1")
    w["status"] = {"requeueState": {"count": 1, "requeueAt": "2026-11-21T08:10:00Z"}}
    plan = run_at(T0 + 599, *cluster(), w, wait_for_pods_ready=WAIT)
    entry = plan.workload("default/back")
    assert entry.state != "admitted"
    assert entry.reasons[0].code == "RequeueBackoff" and "until 2026-11-21T08:10:00Z" in entry.reasons[0].message
    assert plan.wake_at == T0 + 600
    assert run_at(T0 + 600, *cluster(), w, wait_for_pods_ready=WAIT).workload("default/back").state == "admitted"


def test_beyond_the_limit_the_workload_is_deactivated():
    plan = run_at(T0 + 300, *cluster(), admitted("done", requeues=3), wait_for_pods_ready=WAIT)
    reason = evictions(plan)["default/done"]
    assert reason["code"] == "RequeuingLimitExceeded"
    assert reason["message"] == ("evicted and deactivated: pods not ready within 5m after 3 requeue(s) "
                                 "(backoffLimitCount 3)")


def test_block_admission_admits_nothing_while_pods_are_not_ready():
    objs = [*cluster(), admitted("slow"), workload("next", cpu="1", minute=1)]
    block = WaitForPodsReady(timeout_seconds=300, block_admission=True)
    plan = run_at(T0 + 60, *objs, wait_for_pods_ready=block)
    assert plan.workload("default/next").state != "admitted"
    assert plan.workload("default/next").reasons[0].code == "WaitingForPodsReady"
    assert "default/slow" in plan.workload("default/next").reasons[0].message
    assert run_at(T0 + 60, *objs, wait_for_pods_ready=WAIT).workload("default/next").state == "admitted"
    ready = [*cluster(), admitted("slow", ready=True), workload("next", cpu="1", minute=1)]
    assert run_at(T0 + 60, *ready, wait_for_pods_ready=block).workload("default/next").state == "admitted"


def test_back_off_doubles_up_to_the_most():
    wait = WaitForPodsReady(backoff_base_seconds=10, backoff_max_seconds=50)
    assert [backoff_seconds(wait, n) for n in (1, 2, 3, 4)] == [10, 20, 40, 50]


def test_the_section_of_kueues_config_map_applies_and_clueues_config_wins():
    cm = kueue_config("apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
                      "waitForPodsReady:\n  enable: true\n  timeout: 2m\n  blockAdmission: false\n"
                      "  requeuingStrategy:\n    backoffLimitCount: 0\n")
    objs = [*cluster(), admitted("slow"), cm]
    assert evictions(run_at(T0 + 119, *objs)) == {}
    assert evictions(run_at(T0 + 120, *objs))["default/slow"]["code"] == "RequeuingLimitExceeded"
    # clueue's own section wins; enable: false turns it off
    assert evictions(run_at(T0 + 120, *objs, wait_for_pods_ready=WaitForPodsReady(enabled=False))) == {}


def config(section: dict[str, Any]) -> Config:
    return parse_config(Document("c.yaml#1", {"kind": "Configuration", "waitForPodsReady": section}))


def test_config_fields_and_defaults():
    got = config({"timeout": "90s", "recoveryTimeout": "1m", "requeuingStrategy": {
        "timestamp": "Creation", "backoffLimitCount": 5, "backoffBaseSeconds": 30, "backoffMaxSeconds": 600}})
    assert got.wait_for_pods_ready == WaitForPodsReady(True, 90.0, True, 60.0, "Creation", 5, 30, 600)
    assert config({}).wait_for_pods_ready == WaitForPodsReady()
    assert config({"enable": False}).wait_for_pods_ready.block_admission is False  # Kueue: defaults to enable


@pytest.mark.parametrize("section, field", [
    ({"timeout": "soon"}, "waitForPodsReady.timeout"),
    ({"timeout": "0s"}, "waitForPodsReady.timeout"),
    ({"blockAdmission": "yes"}, "waitForPodsReady.blockAdmission"),
    ({"requeuingStrategy": {"timestamp": "Now"}}, "waitForPodsReady.requeuingStrategy.timestamp"),
    ({"requeuingStrategy": {"backoffLimitCount": -1}}, "waitForPodsReady.requeuingStrategy.backoffLimitCount"),
    ({"requeuingStrategy": {"backoffBaseSeconds": 100, "backoffMaxSeconds": 10}},
     "waitForPodsReady.requeuingStrategy.backoffBaseSeconds"),
])
def test_bad_fields_are_named(section, field):
    with pytest.raises(SnapshotError) as e:
        config(section)
    assert field in str(e.value)


def test_a_bad_config_map_names_its_field():
    with pytest.raises(SnapshotError) as e:
        build_snapshot([Document("cm#1", kueue_config("waitForPodsReady:\n  timeout: later\n"))])
    assert "waitForPodsReady.timeout" in str(e.value)


def test_a_session_sees_holds_end_with_time_alone():
    # the same snapshot twice: only the time differs, which a Session's memo does not see
    w = workload("back", cpu="1")
    w["status"] = {"requeueState": {"count": 1, "requeueAt": "2026-11-21T08:10:00Z"}}
    snapshot = build_snapshot([Document(f"test#{i + 1}", o) for i, o in enumerate([*cluster(), w])])
    session = Session(load_policy(()), Config(wait_for_pods_ready=WAIT))
    assert session.run(snapshot, now=T0 + 599).workload("default/back").reasons[0].code == "RequeueBackoff"
    assert session.run(snapshot, now=T0 + 600).workload("default/back").state == "admitted"
    assert session.run(snapshot, now=T0 + 599).workload("default/back").reasons[0].code == "RequeueBackoff"
    # an admitted one times out, and what it blocked is admitted in its place
    objs = [*cluster(cpu=2), admitted("slow"), workload("next", cpu="2", minute=1)]
    snapshot = build_snapshot([Document(f"test#{i + 1}", o) for i, o in enumerate(objs)])
    session = Session(load_policy(()), Config(wait_for_pods_ready=WaitForPodsReady(timeout_seconds=300)))
    early = session.run(snapshot, now=T0 + 299)
    assert evictions(early) == {} and early.workload("default/next").reasons[0].code == "WaitingForPodsReady"
    late = session.run(snapshot, now=T0 + 300)
    assert set(evictions(late)) == {"default/slow"}
    assert late.workload("default/next").reasons[0].code != "WaitingForPodsReady"
