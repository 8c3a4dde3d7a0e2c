"""Coscheduling PodGroups against a real API server: InQueue before pods exist, the gang
admitted together once its pods are created (gated, as the webhook creates them), the phase
written to the PodGroup's status, and a timed-out group released; and, with the controller
running as a process of its own, what an InQueue group holds is not given to a workload created
after it, while the group's own pods are admitted into it.

The apply tests run on the shared control plane: their cycles read only the test's namespace
(Nodes left out, so that other tests' Nodes do not decide InQueue: quota alone does), so they
write nothing of other tests' but the status of their queues. The controller test has a control
plane of its own (controller_harness.py), without Nodes.
"""

from __future__ import annotations

import dataclasses
import time
import uuid

from kubernetes import client

from clueue.adapters.kube import read_cluster
from clueue.adapters.kube.decide import decide_and_apply
from clueue.adapters.kube.kinds import served_kinds
from clueue.engine import load_policy
from clueue.engine.kueue_api import POD_GROUP_LABEL
from tests.e2e.controller_harness import (  # noqa: F401 - cluster and api are this module's fixtures
    api, cluster, controller_log, start_controller, stop_controller, wait_until,
)
from tests.e2e.test_adapter import create, gated_pod, queue_setup, workload_object
from tests.e2e.test_queue_status import _ensure_namespace
from tests.testenv.control_plane import ControlPlane

GROUP, VERSION, PLURAL = "scheduling.x-k8s.io", "v1alpha1", "podgroups"


def _reader(api: client.ApiClient, ns: str):
    def read():
        s = read_cluster(api)
        return dataclasses.replace(s, nodes={}, pods={k: v for k, v in s.pods.items() if k.startswith(f"{ns}/")},
                                   workloads={k: v for k, v in s.workloads.items() if k.startswith(f"{ns}/")},
                                   pod_groups={k: v for k, v in s.pod_groups.items() if k.startswith(f"{ns}/")})
    return read


def _podgroup(api: client.ApiClient, ns: str, name: str, **spec) -> None:
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "main"}},
            "spec": spec}
    client.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)


def _get(api: client.ApiClient, ns: str, name: str) -> dict:
    return client.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)


def _member(ns: str, name: str, group: str, cpu: str = "1") -> dict:
    body = gated_pod(ns, name, cpu=cpu)
    body["metadata"]["labels"][POD_GROUP_LABEL] = group
    return body


def _phase(api: client.ApiClient, ns: str, name: str) -> str:
    return (_get(api, ns, name).get("status") or {}).get("phase", "")


def _gated(api: client.ApiClient, ns: str, name: str) -> bool:
    return bool(client.CoreV1Api(api).read_namespaced_pod(name, ns).spec.scheduling_gates)


def _waits_for(api: client.ApiClient, ns: str, workload: str) -> str:
    """The message of a Workload's QuotaReserved=False condition ("" while it has none)."""
    try:
        obj = workload_object(api, ns, workload)
    except client.ApiException:
        return ""
    return next((c.get("message") or "-" for c in (obj.get("status") or {}).get("conditions", [])
                 if c["type"] == "QuotaReserved" and c["status"] == "False"), "")


def test_the_controller_keeps_what_an_in_queue_group_holds_for_its_pods(cluster, api) -> None:
    """delay-pod-creation end to end: the group goes InQueue with no pod; a pod created after
    that would fit the quota but for the group's hold, and waits; the group's pods, created
    once it is InQueue (as an operator would), are admitted into what it held."""
    t = uuid.uuid4().hex[:6]
    ns = queue_setup(api, t, nominal=4)
    _podgroup(api, ns, "mpi", minMember=3, minResources={"cpu": "3"})
    proc = start_controller(cluster, "--batch-window", "0.05", "--max-delay", "0.5", "--lease-duration", "4")
    try:
        wait_until(lambda: _phase(api, ns, "mpi") == "InQueue", 60, "the PodGroup InQueue", proc=proc)
        create(api, gated_pod(ns, "other", cpu="2"))  # 4 - 3 held < 2
        why = wait_until(lambda: _waits_for(api, ns, "pod-other"), 60, "the competing pod decided", proc=proc)
        assert "reserved for InQueue PodGroup(s) " + f"{ns}/mpi" in why, why
        assert _gated(api, ns, "other") and _phase(api, ns, "mpi") == "InQueue"

        for i in range(3):  # the operator creates the group's pods now
            create(api, _member(ns, f"mpi-{i}", "mpi"))
        wait_until(lambda: not any(_gated(api, ns, f"mpi-{i}") for i in range(3)), 60,
                   "the group's pods ungated", proc=proc)
        wait_until(lambda: _phase(api, ns, "mpi") == "Scheduling", 30, "the PodGroup Scheduling", proc=proc)
        assert _gated(api, ns, "other")  # 4 - 3 admitted < 2: it still waits
        assert workload_object(api, ns, "podgroup-mpi")["status"]["admission"]["clusterQueue"] == f"cq-{t}"
    finally:
        code = stop_controller(proc)
    assert code == 0, controller_log(proc)[-3000:]


