"""The Workload status apply writes for admission checks (adapters/kube/apply.py, pure parts):
states merged by check name, never losing one a check's controller wrote; Admitted only with
every check Ready; states reset to Pending on eviction."""

from __future__ import annotations

from typing import Any

from clueue.adapters.kube.apply import _reset_checks, desired_status
from clueue.engine.objects import CheckState
from clueue.engine.plan import PodSetAssignment, PodSetRequest, WorkloadEntry


def entry(*checks: tuple[str, str]) -> WorkloadEntry:
    return WorkloadEntry(name="ns/w", queue="main", cluster_queue="cq", priority=0, state="admitted",
                         origin="workload", pod_sets=(PodSetRequest("main", 1, {"cpu": "1"}),),
                         admission=(PodSetAssignment("main", 1, {"cpu": "f"}),),
                         admission_checks=tuple(CheckState(n, s) for n, s in checks))


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def test_a_new_reservation_adds_pending_checks_and_is_not_admitted():
    status = desired_status(entry(("prov", "Pending")), {})
    assert status is not None and status["admission"]["clusterQueue"] == "cq"
    assert conditions(status) == {"QuotaReserved": ("True", "QuotaReserved"),
                                  "Admitted": ("False", "UnsatisfiedAdmissionChecks")}
    assert [(c["name"], c["state"]) for c in status["admissionChecks"]] == [("prov", "Pending")]


def test_a_state_written_by_the_checks_controller_is_kept_and_stale_ones_dropped():
    written = {"name": "prov", "state": "Pending", "message": "queued at the provisioner",
               "lastTransitionTime": "2026-11-21T08:00:00Z"}
    stale = {"name": "gone", "state": "Ready", "message": "", "lastTransitionTime": "2026-11-21T08:00:00Z"}
    status = desired_status(entry(("prov", "Pending"), ("new", "Pending")), {"admissionChecks": [written, stale]})
    assert status is not None
    assert status["admissionChecks"][1] == written
    assert [c["name"] for c in status["admissionChecks"]] == ["new", "prov"]


def test_a_reserved_workload_gets_a_check_its_queue_added_and_nothing_else():
    held = {"admission": {"clusterQueue": "cq"}, "admissionChecks": [
        {"name": "prov", "state": "Ready", "message": "", "lastTransitionTime": "2026-11-21T08:00:00Z"}]}
    status = desired_status(entry(("prov", "Ready"), ("extra", "Pending")), held)
    assert status is not None and [(c["name"], c["state"]) for c in status["admissionChecks"]] == [
        ("extra", "Pending"), ("prov", "Ready")]
    assert desired_status(entry(("prov", "Ready"), ("extra", "Pending")), status) is None  # in place: no write


def test_without_checks_admission_is_at_once():
    status = desired_status(entry(), {})
    assert status is not None and conditions(status)["Admitted"] == ("True", "Admitted")
    assert "admissionChecks" not in status


def test_an_eviction_resets_every_state_to_pending():
    checks = [{"name": "a", "state": "Ready", "message": "ok", "lastTransitionTime": "t",
               "podSetUpdates": [{"name": "main", "labels": {"x": "y"}}]},
              {"name": "b", "state": "Pending", "message": "waiting", "lastTransitionTime": "t"}]
    reset = _reset_checks(checks)
    assert [(c["name"], c["state"]) for c in reset] == [("a", "Pending"), ("b", "Pending")]
    assert reset[0]["message"] == "Reset to Pending after eviction. Previously: Ready"
    assert "podSetUpdates" not in reset[0] and reset[1] == checks[1]
