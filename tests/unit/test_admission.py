"""Each admission rule of the built-in policy, on the smallest snapshot that shows it."""

import pytest

from tests.builders import (cluster_queue, codes, cohort, flavor, flavors, group, local_queue, namespace, pod,
                            resource_group, run, states, workload)

SPOT_TAINT = [{"key": "spot", "value": "true", "effect": "NoSchedule"}]
TOLERATE_SPOT = [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]


def one_queue(nominal=2, **cq):
    return [flavor("default"), cluster_queue("cq", {"default": {"cpu": nominal}}, **cq), local_queue("cq")]


def reason(plan, name, code):
    return next(r for r in plan.workload(name).reasons if r.code == code)


def test_admits_everything_that_fits_in_one_cycle_and_no_more():
    plan = run(one_queue(3), [pod(f"p{i}", minute=i) for i in range(5)])
    assert states(plan) == {"default/pod-p0": "admitted", "default/pod-p1": "admitted", "default/pod-p2": "admitted",
                            "default/pod-p3": "pending", "default/pod-p4": "pending"}


def test_pending_reason_gives_the_numbers_and_what_it_would_take():
    plan = run(one_queue(3), pod("big", cpu=2, minute=0), pod("next", cpu=3, minute=1))
    r = reason(plan, "default/pod-next", "InsufficientQuota")
    assert r.details == {"clusterQueue": "cq", "flavor": "default", "resource": "cpu", "need": "3",
                         "unusedNominal": "1", "lent": "0", "borrowable": "0", "short": "2"}
    assert "3 cpu" in r.message and "2 short" in r.message
    assert reason(plan, "default/pod-next", "WaitsBehind").details["workloads"] == ["default/pod-big"]


def test_higher_priority_first_then_older_first():
    pcs = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
           for n, v in (("high", 100), ("low", 1))]
    plan = run(one_queue(2), pcs, pod("old-low", cpu=2, minute=0, priority_class="low"),
               pod("new-high", cpu=2, minute=9, priority_class="high"), pod("mid", cpu=2, minute=5, priority_class="low"))
    assert states(plan)["default/pod-new-high"] == "admitted"
    assert reason(plan, "default/pod-old-low", "WaitsBehind").details["workloads"] == ["default/pod-new-high"]
    plan = run(one_queue(6), pcs, pod("old-low", cpu=2, minute=0, priority_class="low"),
               pod("new-high", cpu=2, minute=9, priority_class="high"), pod("mid", cpu=2, minute=5, priority_class="low"))
    assert [plan.workload(f"default/pod-{n}").rank for n in ("new-high", "old-low", "mid")] == [1, 2, 3]


def test_best_effort_fifo_lets_smaller_workloads_pass():
    plan = run(one_queue(2), workload("held", cpu=1, admitted_in=("cq", "default")),
               pod("head", cpu=2, minute=0), pod("small", cpu=1, minute=1))
    assert states(plan)["default/pod-head"] == "pending"
    assert states(plan)["default/pod-small"] == "admitted"


def test_strict_fifo_blocks_behind_the_head():
    plan = run(one_queue(2, strategy="StrictFIFO"), workload("held", cpu=1, admitted_in=("cq", "default")),
               pod("head", cpu=2, minute=0), pod("small", cpu=1, minute=1))
    assert states(plan)["default/pod-small"] == "pending"
    assert codes(plan, "default/pod-small") == ["StrictFIFOBlocked"]  # it fits: only the head holds it back
    assert reason(plan, "default/pod-small", "StrictFIFOBlocked").details == {"head": "default/pod-head"}


def cohort_of_two(a=None, b=None):
    return [flavor("default"),
            cluster_queue("a", {"default": {"cpu": a or 2}}, cohort="eng"), local_queue("a", ns="ta"),
            cluster_queue("b", {"default": {"cpu": b or 2}}, cohort="eng"), local_queue("b", ns="tb")]


def test_borrowing_unused_quota_of_the_cohort():
    plan = run(cohort_of_two(), [pod(f"p{i}", ns="ta", minute=i) for i in range(5)])
    assert sorted(states(plan).values()) == ["admitted"] * 4 + ["pending"]


def test_borrowing_limit_caps_borrowing():
    from tests.builders import quota
    plan = run(cohort_of_two(a=quota(2, borrowing=1)), [pod(f"p{i}", ns="ta", minute=i) for i in range(5)])
    assert sorted(states(plan).values()) == ["admitted"] * 3 + ["pending"] * 2


def test_lending_limit_keeps_the_rest_for_its_owner():
    from tests.builders import quota
    plan = run(cohort_of_two(b=quota(2, lending=1)), [pod(f"p{i}", ns="ta", minute=i) for i in range(5)])
    assert sorted(states(plan).values()) == ["admitted"] * 3 + ["pending"] * 2
    r = reason(plan, "ta/pod-p3", "InsufficientQuota")
    assert (r.details["unusedNominal"], r.details["borrowable"], r.details["short"]) == ("0", "0", "1")


