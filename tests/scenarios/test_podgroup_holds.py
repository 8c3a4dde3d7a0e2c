"""InQueue PodGroups hold their capacity (delay-pod-creation): what a group the snapshot records
InQueue holds is subtracted before the solve, so no other workload takes it; its own gang is
admitted into it once its pods exist; it goes back to Pending when it no longer fits; groups
are taken first come, first served; explanations say what is held. One cycle per scenario,
as tests/scenarios/test_podgroups.py runs them."""

from __future__ import annotations

from clueue.engine.podgroups import holds
from tests.builders import cluster_queue, flavor, local_queue, pod, states, workload
from tests.scenarios.test_podgroups import QUEUE, UNQUEUED_TO_NODES, cycle, gang, node, phase, podgroup

IN_QUEUE = {"phase": "InQueue", "running": 0, "succeeded": 0, "failed": 0}


def held_group(name: str = "g", *, minute: int = 0, cpu: int = 3, min_member: int = 3, queue: str | None = "main"):
    return podgroup(name, min_member, minute=minute, min_resources={"cpu": cpu}, queue=queue, status=IN_QUEUE)


def reasons(plan, name: str) -> list[str]:
    return [r.message for r in plan.workload(name).reasons]


def test_what_an_in_queue_group_holds_is_not_given_to_another_workload():
    plan, decisions = cycle(QUEUE, held_group(), pod("other", cpu=2, minute=5))
    assert states(plan) == {"default/pod-other": "pending"}  # 4 - 3 held < 2
    assert phase(decisions, "g") == "InQueue"
    assert "holds cpu 3 in ClusterQueue cq" in decisions.statuses["default/g"].message
    [why] = [r for r in plan.workload("default/pod-other").reasons if r.code == "InsufficientQuota"]
    assert why.details["reserved"] == "3" and why.details["reservedFor"] == ["default/g"]
    assert "3 cpu are reserved for InQueue PodGroup(s) default/g" in why.message
    # what is not held is given: a pod of 1 cpu fits beside the hold
    plan, _ = cycle(QUEUE, held_group(), pod("small", cpu=1, minute=5))
    assert states(plan) == {"default/pod-small": "admitted"}


def test_the_groups_own_pods_are_admitted_into_what_it_holds():
    # "other" is older and not a gang, so it is ranked first; it still does not take the held room
    plan, decisions = cycle(QUEUE, held_group(minute=3), pod("other", cpu=2, minute=1), gang("g", 3))
    assert states(plan) == {"default/podgroup-g": "admitted", "default/pod-other": "pending"}
    assert phase(decisions, "g") == "Scheduling"


def test_pods_short_of_min_member_leave_the_hold_in_place():
    plan, decisions = cycle(QUEUE, held_group(), gang("g", 2), pod("other", cpu=2, minute=5))
    assert states(plan) == {"default/podgroup-g": "pending", "default/pod-other": "pending"}
    assert phase(decisions, "g") == "InQueue"


def test_a_group_goes_back_to_pending_when_its_quota_shrinks_and_frees_what_it_held():
    small = [flavor("default"), cluster_queue("cq", {"default": {"cpu": 2}}), local_queue("cq")]
    plan, decisions = cycle(small, held_group(), pod("other", cpu=2, minute=5))
    assert phase(decisions, "g") == "Pending"
    assert decisions.statuses["default/g"].message.startswith("back to Pending, minResources do not fit")
    assert states(plan) == {"default/pod-other": "admitted"}  # nothing held any more


def test_holds_are_first_come_first_served_within_a_queue():
    older, newer = held_group("a", minute=1), held_group("b", minute=2)
    plan, decisions = cycle(QUEUE, newer, older, pod("other", cpu=1, minute=5))
    assert (phase(decisions, "a"), phase(decisions, "b")) == ("InQueue", "Pending")
    assert "3 reserved for InQueue group default/a" in decisions.statuses["default/b"].message
    assert states(plan) == {"default/pod-other": "admitted"}  # b's 3 cpu are not held: 4 - 3 >= 1
    # a group already InQueue keeps its hold ahead of an older Pending one
    plan, decisions = cycle(QUEUE, podgroup("a", 1, minute=1, min_resources={"cpu": 3}, queue="main"),
                            held_group("b", minute=2))
    assert (phase(decisions, "a"), phase(decisions, "b")) == ("Pending", "InQueue")


