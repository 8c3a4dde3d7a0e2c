"""The Kubernetes adapter against a real kube-apiserver: read, snapshot, apply, watch."""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from kubernetes import client

from clueue.adapters.cli import main
from clueue.adapters.kube import ClusterCache, apply_plan, read_cluster
from clueue.adapters.kube.apply import GATE
from clueue.adapters.kube.retry import update_with_retry
from clueue.engine import load_policy, run_cycle
# a control plane of this module's own, so that its cycles see only its objects
from tests.e2e.controller_harness import api, cluster  # noqa: F401 - this module's fixtures

KUEUE = "kueue.x-k8s.io/v1beta1"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cluster"


def create(api, body):
    """Create any object clueue reads, as `kubectl create` would."""
    kind, ns = body["kind"], body["metadata"].get("namespace")
    if body["apiVersion"].startswith("kueue.x-k8s.io/"):
        group, version = body["apiVersion"].split("/")
        plural = {"ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues",
                  "Cohort": "cohorts", "WorkloadPriorityClass": "workloadpriorityclasses", "Workload": "workloads",
                      "Topology": "topologies"}[kind]
        objects = client.CustomObjectsApi(api)
        if ns:
            return objects.create_namespaced_custom_object(group, version, ns, plural, body)
        return objects.create_cluster_custom_object(group, version, plural, body)
    if kind == "Namespace":
        return client.CoreV1Api(api).create_namespace(body)
    if kind == "Pod":
        return client.CoreV1Api(api).create_namespaced_pod(ns, body)
    if kind == "PriorityClass":
        return client.SchedulingV1Api(api).create_priority_class(body)
    raise AssertionError(kind)


def queue_setup(api, tag, nominal=4, namespace=None, *, quotas=None, topology=None):
    """A namespace (``ns-<tag>`` unless named), a flavor ``fl-<tag>`` selecting the nodes of
    ``pool: pool-<tag>`` (and of the Topology ``topology``, if named), a ClusterQueue ``cq-<tag>``
    with ``nominal`` cpu of it (or the nominal quota of each resource in ``quotas``) and a
    LocalQueue ``main`` of it. Returns the namespace."""
    ns = namespace or f"ns-{tag}"
    quotas = quotas or {"cpu": nominal}
    create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    create(api, {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": f"fl-{tag}"},
                 "spec": {"nodeLabels": {"pool": f"pool-{tag}"}, **({"topologyName": topology} if topology else {})}})
    create(api, {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": f"cq-{tag}"}, "spec": {
        "namespaceSelector": {}, "resourceGroups": [{"coveredResources": list(quotas), "flavors": [
            {"name": f"fl-{tag}", "resources": [{"name": r, "nominalQuota": q} for r, q in quotas.items()]}]}]}})
    create(api, {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "main", "namespace": ns},
                 "spec": {"clusterQueue": f"cq-{tag}"}})
    return ns


def gated_pod(ns, name, cpu="1", group=None, total=None):
    labels = {"kueue.x-k8s.io/queue-name": "main", "kueue.x-k8s.io/managed": "true"}
    annotations = {}
    if group:
        labels["kueue.x-k8s.io/pod-group-name"] = group
        annotations["kueue.x-k8s.io/pod-group-total-count"] = str(total)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels, "annotations": annotations,
                         "finalizers": ["kueue.x-k8s.io/managed"]},
            "spec": {"schedulingGates": [{"name": GATE}],
                     "containers": [{"name": "main", "image": "registry.example/app:1",
                                     "resources": {"requests": {"cpu": cpu}}}]}}


def cycle(api):
    return run_cycle(read_cluster(api), load_policy())


def workload_object(api, ns, name):
    return client.CustomObjectsApi(api).get_namespaced_custom_object("kueue.x-k8s.io", "v1beta1", ns, "workloads", name)


def tag():
    return uuid.uuid4().hex[:6]