def test_lent_quota_is_reported_as_lent():
    plan = run(cohort_of_two(), [pod(f"b{i}", ns="tb", minute=i) for i in range(3)], pod("late", ns="ta", cpu=2, minute=9))
    r = reason(plan, "ta/pod-late", "InsufficientQuota")
    assert (r.details["unusedNominal"], r.details["lent"], r.details["short"]) == ("1", "1", "1")


def test_hierarchical_cohorts_share_parent_quota():
    objs = [flavor("default"), cohort("org", flavors={"default": {"cpu": 3}}), cohort("eng", parent="org"),
            cohort("ops", parent="org"),
            cluster_queue("a", {"default": {"cpu": 1}}, cohort="eng"), local_queue("a", ns="ta"),
            cluster_queue("b", {"default": {"cpu": 1}}, cohort="ops"), local_queue("b", ns="tb")]
    plan = run(objs, [pod(f"p{i}", ns="ta", minute=i) for i in range(6)], pod("q", ns="tb", minute=10))
    s = states(plan)
    # 5 CPU in the tree: a's own 1, b's 1 and the org's 3; a takes 5 in rank order before b's pod.
    assert sum(v == "admitted" for v in s.values()) == 5
    assert s["tb/pod-q"] == "pending"


def test_flavors_are_tried_in_order():
    objs = [flavor("first"), flavor("second"), cluster_queue("cq", {"first": {"cpu": 1}, "second": {"cpu": 2}}), local_queue("cq")]
    plan = run(objs, [pod(f"p{i}", minute=i) for i in range(4)])
    assert flavors(plan, "default/pod-p0") == {"main": {"cpu": "first"}}
    assert [flavors(plan, f"default/pod-p{i}")["main"]["cpu"] for i in (1, 2)] == ["second", "second"]
    assert states(plan)["default/pod-p3"] == "pending"


def fungibility_case(when):
    return [flavor("first"), flavor("second"),
            cluster_queue("a", {"first": {"cpu": 1}, "second": {"cpu": 1}}, cohort="eng", when_can_borrow=when),
            local_queue("a"), cluster_queue("b", {"first": {"cpu": 2}}, cohort="eng"), local_queue("b", ns="other"),
            pod("p0", cpu=1, minute=0), pod("p1", cpu=1, minute=1)]


def test_when_can_borrow_borrow_stays_in_the_first_flavor():
    plan = run(fungibility_case("Borrow"))
    assert [flavors(plan, f"default/pod-p{i}")["main"]["cpu"] for i in (0, 1)] == ["first", "first"]


def test_when_can_borrow_try_next_flavor_avoids_borrowing():
    plan = run(fungibility_case("TryNextFlavor"))
    assert sorted(flavors(plan, f"default/pod-p{i}")["main"]["cpu"] for i in (0, 1)) == ["first", "second"]


def test_rechooses_flavors_where_greedy_first_fit_would_block():
    # p0 fits either flavor; p1 only fits "small" (node selector).  Kueue's greedy puts p0 in
    # "small" (first flavor) and leaves p1 out; clueue moves p0 to "large" and admits both.
    objs = [flavor("small", labels={"size": "small"}), flavor("large", labels={"size": "large"}),
            cluster_queue("cq", {"small": {"cpu": 2}, "large": {"cpu": 2}}), local_queue("cq"),
            pod("p0", cpu=2, minute=0), pod("p1", cpu=2, minute=1, node_selector={"size": "small"})]
    plan = run(objs)
    assert flavors(plan, "default/pod-p0") == {"main": {"cpu": "large"}}
    assert flavors(plan, "default/pod-p1") == {"main": {"cpu": "small"}}


def test_taints_need_tolerations():
    objs = [flavor("spot", taints=SPOT_TAINT), cluster_queue("cq", {"spot": {"cpu": 4}}), local_queue("cq"),
            pod("tolerant", tolerations=TOLERATE_SPOT), pod("intolerant")]
    plan = run(objs)
    assert states(plan) == {"default/pod-tolerant": "admitted", "default/pod-intolerant": "inadmissible"}
    assert codes(plan, "default/pod-intolerant")[:2] == ["FlavorUnfit", "NoFittingFlavor"]


def test_node_selector_excludes_flavors_with_other_labels():
    objs = [flavor("od", labels={"cap": "od"}), flavor("spot", labels={"cap": "spot"}),
            cluster_queue("cq", {"od": {"cpu": 4}, "spot": {"cpu": 4}}), local_queue("cq"),
            pod("p", node_selector={"cap": "spot"})]
    assert flavors(run(objs), "default/pod-p") == {"main": {"cpu": "spot"}}


