"""Coscheduling PodGroups: gangs by minMember, quota and no-quota groups, ordering, timeouts and
back-off, phases from pod states, and InQueue (delay-pod-creation). One cycle per scenario;
statuses are computed by engine/podgroups.py from the snapshot and the cycle's plan, and the
plan carries them (``podGroups[]``, docs/plan-format.md): every scenario checks that it does."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from clueue.engine import Config, Document, build_snapshot, load_policy, run_cycle
from clueue.engine.config import PodGroups
from clueue.engine.kueue_api import POD_GROUP_LABEL
from clueue.engine.podgroups import backoff_seconds, podgroup_statuses
from tests.builders import cluster_queue, flatten, flavor, local_queue, pod, states, ts, workload

QUEUE = [flavor("default"), cluster_queue("cq", {"default": {"cpu": 4}}), local_queue("cq")]
POLICY = load_policy()


def at(minute: int) -> int:
    return int(datetime.fromisoformat(ts(minute).replace("Z", "+00:00")).timestamp())


def podgroup(name: str, min_member: int, *, minute: int = 0, min_resources: dict[str, Any] | None = None,
             timeout: int | None = None, queue: str | None = None, status: dict[str, Any] | None = None,
             annotations: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member}
    if min_resources:
        spec["minResources"] = min_resources
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    meta: dict[str, Any] = {"name": name, "namespace": "default", "creationTimestamp": ts(minute),
                            "labels": {"kueue.x-k8s.io/queue-name": queue} if queue else {},
                            "annotations": annotations or {}}
    out = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": meta, "spec": spec}
    if status:
        out["status"] = status
    return out


def member(name: str, group: str, *, node: str | None = None, **kw: Any) -> dict[str, Any]:
    out = pod(name, labels={POD_GROUP_LABEL: group}, **kw)
    if node:
        out["spec"]["nodeName"] = node
    return out


def gang(group: str, count: int, **kw: Any) -> list[dict[str, Any]]:
    return [member(f"{group}-{i}", group, **kw) for i in range(count)]


def node(name: str, cpu: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"allocatable": {"cpu": cpu}}}


#: clueue left to the nodes what has no queue (a scheduler with the coscheduling plugin decides)
UNQUEUED_TO_NODES = Config(pod_groups=PodGroups(gang_schedule_without_queue=False))


def cycle(*objs: Any, now: int = 60, config: Config = Config()):
    snapshot = build_snapshot([Document(f"test#{i}", o) for i, o in enumerate(flatten(objs))])
    plan = run_cycle(snapshot, POLICY, config, now=at(now))
    decisions = podgroup_statuses(snapshot, plan, at(now))
    # the plan is the contract: what the status writer writes is what these decisions say
    assert {g.name: (g.phase, dict(g.status), g.reason.message) for g in plan.pod_groups} == {
        k: (s.phase, s.to_dict(), s.message) for k, s in decisions.statuses.items()}
    assert {g.name: (g.release.pods, g.release.workload, g.release.requeues, g.release.backoff_until)
            for g in plan.pod_groups if g.release} == {
        f"{r.namespace}/{r.name}": (tuple(sorted((p.name, p.uid) for p in r.pods)), r.workload, r.requeues,
                                    r.backoff_until) for r in decisions.releases}
    assert tuple(g.name for g in plan.pod_groups if g.end_backoff) == decisions.backoff_over
    return plan, decisions


def ungated(plan) -> list[str]:
    return sorted(a.target for a in plan.actions if a.kind == "ungate")


def phase(decisions, name: str) -> str:
    return decisions.statuses[f"default/{name}"].phase


# -- gangs: minMember pods together or none ---------------------------------------------------

def test_a_gang_waits_for_min_member_pods_then_all_are_ungated_together():
    plan, _ = cycle(QUEUE, podgroup("mpi", 3), gang("mpi", 2))
    assert states(plan) == {"default/podgroup-mpi": "pending"} and ungated(plan) == []
    assert [r.code for r in plan.workload("default/podgroup-mpi").reasons] == ["GroupIncomplete"]
    plan, decisions = cycle(QUEUE, podgroup("mpi", 3), gang("mpi", 3))
    assert states(plan) == {"default/podgroup-mpi": "admitted"}
    assert ungated(plan) == ["default/mpi-0", "default/mpi-1", "default/mpi-2"]
    assert phase(decisions, "mpi") == "Scheduling"


def test_a_gang_beyond_its_quota_has_no_pod_ungated():
    plan, decisions = cycle(QUEUE, podgroup("big", 3), gang("big", 3, cpu=2))
    assert states(plan) == {"default/podgroup-big": "inadmissible"} and ungated(plan) == []  # 6 cpu > 4
    assert phase(decisions, "big") == "Pending"


def test_pods_of_a_missing_podgroup_wait_for_it():
    plan, _ = cycle(QUEUE, gang("ghost", 2))
    assert [r.code for r in plan.workload("default/podgroup-ghost").reasons][0] == "PodGroupNotFound"
    assert ungated(plan) == []


def test_with_the_switch_off_a_group_without_a_queue_is_left_to_the_nodes_and_only_gets_a_status():
    """podGroups.gangScheduleWithoutQueue: false (a scheduler with the coscheduling plugin runs):
    its pods are not gated, and clueue decides nothing for them but their group's status."""
    plan, decisions = cycle(QUEUE, podgroup("free", 2), gang("free", 2, queue=None, gated=False),
                            config=UNQUEUED_TO_NODES)
    assert states(plan) == {} and ungated(plan) == [] and plan.actions == ()
    assert phase(decisions, "free") == "InQueue"  # no quota to check, no Nodes: it fits
    _, decisions = cycle(QUEUE, podgroup("free", 2), gang("free", 2, queue=None, gated=False, node="n1"),
                         config=UNQUEUED_TO_NODES)
    assert phase(decisions, "free") == "Scheduling"


