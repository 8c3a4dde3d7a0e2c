"""Coscheduling PodGroups without a queue (issue 33): clueue gang-schedules them as the
coscheduling plugin would, on the nodes alone: the webhook gates their pods, a group is admitted
only where minMember of its pods fit on the nodes at once (no quota applies), its pods are pinned
to their nodes, groups are taken in the seed's QueueSort order, and a waiting group says
NodesUnfit. With podGroups.gangScheduleWithoutQueue off, clueue leaves them to the nodes."""

from __future__ import annotations

from typing import Any

from clueue.engine.kueue_api import MANAGED_LABEL, POD_GROUP_LABEL
from clueue.engine.podgroups import COSCHEDULING_QUEUE, backoff_seconds
from tests.builders import pod, states, ts, workload
from tests.scenarios.test_podgroups import QUEUE, UNQUEUED_TO_NODES, at, cycle, phase, podgroup, ungated


def gated(group: str, count: int, *, cpu: Any = "1", minute: int = 0, **kw: Any) -> list[dict[str, Any]]:
    """``count`` pods of PodGroup ``group`` with no queue name, as the webhook leaves them: gated
    and labelled managed."""
    return [pod(f"{group}-{i}", queue=None, cpu=cpu, minute=minute,
                labels={POD_GROUP_LABEL: group, MANAGED_LABEL: "true"}, **kw) for i in range(count)]


def nodes(count: int, cpu: Any = 1, *, prefix: str = "n", taints: list[dict[str, str]] | None = None
          ) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        node: dict[str, Any] = {"apiVersion": "v1", "kind": "Node",
                                "metadata": {"name": f"{prefix}{i}", "labels": {"kubernetes.io/hostname": f"{prefix}{i}"}},
                                "status": {"allocatable": {"cpu": cpu, "pods": 110}}}
        if taints:
            node["spec"] = {"taints": taints}
        out.append(node)
    return out


def pinned(plan) -> dict[str, str]:
    """Ungated pod -> the node its nodeSelector pins it to."""
    return {a.target: a.details["nodeSelector"].get("kubernetes.io/hostname") for a in plan.actions if a.kind == "ungate"}


def test_a_group_of_four_on_nodes_with_room_for_three_starts_no_pod_and_says_nodes_unfit():
    plan, decisions = cycle(QUEUE, nodes(3), podgroup("mpi", 4), gated("mpi", 4))
    assert states(plan) == {"default/podgroup-mpi": "pending"} and ungated(plan) == []
    entry = plan.workload("default/podgroup-mpi")
    [why] = entry.reasons
    assert why.code == "NodesUnfit" and why.details["fit"] == 3 and why.details["pods"] == 4
    assert "of flavor" not in why.message  # the built-in queue's flavor is no flavor a user chose
    assert entry.queue == COSCHEDULING_QUEUE
    assert phase(decisions, "mpi") == "Pending"


def test_a_group_of_four_on_nodes_with_room_for_four_is_admitted_whole_and_pinned():
    plan, decisions = cycle(QUEUE, nodes(4), podgroup("mpi", 4), gated("mpi", 4))
    assert states(plan) == {"default/podgroup-mpi": "admitted"}
    [admit] = [a for a in plan.actions if a.kind == "admit"]
    assert admit.details["clusterQueue"] == COSCHEDULING_QUEUE  # no quota of any ClusterQueue of the user's
    on = pinned(plan)
    assert sorted(on) == [f"default/mpi-{i}" for i in range(4)]
    assert sorted(on.values()) == ["n0", "n1", "n2", "n3"]  # one pod per 1-cpu node: each pinned to its own
    assert phase(decisions, "mpi") == "Scheduling"


def test_a_group_fills_nodes_in_use_before_wholly_free_ones():
    """The stranded-capacity objective holds for it: whole free nodes stay whole for big gangs."""
    busy = pod("busy", queue=None, cpu=2, gated=False)
    busy["spec"]["nodeName"] = "big0"
    plan, _ = cycle(QUEUE, nodes(2, 4, prefix="big"), busy, podgroup("g", 2), gated("g", 2))
    assert set(pinned(plan).values()) == {"big0"}  # 2 cpu left there: big1 stays whole


