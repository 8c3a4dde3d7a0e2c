"""Objects the API server accepts but clueue cannot use, and Kueue's stop switches, against a
real kube-apiserver: a malformed object is left out with a reason and an Event, everything else
is decided and applied as if it were not there."""

from __future__ import annotations

import pytest
from kubernetes import client

from clueue.adapters.kube import ClusterCache, apply_plan
from clueue.adapters.kube.apply import SentWarnings
# a control plane of this module's own: the malformed objects stay out of other tests' cycles
from tests.e2e.controller_harness import api, cluster  # noqa: F401 - this module's fixtures
from tests.e2e.test_adapter import KUEUE, create, cycle, gated_pod, queue_setup, tag, workload_object


def _events(api, ns):
    return {(e.involved_object.kind, e.involved_object.name, e.reason, e.type): e.message
            for e in client.CoreV1Api(api).list_namespaced_event(ns).items}


def _workload(ns, name, spec_patch=None, containers=None):
    containers = containers or [{"name": "main", "image": "app:1", "resources": {"requests": {"cpu": "1"}}}]
    body = {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": name, "namespace": ns},
            "spec": {"queueName": "main", "podSets": [{"name": "main", "count": 1,
                                                        "template": {"spec": {"containers": containers}}}]}}
    body["spec"].update(spec_patch or {})
    return body


def test_malformed_objects_are_left_out_with_a_reason_and_an_event(api):
    t = tag()
    ns = queue_setup(api, t, nominal=4)
    # The template is kept as written (preserve-unknown-fields): resources may be anything.
    create(api, _workload(ns, "bad", containers=[{"name": "main", "image": "app:1", "resources": "lots"}]))
    # Its resource is not covered, which the CRD's rule (same count) lets through.
    create(api, {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": f"cq-bad-{t}"}, "spec": {
        "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": f"fl-{t}", "resources": [{"name": "memory", "nominalQuota": 4}]}]}]}})
    create(api, {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "broken", "namespace": ns},
                 "spec": {"clusterQueue": f"cq-bad-{t}"}})
    create(api, _workload(ns, "via-broken", {"queueName": "broken"}))
    sets = gated_pod(ns, "driver", group="sets")
    sets["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-sets"] = "[{name: main, count: 1"  # not YAML
    create(api, sets)
    create(api, gated_pod(ns, "good", cpu="4"))

    plan = cycle(api)
    assert {(r.kind, r.name) for r in plan.rejected} >= {("Workload", "bad"), ("ClusterQueue", f"cq-bad-{t}")}
    result = apply_plan(api, plan)
    assert not result.errors, result.errors

    assert not client.CoreV1Api(api).read_namespaced_pod("good", ns).spec.scheduling_gates
    reserved = {c["type"]: c for c in workload_object(api, ns, "bad")["status"]["conditions"]}["QuotaReserved"]
    assert reserved["status"] == "False" and reserved["reason"] == "Inadmissible"
    assert "Workload" in reserved["message"] and "spec.podSets[0].template.spec.containers[0].resources" in reserved["message"]
    events = _events(api, ns)
    assert ("Workload", "bad", "Inadmissible", "Warning") in events
    assert "ClusterQueue cq-bad" in next(c["message"] for c in workload_object(api, ns, "via-broken")["status"]["conditions"]
                                         if c["type"] == "QuotaReserved")
    # a group whose pod-group-sets cannot be read makes no Workload (KEP-976): its pod is told why
    assert "pod-group-sets" in events[("Pod", "driver", "ErrWorkloadCompose", "Warning")]
    with pytest.raises(client.ApiException) as missing:
        workload_object(api, ns, "sets")
    assert missing.value.status == 404
    cq_events = _events(api, "default")
    message = cq_events[("ClusterQueue", f"cq-bad-{t}", "InvalidObject", "Warning")]
    assert "spec.resourceGroups[0].flavors[0].resources[0].name" in message
    # Found as `kubectl describe clusterqueue` finds it: by the object's uid, with no namespace.
    bad_cq = client.CustomObjectsApi(api).get_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues", f"cq-bad-{t}")
    [event] = [e for e in client.CoreV1Api(api).list_namespaced_event("default").items
               if e.involved_object.name == f"cq-bad-{t}"]
    assert (event.involved_object.uid, event.involved_object.namespace) == (bad_cq["metadata"]["uid"], None)

    # A controller tells it once while the fault lasts, not every cycle (it keeps what it told).
    def told_cq() -> list[tuple[str, int]]:
        return sorted((e.metadata.name, e.count or 1) for e in client.CoreV1Api(api).list_namespaced_event("default").items
                      if e.involved_object.name == f"cq-bad-{t}")
    kept = SentWarnings()
    assert not apply_plan(api, plan, warned=kept).errors
    once = told_cq()
    assert once != [(event.metadata.name, event.count or 1)]  # told again: this applier had not told it
    assert not apply_plan(api, cycle(api), warned=kept).errors
    assert told_cq() == once

    cache = ClusterCache(api, watch_seconds=2).start()  # what a controller reads: lenient as well
    try:
        assert cache.wait_synced(30)
        assert {(r.kind, r.name) for r in cache.snapshot().rejected} >= {("Workload", "bad"), ("ClusterQueue", f"cq-bad-{t}")}
    finally:
        cache.stop()


def test_stopped_queues_and_deactivated_workloads(api):
    t = tag()
    ns = queue_setup(api, t, nominal=8)
    core = client.CoreV1Api(api)
    create(api, {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "held", "namespace": ns},
                 "spec": {"clusterQueue": f"cq-{t}", "stopPolicy": "Hold"}})
    create(api, _workload(ns, "on-hold", {"queueName": "held"}))
    create(api, _workload(ns, "off", {"active": False}))
    create(api, gated_pod(ns, "runs"))
    assert not apply_plan(api, cycle(api)).errors
    assert not core.read_namespaced_pod("runs", ns).spec.scheduling_gates
    for name, words in (("on-hold", "is stopped"), ("off", "deactivated")):
        status = workload_object(api, ns, name)["status"]
        assert "admission" not in status and words in status["conditions"][0]["message"], name

    # Draining the pod's queue evicts it: its Workload loses its admission, its pod is deleted.
    objects = client.CustomObjectsApi(api)
    objects.patch_namespaced_custom_object("kueue.x-k8s.io", "v1beta1", ns, "localqueues", "main",
                                           {"spec": {"stopPolicy": "HoldAndDrain"}})
    plan = cycle(api)
    assert {a.target: a.details["reason"]["code"] for a in plan.actions if a.kind == "preempt"} == {
        f"{ns}/pod-runs": "LocalQueueDrained"}
    assert not apply_plan(api, plan).errors
    status = workload_object(api, ns, "pod-runs").get("status", {})
    assert "admission" not in status
    # Recorded with Kueue's reason for an eviction by a stopped LocalQueue, not as a preemption.
    assert {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}["Evicted"] == ("True", "LocalQueueStopped")
    assert ("Workload", "pod-runs", "LocalQueueStopped", "Normal") in _events(api, ns)
    assert core.list_namespaced_pod(ns, field_selector="metadata.name=runs").items == [] or \
        core.read_namespaced_pod("runs", ns).metadata.deletion_timestamp is not None
