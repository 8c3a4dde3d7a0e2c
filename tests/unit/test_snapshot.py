import json

import pytest

from clueue.adapters.files import load_snapshot, read_documents
from clueue.engine import Document, SnapshotError, build_snapshot
from tests.builders import cluster_queue, cohort, local_queue, pod


def test_multi_document_yaml_and_kubectl_lists_load(tmp_path):
    (tmp_path / "a.yaml").write_text(
        "apiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: v1, kind: Namespace, metadata: {name: team-a}}\n"
        "- {apiVersion: v1, kind: Namespace, metadata: {name: team-b}}\n"
        "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: default}\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.json").write_text(json.dumps(local_queue("cq", ns="team-a")))
    snap = load_snapshot([str(tmp_path)])
    assert set(snap.namespaces) == {"team-a", "team-b"}
    assert set(snap.flavors) == {"default"}
    assert set(snap.local_queues) == {"team-a/main"}


def test_unknown_kinds_are_skipped_with_a_notice():
    snap = build_snapshot([Document("x.yaml#1", {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}})])
    assert snap.notices and "Deployment" in snap.notices[0] and "x.yaml#1" in snap.notices[0]


def test_v1beta1_and_v1beta2_field_names_load_the_same():
    old = cluster_queue("a", {"f": {"cpu": 1}}, cohort="eng")
    new = cluster_queue("a", {"f": {"cpu": 1}}, cohort="eng", api="kueue.x-k8s.io/v1beta2")
    assert "cohortName" in new["spec"] and "cohort" in old["spec"]
    one = build_snapshot([Document("a", old)]).cluster_queues["a"]
    two = build_snapshot([Document("b", new)]).cluster_queues["a"]
    assert one == two and one.cohort == "eng"
    assert build_snapshot([Document("c", cohort("eng", parent="org"))]).cohorts["eng"].parent == "org"


@pytest.mark.parametrize("obj,field,words", [
    (pod("p", cpu="lots"), "spec.containers[0].resources.requests.cpu", "not a quantity"),
    (pod("p", cpu="-1"), "spec.containers[0].resources.requests.cpu", "negative"),
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {}}, "metadata.name", "required"),
    (local_queue("cq", name=""), "metadata.name", "required"),
    ({**local_queue("cq"), "spec": {}}, "spec.clusterQueue", "required"),
    ({**cluster_queue("cq", {"f": {"cpu": 1}}), "spec": {"queueingStrategy": "Random"}}, "spec.queueingStrategy", "StrictFIFO"),
    ({**cluster_queue("cq"), "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": "f", "resources": [{"name": "memory", "nominalQuota": 1}]}]}]}},
     "spec.resourceGroups[0].flavors[0].resources[0].name", "coveredResources"),
    # Kueue keys a group's flavors by name: two quotas for one flavor and resource cannot be told apart.
    ({**cluster_queue("cq"), "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": "f", "resources": [{"name": "cpu", "nominalQuota": 1}]},
        {"name": "f", "resources": [{"name": "cpu", "nominalQuota": 2}]}]}]}},
     "spec.resourceGroups[0].flavors[1].name", "listed twice"),
    ({"apiVersion": "kueue.x-k8s.io/v1alpha9", "kind": "ClusterQueue", "metadata": {"name": "x"}}, "apiVersion", "v1beta1"),
    (cluster_queue("cq", preemption={"withinClusterQueue": "Always"}), "spec.preemption.withinClusterQueue",
     "LowerOrNewerEqualPriority"),
])
def test_malformed_objects_name_file_object_and_field(obj, field, words):
    with pytest.raises(SnapshotError) as err:
        build_snapshot([Document("cluster.yaml#3", obj)])
    message = str(err.value)
    assert "cluster.yaml#3" in message and field in message and words in message


