"""What Kueue's users see through kubectl against clueue, on a real kube-apiserver (issue 34):
the Events ``kubectl describe`` lists, the columns ``kubectl get`` prints."""

from __future__ import annotations

from kubernetes import client

from clueue.adapters.kube import apply_plan
# a control plane of this module's own, so that its cycles see only its objects
from tests.e2e.controller_harness import api, cluster  # noqa: F401 - this module's fixtures
from tests.e2e.test_adapter import create, cycle, gated_pod, queue_setup, tag, workload_object


def described_events(api, obj):
    """The Events ``kubectl describe`` shows for ``obj``: it selects them by the object's name,
    namespace, kind and uid (k8s.io/kubectl describe's searchEvents)."""
    meta = obj["metadata"]
    selector = (f"involvedObject.name={meta['name']},involvedObject.namespace={meta['namespace']},"
                f"involvedObject.kind={obj['kind']},involvedObject.uid={meta['uid']}")
    return client.CoreV1Api(api).list_namespaced_event(meta["namespace"], field_selector=selector).items


def test_kubectl_describe_finds_the_events_of_an_admitted_workload_and_its_pod(api):
    ns = queue_setup(api, tag(), nominal=4)
    create(api, gated_pod(ns, "solo", cpu="1"))
    assert not apply_plan(api, cycle(api)).errors
    workload = workload_object(api, ns, "pod-solo")
    told = [(e.type, e.reason) for e in described_events(api, workload)]
    # as Kueue's scheduler records an admission without admission checks: both, once each
    assert sorted(told) == [("Normal", "Admitted"), ("Normal", "QuotaReserved")], told
    cq = workload["status"]["admission"]["clusterQueue"]
    messages = {e.reason: e.message for e in described_events(api, workload)}
    assert messages["QuotaReserved"].startswith(f"Quota reserved in ClusterQueue {cq}")
    assert messages["Admitted"] == f"Admitted by ClusterQueue {cq}"
    ref = described_events(api, workload)[0].involved_object
    assert ref.api_version.startswith("kueue.x-k8s.io/v1beta") and ref.resource_version

    pod = client.CoreV1Api(api).read_namespaced_pod("solo", ns).to_dict()
    pod = {"kind": "Pod", "metadata": {"name": "solo", "namespace": ns, "uid": pod["metadata"]["uid"]}}
    assert [e.reason for e in described_events(api, pod)] == ["Admitted"]

    # the next cycle, with nothing new, tells nothing new
    assert not apply_plan(api, cycle(api)).errors
    assert len(described_events(api, workload)) == 2


def test_kubectl_describe_finds_why_a_workload_waits(api):
    ns = queue_setup(api, tag(), nominal=1)
    create(api, gated_pod(ns, "first", cpu="1"))
    assert not apply_plan(api, cycle(api)).errors
    create(api, gated_pod(ns, "second", cpu="1"))
    assert not apply_plan(api, cycle(api)).errors
    told = described_events(api, workload_object(api, ns, "pod-second"))
    assert [(e.type, e.reason) for e in told] == [("Normal", "Pending")] and "short" in told[0].message, \
        [e.message for e in told]
    told = described_events(api, workload_object(api, ns, "pod-first"))
    assert sorted(e.reason for e in told) == ["Admitted", "QuotaReserved"]  # no news for it in the second cycle


def test_kubectl_describe_finds_why_a_workload_is_inadmissible(api):
    ns = queue_setup(api, tag(), nominal=1)
    create(api, gated_pod(ns, "big", cpu="3"))
    assert not apply_plan(api, cycle(api)).errors
    told = described_events(api, workload_object(api, ns, "pod-big"))
    assert [(e.type, e.reason) for e in told] == [("Warning", "Inadmissible")], [e.message for e in told]


def test_a_drained_groups_workload_is_kept_while_its_pods_terminate(api):
    # Issue 34: `kueuectl stop clusterqueue` (HoldAndDrain) evicted a pod group and clueue deleted
    # its Workload a second later, while its pods were still terminating. KEP-976 keeps it, for
    # the replacement pods; it goes with its pods, by the garbage collector.
    t = tag()
    ns = queue_setup(api, t, nominal=4)
    for i in range(2):
        create(api, gated_pod(ns, f"gang-{i}", cpu="1", group="gang", total=2))
    assert not apply_plan(api, cycle(api)).errors
    core = client.CoreV1Api(api)
    for i in range(2):  # bound to a node, as the scheduler would: deleting it then waits for a kubelet
        if not core.read_namespaced_pod(f"gang-{i}", ns).spec.node_name:
            core.create_namespaced_pod_binding(f"gang-{i}", ns, client.V1Binding(
                metadata=client.V1ObjectMeta(name=f"gang-{i}"),
                target=client.V1ObjectReference(kind="Node", name="node-that-never-answers")),
                _preload_content=False)  # the answer is a Status, which the typed client cannot read
    objects = client.CustomObjectsApi(api)
    objects.patch_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues", f"cq-{t}",
                                        {"spec": {"stopPolicy": "HoldAndDrain"}})
    drained = apply_plan(api, cycle(api))
    assert not drained.errors and f"preempt Workload {ns}/gang" in drained.writes, drained.writes
    assert all(core.read_namespaced_pod(f"gang-{i}", ns).metadata.deletion_timestamp for i in range(2))
    for _ in range(2):  # the cycles while its pods terminate
        result = apply_plan(api, cycle(api))
        assert not result.errors and f"delete Workload {ns}/gang" not in " ".join(result.writes), result.writes
    gang = workload_object(api, ns, "gang")
    assert not gang["status"].get("admission") and not gang["metadata"].get("deletionTimestamp")