def test_taints_and_node_selectors_keep_its_pods_off_nodes_as_they_would_any_pod():
    taint = [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    plan, _ = cycle(QUEUE, nodes(3), nodes(1, prefix="t", taints=taint), podgroup("g", 4), gated("g", 4))
    assert ungated(plan) == [] and [r.code for r in plan.workload("default/podgroup-g").reasons] == ["NodesUnfit"]
    toleration = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    plan, _ = cycle(QUEUE, nodes(3), nodes(1, prefix="t", taints=taint), podgroup("g", 4),
                    gated("g", 4, tolerations=toleration))
    assert sorted(pinned(plan).values()) == ["n0", "n1", "n2", "t0"]
    plan, _ = cycle(QUEUE, nodes(4), podgroup("g", 2), gated("g", 2, node_selector={"kubernetes.io/hostname": "n3"}))
    assert ungated(plan) == [] and [r.code for r in plan.workload("default/podgroup-g").reasons] == ["NodesUnfit"]


def test_two_groups_competing_for_the_nodes_are_taken_in_queue_sort_order():
    # room for one group of four: the older PodGroup goes first, whatever its pods' age
    plan, decisions = cycle(QUEUE, nodes(4), podgroup("old", 4, minute=1), podgroup("new", 4, minute=2),
                            gated("old", 4, minute=9), gated("new", 4, minute=3))
    assert states(plan) == {"default/podgroup-old": "admitted", "default/podgroup-new": "pending"}
    assert [r.code for r in plan.workload("default/podgroup-new").reasons] == ["NodesUnfit"]
    assert (phase(decisions, "old"), phase(decisions, "new")) == ("Scheduling", "Pending")
    # a higher priority goes first, however young its PodGroup
    plan, _ = cycle(QUEUE, nodes(4), podgroup("old", 4, minute=1), podgroup("new", 4, minute=2),
                    gated("old", 4), gated("new", 4, priority_class="high"),
                    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
                     "value": 100})
    assert states(plan) == {"default/podgroup-old": "pending", "default/podgroup-new": "admitted"}


def test_a_queued_lone_pod_goes_before_an_older_group_for_the_same_nodes():
    """QueueSort's second key across queues: at equal priority, a pod of no group goes first."""
    plan, _ = cycle(QUEUE, nodes(4), podgroup("g", 4, minute=0), gated("g", 4), pod("solo", minute=30))
    assert states(plan) == {"default/podgroup-g": "pending", "default/pod-solo": "admitted"}


def test_without_nodes_in_the_snapshot_a_group_is_admitted_once_min_member_pods_exist():
    plan, _ = cycle(QUEUE, podgroup("g", 3), gated("g", 2))
    assert [r.code for r in plan.workload("default/podgroup-g").reasons] == ["GroupIncomplete"]
    plan, _ = cycle(QUEUE, podgroup("g", 3), gated("g", 3))
    assert states(plan) == {"default/podgroup-g": "admitted"} and len(ungated(plan)) == 3


def test_no_quota_of_the_users_queues_is_used_or_asked():
    # 8 cpu of pods: far beyond the 4 cpu quota of the user's ClusterQueue, which does not apply
    plan, _ = cycle(QUEUE, nodes(4, 2), podgroup("g", 4), gated("g", 4, cpu=2))
    assert states(plan) == {"default/podgroup-g": "admitted"}


def test_its_schedule_timeout_releases_it_with_back_off_as_a_queued_group():
    pg = podgroup("t", 2, timeout=60, status={"phase": "Scheduling", "scheduleStartTime": ts(0)})
    pods = [pod(f"t-{i}", queue=None, gated=False, labels={POD_GROUP_LABEL: "t", MANAGED_LABEL: "true"},
                phase="Running" if i == 0 else None) for i in range(2)]
    admitted = workload("podgroup-t", queue=COSCHEDULING_QUEUE, count=2, admitted_in=(COSCHEDULING_QUEUE,
                                                                                       COSCHEDULING_QUEUE))
    plan, early = cycle(QUEUE, pg, pods, admitted, now=0)
    assert states(plan) == {"default/podgroup-t": "admitted"} and phase(early, "t") == "Scheduling"
    _, late = cycle(QUEUE, pg, pods, admitted, now=2)
    [release] = late.releases
    assert release.workload == "default/podgroup-t" and sorted(p.name for p in release.pods) == ["t-0", "t-1"]
    assert (release.requeues, release.backoff_until) == (1, at(2) + backoff_seconds(1))
    held = podgroup("t", 2, annotations={"clueue.dev/requeues": "1", "clueue.dev/backoff-until": str(at(10))})
    plan, decisions = cycle(QUEUE, nodes(4), held, gated("t", 2), now=5)
    assert [r.code for r in plan.workload("default/podgroup-t").reasons] == ["PodGroupBackoff"]
    assert ungated(plan) == [] and phase(decisions, "t") == "Pending"


