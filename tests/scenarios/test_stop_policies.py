"""Kueue's switches that stop admission: a queue's stopPolicy (Hold, HoldAndDrain) on a
LocalQueue or a ClusterQueue, and a Workload's spec.active. Hold admits nothing new and keeps
what runs; HoldAndDrain and deactivation also evict what was admitted, with a preempt action
whose reason names the cause."""

from __future__ import annotations

import pytest

from tests.builders import cluster_queue, codes, flavor, local_queue, pod, run, states, workload


def _queues(cq_policy: str | None = None, lq_policy: str | None = None):
    cq = cluster_queue("cq", {"f": {"cpu": 8}})
    lq = local_queue("cq")
    if cq_policy:
        cq["spec"]["stopPolicy"] = cq_policy
    if lq_policy:
        lq["spec"]["stopPolicy"] = lq_policy
    return [flavor("f"), cq, lq, cluster_queue("other", {"f": {"cpu": 8}}), local_queue("other", name="q2")]


def _preempts(plan):
    return {a.target: a.details["reason"]["code"] for a in plan.actions if a.kind == "preempt"}


@pytest.mark.parametrize("policy", ["Hold", "HoldAndDrain"])
def test_a_stopped_local_queue_admits_nothing_new(policy):
    plan = run(_queues(lq_policy=policy), workload("new"), pod("p"), workload("elsewhere", queue="q2"))
    assert codes(plan, "default/new") == ["LocalQueueStopped"] and codes(plan, "default/pod-p") == ["LocalQueueStopped"]
    assert plan.workload("default/new").reasons[0].details == {"namespace": "default", "localQueue": "main"}
    assert states(plan)["default/new"] == "inadmissible"
    assert states(plan)["default/elsewhere"] == "admitted"
    assert not [a for a in plan.actions if a.workload in ("default/new", "default/pod-p")]


def test_hold_keeps_what_was_admitted():
    for stopped in (dict(lq_policy="Hold"), dict(cq_policy="Hold")):
        plan = run(_queues(**stopped), workload("running", admitted_in=("cq", "f")))
        assert states(plan)["default/running"] == "admitted" and not _preempts(plan)


@pytest.mark.parametrize("stopped,code", [(dict(lq_policy="HoldAndDrain"), "LocalQueueDrained"),
                                          (dict(cq_policy="HoldAndDrain"), "ClusterQueueDrained")])
def test_hold_and_drain_evicts_what_was_admitted(stopped, code):
    plan = run(_queues(**stopped), workload("running", admitted_in=("cq", "f")),
               workload("elsewhere", queue="q2", admitted_in=("other", "f")))
    assert _preempts(plan) == {"default/running": code}
    running = plan.workload("default/running")
    assert running.state == "inadmissible" and [r.code for r in running.reasons] == [code]
    assert states(plan)["default/elsewhere"] == "admitted"


def test_hold_and_drain_evicts_the_pods_of_an_admitted_pod():
    plan = run(_queues(lq_policy="HoldAndDrain"), pod("p", gated=False, phase="Running"))
    [action] = [a for a in plan.actions if a.kind == "preempt"]
    assert action.target == "default/pod-p" and [p["name"] for p in action.details["pods"]] == ["p"]


def test_a_deactivated_workload_is_not_admitted_and_evicted_if_admitted():
    inactive = workload("off")
    inactive["spec"]["active"] = False
    admitted = workload("was-on", admitted_in=("cq", "f"))
    admitted["spec"]["active"] = False
    plan = run(_queues(), inactive, admitted, workload("on"))
    assert codes(plan, "default/off") == ["Deactivated"] and states(plan)["default/off"] == "inadmissible"
    assert _preempts(plan) == {"default/was-on": "Deactivated"}
    assert states(plan)["default/on"] == "admitted"
    assert not [a for a in plan.actions if a.workload == "default/off"]


def test_the_quota_of_a_drained_workload_is_not_given_away_in_the_same_cycle():
    # As with preemption: the eviction releases the quota; a later cycle admits into it.
    plan = run(_queues(lq_policy="HoldAndDrain"), workload("running", cpu="8", admitted_in=("cq", "f")),
               local_queue("cq", name="open"), workload("waiting", cpu="8", queue="open"))
    assert _preempts(plan) == {"default/running": "LocalQueueDrained"}
    assert states(plan)["default/waiting"] == "pending"


def test_the_text_plan_says_why_a_workload_is_evicted(tmp_path):
    import json

    from click.testing import CliRunner

    from clueue.adapters.cli import main
    off = workload("off", admitted_in=("cq", "f"))
    off["spec"]["active"] = False
    objs = _queues(lq_policy="HoldAndDrain") + [workload("running", admitted_in=("cq", "f")), off]
    (tmp_path / "s.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))
    result = CliRunner().invoke(main, ["plan", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "evicted: LocalQueue default/main is stopped with stopPolicy HoldAndDrain" in result.output
    assert "the Workload is deactivated (spec.active is false)" in result.output