# -- ordering: priority, lone pods, PodGroup creation, pod creation --------------------------

def test_at_equal_priority_a_lone_pod_goes_before_an_older_gang():
    plan, _ = cycle(QUEUE, podgroup("g", 2), gang("g", 2, cpu=2), pod("solo", cpu=1, minute=30))
    assert states(plan) == {"default/podgroup-g": "pending", "default/pod-solo": "admitted"}


def test_gangs_are_ordered_by_their_podgroups_creation_not_their_pods():
    plan, _ = cycle(QUEUE, podgroup("old", 2, minute=1), podgroup("new", 2, minute=2),
                    gang("old", 2, cpu=2, minute=9), gang("new", 2, cpu=2, minute=3))
    assert states(plan) == {"default/podgroup-old": "admitted", "default/podgroup-new": "pending"}


# -- phases from the pods' live state ----------------------------------------------------------

def test_phases_follow_the_pods():
    pg = podgroup("p", 2)
    assert phase(cycle(QUEUE, pg)[1], "p") == "InQueue"
    assert phase(cycle(QUEUE, pg, gang("p", 2, cpu=3))[1], "p") == "Pending"
    assert phase(cycle(QUEUE, pg, gang("p", 2, gated=False))[1], "p") == "Scheduling"
    bound = [member("p-0", "p", queue=None, gated=False, node="n1"), member("p-1", "p", queue=None, gated=False)]
    assert phase(cycle(QUEUE, pg, bound)[1], "p") == "Unknown"  # nodes decide: one bound, one not
    running = cycle(QUEUE, pg, gang("p", 2, gated=False, phase="Running"))[1].statuses["default/p"]
    assert (running.phase, running.running) == ("Running", 2)
    done = cycle(QUEUE, pg, gang("p", 2, gated=False, phase="Succeeded"))[1].statuses["default/p"]
    assert (done.phase, done.succeeded) == ("Finished", 2)
    failed = cycle(QUEUE, pg, member("p-0", "p", gated=False, phase="Running"),
                   member("p-1", "p", gated=False, phase="Failed"))[1].statuses["default/p"]
    assert (failed.phase, failed.failed, failed.running) == ("Failed", 1, 1)


def test_schedule_start_time_is_set_when_scheduling_starts_and_kept_after():
    started = cycle(QUEUE, podgroup("p", 2), gang("p", 2), now=5)[1].statuses["default/p"]
    assert started.schedule_start == at(5) and started.to_dict()["scheduleStartTime"] == ts(5)
    kept = cycle(QUEUE, podgroup("p", 2, status={"phase": "Scheduling", "scheduleStartTime": ts(5)}),
                 gang("p", 2, gated=False), now=6)[1].statuses["default/p"]
    assert kept.schedule_start == at(5)


def test_occupied_by_is_the_controller_of_the_pods():
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "job-uid", "controller": True}
    status = cycle(QUEUE, podgroup("p", 1), gang("p", 1, owner=owner))[1].statuses["default/p"]
    assert status.to_dict()["occupiedBy"] == "job-uid"


# -- timeouts: released whole, requeued with back-off -------------------------------------------