def test_a_saved_snapshot_replays_the_live_plan(cluster, api, tmp_path):
    for path in sorted(EXAMPLE.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            for body in doc.get("items", [doc]):
                body.get("metadata", {}).pop("creationTimestamp", None)
                body.pop("status", None)
                create(api, body)
    runner = CliRunner()
    live = runner.invoke(main, ["plan", "--kubeconfig", str(cluster.kubeconfig), "-o", "json"])
    saved = runner.invoke(main, ["snapshot", "--kubeconfig", str(cluster.kubeconfig)])
    assert live.exit_code == 0 and saved.exit_code == 0, live.output + saved.output
    (tmp_path / "snap.yaml").write_text(saved.output)
    offline = runner.invoke(main, ["plan", str(tmp_path / "snap.yaml"), "-o", "json"])
    live_plan, offline_plan = json.loads(live.output), json.loads(offline.output)
    assert live_plan["metadata"]["snapshotDigest"] == offline_plan["metadata"]["snapshotDigest"]
    assert live_plan["workloads"] == offline_plan["workloads"]
    assert {w["name"]: w["state"] for w in live_plan["workloads"]}["team-a/train-resnet"] == "admitted"


def test_live_objects_load_like_the_files(api):
    files = {}
    for path in sorted(EXAMPLE.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            for body in doc.get("items", [doc]):
                files[(body["kind"], body["metadata"].get("namespace"), body["metadata"]["name"])] = body
    from clueue.adapters.files import load_snapshot
    from_files = load_snapshot([str(EXAMPLE)])
    live = read_cluster(api)  # the previous test created the example's objects
    for attr in ("flavors", "cluster_queues", "cohorts", "local_queues", "workload_priority_classes", "priority_classes"):
        for key, obj in getattr(from_files, attr).items():
            assert getattr(live, attr)[key] == obj, (attr, key)
    for key, pod in from_files.pods.items():
        got = live.pods[key]
        assert (got.labels, got.annotations, got.requests, got.scheduling_gates, got.node_selector) == \
               (pod.labels, pod.annotations, pod.requests, pod.scheduling_gates, pod.node_selector), key
    for key, ns in from_files.namespaces.items():
        assert ns.labels.items() <= live.namespaces[key].labels.items()
    assert files  # the example is not empty


def test_apply_admits_ungates_and_records(api):
    t = tag()
    ns = queue_setup(api, t, nominal=4)
    create(api, gated_pod(ns, "solo", cpu="1"))
    for i in range(2):
        create(api, gated_pod(ns, f"gang-{i}", cpu="1", group="gang", total=2))
    create(api, gated_pod(ns, "too-big", cpu="3"))

    result = apply_plan(api, cycle(api))
    assert not result.errors, result.errors
    core = client.CoreV1Api(api)
    for name in ("solo", "gang-0", "gang-1"):
        pod = core.read_namespaced_pod(name, ns)
        assert not pod.spec.scheduling_gates and pod.spec.node_selector == {"pool": f"pool-{t}"}, name
    assert core.read_namespaced_pod("too-big", ns).spec.scheduling_gates[0].name == GATE

    gang = workload_object(api, ns, "gang")
    assert sorted(o["name"] for o in gang["metadata"]["ownerReferences"]) == ["gang-0", "gang-1"]
    admitted = gang["status"]
    assert admitted["admission"]["clusterQueue"] == f"cq-{t}"
    assert admitted["admission"]["podSetAssignments"][0]["count"] == 2
    assert {c["type"]: c["status"] for c in admitted["conditions"]} == {"Admitted": "True", "QuotaReserved": "True"}
    pending = workload_object(api, ns, "pod-too-big")["status"]
    assert "admission" not in pending
    reserved = next(c for c in pending["conditions"] if c["type"] == "QuotaReserved")
    assert reserved["status"] == "False" and reserved["reason"] == "Pending" and "short" in reserved["message"]
    events = core.list_namespaced_event(ns).items
    assert {("Workload", "gang", "Admitted"), ("Pod", "solo", "Admitted"), ("Workload", "pod-too-big", "Pending")} <= \
           {(e.involved_object.kind, e.involved_object.name, e.reason) for e in events}


def _admitted_gang(api, *, cpu):
    """A namespace with 4 cpu of quota and the pod group ``gang`` of two pods, applied: admitted."""
    ns = queue_setup(api, tag(), nominal=4)
    for i in range(2):
        create(api, gated_pod(ns, f"gang-{i}", cpu=cpu, group="gang", total=2))
    assert not apply_plan(api, cycle(api)).errors
    return ns


def test_an_ungated_group_keeps_holding_its_quota(api):
    # Ungating adds the flavor's node labels to pods whose role hash covers their nodeSelector:
    # the group must still be counted against its admitted pod set afterwards.
    ns = _admitted_gang(api, cpu="2")
    core = client.CoreV1Api(api)
    pod_set = workload_object(api, ns, "gang")["status"]["admission"]["podSetAssignments"][0]["name"]
    for i in range(2):
        pod = core.read_namespaced_pod(f"gang-{i}", ns)
        assert not pod.spec.scheduling_gates and pod.metadata.annotations["kueue.x-k8s.io/role-hash"] == pod_set

    create(api, gated_pod(ns, "late", cpu="1"))
    result = apply_plan(api, cycle(api))
    assert f"ungate Pod {ns}/late" not in result.writes
    assert core.read_namespaced_pod("late", ns).spec.scheduling_gates[0].name == GATE


def test_applying_twice_changes_nothing(api):
    ns = queue_setup(api, tag(), nominal=2)
    create(api, gated_pod(ns, "a"))
    create(api, gated_pod(ns, "b", cpu="5"))
    create(api, gated_pod(ns, "c", cpu="1"))
    create(api, gated_pod(ns, "d", cpu="2"))  # waits behind a and c, admitted in the same cycle
    first = apply_plan(api, cycle(api))
    assert any(w.endswith(f"{ns}/a") for w in first.writes)
    pending = next(c for c in workload_object(api, ns, "pod-d")["status"]["conditions"] if c["type"] == "QuotaReserved")
    assert "waits behind" in pending["message"]
    # The second cycle sees a and c admitted before it: d no longer "waits behind" them, but its
    # reasons and their numbers are the same, so its status is not rewritten.
    second = apply_plan(api, cycle(api))
    assert [w for w in second.writes if ns in w] == [] and not second.errors


def test_a_pending_status_is_rewritten_when_its_numbers_change(api):
    ns = queue_setup(api, tag(), nominal=4)
    create(api, gated_pod(ns, "x", cpu="3"))
    create(api, gated_pod(ns, "y", cpu="3"))
    assert not apply_plan(api, cycle(api)).errors
    waiting = next(n for n in ("pod-x", "pod-y") if "admission" not in workload_object(api, ns, n)["status"])
    before = next(c for c in workload_object(api, ns, waiting)["status"]["conditions"] if c["type"] == "QuotaReserved")
    create(api, gated_pod(ns, "z", cpu="1"))  # takes the 1 cpu left: the waiting one is then 3 short, not 2
    # (in the cycle that admits z, ranked after it, what z takes still counts as given back: 2 short)
    assert not apply_plan(api, cycle(api)).errors
    assert f"status Workload {ns}/{waiting}" in apply_plan(api, cycle(api)).writes
    after = next(c for c in workload_object(api, ns, waiting)["status"]["conditions"] if c["type"] == "QuotaReserved")
    assert "2 short" in before["message"] and "3 short" in after["message"]


def test_a_pod_groups_workload_is_made_only_once_all_its_pods_are_there(api):
    # KEP-976: "We can only build the Workload object once we observe the number of Pods defined
    # by the pod-group-total-count annotation": 2 of 3 pods make no Workload, nor a pending one.
    ns = queue_setup(api, tag(), nominal=4)
    for i in range(2):
        create(api, gated_pod(ns, f"gang-{i}", cpu="1", group="gang", total=3))
    result = apply_plan(api, cycle(api))
    assert not result.errors and not [w for w in result.writes if ns in w], result.writes
    with pytest.raises(client.ApiException) as missing:
        workload_object(api, ns, "gang")
    assert missing.value.status == 404
    create(api, gated_pod(ns, "gang-2", cpu="1", group="gang", total=3))
    result = apply_plan(api, cycle(api))
    assert not result.errors and f"create Workload {ns}/gang" in result.writes, result.writes
    assert not [w for w in result.writes if w.startswith("delete Workload")], result.writes
    gang = workload_object(api, ns, "gang")
    assert [p["count"] for p in gang["spec"]["podSets"]] == [3]
    assert [(a["count"], a["resourceUsage"]) for a in gang["status"]["admission"]["podSetAssignments"]] == \
        [(3, {"cpu": "3"})]
    assert sorted(o["name"] for o in gang["metadata"]["ownerReferences"]) == ["gang-0", "gang-1", "gang-2"]
    assert [w for w in apply_plan(api, cycle(api)).writes if ns in w] == []


def test_pods_that_disagree_on_their_group_count_make_no_workload_and_are_told_once(api):
    from clueue.adapters.kube.apply import SentWarnings
    ns = queue_setup(api, tag(), nominal=4)
    create(api, gated_pod(ns, "mm-0", group="mm", total=2))
    create(api, gated_pod(ns, "mm-1", group="mm", total=3))
    warned = SentWarnings()
    assert not apply_plan(api, cycle(api), warned=warned).errors
    assert not apply_plan(api, cycle(api), warned=warned).errors  # told once, not every cycle
    with pytest.raises(client.ApiException) as missing:
        workload_object(api, ns, "mm")
    assert missing.value.status == 404
    events = client.CoreV1Api(api).list_namespaced_event(ns).items
    told = sorted((e.involved_object.kind, e.involved_object.name, e.type, e.reason) for e in events)
    assert told == [("Pod", "mm-0", "Warning", "ErrWorkloadCompose"), ("Pod", "mm-1", "Warning", "ErrWorkloadCompose")]
    assert all("pod-group-total-count" in e.message or "count" in e.message for e in events), [e.message for e in events]


def test_an_admitted_workload_gets_owner_references_for_all_its_pods(api):
    ns = _admitted_gang(api, cpu="1")
    objects = client.CustomObjectsApi(api)
    gang = workload_object(api, ns, "gang")
    gang["metadata"]["ownerReferences"] = gang["metadata"]["ownerReferences"][:1]  # as an older clueue left it
    objects.replace_namespaced_custom_object("kueue.x-k8s.io", "v1beta1", ns, "workloads", "gang", gang)
    result = apply_plan(api, cycle(api))
    assert f"own Workload {ns}/gang: owner references added for its pods" in result.writes and not result.errors
    gang = workload_object(api, ns, "gang")
    assert sorted(o["name"] for o in gang["metadata"]["ownerReferences"]) == ["gang-0", "gang-1"]
    assert gang["status"]["admission"]  # kept: it holds its quota


def test_excess_pods_are_deleted_youngest_first(api):
    ns = queue_setup(api, tag(), nominal=4)
    create(api, gated_pod(ns, "g-old-0", group="g", total=2))
    create(api, gated_pod(ns, "g-old-1", group="g", total=2))
    time.sleep(1.1)  # creation timestamps have one-second resolution
    create(api, gated_pod(ns, "g-young", group="g", total=2))
    result = apply_plan(api, cycle(api))
    assert f"delete Pod {ns}/g-young" in result.writes
    names = {p.metadata.name for p in client.CoreV1Api(api).list_namespaced_pod(ns).items}
    assert names == {"g-old-0", "g-old-1"}


def test_dry_run_changes_nothing(api):
    ns = queue_setup(api, tag())
    create(api, gated_pod(ns, "p"))
    result = apply_plan(api, cycle(api), dry_run=True)
    assert any(w.endswith(f"{ns}/p") for w in result.writes)
    assert client.CoreV1Api(api).read_namespaced_pod("p", ns).spec.scheduling_gates
    with pytest.raises(client.ApiException) as missing:
        workload_object(api, ns, "pod-p")
    assert missing.value.status == 404


def test_a_pod_is_never_ungated_without_a_recorded_admission(api):
    ns = queue_setup(api, tag(), nominal=1)
    create(api, gated_pod(ns, "waiting", cpu="2"))
    plan = cycle(api)
    from dataclasses import replace
    from clueue.engine import Action
    forged = replace(plan, actions=plan.actions + (Action("ungate", f"{ns}/waiting", f"{ns}/pod-waiting",
                                                          {"uid": "", "nodeSelector": {}}),))
    result = apply_plan(api, forged)
    assert any("left gated" in e for e in result.errors)
    assert client.CoreV1Api(api).read_namespaced_pod("waiting", ns).spec.scheduling_gates


def test_a_conflicting_update_is_read_again_and_retried(api):
    ns = queue_setup(api, tag())
    create(api, gated_pod(ns, "p"))
    core = client.CoreV1Api(api)
    reads = []

    def read():
        pod = core.read_namespaced_pod("p", ns)
        reads.append(pod.metadata.resource_version)
        if len(reads) == 1:  # someone else changes the pod after our read
            core.patch_namespaced_pod("p", ns, {"metadata": {"labels": {"touched": "yes"}}})
        return pod

    def change(pod):
        pod.metadata.annotations = {**(pod.metadata.annotations or {}), "clueue.dev/seen": "yes"}
        return pod

    assert update_with_retry(read, change, lambda pod: core.replace_namespaced_pod("p", ns, pod))
    pod = core.read_namespaced_pod("p", ns)
    assert len(reads) == 2 and reads[0] != reads[1]
    assert pod.metadata.labels["touched"] == "yes" and pod.metadata.annotations["clueue.dev/seen"] == "yes"


def test_the_watch_cache_follows_the_cluster(api):
    cache = ClusterCache(api, watch_seconds=5).start()
    try:
        assert cache.wait_synced(30)
        ns = queue_setup(api, tag())
        cache.changed.clear()
        create(api, gated_pod(ns, "watched"))
        deadline = time.monotonic() + 30
        while f"{ns}/watched" not in cache.snapshot().pods and time.monotonic() < deadline:
            cache.changed.wait(1)
            cache.changed.clear()
        assert f"{ns}/watched" in cache.snapshot().pods
        client.CoreV1Api(api).patch_namespaced_pod("watched", ns, {"metadata": {"finalizers": None}})
        client.CoreV1Api(api).delete_namespaced_pod("watched", ns, grace_period_seconds=0)
        deadline = time.monotonic() + 30
        while f"{ns}/watched" in cache.snapshot().pods and time.monotonic() < deadline:
            time.sleep(0.2)
        assert f"{ns}/watched" not in cache.snapshot().pods
        assert cache.snapshot().local_queues[f"{ns}/main"].cluster_queue.startswith("cq-")
    finally:
        stopper = threading.Thread(target=cache.stop, daemon=True)
        stopper.start()


def test_dry_run_of_a_waiting_workload_that_now_fits_would_ungate_it(api):
    ns = queue_setup(api, tag(), nominal=1)
    create(api, gated_pod(ns, "p", cpu="2"))
    assert not apply_plan(api, cycle(api)).errors  # its Workload exists, pending
    objects = client.CustomObjectsApi(api)
    cq = objects.get_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues", f"cq-{ns[3:]}")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 2
    objects.replace_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues", f"cq-{ns[3:]}", cq)
    result = apply_plan(api, cycle(api), dry_run=True)
    assert f"ungate Pod {ns}/p" in result.writes and not result.errors, result
    assert client.CoreV1Api(api).read_namespaced_pod("p", ns).spec.scheduling_gates


def test_normal_events_beyond_the_event_limit_are_dropped_and_counted_warnings_never(api):
    from clueue.adapters.kube.pacing import PendingWriteLimiter
    ns = queue_setup(api, tag(), nominal=4)
    for i in range(3):
        create(api, gated_pod(ns, f"p{i}"))
    create(api, gated_pod(ns, "bad-0", group="bad", total=2))
    create(api, gated_pod(ns, "bad-1", group="bad", total=3))
    # 3 admissions make 6 Normal Events (Workload and pod; more if other tests' objects are
    # decided too); a budget of 1 sends one of them
    result = apply_plan(api, cycle(api), events=PendingWriteLimiter(rate=1e-6, burst=1))
    assert not result.errors and result.events_dropped >= 5, result.summary()
    assert f"{result.events_dropped} Events over the Event limit not sent" in result.summary()
    types = [e.type for e in client.CoreV1Api(api).list_namespaced_event(ns).items]
    assert types.count("Warning") == 2 and types.count("Normal") <= 1, types
