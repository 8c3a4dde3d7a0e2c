"""A snapshot read from a live cluster (lenient): one malformed object is left out, with a
reason on its workload, and every other workload is decided as if it were not there."""

from __future__ import annotations

from clueue.engine import Config, Document, build_snapshot, load_policy, run_cycle
from tests.builders import cluster_queue, cohort, flatten, flavor, group, local_queue, pod, workload

_BAD_TEMPLATE = [{"name": "main", "count": 1, "template": {"spec": {"containers": [
    {"name": "main", "resources": "lots"}]}}}]


def _plan(*objs):
    docs = [Document(f"api:{i}", o) for i, o in enumerate(flatten(objs))]
    return run_cycle(build_snapshot(docs, lenient=True), load_policy(), Config())


def _cluster(cpu: int = 4):
    return [flavor("f"), cluster_queue("cq", {"f": {"cpu": cpu}}), local_queue("cq")]


def test_a_malformed_workload_is_held_with_its_reason_and_the_others_are_admitted():
    plan = _plan(_cluster(), workload("bad", pod_sets=_BAD_TEMPLATE, minute=0), workload("good", cpu="4", minute=1))
    assert plan.workload("default/good").state == "admitted"
    bad = plan.workload("default/bad")
    assert bad.state == "inadmissible" and [r.code for r in bad.reasons][0] == "InvalidObject"
    assert bad.reasons[0].details == {"kind": "Workload", "name": "default/bad",
                                      "field": "spec.podSets[0].template.spec.containers[0].resources",
                                      "error": "expected an object, got 'lots'"}
    assert "Workload default/bad cannot be used" in bad.reasons[0].message
    assert [(r["kind"], r["name"], r["field"]) for r in plan.to_dict()["rejected"]] == [
        ("Workload", "bad", "spec.podSets[0].template.spec.containers[0].resources")]
    assert not [a for a in plan.actions if a.workload == "default/bad"]


def test_a_malformed_pod_holds_its_group_and_a_single_pod_gets_an_entry():
    members = group("g", 2)
    members[1]["spec"]["containers"][0]["resources"] = "lots"
    single = pod("solo", minute=1)
    single["metadata"]["labels"][1] = "x"
    plan = _plan(_cluster(), members, single, pod("fine", minute=2))
    assert plan.workload("default/pod-fine").state == "admitted"
    assert plan.workload("default/g").reasons[0].code == "InvalidObject"
    solo = plan.workload("default/pod-solo")
    assert solo.state == "inadmissible" and solo.reasons[0].details["field"] == "metadata.labels"
    assert [p.count for p in solo.pod_sets] == [1]  # so that a Workload can be created to record why
    assert {a.target for a in plan.actions if a.kind == "ungate"} == {"default/fine"}


def test_a_malformed_cluster_queue_is_as_if_missing_and_other_queues_admit():
    bad = cluster_queue("cq", {"f": {"cpu": 4}}, preemption={"withinClusterQueue": "Sometimes"})
    plan = _plan(flavor("f"), bad, local_queue("cq"), cluster_queue("other", {"f": {"cpu": 4}}),
                 local_queue("other", name="q2"), workload("a"), workload("b", queue="q2"))
    assert plan.workload("default/a").reasons[0].code == "ClusterQueueNotFound"
    assert plan.workload("default/b").state == "admitted"
    assert [(r.kind, r.name, r.field) for r in plan.rejected] == [("ClusterQueue", "cq", "spec.preemption.withinClusterQueue")]


def test_without_lenient_the_same_object_fails_the_snapshot():
    import pytest
    from clueue.engine import SnapshotError
    with pytest.raises(SnapshotError, match="spec.podSets"):
        build_snapshot([Document("w.yaml#1", workload("bad", pod_sets=_BAD_TEMPLATE))])


def test_plan_shows_the_notice_of_an_empty_snapshot(tmp_path):
    from click.testing import CliRunner
    from clueue.adapters.cli import main
    (tmp_path / "empty.yaml").write_text("# nothing\n")
    result = CliRunner().invoke(main, ["plan", str(tmp_path)])
    assert result.exit_code == 0 and "notice: the snapshot holds no objects clueue reads" in result.output


def test_the_text_plan_lists_the_rejected_objects():
    from clueue.adapters.render import render_plan
    plan = _plan(_cluster(), workload("bad", pod_sets=_BAD_TEMPLATE))
    text = render_plan(plan, "text")
    assert ("rejected: Workload default/bad (api:3): spec.podSets[0].template.spec.containers[0].resources: "
            "expected an object, got 'lots'") in text