def test_a_group_placed_but_not_running_after_its_timeout_is_released_with_back_off():
    pg = podgroup("t", 2, timeout=60, status={"phase": "Scheduling", "scheduleStartTime": ts(0)})
    pods = [member("t-0", "t", gated=False, phase="Running"), member("t-1", "t", gated=False)]
    _, early = cycle(QUEUE, pg, pods, now=0)
    assert early.releases == () and phase(early, "t") == "Scheduling"
    assert early.next_due == at(0) + 60  # when a controller should look again
    admitted = workload("podgroup-t", count=2, admitted_in=("cq", "default"))
    _, late = cycle(QUEUE, pg, pods, admitted, now=2)
    [release] = late.releases
    assert sorted(p.name for p in release.pods) == ["t-0", "t-1"]
    assert release.workload == "default/podgroup-t"  # deleted: its quota back, as Kueue's eviction gives it
    assert (release.requeues, release.backoff_until) == (1, at(2) + backoff_seconds(1))
    assert phase(late, "t") == "Pending" and "released" in late.statuses["default/t"].message


def test_a_group_backing_off_is_held_until_the_back_off_is_over():
    held = podgroup("t", 2, annotations={"clueue.dev/requeues": "2", "clueue.dev/backoff-until": str(at(10))})
    plan, decisions = cycle(QUEUE, held, gang("t", 2), now=5)
    assert [r.code for r in plan.workload("default/podgroup-t").reasons] == ["PodGroupBackoff"]
    assert ungated(plan) == [] and decisions.backoff_over == () and phase(decisions, "t") == "Pending"
    assert decisions.next_due == at(10)
    _, later = cycle(QUEUE, held, gang("t", 2), now=11)
    assert later.backoff_over == ("default/t",)  # the adapter removes the annotation: the next cycle admits
    assert backoff_seconds(1) == 60 and backoff_seconds(2) == 120 and backoff_seconds(30) == 3600


# -- InQueue: minResources fit idle capacity and quota, FCFS, reserved -------------------------

def test_in_queue_when_min_resources_fit_the_quota_and_back_to_pending_when_they_do_not():
    pg = podgroup("q", 2, min_resources={"cpu": 3}, queue="main")
    assert phase(cycle(QUEUE, pg)[1], "q") == "InQueue"
    # the quota is taken by an admitted pod: 4 - 2 < 3
    _, decisions = cycle(QUEUE, pg, pod("other", cpu=2))
    assert phase(decisions, "q") == "Pending"
    assert "quota of ClusterQueue cq" in decisions.statuses["default/q"].message


def test_in_queue_needs_idle_node_capacity_when_there_are_nodes():
    pg = podgroup("q", 2, min_resources={"cpu": 3})
    assert phase(cycle(QUEUE, pg, node("n1", 4))[1], "q") == "InQueue"
    busy = pod("busy", queue=None, gated=False, cpu=2)
    busy["spec"]["nodeName"] = "n1"
    _, decisions = cycle(QUEUE, pg, node("n1", 4), busy)
    assert phase(decisions, "q") == "Pending" and "idle node capacity has 2" in decisions.statuses["default/q"].message


def test_in_queue_is_first_come_first_served_and_reserves_the_capacity():
    first, second = podgroup("a", 1, minute=1, min_resources={"cpu": 3}, queue="main"), \
        podgroup("b", 1, minute=2, min_resources={"cpu": 3}, queue="main")
    _, decisions = cycle(QUEUE, second, first)
    assert (phase(decisions, "a"), phase(decisions, "b")) == ("InQueue", "Pending")
    assert "3 reserved for InQueue group default/a" in decisions.statuses["default/b"].message
    assert dict(decisions.reserved) == {"default/a": {"cpu": 3}}


# -- the plan carries every phase change, with its reason and numbers ---------------------------

def test_the_plan_says_a_group_goes_in_queue_and_what_it_holds():
    plan, _ = cycle(QUEUE, podgroup("q", 2, min_resources={"cpu": 3}, queue="main"))
    entry = plan.pod_group("default/q")
    assert (entry.recorded_phase, entry.phase, entry.changed) == ("", "InQueue", True)
    assert entry.reason.code == "MinResourcesFit"
    assert dict(entry.reason.details) == {"need": {"cpu": "3"}, "clusterQueue": "cq"}
    assert entry.reason.message == "minResources fit; it holds cpu 3 in ClusterQueue cq until its pods are admitted"
    assert dict(entry.holds) == {"cpu": "3"} and entry.status == {"phase": "InQueue", "running": 0, "succeeded": 0,
                                                                   "failed": 0}
    data = plan.to_dict()["podGroups"]
    assert data == [{"name": "default/q", "gang": "default/podgroup-q", "queue": "main", "phase": "InQueue",
                     "reason": entry.reason.to_dict(), "status": dict(entry.status), "holds": {"cpu": "3"}}]