def test_ungate_sets_the_node_selector_of_the_chosen_flavor():
    objs = [flavor("od", labels={"cap": "od", "zone": "a"}), cluster_queue("cq", {"od": {"cpu": 4}}), local_queue("cq"), pod("p")]
    actions = [a.to_dict() for a in run(objs).actions]
    assert {"kind": "ungate", "target": "default/p", "workload": "default/pod-p", "uid": "",
            "nodeSelector": {"cap": "od", "zone": "a"}} in actions
    assert any(a["kind"] == "admit" and a["target"] == "default/pod-p" for a in actions)


def test_names_with_quotes_and_backslashes_reach_the_plan_unchanged():
    # Names travel to the solver as ASP strings and back; escapes must survive both ways.
    name = 'odd "quoted" \\ flavör'
    plan = run([flavor(name, labels={"zone": 'x"y\\z'}), cluster_queue("cq", {name: {"cpu": 2}}), local_queue("cq")],
               pod("p", cpu=1))
    assert flavors(plan, "default/pod-p") == {"main": {"cpu": name}}
    ungate = next(a for a in plan.actions if a.kind == "ungate")
    assert ungate.details["nodeSelector"] == {"zone": 'x"y\\z'}


def test_namespace_selector():
    objs = [namespace("ok", team="yes"), namespace("no", team="no"), flavor("default"),
            cluster_queue("cq", {"default": {"cpu": 4}}, selector={"matchLabels": {"team": "yes"}}),
            local_queue("cq", ns="ok"), local_queue("cq", ns="no"), pod("a", ns="ok"), pod("b", ns="no")]
    plan = run(objs)
    assert states(plan) == {"ok/pod-a": "admitted", "no/pod-b": "inadmissible"}
    assert codes(plan, "no/pod-b") == ["NamespaceNotSelected"]


def test_a_cluster_queue_without_namespace_selector_selects_nothing():
    objs = one_queue(4)
    del objs[1]["spec"]["namespaceSelector"]
    assert codes(run(objs, pod("p")), "default/pod-p") == ["NamespaceNotSelected"]


@pytest.mark.parametrize("objs,code", [
    ([flavor("default"), cluster_queue("cq", {"missing": {"cpu": 4}}), local_queue("cq")], "ClusterQueueInactive"),
    ([flavor("default"), local_queue("nowhere")], "ClusterQueueNotFound"),
    ([flavor("default")], "LocalQueueNotFound"),
])
def test_queues_that_cannot_admit(objs, code):
    plan = run(objs, pod("p"))
    assert states(plan) == {"default/pod-p": "inadmissible"} and codes(plan, "default/pod-p") == [code]


def test_resource_not_covered_and_too_big_are_inadmissible():
    plan = run(one_queue(4), pod("gpu", gpu=1), pod("huge", cpu=5))
    assert codes(plan, "default/pod-gpu") == ["ResourceNotCovered"]
    assert states(plan)["default/pod-huge"] == "inadmissible"
    assert "ExceedsCapacity" in codes(plan, "default/pod-huge")


def test_gangs_are_all_or_nothing():
    plan = run(one_queue(3), group("gang", 4), pod("single", minute=5))
    assert states(plan) == {"default/gang": "inadmissible", "default/pod-single": "admitted"}
    plan = run(one_queue(5), workload("held", cpu=2, admitted_in=("cq", "default")), group("gang", 4), pod("single", minute=5))
    assert states(plan)["default/gang"] == "pending" and states(plan)["default/pod-single"] == "admitted"
    assert not any(a.workload == "default/gang" for a in plan.actions)


def test_admitted_workloads_keep_their_quota():
    plan = run(one_queue(2), workload("running", cpu=2, admitted_in=("cq", "default")), pod("new"))
    assert states(plan) == {"default/running": "admitted", "default/pod-new": "pending"}


def test_ungated_pods_count_as_admitted():
    plan = run(one_queue(2), pod("running", cpu=2, gated=False, phase="Running"), pod("new", minute=3))
    assert states(plan) == {"default/pod-running": "admitted", "default/pod-new": "pending"}
    assert codes(plan, "default/pod-running") == ["AlreadyAdmitted"]


def test_quota_lowered_below_usage_blocks_new_admissions_without_failing():
    plan = run(one_queue(1), workload("running", cpu=3, admitted_in=("cq", "default")), pod("new"))
    assert states(plan) == {"default/running": "admitted", "default/pod-new": "pending"}


