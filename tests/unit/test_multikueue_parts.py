"""MultiKueue's pure parts: settings, the check's condition, rejections, copies and orphans."""

from __future__ import annotations

import doctest

import pytest

from clueue.adapters.multikueue import api, checks, clusters, gc, pods, workloads
from clueue.adapters.multikueue.checks import check_condition
from clueue.adapters.multikueue.clusters import kubeconfig_source
from clueue.adapters.multikueue.gc import orphans
from clueue.adapters.multikueue.workloads import rejection, remote_copy
from clueue.adapters.files import parse_config
from clueue.engine import Document, SnapshotError
from clueue.engine.config import MultiKueue


@pytest.mark.parametrize("module", [api, checks, clusters, gc, pods, workloads])
def test_doctests(module: object) -> None:
    assert doctest.testmod(module).failed == 0  # type: ignore[arg-type]


def _settings(section: object) -> MultiKueue:
    body = {"apiVersion": "clueue.dev/v1", "kind": "Configuration", "metadata": {"name": "c"}}
    return parse_config(Document("config.yaml", body if section is None else {**body, "multiKueue": section})).multikueue


def test_settings_take_kueue_durations_and_defaults() -> None:
    assert _settings(None) == MultiKueue()
    parsed = _settings({"gcInterval": "1m30s", "workerLostTimeout": "500ms", "origin": "eu-1",
                        "dispatcherName": "acme.io/mine", "syncPeriod": 1})
    assert (parsed.gc_interval, parsed.worker_lost_timeout, parsed.origin, parsed.dispatcher_name,
            parsed.sync_period) == (90.0, 0.5, "eu-1", "acme.io/mine", 1.0)
    assert _settings({"gcInterval": "0"}).gc_interval == 0.0


@pytest.mark.parametrize("section, field", [
    ({"gcInterval": "soon"}, "multiKueue.gcInterval"),
    ({"origin": "not a label!"}, "multiKueue.origin"),
    ({"dispatcherName": "nodomain"}, "multiKueue.dispatcherName"),
    ({"syncPeriod": 0}, "multiKueue.syncPeriod"),
])
def test_bad_settings_name_the_field(section: dict[str, object], field: str) -> None:
    with pytest.raises(SnapshotError, match=field):
        _settings(section)


def _check(config: str = "cfg") -> dict[str, object]:
    return {"spec": {"controllerName": api.CONTROLLER_NAME,
                     "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": config}}}


def _cluster(active: str) -> dict[str, object]:
    return {"status": {"conditions": [{"type": "Active", "status": active}]}}


def test_check_condition_follows_kueue() -> None:
    configs = {"cfg": {"spec": {"clusters": ["a", "b", "c"]}}}
    assert check_condition(_check(), configs, {"a": _cluster("True"), "b": _cluster("True"), "c": _cluster("True")}) \
        == ("True", "Active", "The admission check is active", ("a", "b", "c"))
    assert check_condition(_check(), configs, {"a": _cluster("True"), "b": _cluster("False")})[:3] == \
        ("True", "SomeActiveClusters", "Missing clusters: [c], Inactive clusters: [b]")
    assert check_condition(_check(), configs, {"a": _cluster("False")})[:2] == ("False", "NoUsableClusters")
    assert check_condition(_check("other"), configs, {})[:2] == ("False", "BadConfig")


def test_kubeconfig_source_reads_both_versions() -> None:
    v1beta1 = {"spec": {"kubeConfig": {"location": "s", "locationType": "Secret"}}}
    v1beta2 = {"spec": {"clusterSource": {"kubeConfig": {"location": "/p", "locationType": "Path"}}}}
    assert kubeconfig_source(v1beta1)[0] == {"location": "s", "locationType": "Secret"}
    assert kubeconfig_source(v1beta2)[0] == {"location": "/p", "locationType": "Path"}
    assert "clusterProfileRef" in kubeconfig_source({"spec": {"clusterSource": {"clusterProfileRef": {"name": "x"}}}})[1]


def test_rejections() -> None:
    assert rejection({"spec": {}}) == ""
    assert "no GPUs" in rejection({"status": {"admissionChecks": [{"name": "p", "state": "Rejected",
                                                                   "message": "no GPUs"}]}})
    assert rejection({"spec": {"active": False}}) == "it was deactivated"


def test_a_copy_is_labelled_and_carries_no_status() -> None:
    wl = {"metadata": {"name": "j", "namespace": "ns", "uid": "u1", "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                       "ownerReferences": [{"name": "o"}], "resourceVersion": "7"},
          "spec": {"queueName": "lq"}, "status": {"conditions": []}}
    copy = remote_copy(wl, "eu")
    assert copy["metadata"] == {"name": "j", "namespace": "ns",
                                "labels": {"kueue.x-k8s.io/queue-name": "lq", api.ORIGIN_LABEL: "eu"},
                                "annotations": {api.ORIGIN_UID_ANNOTATION: "u1"}}
    assert "status" not in copy and copy["spec"] == {"queueName": "lq"}


def test_orphans_are_copies_without_their_workload() -> None:
    mine = {"metadata": {"name": "a", "namespace": "ns", "annotations": {api.ORIGIN_UID_ANNOTATION: "u1"}}}
    older = {"metadata": {"name": "b", "namespace": "ns", "annotations": {api.ORIGIN_UID_ANNOTATION: "old"}}}
    workloads = {"ns/a": {"metadata": {"uid": "u1"}}, "ns/b": {"metadata": {"uid": "new"}}}
    assert orphans(workloads, {"w": {"ns/a": mine, "ns/b": older}}) == [("w", older)]
