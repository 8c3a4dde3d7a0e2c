"""Kueue's two-phase admission with AdmissionChecks (docs/admission-checks.md): in a
ClusterQueue with checks a workload first gets its quota reserved, with its checks Pending, and
is admitted (its pods ungated) only once every check is Ready; Retry evicts and requeues it,
Rejected evicts and deactivates it; a ClusterQueue whose checks are missing or inactive admits
nothing new."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from clueue.adapters.cli import main
from clueue.engine import Document, build_snapshot
from clueue.engine.errors import SnapshotError
from clueue.engine.queues import queue_statuses
from tests.builders import KUEUE, cluster_queue, codes, flatten, flavor, local_queue, pod, run, states, ts, workload

PROV = "example.com/provisioning"


def check(name: str, *, active: bool = True, controller: str = PROV) -> dict[str, Any]:
    """An AdmissionCheck whose controller reports it Active (or not)."""
    return {"apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": name},
            "spec": {"controllerName": controller},
            "status": {"conditions": [{"type": "Active", "status": "True" if active else "False", "reason": "R",
                                       "message": "", "lastTransitionTime": ts(0)}]}}


def checked_queue(*names: str, flavors: dict[str, dict[str, Any]] | None = None,
                  strategy: list[dict[str, Any]] | None = None, api: str = KUEUE) -> dict[str, Any]:
    cq = cluster_queue("cq", flavors or {"f": {"cpu": 4}}, api=api)
    if strategy is not None:
        cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": strategy}
    else:
        cq["spec"]["admissionChecks"] = list(names)
    return cq


def reserved(name: str, states_: dict[str, str], *, cpu: str = "1", admitted: bool = False,
             messages: dict[str, str] | None = None, updates: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """A Workload whose quota is reserved in ``cq`` (flavor ``f``), with these check states."""
    w = workload(name, cpu=cpu, admitted_in=("cq", "f"))
    w["status"]["admissionChecks"] = [
        {"name": c, "state": s, "message": (messages or {}).get(c, ""), "lastTransitionTime": ts(1),
         **({"podSetUpdates": updates[c]} if updates and c in updates else {})} for c, s in states_.items()]
    w["status"]["conditions"] = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
                                  "lastTransitionTime": ts(1)}]
    if admitted:
        w["status"]["conditions"].append({"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
                                          "lastTransitionTime": ts(2)})
    return w


def kinds(plan, name: str) -> list[str]:
    return [a.kind for a in plan.actions if a.workload == name]


BASE = [flavor("f", {"pool": "f"}), local_queue("cq")]


def test_a_queue_with_a_check_reserves_quota_and_leaves_pods_gated():
    plan = run(BASE, checked_queue("prov"), check("prov"), pod("p"))
    entry = plan.workload("default/pod-p")
    assert entry.state == "admitted" and entry.phase == "QuotaReserved"
    assert [(c.name, c.state) for c in entry.admission_checks] == [("prov", "Pending")]
    assert codes(plan, "default/pod-p") == ["QuotaReserved"]
    [admit] = [a for a in plan.actions if a.kind == "admit"]
    assert admit.details["admissionChecks"] == ["prov"]
    assert kinds(plan, "default/pod-p") == ["admit"]  # no ungate
    out = entry.to_dict()
    assert out["phase"] == "QuotaReserved" and out["admissionChecks"] == [{"name": "prov", "state": "Pending",
                                                                          "message": ""}]


def test_without_checks_nothing_changes():
    plan = run(BASE, cluster_queue("cq", {"f": {"cpu": 4}}), pod("p"))
    entry = plan.workload("default/pod-p")
    assert entry.phase == "Admitted" and "phase" not in entry.to_dict()
    assert kinds(plan, "default/pod-p") == ["admit", "ungate"]


def test_pending_checks_hold_the_quota_and_keep_the_pods_gated():
    plan = run(BASE, checked_queue("prov"), check("prov"),
               reserved("pod-p", {"prov": "Pending"}, cpu="4", messages={"prov": "waiting for capacity"}),
               pod("p", cpu="4"), workload("next", cpu="1"))
    entry = plan.workload("default/pod-p")
    assert entry.state == "admitted" and entry.phase == "QuotaReserved"
    assert entry.reasons[0].message.startswith("waiting for admission checks: prov (Pending: waiting for capacity)")
    assert not kinds(plan, "default/pod-p")
    assert states(plan)["default/next"] == "pending"  # the reserved quota is held


def test_every_check_ready_admits_and_ungates_with_the_checks_pod_set_updates():
    updates = {"prov": [{"name": "main", "labels": {"team": "a"}, "annotations": {"prov/request": "r1"},
                         "nodeSelector": {"zone": "z1"},
                         "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]}]}
    plan = run(BASE, checked_queue("prov", "quota-check"), check("prov"), check("quota-check"),
               reserved("pod-p", {"prov": "Ready", "quota-check": "Ready"}, updates=updates), pod("p"))
    assert kinds(plan, "default/pod-p") == ["complete-admission", "ungate"]
    complete, ungate = [a for a in plan.actions if a.workload == "default/pod-p"]
    assert complete.details["admissionChecks"] == ["prov", "quota-check"]
    assert ungate.details["nodeSelector"] == {"pool": "f", "zone": "z1"}
    assert ungate.details["labels"] == {"team": "a"} and ungate.details["annotations"] == {"prov/request": "r1"}
    assert ungate.details["tolerations"] == [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]
    entry = plan.workload("default/pod-p")
    assert entry.phase == "Admitted" and codes(plan, "default/pod-p") == ["AlreadyAdmitted"]


def test_an_admitted_workload_is_not_admitted_again():
    plan = run(BASE, checked_queue("prov"), check("prov"), reserved("w", {"prov": "Ready"}, admitted=True))
    assert not kinds(plan, "default/w") and plan.workload("default/w").phase == "Admitted"


def test_one_check_not_ready_keeps_it_reserved():
    plan = run(BASE, checked_queue("a", "b"), check("a"), check("b"), reserved("w", {"a": "Ready", "b": "Pending"}))
    assert not kinds(plan, "default/w")
    assert plan.workload("default/w").reasons[0].details["checks"] == ["b"]


def test_a_check_missing_from_the_status_counts_as_pending():
    plan = run(BASE, checked_queue("a", "b"), check("a"), check("b"), reserved("w", {"a": "Ready"}))
    entry = plan.workload("default/w")
    assert entry.phase == "QuotaReserved" and [c.state for c in entry.admission_checks] == ["Ready", "Pending"]


def test_retry_evicts_and_requeues_leaving_gated_pods():
    plan = run(BASE, checked_queue("prov"), check("prov"),
               reserved("pod-p", {"prov": "Retry"}, cpu="4", messages={"prov": "no capacity"}),
               pod("p", cpu="4"), workload("next", cpu="1"))
    [evict] = [a for a in plan.actions if a.kind == "preempt"]
    assert evict.target == "default/pod-p" and evict.details["reason"]["code"] == "AdmissionCheckRetry"
    assert evict.details["pods"] == []  # still gated: kept, queued again
    assert plan.workload("default/pod-p").state == "pending"
    assert "no capacity" in evict.details["reason"]["message"]
    # the quota it released goes to no one else in the same cycle (a later cycle admits into it)
    assert states(plan)["default/next"] == "pending"


def test_after_the_retry_eviction_it_is_reserved_again():
    evicted = workload("w", cpu="4")
    evicted["status"] = {"admissionChecks": [{"name": "prov", "state": "Pending", "message": "Reset to Pending",
                                              "lastTransitionTime": ts(2)}]}
    plan = run(BASE, checked_queue("prov"), check("prov"), evicted)
    entry = plan.workload("default/w")
    assert entry.phase == "QuotaReserved" and codes(plan, "default/w") == ["QuotaReserved"]


def test_rejected_evicts_and_deactivates():
    plan = run(BASE, checked_queue("prov"), check("prov"), reserved("w", {"prov": "Rejected"}))
    [evict] = [a for a in plan.actions if a.kind == "preempt"]
    assert evict.details["reason"]["code"] == "AdmissionCheckRejected"
    assert plan.workload("default/w").state == "inadmissible"


def test_a_rejected_workload_once_deactivated_stays_out():
    w = workload("w")
    w["spec"]["active"] = False
    plan = run(BASE, checked_queue("prov"), check("prov"), w)
    assert codes(plan, "default/w") == ["Deactivated"] and not kinds(plan, "default/w")


@pytest.mark.parametrize("checks,why", [
    ([], "does not exist"),
    ([check("prov", active=False)], "is not Active"),
])
def test_an_inactive_or_missing_check_keeps_its_queue_from_admitting(checks, why):
    other = cluster_queue("other", {"f": {"cpu": 4}})
    plan = run(BASE, checked_queue("prov"), *checks, other, local_queue("other", name="q2"),
               workload("w"), workload("elsewhere", queue="q2"))
    assert codes(plan, "default/w") == ["AdmissionCheckInactive"]
    reason = plan.workload("default/w").reasons[0]
    assert reason.details == {"clusterQueue": "cq", "admissionCheck": "prov", "why": why}
    assert states(plan) == {"default/w": "inadmissible", "default/elsewhere": "admitted"}


def test_an_inactive_check_leaves_what_holds_quota_alone():
    plan = run(BASE, checked_queue("prov"), check("prov", active=False), reserved("w", {"prov": "Pending"}))
    assert plan.workload("default/w").state == "admitted" and not kinds(plan, "default/w")


def test_two_multikueue_checks_make_a_queue_inactive():
    mk = "kueue.x-k8s.io/multikueue"
    plan = run(BASE, checked_queue("mk1", "mk2"), check("mk1", controller=mk), check("mk2", controller=mk),
               workload("w"))
    assert codes(plan, "default/w") == ["AdmissionCheckInactive", "AdmissionCheckInactive"]


def test_on_flavors_applies_a_check_only_to_workloads_using_those_flavors():
    flavors = {"cheap": {"cpu": 1}, "f": {"cpu": 8}}
    queue = checked_queue(flavors=flavors, strategy=[{"name": "prov", "onFlavors": ["f"]}],
                          api="kueue.x-k8s.io/v1beta2")
    plan = run(flavor("cheap"), BASE, queue, check("prov"), workload("small", cpu="1"),
               workload("large", cpu="4", minute=1))
    small, large = plan.workload("default/small"), plan.workload("default/large")
    assert dict(small.admission[0].flavors) == {"cpu": "cheap"} and small.phase == "Admitted"
    assert dict(large.admission[0].flavors) == {"cpu": "f"} and large.phase == "QuotaReserved"
    admits = {a.target: a.details.get("admissionChecks") for a in plan.actions if a.kind == "admit"}
    assert admits == {"default/small": None, "default/large": ["prov"]}


def test_a_strategy_rule_without_flavors_applies_to_every_workload():
    queue = checked_queue(strategy=[{"name": "prov"}])
    plan = run(BASE, queue, check("prov"), workload("w"))
    assert plan.workload("default/w").phase == "QuotaReserved"


def test_clashing_pod_set_updates_keep_the_pods_gated():
    updates = {"a": [{"name": "main", "nodeSelector": {"zone": "z1"}}],
               "b": [{"name": "main", "nodeSelector": {"zone": "z2"}}]}
    plan = run(BASE, checked_queue("a", "b"), check("a"), check("b"),
               reserved("pod-p", {"a": "Ready", "b": "Ready"}, updates=updates), pod("p"))
    assert "ungate" not in kinds(plan, "default/pod-p")
    assert codes(plan, "default/pod-p") == ["AlreadyAdmitted", "PodSetUpdateConflict"]


def test_a_check_setting_a_flavor_label_otherwise_clashes():
    updates = {"a": [{"name": "main", "nodeSelector": {"pool": "elsewhere"}}]}
    plan = run(BASE, checked_queue("a"), check("a"), reserved("pod-p", {"a": "Ready"}, updates=updates), pod("p"))
    assert "ungate" not in kinds(plan, "default/pod-p")


def _load(*objs: dict[str, Any]):
    return build_snapshot([Document(f"test.yaml#{i}", o) for i, o in enumerate(objs)])


def test_the_snapshot_reads_checks_queues_and_states():
    snap = _load(check("prov"), checked_queue("prov"), reserved("w", {"prov": "Ready"}, admitted=True))
    assert snap.admission_checks["prov"].active and snap.admission_checks["prov"].controller == PROV
    assert [r.name for r in snap.cluster_queues["cq"].admission_checks] == ["prov"]
    w = snap.workloads["default/w"]
    assert w.admitted and [(c.name, c.state) for c in w.checks] == [("prov", "Ready")]


def test_admission_checks_and_a_strategy_together_are_an_error():
    cq = checked_queue("prov")
    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "other"}]}
    with pytest.raises(SnapshotError, match="admissionChecksStrategy"):
        _load(cq)


def test_an_unknown_check_state_is_an_error_naming_the_field():
    w = reserved("w", {"prov": "Maybe"})
    with pytest.raises(SnapshotError, match=r"status.admissionChecks\[0\].state"):
        _load(w)


def test_queue_status_counts_reserving_apart_from_admitted():
    objs = [BASE, checked_queue("prov"), check("prov"), reserved("waiting", {"prov": "Pending"}, cpu="2"),
            reserved("running", {"prov": "Ready"}, admitted=True)]
    cq = queue_statuses(_load(*flatten(objs)), run(*objs)).cluster_queues["cq"].to_dict()
    assert (cq["reservingWorkloads"], cq["admittedWorkloads"]) == (2, 1)
    assert cq["flavorsReservation"][0]["resources"][0]["total"] == "3"
    assert cq["flavorsUsage"][0]["resources"][0]["total"] == "1"


def test_an_inactive_check_makes_the_queue_status_inactive():
    objs = [flavor("f"), checked_queue("prov"), check("prov", active=False)]
    active = queue_statuses(_load(*objs), run(*objs)).cluster_queues["cq"].active
    assert (active.status, active.reason) == ("False", "AdmissionCheckInactive")
    assert "admission check prov is not Active" in active.message


def test_the_text_plan_and_explain_say_the_quota_is_reserved(tmp_path):
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all([*BASE, checked_queue("prov"), check("prov"),
                                        reserved("w", {"prov": "Pending"}, messages={"prov": "2 nodes coming"})]))
    plan = CliRunner().invoke(main, ["plan", str(path)])
    assert plan.exit_code == 0 and "RESERVED     default/w" in plan.output
    explain = CliRunner().invoke(main, ["explain", str(path), "default/w"])
    assert "waiting for admission checks: prov (Pending: 2 nodes coming)" in explain.output


def test_a_check_added_to_the_queue_does_not_hold_back_what_is_admitted():
    admitted = workload("w", admitted_in=("cq", "f"))
    admitted["status"]["conditions"] = [{"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
                                         "lastTransitionTime": ts(1)}]
    plan = run(BASE, checked_queue("prov"), check("prov"), admitted)
    entry = plan.workload("default/w")
    assert entry.phase == "Admitted" and codes(plan, "default/w") == ["AlreadyAdmitted"] and not kinds(plan, "default/w")


def test_an_admitted_workload_is_evicted_by_a_retry():
    plan = run(BASE, checked_queue("prov"), check("prov"), reserved("w", {"prov": "Retry"}, admitted=True))
    assert [a.details["reason"]["code"] for a in plan.actions if a.kind == "preempt"] == ["AdmissionCheckRetry"]


def test_a_workload_without_quota_whose_check_asks_to_retry_waits():
    w = workload("w")
    w["status"] = {"admissionChecks": [{"name": "prov", "state": "Retry", "message": "later",
                                        "lastTransitionTime": ts(1)}]}
    plan = run(BASE, checked_queue("prov"), check("prov"), w)
    assert codes(plan, "default/w") == ["AdmissionCheckRetry"] and states(plan)["default/w"] == "pending"
    assert "not considered until" in plan.workload("default/w").reasons[0].message
    assert not kinds(plan, "default/w")


def test_clueue_list_tells_quota_reserved_from_admitted(tmp_path):
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all([*BASE, checked_queue("prov"), check("prov"),
                                        reserved("waiting", {"prov": "Pending"}),
                                        reserved("running", {"prov": "Ready"}, admitted=True)]))

    def names(status: str) -> list[str]:
        out = CliRunner().invoke(main, ["list", "workloads", str(path), "--status", status, "-o", "json"])
        assert out.exit_code == 0, out.output
        return [row["name"] for row in yaml.safe_load(out.output)]
    assert names("quotareserved") == ["waiting"] and names("admitted") == ["running"]


def test_a_session_follows_check_states_and_check_objects_as_a_fresh_cycle_does():
    from clueue.engine import Session, load_policy, run_cycle
    policy = load_policy()
    session = Session(policy)
    for states_, active in ((("Pending",), True), (("Ready",), True), (("Ready",), False), (("Pending",), True)):
        snapshot = _load(*flatten([BASE, checked_queue("prov"), check("prov", active=active),
                                   reserved("w", {"prov": states_[0]}), workload("x")]))
        kept, fresh = session.run(snapshot), run_cycle(snapshot, policy)
        assert kept.to_dict()["workloads"] == fresh.to_dict()["workloads"]
        assert [a.to_dict() for a in kept.actions] == [a.to_dict() for a in fresh.actions]