def test_podgroup_goes_in_queue_then_its_gang_is_admitted_and_its_phase_written(kube: ControlPlane) -> None:
    t = uuid.uuid4().hex[:6]
    with kube.api_client() as api:
        assert any(k.kind == "PodGroup" for k in served_kinds(api, "v1beta1"))  # the CRD is served here
        _ensure_namespace(api, "clueue-system")  # where apply takes its Lease
        ns = queue_setup(api, t, nominal=4)
        # FCFS by creation (then name, within a second): mpi first, then later, which fits alone but not beside it
        _podgroup(api, ns, "mpi", minMember=3, minResources={"cpu": "3"})
        _podgroup(api, ns, "zlater", minMember=2, minResources={"cpu": "3"})
        core = client.CoreV1Api(api)
        read = _reader(api, ns)

        decided = decide_and_apply(api, load_policy(), read=read)
        assert not decided.applied.errors, decided.applied.errors
        assert _get(api, ns, "mpi")["status"]["phase"] == "InQueue"
        assert _get(api, ns, "zlater")["status"]["phase"] == "Pending"  # mpi's 3 cpu are reserved
        # what is written is what the plan says (docs/plan-format.md, podGroups[])
        for name in ("mpi", "zlater"):
            assert _get(api, ns, name)["status"] == dict(decided.plan.pod_group(f"{ns}/{name}").status)
        assert decided.plan.pod_group(f"{ns}/zlater").reason.details["reservedFor"] == [f"{ns}/mpi"]
        again = decide_and_apply(api, load_policy(), read=read).applied
        assert not [w for w in again.writes if "PodGroup" in w]  # nothing changed: nothing written

        for i in range(2):
            core.create_namespaced_pod(ns, _member(ns, f"mpi-{i}", "mpi"))
        decide_and_apply(api, load_policy(), read=read)
        assert all(core.read_namespaced_pod(f"mpi-{i}", ns).spec.scheduling_gates for i in range(2))  # 2 of 3
        assert _get(api, ns, "mpi")["status"]["phase"] == "InQueue"

        core.create_namespaced_pod(ns, _member(ns, "mpi-2", "mpi"))
        decided = decide_and_apply(api, load_policy(), read=read)
        assert not decided.applied.errors, decided.applied.errors
        assert not any(core.read_namespaced_pod(f"mpi-{i}", ns).spec.scheduling_gates for i in range(3))
        status = _get(api, ns, "mpi")["status"]
        assert (status["phase"], status["running"]) == ("Scheduling", 0) and status["scheduleStartTime"]
        entry = decided.plan.pod_group(f"{ns}/mpi")
        assert (entry.recorded_phase, entry.phase, entry.reason.code) == ("InQueue", "Scheduling", "PodsPlaced")
        assert status == dict(entry.status)

        for i in range(3):  # the tests act as kubelet
            pod = core.read_namespaced_pod(f"mpi-{i}", ns)
            pod.status.phase = "Running"
            core.replace_namespaced_pod_status(f"mpi-{i}", ns, pod)
        decided = decide_and_apply(api, load_policy(), read=read)
        status = _get(api, ns, "mpi")["status"]
        assert (status["phase"], status["running"]) == ("Running", 3)
        assert status == dict(decided.plan.pod_group(f"{ns}/mpi").status)


def test_a_timed_out_group_is_released_whole_and_held_for_a_back_off(kube: ControlPlane) -> None:
    t = uuid.uuid4().hex[:6]
    with kube.api_client() as api:
        _ensure_namespace(api, "clueue-system")
        ns = queue_setup(api, t, nominal=4)
        _podgroup(api, ns, "slow", minMember=2, scheduleTimeoutSeconds=0)  # 0 s: released at the next cycle
        core = client.CoreV1Api(api)
        for i in range(2):
            body = _member(ns, f"slow-{i}", "slow")
            body["metadata"]["finalizers"] = []  # so that the delete completes without a kubelet
            core.create_namespaced_pod(ns, body)
        read = _reader(api, ns)
        decide_and_apply(api, load_policy(), read=read)  # admitted: ungated, Scheduling starts now
        assert _get(api, ns, "slow")["status"]["phase"] == "Scheduling"
        decided = decide_and_apply(api, load_policy(), read=read)
        applied = decided.applied
        assert not applied.errors, applied.errors
        release = decided.plan.pod_group(f"{ns}/slow").release  # the plan says what is released
        assert release is not None and sorted(name for name, _ in release.pods) == ["slow-0", "slow-1"]
        assert f"release PodGroup {ns}/slow" in applied.writes
        assert f"delete Workload {ns}/podgroup-slow" in applied.writes  # its quota given back
        assert sorted(w for w in applied.writes if w.startswith("delete Pod")) == [
            f"delete Pod {ns}/slow-0", f"delete Pod {ns}/slow-1"]
        pg = _get(api, ns, "slow")
        assert pg["metadata"]["annotations"]["clueue.dev/requeues"] == "1" == str(release.requeues)
        assert int(pg["metadata"]["annotations"]["clueue.dev/backoff-until"]) > time.time() + 30
        assert pg["metadata"]["annotations"]["clueue.dev/backoff-until"] == str(release.backoff_until)
        assert pg["status"]["phase"] == "Pending" and pg["status"] == dict(decided.plan.pod_group(f"{ns}/slow").status)