def test_cpu_and_memory_both_count():
    objs = [flavor("default"), cluster_queue("cq", {"default": {"cpu": 8, "memory": "4Gi"}}), local_queue("cq")]
    plan = run(objs, pod("a", cpu=1, memory="3Gi", minute=0), pod("b", cpu=1, memory="2Gi", minute=1))
    assert states(plan) == {"default/pod-a": "admitted", "default/pod-b": "pending"}
    assert reason(plan, "default/pod-b", "InsufficientQuota").details["short"] == "1Gi"


def test_multiple_resource_groups_get_a_flavor_each():
    groups = [resource_group({"od": {"cpu": 8}}), resource_group({"a100": {"nvidia.com/gpu": 2}})]
    objs = [flavor("od", labels={"cap": "od"}), flavor("a100", labels={"gpu": "a100"}),
            cluster_queue("cq", groups=groups), local_queue("cq"), pod("p", cpu=2, gpu=1)]
    plan = run(objs)
    assert flavors(plan, "default/pod-p") == {"main": {"cpu": "od", "nvidia.com/gpu": "a100"}}
    ungate = next(a for a in plan.actions if a.kind == "ungate")
    assert ungate.details["nodeSelector"] == {"cap": "od", "gpu": "a100"}


def test_finished_workloads_hold_no_quota():
    plan = run(one_queue(1), pod("done", gated=False, phase="Succeeded"), pod("new", minute=3))
    assert states(plan) == {"default/pod-done": "finished", "default/pod-new": "admitted"}


def test_plans_are_deterministic():
    objs = [cohort_of_two(), [pod(f"p{i}", ns="ta", minute=i % 3) for i in range(8)],
            [pod(f"q{i}", ns="tb", minute=i % 2) for i in range(5)]]
    def stable(plan):
        d = plan.to_dict()
        d.pop("solver")
        return d
    assert stable(run(objs)) == stable(run(objs))


def test_a_spent_time_budget_still_returns_a_plan_and_says_so():
    plan = run(one_queue(4), [pod(f"p{i}", minute=i) for i in range(3)], time_budget=1e-9)
    assert plan.solver.budget_exhausted and not plan.solver.optimal
    assert all("BudgetExhausted" in codes(plan, w.name) for w in plan.workloads)


def test_huge_quantities_coarsen_safely_and_never_overcommit():
    # 1Ti + 1 byte per pod: exact integers would overflow clingo's 32 bits; the unit grows, requests
    # round up and quotas down, so 2 fit in 3Ti and the third does not.
    objs = [flavor("default"), cluster_queue("cq", {"default": {"memory": "3Ti"}}), local_queue("cq")]
    pods = [pod(f"p{i}", cpu=None, memory=str(2**40 + 1), minute=i) for i in range(3)]
    plan = run(objs, pods)
    assert [states(plan)[f"default/pod-p{i}"] for i in range(3)] == ["admitted", "admitted", "pending"]


def test_a_workload_behind_a_preemptor_is_not_told_the_preemptor_was_admitted():
    plan = run(one_queue(4, preemption={"withinClusterQueue": "LowerPriority"}),
               workload("low", cpu="4", priority=0, admitted_in=("cq", "default")),
               workload("high", cpu="4", priority=100, minute=1), workload("mid", cpu="1", priority=50, minute=2))
    assert plan.workload("default/high").state == "pending"
    assert "WaitsBehind" not in codes(plan, "default/mid")  # high is not admitted: mid waits for the eviction
    progress = reason(plan, "default/mid", "PreemptionInProgress")
    assert progress.details == {"preemptors": ["default/high"], "victims": ["default/low"]}
    assert "InsufficientQuota" not in codes(plan, "default/mid")


def test_a_workload_behind_admitted_ones_is_told_so():
    behind = reason(run(one_queue(3), pod("big", cpu=2, minute=0), pod("next", cpu=3, minute=1)),
                    "default/pod-next", "WaitsBehind")
    assert behind.details == {"workloads": ["default/pod-big"], "preempting": []}
    assert behind.message == "waits behind higher-ranked workloads admitted first: default/pod-big"


@pytest.mark.parametrize("local_queues", [
    pytest.param([local_queue("b", name="main"), local_queue("a", name="qa")], id="its LocalQueue points elsewhere now"),
    pytest.param([local_queue("a", name="qa")], id="its LocalQueue is gone"),
])
def test_an_admitted_workload_holds_quota_in_the_cluster_queue_of_its_admission(local_queues):
    queues = [flavor("default"), cluster_queue("a", {"default": {"cpu": 4}}), cluster_queue("b", {"default": {"cpu": 4}})]
    plan = run(queues, local_queues, workload("old", cpu="4", admitted_in=("a", "default")),
               workload("new", cpu="1", queue="qa", minute=1))
    assert states(plan)["default/new"] == "pending"
    assert reason(plan, "default/new", "InsufficientQuota").details["clusterQueue"] == "a"