def test_the_plan_says_a_group_goes_back_to_pending_with_the_numbers():
    recorded = podgroup("q", 2, min_resources={"cpu": 3}, queue="main", status={"phase": "InQueue"})
    plan, _ = cycle(QUEUE, recorded, workload("other", cpu=2, admitted_in=("cq", "default")))
    entry = plan.pod_group("default/q")
    assert (entry.recorded_phase, entry.phase, entry.changed) == ("InQueue", "Pending", True)
    assert entry.reason.code == "MinResourcesUnfit"
    assert dict(entry.reason.details) == {"need": {"cpu": "3"}, "resource": "cpu", "asks": "3", "has": "2",
                                          "pool": "the quota of ClusterQueue cq", "backToPending": True}
    assert entry.reason.message.startswith("back to Pending, minResources do not fit: needs cpu 3")
    assert not entry.holds


def test_the_plan_names_the_groups_that_hold_what_a_later_one_lacks():
    first, second = podgroup("a", 1, minute=1, min_resources={"cpu": 3}, queue="main"), \
        podgroup("b", 1, minute=2, min_resources={"cpu": 3}, queue="main")
    plan, _ = cycle(QUEUE, second, first)
    details = plan.pod_group("default/b").reason.details
    assert (details["reserved"], details["reservedFor"], details["reservedCount"]) == ("3", ["default/a"], 1)


def test_the_plan_says_when_a_gang_starts_scheduling():
    plan, _ = cycle(QUEUE, podgroup("mpi", 3, status={"phase": "InQueue"}), gang("mpi", 3), now=5)
    entry = plan.pod_group("default/mpi")
    assert (entry.recorded_phase, entry.phase) == ("InQueue", "Scheduling")
    assert (entry.reason.code, dict(entry.reason.details)) == ("PodsPlaced", {"placed": 3, "running": 0,
                                                                              "minMember": 3})
    assert entry.status["scheduleStartTime"] == ts(5)
    # an unchanged phase is an entry too: the writer writes its counts
    running = cycle(QUEUE, podgroup("mpi", 3, status={"phase": "Running"}), gang("mpi", 3, gated=False,
                                                                               phase="Running"))[0]
    entry = running.pod_group("default/mpi")
    assert (entry.changed, entry.reason.code, entry.status["running"]) == (False, "PodsRunning", 3)


def test_the_plan_carries_a_release_and_the_end_of_its_back_off():
    pg = podgroup("t", 2, timeout=60, status={"phase": "Scheduling", "scheduleStartTime": ts(0)})
    pods = [member("t-0", "t", gated=False, phase="Running"), member("t-1", "t", gated=False)]
    for p in pods:  # the release deletes exactly these pods, by uid
        p["metadata"]["uid"] = f"uid-{p['metadata']['name']}"
    plan, _ = cycle(QUEUE, pg, pods, workload("podgroup-t", count=2, admitted_in=("cq", "default")), now=2)
    entry = plan.pod_group("default/t")
    assert (entry.recorded_phase, entry.phase) == ("Scheduling", "Pending")
    assert entry.reason.code == "ScheduleTimeout"
    assert dict(entry.reason.details) == {"running": 1, "minMember": 2, "waitedSeconds": 120,
                                          "scheduleTimeoutSeconds": 60, "requeues": 1,
                                          "backoffUntil": ts(2 + backoff_seconds(1) // 60)}
    assert plan.to_dict()["podGroups"][0]["release"] == {
        "pods": [{"name": "t-0", "uid": "uid-t-0"}, {"name": "t-1", "uid": "uid-t-1"}],
        "workload": "default/podgroup-t", "requeues": 1, "backoffUntil": at(2) + backoff_seconds(1)}
    held = podgroup("t", 2, annotations={"clueue.dev/requeues": "1", "clueue.dev/backoff-until": str(at(10))})
    plan, _ = cycle(QUEUE, held, gang("t", 2), now=5)
    entry = plan.pod_group("default/t")
    assert (entry.reason.code, entry.end_backoff, plan.wake_at) == ("BackingOff", False, at(10))
    plan, _ = cycle(QUEUE, held, gang("t", 2), now=11)
    assert plan.pod_group("default/t").end_backoff and plan.to_dict()["podGroups"][0]["endBackoff"] is True


def test_without_a_time_nothing_that_depends_on_time_is_decided():
    pg = podgroup("t", 2, timeout=60, status={"phase": "Scheduling", "scheduleStartTime": ts(0)})
    snapshot = build_snapshot([Document(f"test#{i}", o) for i, o in enumerate(flatten(
        [QUEUE, pg, member("t-0", "t", gated=False), member("t-1", "t", gated=False)]))])
    plan = run_cycle(snapshot, POLICY, Config())
    entry = plan.pod_group("default/t")
    assert (entry.phase, entry.release, plan.wake_at) == ("Scheduling", None, None)
