"""PodGroup objects in a snapshot: every field type-checked, errors naming object and field,
left out (and listed) in a lenient snapshot."""

from __future__ import annotations

from typing import Any

import pytest

from clueue.engine import Document, SnapshotError, build_snapshot
from clueue.engine.podgroups import rfc3339

API = "scheduling.x-k8s.io/v1alpha1"


def podgroup(spec: dict[str, Any], *, api: str = API, **meta: Any) -> Document:
    return Document("pg.yaml#1", {"apiVersion": api, "kind": "PodGroup",
                                  "metadata": {"name": "mpi", "namespace": "team", **meta}, "spec": spec})


def test_a_podgroup_is_read_with_every_field():
    doc = podgroup({"minMember": 4, "minResources": {"cpu": "16", "nvidia.com/gpu": 4}, "scheduleTimeoutSeconds": 120},
                   uid="u1", creationTimestamp="2026-01-05T12:00:00Z", labels={"kueue.x-k8s.io/queue-name": "main"},
                   annotations={"clueue.dev/requeues": "2", "clueue.dev/backoff-until": "1767614460"})
    body = dict(doc.body, status={"phase": "Scheduling", "scheduleStartTime": "2026-01-05T12:00:00Z"})
    pg = build_snapshot([Document(doc.source, body)]).pod_groups["team/mpi"]
    assert (pg.min_member, pg.schedule_timeout, pg.phase, pg.requeues, pg.backoff_until) == (4, 120, "Scheduling", 2, 1767614460)
    assert {k: str(v) for k, v in pg.min_resources.items()} == {"cpu": "16", "nvidia.com/gpu": "4"}
    assert rfc3339(pg.schedule_start) == "2026-01-05T12:00:00Z" and pg.created == pg.schedule_start


@pytest.mark.parametrize("spec,meta,field", [
    ({"minMember": "4"}, {}, "spec.minMember"),
    ({"minMember": -1}, {}, "spec.minMember"),
    ({"minMember": 2**31}, {}, "spec.minMember"),
    ({"minResources": {"cpu": "lots"}}, {}, "spec.minResources.cpu"),
    ({"minResources": ["cpu"]}, {}, "spec.minResources"),
    ({"scheduleTimeoutSeconds": -5}, {}, "spec.scheduleTimeoutSeconds"),
    ({"scheduleTimeoutSeconds": 1.5}, {}, "spec.scheduleTimeoutSeconds"),
    ({}, {"labels": {"a": 1}}, "metadata.labels.a"),
    ({}, {"annotations": {"clueue.dev/requeues": "many"}}, "metadata.annotations[clueue.dev/requeues]"),
])
def test_a_malformed_field_is_named(spec, meta, field):
    with pytest.raises(SnapshotError) as e:
        build_snapshot([podgroup(spec, **meta)])
    assert e.value.field == field and "PodGroup mpi" in str(e.value)


def test_a_malformed_status_is_named():
    body = dict(podgroup({}).body, status={"phase": 3})
    with pytest.raises(SnapshotError) as e:
        build_snapshot([Document("pg.yaml#1", body)])
    assert e.value.field == "status.phase"


def test_an_unknown_version_is_refused():
    with pytest.raises(SnapshotError) as e:
        build_snapshot([podgroup({}, api="scheduling.x-k8s.io/v1beta9")])
    assert e.value.field == "apiVersion"


def test_a_lenient_snapshot_leaves_a_malformed_podgroup_out():
    snapshot = build_snapshot([podgroup({"minMember": "x"}), podgroup({"minMember": 2}, name="ok")], lenient=True)
    assert list(snapshot.pod_groups) == ["team/ok"]
    assert [(r.kind, r.name, r.field) for r in snapshot.rejected] == [("PodGroup", "mpi", "spec.minMember")]


def test_the_pods_of_a_malformed_podgroup_wait_and_say_why():
    from clueue.engine.workloads import build_workloads
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "p", "namespace": "team", "labels": {"scheduling.x-k8s.io/pod-group": "mpi",
                                                      "kueue.x-k8s.io/queue-name": "main"}},
        "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}], "containers": [{"name": "c"}]}}
    snapshot = build_snapshot([podgroup({"minMember": "x"}), Document("pod.yaml#1", pod)], lenient=True)
    [w] = build_workloads(snapshot).workloads
    assert (w.key, [r.code for r in w.held]) == ("team/podgroup-mpi", ["InvalidObject"])
    assert "spec.minMember" in w.held[0].message


def test_the_e2e_manifest_with_its_status_reads():
    from pathlib import Path

    import yaml
    manifests = Path(__file__).resolve().parents[1] / "e2e" / "manifests"
    body = yaml.safe_load((manifests / "podgroup.yaml").read_text())
    body["status"] = yaml.safe_load((manifests / "podgroup-status.yaml").read_text())
    pg = build_snapshot([Document("podgroup.yaml", body)]).pod_groups["default/mpi-job"]
    assert (pg.min_member, pg.schedule_timeout, pg.phase) == (4, 120, "Running")
    assert rfc3339(pg.schedule_start) == "2026-01-05T12:00:00Z"
