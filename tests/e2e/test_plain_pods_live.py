"""The plain-pods lifecycle (KEP-976's integration-test plan) against a real kube-apiserver,
cycle after cycle, through ``decide_and_apply`` as the controller runs it.

Pods are created as the webhook leaves them (gate, managed label, finalizer, role hash); there is
no kubelet, so tests set pod phases through the status subresource, as a kubelet would. Each
test has its own namespace and ClusterQueue, and its cycles decide over them alone (the shared
control plane holds other tests' objects). Covered elsewhere, live: a group queued and admitted,
excess pods before admission (test_adapter.py), preemption deleting every pod of a group
(test_preemption.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from clueue.adapters.kube.apply import FINALIZER, apply_plan
from clueue.adapters.kube.decide import Decided, decide_and_apply
from clueue.adapters.kube.pacing import PendingWriteLimiter
from clueue.adapters.kube.read import read_cluster
from clueue.engine import Plan, Snapshot, load_policy, run_cycle
from clueue.engine.kueue_api import ROLE_HASH_ANNOTATION
from clueue.engine.snapshot import role_hash
from clueue.engine.workloads import WORKLOAD_UID_ANNOTATION
from tests.e2e.test_adapter import KUEUE, create, gated_pod, queue_setup, tag, workload_object
from tests.e2e.test_preemption import preempting_queue
from tests.testenv.control_plane import ControlPlane

POLICY = load_policy()
SETS = ("[{name: driver, count: 1},"
        " {name: workers, count: 2, template: {spec: {containers: [{name: w, resources: {requests: {cpu: 1}}}]}}}]")


@pytest.fixture
def api(kube: ControlPlane) -> Iterator[client.ApiClient]:
    with kube.api_client() as api:
        yield api


def only(ns: str, snapshot: Snapshot) -> Snapshot:
    """The snapshot with the pods, Workloads, PodGroups and rejected objects of namespace ``ns``
    alone. (Another test's PodGroup in the same cluster would otherwise set the plan's
    ``wake_at``, and a cycle at a chosen time would write its phase, timed out, for that test.)"""
    return dataclasses.replace(
        snapshot, pods={k: v for k, v in snapshot.pods.items() if k.startswith(f"{ns}/")},
        workloads={k: v for k, v in snapshot.workloads.items() if k.startswith(f"{ns}/")},
        pod_groups={k: v for k, v in snapshot.pod_groups.items() if k.startswith(f"{ns}/")},
        rejected=tuple(r for r in snapshot.rejected if r.namespace == ns))


def cycle(api: client.ApiClient, ns: str) -> Decided:
    """One controller cycle over namespace ``ns``: lease, read, decide, apply; no errors."""
    done = decide_and_apply(api, POLICY, lease_namespace=ns, decide=lambda s: run_cycle(only(ns, s), POLICY))
    assert not done.applied.errors, done.applied.errors
    return done


def member(ns: str, name: str, group: str, total: int | None = None, cpu: str = "1", **labels: str) -> dict[str, Any]:
    """A pod of ``group`` as the webhook mutates it, role hash included."""
    body = gated_pod(ns, name, cpu=cpu, group=group, total=total)
    if total is None:
        body["metadata"]["annotations"].pop("kueue.x-k8s.io/pod-group-total-count")
    body["metadata"]["labels"].update(labels)
    body["metadata"]["annotations"][ROLE_HASH_ANNOTATION] = role_hash(body)
    return body


def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


def phase(api: client.ApiClient, ns: str, name: str, value: str) -> None:
    """Set a pod's phase, as the kubelet would."""
    core(api).patch_namespaced_pod_status(name, ns, {"status": {"phase": value}})


def pod(api: client.ApiClient, ns: str, name: str) -> client.V1Pod:
    return core(api).read_namespaced_pod(name, ns)


def pods(api: client.ApiClient, ns: str) -> set[str]:
    return {p.metadata.name for p in core(api).list_namespaced_pod(ns).items}


def finalized(api: client.ApiClient, ns: str, name: str) -> bool:
    return FINALIZER not in (pod(api, ns, name).metadata.finalizers or [])


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in (obj.get("status") or {}).get("conditions", [])}