def test_a_hold_lasts_across_cycles_until_the_gang_is_admitted():
    # cycle 1: Pending, it fits: written InQueue (it holds from the next cycle on)
    _, decisions = cycle(QUEUE, podgroup("g", 3, min_resources={"cpu": 3}, queue="main"))
    assert phase(decisions, "g") == "InQueue"
    # cycles 2 and 3, recorded InQueue: it keeps its hold while a competitor waits
    for _ in range(2):
        plan, decisions = cycle(QUEUE, held_group(), pod("other", cpu=2, minute=5))
        assert phase(decisions, "g") == "InQueue" and states(plan) == {"default/pod-other": "pending"}


def test_a_hold_counts_a_workload_admitted_before():
    # the quota of 4 holds 2 admitted before and the group's 3 only if it ignores the admission
    plan, decisions = cycle(QUEUE, held_group(), workload("running", cpu=2, admitted_in=("cq", "default")))
    assert phase(decisions, "g") == "Pending"
    assert "the quota of ClusterQueue cq has 2" in decisions.statuses["default/g"].message


def test_what_a_group_holds_of_the_nodes_is_not_given_to_another_workload():
    # a group without a queue: the nodes alone decide; it holds 3 of the node's 4 cpu
    plan, decisions = cycle(QUEUE, node("n1", 4), held_group(queue=None), pod("other", cpu=2, minute=5))
    assert phase(decisions, "g") == "InQueue"
    assert states(plan) == {"default/pod-other": "pending"}
    [why] = [r for r in plan.workload("default/pod-other").reasons if r.code == "NodesUnfit"]
    assert why.details["reserved"] == "cpu 3 (default/g)"
    assert "InQueue PodGroups hold cpu 3 (default/g) of the nodes" in why.message
    # its pods, left to the scheduler (podGroups.gangScheduleWithoutQueue off), are not bound
    # yet: the hold stays until they are
    plan, decisions = cycle(QUEUE, node("n1", 4), held_group(queue=None), gang("g", 3, queue=None, gated=False),
                            pod("other", cpu=2, minute=5), config=UNQUEUED_TO_NODES)
    assert phase(decisions, "g") == "InQueue" and states(plan) == {"default/pod-other": "pending"}


def test_a_queued_groups_arrived_pods_take_what_it_holds_of_the_nodes():
    plan, decisions = cycle(QUEUE, node("n1", 4), held_group(), gang("g", 3), pod("other", cpu=2, minute=1))
    assert states(plan) == {"default/podgroup-g": "admitted", "default/pod-other": "pending"}
    assert phase(decisions, "g") == "Scheduling"


def test_holds_are_computed_from_the_snapshot_alone():
    from clueue.engine import Document, build_snapshot
    from tests.builders import flatten
    objs = flatten([QUEUE, held_group("a", minute=1), held_group("b", minute=2, cpu=1)])
    snapshot = build_snapshot([Document(f"t#{i}", o) for i, o in enumerate(objs)])
    first = holds(snapshot)
    assert first is holds(snapshot)  # asked again about one snapshot: the same answer
    assert sorted(first.held) == ["default/a", "default/b"]
    assert first.held["default/a"].quota == (("default", "cpu", 3),)
    assert first.held["default/a"].gang == "default/podgroup-a"


# -- Kueue Workloads of a Job: admitted before their pods exist ------------------------------

JOB = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-1", "controller": True}
ROOMY = [flavor("default"), cluster_queue("cq", {"default": {"cpu": 8}}), local_queue("cq")]


