"""Comparing a Workload object with the plan by meaning: pod sets, owners, recorded flavors, reasons."""

from clueue.adapters.kube.consistency import (admission_difference, missing_owners, pod_set_difference,
                                              reasons_digest, tag_of, tagged)
from clueue.engine.plan import PodSetAssignment, PodSetRequest, WorkloadEntry
from clueue.engine.reasons import make_reason


def entry(count=3, cpu="1", pods=(), admission=()):
    return WorkloadEntry(name="ns/gang", queue="main", cluster_queue="cq", priority=0, state="pending",
                         origin="pod-group", pod_sets=(PodSetRequest("main", count, {"cpu": cpu}),), pods=tuple(pods),
                         admission=tuple(admission))


def workload(count=3, requests=None, owners=()):
    return {"metadata": {"name": "gang", "namespace": "ns", "ownerReferences": list(owners)},
            "spec": {"podSets": [{"name": "main", "count": count, "template": {"spec": {"containers": [
                {"name": "c", "resources": {"requests": requests or {"cpu": "1000m"}}}]}}}]}}


def test_pod_sets_compare_by_count_and_quantity_not_notation():
    assert pod_set_difference(workload(3), entry(3)) == ""  # 1000m is 1
    assert pod_set_difference(workload(2), entry(3)) == "it has pod sets main x2, its pods make main x3"
    assert "other resources" in pod_set_difference(workload(3, {"cpu": "2"}), entry(3))


def test_owners_missing_are_the_pods_not_referenced_by_uid():
    obj = workload(owners=[{"kind": "Pod", "name": "gang-0", "uid": "u0"}])
    assert [o["name"] for o in missing_owners(obj, entry(pods=[("gang-0", "u0"), ("gang-1", "u1")]))] == ["gang-1"]


def test_recorded_flavors_must_match_the_plans():
    planned = entry(admission=[PodSetAssignment("main", 3, {"cpu": "a"})])
    recorded = {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 3, "flavors": {"cpu": "a"}}]}
    assert admission_difference(recorded, planned) == ""
    recorded["podSetAssignments"][0]["flavors"] = {"cpu": "b"}
    assert "{'main': {'cpu': 'b'}}" in admission_difference(recorded, planned)
    assert admission_difference("not an object", planned)


def test_the_digest_follows_codes_and_data_but_not_whom_it_waited_behind():
    short = make_reason("InsufficientQuota", clusterQueue="cq", flavor="f", resource="cpu", need="1",
                        unusedNominal="0", lent="0", borrowable="0", short="1")
    behind = make_reason("WaitsBehind", workloads=["ns/a"], preempting=[])
    assert reasons_digest([short, behind]) == reasons_digest([short])
    shorter = make_reason("InsufficientQuota", clusterQueue="cq", flavor="f", resource="cpu", need="2",
                          unusedNominal="0", lent="0", borrowable="0", short="2")
    assert reasons_digest([shorter]) != reasons_digest([short])


def test_a_tagged_message_keeps_its_tag_within_the_limit():
    message = tagged("x" * 100, "0123456789ab", 50)
    assert len(message) == 50 and tag_of(message) == "0123456789ab"
    assert tag_of("a message clueue did not tag") == ""