def started(api: client.ApiClient, ns: str, name: str) -> bool:
    """Ungated (then set Running, as the kubelet would once it runs)."""
    ungated = not pod(api, ns, name).spec.scheduling_gates
    if ungated:
        phase(api, ns, name, "Running")
    return ungated


def running_group(api: client.ApiClient, nominal: int, size: int = 2) -> str:
    """A namespace with ``nominal`` cpu of quota and the group ``g`` of ``size`` 1-cpu pods, admitted
    and running."""
    ns = queue_setup(api, tag(), nominal=nominal)
    for i in range(size):
        create(api, member(ns, f"g-{i}", "g", total=size))
    cycle(api, ns)
    assert all([started(api, ns, f"g-{i}") for i in range(size)])
    return ns


def test_single_pod_queued_admitted_and_finished(api: client.ApiClient) -> None:
    ns = queue_setup(api, tag(), nominal=4)
    create(api, gated_pod(ns, "solo", cpu="4"))
    cycle(api, ns)
    wl = workload_object(api, ns, "pod-solo")
    assert conditions(wl) == {"QuotaReserved": ("True", "QuotaReserved"), "Admitted": ("True", "Admitted")}
    assert started(api, ns, "solo")
    assert pod(api, ns, "solo").metadata.annotations[WORKLOAD_UID_ANNOTATION] == wl["metadata"]["uid"]

    create(api, gated_pod(ns, "next", cpu="4"))
    cycle(api, ns)
    assert not started(api, ns, "next")  # the quota is held
    phase(api, ns, "solo", "Succeeded")
    writes = cycle(api, ns).applied.writes
    assert {f"finish Workload {ns}/pod-solo", f"finalize Pod {ns}/solo"} <= set(writes)
    assert conditions(workload_object(api, ns, "pod-solo"))["Finished"] == ("True", "Succeeded")
    assert finalized(api, ns, "solo") and started(api, ns, "next")  # a finished pod releases its quota
    assert not [w for w in cycle(api, ns).applied.writes if "solo" in w]  # nothing to do again


def test_group_finished_when_all_pods_succeed_with_reclaimable_pods_meanwhile(api: client.ApiClient) -> None:
    ns = running_group(api, nominal=3)
    create(api, gated_pod(ns, "next", cpu="2"))
    phase(api, ns, "g-0", "Succeeded")
    cycle(api, ns)
    role = pod(api, ns, "g-0").metadata.annotations[ROLE_HASH_ANNOTATION]
    assert workload_object(api, ns, "g")["status"]["reclaimablePods"] == [{"name": role, "count": 1}]
    assert not finalized(api, ns, "g-0")  # its group has not finished: it may still matter
    assert started(api, ns, "next")  # 1 cpu held by g-1, 2 free: the succeeded pod's quota is reclaimed

    phase(api, ns, "g-1", "Succeeded")
    writes = cycle(api, ns).applied.writes
    assert f"finish Workload {ns}/g" in writes
    assert conditions(workload_object(api, ns, "g"))["Finished"] == ("True", "Succeeded")
    assert finalized(api, ns, "g-0") and finalized(api, ns, "g-1")


def test_group_finished_by_a_pod_that_is_not_retriable(api: client.ApiClient) -> None:
    ns = running_group(api, nominal=2)
    core(api).patch_namespaced_pod("g-0", ns, {"metadata": {"annotations": {
        "kueue.x-k8s.io/retriable-in-group": "false"}}})
    phase(api, ns, "g-0", "Failed")
    phase(api, ns, "g-1", "Succeeded")
    cycle(api, ns)
    assert conditions(workload_object(api, ns, "g"))["Finished"][0] == "True"
    assert finalized(api, ns, "g-0") and finalized(api, ns, "g-1")