def test_invalid_yaml_names_the_file(tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("kind: [unclosed\n")
    with pytest.raises(SnapshotError, match="broken.yaml"):
        read_documents([str(bad)])


def test_effective_pod_request_follows_kubernetes():
    body = pod("p", cpu=None)
    body["spec"]["containers"] = [
        {"name": "a", "resources": {"requests": {"cpu": "1"}}},
        {"name": "b", "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}},  # limit stands in for request
    ]
    body["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "3"}}}]
    body["spec"]["overhead"] = {"cpu": "100m"}
    p = build_snapshot([Document("p", body)]).pods["default/p"]
    assert str(p.requests["cpu"]) == "31/10"  # max(1.5, 3) + 0.1
    assert p.requests["memory"] == 2**30


def test_snapshot_digest_is_stable_and_content_sensitive():
    a = build_snapshot([Document("a", pod("p"))])
    b = build_snapshot([Document("elsewhere", pod("p"))])
    c = build_snapshot([Document("a", pod("p", cpu="2"))])
    assert a.digest() != c.digest()
    assert a.digest() == build_snapshot([Document("a", pod("p"))]).digest()
    assert b.pods == a.pods


def test_newer_fungibility_names_load_as_the_older_ones():
    body = cluster_queue("cq", {"f": {"cpu": 1}})
    body["spec"]["flavorFungibility"] = {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}
    cq = build_snapshot([Document("a", body)]).cluster_queues["cq"]
    assert (cq.when_can_borrow, cq.when_can_preempt) == ("Borrow", "Preempt")
    body["spec"]["flavorFungibility"] = {"whenCanBorrow": "Sometimes"}
    with pytest.raises(SnapshotError, match="spec.flavorFungibility.whenCanBorrow"):
        build_snapshot([Document("a", body)])


def test_preemption_settings_are_read():
    cq = cluster_queue("cq", preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                                         "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 7}})
    snap = build_snapshot([Document("q.yaml#1", cq)])
    read = snap.cluster_queues["cq"]
    assert (read.within_cluster_queue, read.reclaim_within_cohort) == ("LowerPriority", "Any")
    assert (read.borrow_within_cohort, read.borrow_max_priority) == ("LowerPriority", 7)
    assert snap.notices == ()


def test_preempting_while_borrowing_without_reclaiming_is_refused():
    # Kueue's API refuses it as well: borrowWithinCohort builds on reclaimWithinCohort.
    cq = cluster_queue("cq", preemption={"borrowWithinCohort": {"policy": "LowerPriority"}})
    with pytest.raises(SnapshotError, match=r"q.yaml#1.*ClusterQueue cq.*spec.preemption.borrowWithinCohort.policy.*"
                                            r"reclaimWithinCohort other than Never"):
        build_snapshot([Document("q.yaml#1", cq)])
    cq["spec"]["preemption"] = {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "Sometimes"}}
    with pytest.raises(SnapshotError, match="spec.preemption.borrowWithinCohort.policy"):
        build_snapshot([Document("q.yaml#1", cq)])




def test_two_objects_of_the_same_kind_and_name_are_an_error_naming_both_files(tmp_path):
    (tmp_path / "a.yaml").write_text(json.dumps(local_queue("cq")))
    (tmp_path / "b.yaml").write_text(json.dumps(local_queue("other")))
    with pytest.raises(SnapshotError) as err:
        load_snapshot([str(tmp_path)])
    message = str(err.value)
    assert "a.yaml#1" in message and "b.yaml#1" in message and "LocalQueue default/main" in message


def test_the_same_name_in_two_namespaces_or_two_kinds_is_no_duplicate():
    snap = build_snapshot([Document("a", local_queue("cq", ns="x")), Document("b", local_queue("cq", ns="y")),
                           Document("c", pod("main"))])
    assert set(snap.local_queues) == {"x/main", "y/main"}


def test_an_empty_snapshot_gives_a_notice():
    assert build_snapshot([]).notices == ("the snapshot holds no objects clueue reads",)
    skipped = build_snapshot([Document("d#1", {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}})])
    assert skipped.notices[-1] == "the snapshot holds no objects clueue reads"
    assert build_snapshot([Document("a", local_queue("cq"))]).notices == ()