def test_the_digest_covers_the_rejected_objects():
    bad = workload("bad", pod_sets=_BAD_TEMPLATE)
    worse = workload("bad", pod_sets=[{**_BAD_TEMPLATE[0], "count": "two"}])
    one, two = (build_snapshot([Document("api:1", w)], lenient=True) for w in (bad, worse))
    assert one.digest() != two.digest() != build_snapshot([], lenient=True).digest()


def test_cohorts_whose_parents_form_a_cycle_are_left_out_with_their_queues():
    loop = [cohort("a", parent="b"), cohort("b", parent="a"), cohort("under", parent="a")]
    queues = [cluster_queue("in-loop", {"f": {"cpu": 4}}, cohort="under"), local_queue("in-loop", name="looped"),
              cluster_queue("cq", {"f": {"cpu": 4}}), local_queue("cq")]
    plan = _plan(flavor("f"), loop, queues, workload("stuck", cpu="1", queue="looped"), workload("good", cpu="4"))
    assert plan.workload("default/good").state == "admitted"
    assert plan.workload("default/stuck").state != "admitted"
    rejected = {(r.kind, r.name): r for r in plan.rejected}
    assert set(rejected) == {("Cohort", "a"), ("Cohort", "b"), ("Cohort", "under"), ("ClusterQueue", "in-loop")}
    assert rejected[("Cohort", "under")].message == "cohort parents form a cycle: a -> b -> a"
    assert rejected[("ClusterQueue", "in-loop")].field == "spec.cohort"


def test_a_malformed_admitted_workload_stops_new_admissions_in_its_tree_not_elsewhere():
    # Its admission holds quota nobody can count: counting none would admit others into it.
    bad = workload("bad", pod_sets=_BAD_TEMPLATE, admitted_in=("cq", "f"))
    other = [cluster_queue("cq2", {"f": {"cpu": 4}}), local_queue("cq2", name="q2")]
    plan = _plan(_cluster(), other, bad, workload("waits", cpu="1", minute=1),
                 workload("elsewhere", cpu="1", queue="q2", minute=2))
    waits = plan.workload("default/waits")
    assert waits.state == "pending" and [r.code for r in waits.reasons] == ["QuotaUnknown"]
    assert waits.reasons[0].details == {"clusterQueue": "cq", "object": "Workload default/bad"}
    assert plan.workload("default/elsewhere").state == "admitted"


def test_a_malformed_started_pod_stops_new_admissions_in_its_tree():
    running = pod("runs", gated=False)
    running["spec"]["containers"][0]["resources"] = "lots"
    plan = _plan(_cluster(), running, pod("next", minute=1))
    assert [r.code for r in plan.workload("default/pod-next").reasons] == ["QuotaUnknown"]


def test_an_admission_naming_a_pod_set_the_spec_lacks_stops_new_admissions_in_its_tree():
    # Issue 34: it was counted as holding nothing, and a 4-cpu pod was admitted beside its 4 cpu.
    stray = workload("stray", cpu="4", admitted_in=("cq", "f"))
    stray["status"]["admission"]["podSetAssignments"][0].update(name="other", resourceUsage={"cpu": "4"})
    plan = _plan(_cluster(cpu=4), stray, pod("next", cpu="4", minute=1))
    assert plan.workload("default/pod-next").state == "pending"
    assert [r.code for r in plan.workload("default/pod-next").reasons] == ["QuotaUnknown"]
    (rejected,) = plan.rejected
    assert (rejected.field, rejected.holds_quota) == ("status.admission.podSetAssignments[0].name", True)
    assert "'other', which spec.podSets does not have (main)" in rejected.message
    assert not [a for a in plan.actions if a.workload == "default/stray"]  # it keeps its admission


def test_pods_of_a_group_whose_workload_cannot_be_read_are_not_deleted():
    # A group's Workload left out as malformed is not a deleted one: its ungated pods keep running.
    members = group("g", 1)
    members[0]["spec"].pop("schedulingGates", None)
    members[0]["metadata"].setdefault("annotations", {})["clueue.dev/workload-uid"] = "uid-1"
    bad = workload("g", pod_sets=_BAD_TEMPLATE, admitted_in=("cq", "f"))
    bad["metadata"]["uid"] = "uid-1"
    plan = _plan(_cluster(), members, bad)
    assert not [a for a in plan.actions if a.kind == "delete-pod"], plan.actions