def test_failed_pods_recreated_use_the_same_quota(api: client.ApiClient) -> None:
    ns = running_group(api, nominal=2)
    phase(api, ns, "g-1", "Failed")
    create(api, member(ns, "g-1b", "g", total=2))  # its replacement
    create(api, gated_pod(ns, "other"))  # wants the failed pod's cpu, which the group keeps
    writes = cycle(api, ns).applied.writes
    assert f"ungate Pod {ns}/g-1b" in writes and f"own Workload {ns}/g: owner references added for its pods" in writes
    assert not started(api, ns, "other") and not finalized(api, ns, "g-1")
    assert "g-1b" in {o["name"] for o in workload_object(api, ns, "g")["metadata"]["ownerReferences"]}
    assert f"finalize Pod {ns}/g-1" in cycle(api, ns).applied.writes  # once its replacement is adopted
    assert finalized(api, ns, "g-1") and not started(api, ns, "other")


def test_excess_pods_after_admission_youngest_per_role_deleted(api: client.ApiClient) -> None:
    ns = running_group(api, nominal=4)
    create(api, member(ns, "g-late", "g", total=2))
    assert f"delete Pod {ns}/g-late" in cycle(api, ns).applied.writes
    assert pods(api, ns) == {"g-0", "g-1"}


def test_driver_creates_workers_extra_ones_rejected_finished_when_all_finish(api: client.ApiClient) -> None:
    ns = queue_setup(api, tag(), nominal=4)
    driver = member(ns, "driver", "spark")
    driver["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-sets"] = SETS
    create(api, driver)
    cycle(api, ns)
    assert [a["count"] for a in workload_object(api, ns, "spark")["status"]["admission"]["podSetAssignments"]] == [1, 2]
    assert started(api, ns, "driver")
    for i in range(3):
        create(api, member(ns, f"w{i}", "spark", **{"kueue.x-k8s.io/pod-group-role": "workers"}))
    writes = cycle(api, ns).applied.writes
    assert f"delete Pod {ns}/w2" in writes and pods(api, ns) == {"driver", "w0", "w1"}
    assert started(api, ns, "w0") and started(api, ns, "w1")
    for name in ("driver", "w0", "w1"):
        phase(api, ns, name, "Succeeded")
    cycle(api, ns)
    assert conditions(workload_object(api, ns, "spark"))["Finished"] == ("True", "Succeeded")
    assert all(finalized(api, ns, n) for n in ("driver", "w0", "w1"))