def test_in_queue_before_its_pods_exist_as_a_queued_group_on_the_nodes_alone():
    plan, decisions = cycle(QUEUE, nodes(3), podgroup("g", 4, min_resources={"cpu": 4}))
    assert phase(decisions, "g") == "Pending" and "idle node capacity has 3" in decisions.statuses["default/g"].message
    plan, decisions = cycle(QUEUE, nodes(4), podgroup("g", 4, min_resources={"cpu": 4}))
    assert phase(decisions, "g") == "InQueue"


def test_with_the_switch_off_its_ungated_pods_are_left_to_the_scheduler():
    plan, decisions = cycle(QUEUE, nodes(3), podgroup("mpi", 4),
                            [pod(f"mpi-{i}", queue=None, gated=False, labels={POD_GROUP_LABEL: "mpi"}) for i in range(4)],
                            config=UNQUEUED_TO_NODES)
    assert plan.workloads == () and plan.actions == ()
    assert phase(decisions, "mpi") == "Pending"


def test_with_the_switch_off_pods_it_gated_before_are_still_admitted_not_stranded():
    plan, _ = cycle(QUEUE, nodes(4), podgroup("mpi", 4), gated("mpi", 4), config=UNQUEUED_TO_NODES)
    assert states(plan) == {"default/podgroup-mpi": "admitted"} and len(ungated(plan)) == 4


def test_topology_aware_scheduling_uses_the_clusters_one_topology():
    one_node = {"kueue.x-k8s.io/podset-required-topology": "kubernetes.io/hostname"}
    topology = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Topology", "metadata": {"name": "hosts"},
                "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}}
    plan, _ = cycle(QUEUE, topology, nodes(4, 4), podgroup("g", 2), gated("g", 2, annotations=one_node))
    assert states(plan) == {"default/podgroup-g": "admitted"}
    assert len(set(pinned(plan).values())) == 1  # both on one node, as the annotation requires
    plan, _ = cycle(QUEUE, topology, nodes(4, 1), podgroup("g", 2), gated("g", 2, annotations=one_node))
    assert [r.code for r in plan.workload("default/podgroup-g").reasons] == ["TopologyUnfit"]
    # without a Topology in the cluster it says why it waits, rather than anything false
    plan, _ = cycle(QUEUE, nodes(4, 4), podgroup("g", 2), gated("g", 2, annotations=one_node))
    [why] = plan.workload("default/podgroup-g").reasons
    assert why.code == "TopologyUnfit" and "no spec.topologyName" in why.message


def test_pods_without_a_queue_of_a_podgroup_with_one_are_admitted_through_its_quota():
    """The PodGroup's queue label stands in for its pods': that ClusterQueue's quota applies."""
    plan, _ = cycle(QUEUE, podgroup("g", 4, queue="main"), gated("g", 4, cpu=2))  # 8 cpu > the 4 of cq
    assert plan.workload("default/podgroup-g").queue == "main"
    assert states(plan) == {"default/podgroup-g": "inadmissible"} and ungated(plan) == []
    plan, _ = cycle(QUEUE, podgroup("g", 4, queue="main"), gated("g", 4))
    assert states(plan) == {"default/podgroup-g": "admitted"} and plan.workload("default/podgroup-g").cluster_queue == "cq"


def test_groups_with_and_without_a_queue_compete_for_the_nodes_in_queue_sort_order():
    from tests.builders import cluster_queue, flavor, local_queue
    from tests.scenarios.test_podgroups import gang
    roomy = [flavor("default"), cluster_queue("cq", {"default": {"cpu": 16}}), local_queue("cq")]  # quota never binds
    for older, newer in (("queued", "free"), ("free", "queued")):
        groups = {older: podgroup(older, 4, minute=1), newer: podgroup(newer, 4, minute=2)}
        plan, _ = cycle(roomy, nodes(4), groups["queued"], groups["free"], gang("queued", 4), gated("free", 4))
        assert states(plan) == {f"default/podgroup-{older}": "admitted", f"default/podgroup-{newer}": "pending"}