def job_workload(count: int = 3):
    out = workload("train", cpu=1, count=count, admitted_in=("cq", "default"))
    out["metadata"]["labels"] = {"kueue.x-k8s.io/job-uid": "job-1"}
    return out


def job_pod(i: int, node_name: str | None = "n1"):
    out = pod(f"train-{i}", queue=None, gated=False, cpu=1, owner=JOB,
              labels={"kueue.x-k8s.io/podset": "main"})
    if node_name:
        out["spec"]["nodeName"] = node_name
    return out


def test_the_nodes_an_admitted_jobs_pods_will_take_are_held_until_they_exist():
    # admitted with 3 pods of 1 cpu, none created yet: 4 - 3 < 2 on the one node
    plan, _ = cycle(ROOMY, node("n1", 4), job_workload(), pod("other", cpu=2, minute=5))
    assert states(plan)["default/pod-other"] == "pending"
    [why] = [r for r in plan.workload("default/pod-other").reasons if r.code == "NodesUnfit"]
    assert why.details["reserved"] == "cpu 3 (Workload default/train)"
    # two of them bound: they count where they run, the third is still held
    plan, _ = cycle(ROOMY, node("n1", 4), job_workload(), job_pod(0), job_pod(1), pod("other", cpu=2, minute=5))
    assert states(plan)["default/pod-other"] == "pending"
    # a Workload holds nothing for pods it does not wait for: 1 pod admitted, 1 running
    plan, _ = cycle(ROOMY, node("n1", 4), job_workload(1), job_pod(0), pod("other", cpu=2, minute=5))
    assert states(plan)["default/pod-other"] == "admitted"


# -- through the quota tree, and in the facts -------------------------------------------------

def test_quota_a_group_holds_is_not_lent_to_its_cohort():
    tree = [flavor("default"), cluster_queue("a", {"default": {"cpu": 4}}, cohort="co"),
            cluster_queue("b", {"default": {"cpu": 4}}, cohort="co"), local_queue("a"), local_queue("b", "team-b")]
    # b needs 6: 4 of its own and 2 borrowed; a lends only the 1 its group does not hold
    plan, _ = cycle(tree, held_group(), pod("big", cpu=6, queue="team-b", minute=5))
    assert states(plan) == {"default/pod-big": "pending"}
    [why] = [r for r in plan.workload("default/pod-big").reasons if r.code == "InsufficientQuota"]
    assert why.details["reservedFor"] == ["default/g"]
    plan, _ = cycle(tree, held_group(cpu=1), pod("big", cpu=6, queue="team-b", minute=5))
    assert states(plan) == {"default/pod-big": "admitted"}  # a lends 3, b borrows 2


def test_the_holds_are_facts_of_the_quota_tree():
    from clueue.engine import Document, build_snapshot, compile_snapshot
    from tests.builders import flatten
    objs = flatten([QUEUE, held_group()])
    compiled, _ = compile_snapshot(build_snapshot([Document(f"t#{i}", o) for i, o in enumerate(objs)]))
    assert compiled.lines["reservation"] == ['reservation("default/g","cq","default","cpu",3).']
    assert compiled.lines["reservation_gang"] == ['reservation_gang("default/g","default/podgroup-g").']


def test_quota_lent_to_another_queue_of_the_cohort_is_not_free_to_hold():
    tree = [flavor("default"), cluster_queue("a", {"default": {"cpu": 4}}, cohort="co"),
            cluster_queue("b", {"default": {"cpu": 4}}, cohort="co"), local_queue("a"), local_queue("b", "team-b")]
    # b runs 7: 3 of them borrowed from a, whose own quota is unused but lent
    lent = workload("borrower", queue="team-b", cpu=7, admitted_in=("b", "default"))
    _, decisions = cycle(tree, held_group(), lent)
    assert phase(decisions, "g") == "Pending"
    assert "the unused quota of cohort co has 1" in decisions.statuses["default/g"].message