def test_group_preempted_then_resumed_with_new_pods(api: client.ApiClient) -> None:
    t = tag()
    ns = preempting_queue(api, t)
    low = {"kueue.x-k8s.io/priority-class": f"low-{t}"}
    for i in range(2):
        create(api, member(ns, f"low-{i}", "low", total=2, **low))
    cycle(api, ns)
    high = gated_pod(ns, "high", cpu="2")
    high["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = f"high-{t}"
    create(api, high)
    cycle(api, ns)  # evicts low, deleting its pods
    assert pods(api, ns) == {"high"}
    cycle(api, ns)
    assert started(api, ns, "high")
    phase(api, ns, "high", "Succeeded")
    for i in range(2):  # its owner sends the group again
        create(api, member(ns, f"low-{i}-again", "low", total=2, **low))
    cycle(api, ns)
    assert started(api, ns, "low-0-again") and started(api, ns, "low-1-again")
    assert conditions(workload_object(api, ns, "low"))["Evicted"] == ("False", "QuotaReserved")


def test_deleting_a_workload_ends_its_group(api: client.ApiClient) -> None:
    ns = running_group(api, nominal=4, size=3)
    phase(api, ns, "g-2", "Succeeded")
    client.CustomObjectsApi(api).delete_namespaced_custom_object("kueue.x-k8s.io", "v1beta1", ns, "workloads", "g")
    writes = cycle(api, ns).applied.writes
    assert {f"delete Pod {ns}/g-0", f"delete Pod {ns}/g-1", f"finalize Pod {ns}/g-2"} <= set(writes), writes
    assert pods(api, ns) == {"g-2"} and finalized(api, ns, "g-2")
    cycle(api, ns)
    with pytest.raises(client.ApiException):  # not made again for what is left of the group
        workload_object(api, ns, "g")


def test_a_gated_pod_being_deleted_is_finalized(api: client.ApiClient) -> None:
    ns = queue_setup(api, tag(), nominal=1)
    create(api, gated_pod(ns, "first"))
    create(api, gated_pod(ns, "waits"))
    cycle(api, ns)
    waiting = "waits" if started(api, ns, "first") else "first"
    core(api).delete_namespaced_pod(waiting, ns)  # held by its finalizer
    assert pod(api, ns, waiting).metadata.deletion_timestamp
    assert f"finalize Pod {ns}/{waiting}" in cycle(api, ns).applied.writes
    assert waiting not in pods(api, ns)


def test_a_users_workload_is_admitted_as_kueue_admits_it_and_released_once_finished(api: client.ApiClient) -> None:
    ns = queue_setup(api, tag(), nominal=2)
    objects = client.CustomObjectsApi(api)
    for name in ("first", "second"):
        create(api, {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": name, "namespace": ns},
                     "spec": {"queueName": "main", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                         "containers": [{"name": "main", "resources": {"requests": {"cpu": "2"}}}]}}}]}})
    cycle(api, ns)
    admitted = [n for n in ("first", "second") if "admission" in workload_object(api, ns, n)["status"]]
    assert len(admitted) == 1
    done, waiting = admitted[0], ({"first", "second"} - set(admitted)).pop()
    obj = workload_object(api, ns, done)
    assert obj["status"]["admission"]["podSetAssignments"][0]["count"] == 1
    assert obj["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] == {"cpu": "2"}  # requests x count
    assert conditions(obj) == {"QuotaReserved": ("True", "QuotaReserved"), "Admitted": ("True", "Admitted")}
    assert conditions(workload_object(api, ns, waiting))["QuotaReserved"] == ("False", "Pending")

    obj["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded",
                                        "message": "done", "lastTransitionTime": "2026-11-25T00:00:00Z"})
    objects.replace_namespaced_custom_object_status("kueue.x-k8s.io", "v1beta1", ns, "workloads", done, obj)
    writes = cycle(api, ns).applied.writes
    assert f"status Workload {ns}/{waiting}" in writes and f"finish Workload {ns}/{done}" not in writes
    assert "admission" in workload_object(api, ns, waiting)["status"]


def test_pending_status_writes_are_paced_highest_ranked_first_decisions_never(api: client.ApiClient) -> None:
    t = tag()
    ns = queue_setup(api, t, nominal=2)
    for i in range(3):
        create(api, gated_pod(ns, f"big{i}", cpu="3"))  # never fit: inadmissible
    clock = [0.0]
    limiter = PendingWriteLimiter(rate=1, burst=1, clock=lambda: clock[0])

    def paced() -> tuple[Plan, list[str], list[str]]:
        plan = run_cycle(only(ns, read_cluster(api)), POLICY)
        result = apply_plan(api, plan, pending_writes=limiter)
        assert not result.errors, result.errors
        return plan, [w for w in result.writes if w.startswith(f"status Workload {ns}/pod-big")], result.deferred

    _, written, deferred = paced()
    assert len(written) == 3 and not deferred  # a Workload's first status, when it is created, is never paced
    objects, where = client.CustomObjectsApi(api), ("kueue.x-k8s.io", "v1beta1", "clusterqueues", f"cq-{t}")
    cq = objects.get_cluster_custom_object(*where)
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "2500m"
    objects.replace_cluster_custom_object(*where, cq)  # every waiting one's numbers change
    create(api, gated_pod(ns, "small"))

    plan, written, deferred = paced()
    ranked = next(w.name for w in plan.workloads if w.name.startswith(f"{ns}/pod-big") and w.rank is not None)
    assert written == [f"status Workload {ranked}"] and len(deferred) == 2
    assert not pod(api, ns, "small").spec.scheduling_gates  # its admission was not held back
    clock[0] += 1.0
    assert [len(x) for x in paced()[1:]] == [1, 1]
    clock[0] += 1.0
    assert [len(x) for x in paced()[1:]] == [1, 0]
    clock[0] += 1.0
    assert [len(x) for x in paced()[1:]] == [0, 0]
