"""Deciders racing and dying against a real kube-apiserver: quota is never over-committed, and no
pod is ungated into another flavor than its Workload records.

The racing tests start several ``clueue apply`` processes a moment apart while a higher-priority
pod arrives, so that deciders reading at different moments would decide differently; the lease
(adapters/kube/lease.py) makes them take turns, each reading the cluster after the previous
one's writes. The fault tests kill a decider between recording an admission and ungating.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kubernetes import client

from clueue.adapters.cli import main
from clueue.adapters.kube import apply_plan
from clueue.adapters.kube.apply import GATE
from clueue.adapters.kube.decide import decide_and_apply
from clueue.adapters.kube.lease import DeciderLease, LeaseHeld
from clueue.engine import load_policy
# a control plane of this module's own: each apply decides over the whole cluster
from tests.e2e.controller_harness import CONTROLLER_NS, api, cluster  # noqa: F401 - cluster and api are fixtures
from tests.e2e.decider_hooks import CRASH_EXIT
from tests.e2e.test_adapter import KUEUE, create, cycle, gated_pod, queue_setup, tag, workload_object
from tests.testenv.control_plane import ControlPlane

LEASE_NS = CONTROLLER_NS  # the fixture `cluster` makes it
REPO = Path(__file__).resolve().parents[2]
HOOKS = Path(__file__).resolve().parent / "decider_hooks.py"
DECIDERS = 4  # racing in each trial: one that pauses between reading and writing, and three more
TRIALS = 3


def start_apply(cluster: ControlPlane, *extra: str, hook: str = "", env: dict[str, str] | None = None
                ) -> subprocess.Popen[str]:
    """``clueue apply`` in a process of its own, with a fault of decider_hooks.py if ``hook``."""
    command = [str(HOOKS), hook] if hook else ["-m", "clueue.adapters.cli"]
    argv = [sys.executable, *command, "apply", "--kubeconfig", str(cluster.kubeconfig), *extra]
    return subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(
                                [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])})


def two_flavor_queue(api: client.ApiClient, t: str) -> str:
    """Namespace ``ns-<t>`` whose queue feeds ClusterQueue ``cq-<t>``: flavors ``a-<t>`` then
    ``b-<t>`` (node label pool=a-<t> / b-<t>), 4 cpu each."""
    ns = f"ns-{t}"
    create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for f in ("a", "b"):
        create(api, {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": f"{f}-{t}"},
                     "spec": {"nodeLabels": {"pool": f"{f}-{t}"}}})
    create(api, {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": f"cq-{t}"}, "spec": {
        "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": f"{f}-{t}", "resources": [{"name": "cpu", "nominalQuota": 4}]} for f in ("a", "b")]}]}})
    create(api, {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "main", "namespace": ns},
                 "spec": {"clusterQueue": f"cq-{t}"}})
    return ns


def workloads_of(api: client.ApiClient, ns: str) -> dict[str, dict[str, Any]]:
    items = client.CustomObjectsApi(api).list_namespaced_custom_object("kueue.x-k8s.io", "v1beta1", ns, "workloads")
    return {w["metadata"]["name"]: w for w in items["items"]}


def assert_consistent(api: client.ApiClient, ns: str, flavor_label: dict[str, str]) -> list[str]:
    """Every ungated pod of ``ns`` runs with the node selector of the flavor its Workload records;
    returns the admitted Workloads."""
    workloads = workloads_of(api, ns)
    admitted = [n for n, w in workloads.items() if (w.get("status") or {}).get("admission")]
    for pod in client.CoreV1Api(api).list_namespaced_pod(ns).items:
        if pod.spec.scheduling_gates:
            continue
        name = pod.metadata.labels.get("kueue.x-k8s.io/pod-group-name") or f"pod-{pod.metadata.name}"
        assert name in admitted, f"{pod.metadata.name} is ungated without a recorded admission"
        (assignment,) = workloads[name]["status"]["admission"]["podSetAssignments"]
        assert pod.spec.node_selector == {"pool": flavor_label[assignment["flavors"]["cpu"]]}, pod.metadata.name
    return admitted


def test_racing_applies_never_admit_beyond_the_quota(cluster: ControlPlane, api: client.ApiClient,
                                                     tmp_path: Path) -> None:
    # Without the lease, the first decider admits pod-first from what it read, and the others,
    # reading before it writes, admit the urgent pod that arrived meanwhile: 8 cpu in a 4-cpu flavor.
    for trial in range(TRIALS):
        go = {"GO_FILE": str(tmp_path / f"go-{trial}")}
        t = tag()
        ns = queue_setup(api, t, nominal=4)
        create(api, {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": f"urgent-{t}"},
                     "value": 100})
        create(api, gated_pod(ns, "first", cpu="4"))
        slow = start_apply(cluster, "--lease-timeout", "120", hook="slow-read", env=go)
        assert slow.stderr is not None and slow.stderr.readline() == "read\n"
        urgent = gated_pod(ns, "urgent", cpu="4")
        urgent["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = f"urgent-{t}"
        create(api, urgent)
        others = [start_apply(cluster, "--lease-timeout", "120", hook="announce") for _ in range(DECIDERS - 1)]
        for decider in others:
            assert decider.stderr is not None and decider.stderr.readline() == "started\n"
        time.sleep(4)  # time enough to read the cluster (on a busy machine) for a decider that need not wait
        Path(go["GO_FILE"]).touch()
        deciders = [slow, *others]
        for decider in deciders:
            code, (out, err) = decider.wait(timeout=300), decider.communicate()
            assert code == 0, f"trial {trial}: exit {code}\n{out}\n{err}"
        admitted = assert_consistent(api, ns, {f"fl-{t}": f"pool-{t}"})
        assert admitted == ["pod-first"], f"trial {trial}: {admitted} admitted into a 4-cpu flavor, 4 cpu each"


def test_a_held_lease_makes_apply_wait_then_fail_naming_the_holder(cluster: ControlPlane,
                                                                   api: client.ApiClient) -> None:
    with DeciderLease(api, LEASE_NS, identity="someone-else").acquire(10):
        started = time.monotonic()
        result = CliRunner().invoke(main, ["apply", "--kubeconfig", str(cluster.kubeconfig), "--lease-timeout", "1"])
        assert time.monotonic() - started >= 1
    assert result.exit_code == 4, result.output
    assert result.stderr.startswith(f"error: Lease {LEASE_NS}/clueue-decider is held by someone-else")
    assert "--lease-timeout" in result.stderr and result.stdout == ""
    with pytest.raises(LeaseHeld):  # released now: taken at once, and held against the next taker
        with DeciderLease(api, LEASE_NS).acquire(0):
            DeciderLease(api, LEASE_NS).acquire(0)


def test_a_missing_lease_namespace_is_a_clear_error(cluster: ControlPlane) -> None:
    result = CliRunner().invoke(main, ["apply", "--kubeconfig", str(cluster.kubeconfig), "--lease-namespace", "nowhere"])
    assert result.exit_code == 1
    assert result.stderr == ("error: cannot take Lease nowhere/clueue-decider: namespace nowhere does not exist; "
                             "create it (kubectl create namespace), or name another with --lease-namespace\n")


def test_a_decider_killed_after_admitting_leaves_the_next_to_ungate_as_recorded(cluster: ControlPlane,
                                                                                api: client.ApiClient) -> None:
    t = tag()
    ns = two_flavor_queue(api, t)
    create(api, gated_pod(ns, "job", cpu="4"))
    crashed = start_apply(cluster, hook="crash-after-admission")
    assert crashed.wait(timeout=120) == CRASH_EXIT, crashed.communicate()
    recorded = workload_object(api, ns, "pod-job")["status"]["admission"]
    assert client.CoreV1Api(api).read_namespaced_pod("job", ns).spec.scheduling_gates  # died before ungating
    # Flavor a fills up meanwhile: a decider that ignored the record would now pick flavor b.
    create(api, {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": "filler", "namespace": ns}, "spec": {
        "queueName": "main", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
            {"name": "main", "resources": {"requests": {"cpu": "4"}}}]}}}]}})

    second = start_apply(cluster, "--lease-timeout", "30")  # waits out the dead decider's 2 s lease
    code, out, err = second.wait(timeout=120), *second.communicate()
    assert code == 0, out + err
    admitted = assert_consistent(api, ns, {f"a-{t}": f"a-{t}", f"b-{t}": f"b-{t}"})
    assert sorted(admitted) == ["filler", "pod-job"]
    assert workload_object(api, ns, "pod-job")["status"]["admission"] == recorded
    assert not client.CoreV1Api(api).read_namespaced_pod("job", ns).spec.scheduling_gates
    flavors = {n: workload_object(api, ns, n)["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"]
               for n in admitted}
    assert flavors == {"pod-job": recorded["podSetAssignments"][0]["flavors"]["cpu"],
                       "filler": ({f"a-{t}", f"b-{t}"} - {recorded["podSetAssignments"][0]["flavors"]["cpu"]}).pop()}


def test_a_plan_disagreeing_with_the_recorded_admission_does_not_ungate(api: client.ApiClient) -> None:
    # The second defence, without the lease: a plan decided before another decider recorded an
    # admission in flavor a chose flavor b; applying it must not ungate the pod into flavor b.
    t = tag()
    ns = two_flavor_queue(api, t)
    create(api, {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": "holder", "namespace": ns}, "spec": {
        "queueName": "main", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
            {"name": "main", "resources": {"requests": {"cpu": "4"}}}]}}}]}})
    assert not apply_plan(api, cycle(api)).errors  # holder takes flavor a
    create(api, gated_pod(ns, "job", cpu="4"))
    stale = cycle(api)  # job into flavor b
    assert stale.workload(f"{ns}/pod-job").admission[0].flavors == {"cpu": f"b-{t}"}
    client.CustomObjectsApi(api).delete_namespaced_custom_object("kueue.x-k8s.io", "v1beta1", ns, "workloads", "holder")
    fresh = cycle(api)  # another decider: job into flavor a, recorded, then it dies before ungating
    assert fresh.workload(f"{ns}/pod-job").admission[0].flavors == {"cpu": f"a-{t}"}
    assert not apply_plan(api, replace(fresh, actions=tuple(a for a in fresh.actions if a.kind != "ungate"))).errors

    result = apply_plan(api, stale)
    assert any(f"ungate Pod {ns}/job" in e and "recorded admission" in e for e in result.errors), result.errors
    assert client.CoreV1Api(api).read_namespaced_pod("job", ns).spec.scheduling_gates
    assert not apply_plan(api, cycle(api)).errors  # the next cycle ungates as recorded
    assert_consistent(api, ns, {f"a-{t}": f"a-{t}", f"b-{t}": f"b-{t}"})
    assert not client.CoreV1Api(api).read_namespaced_pod("job", ns).spec.scheduling_gates


def test_quota_held_beyond_a_tree_is_reported_not_evicted(api: client.ApiClient) -> None:
    t = tag()
    ns = queue_setup(api, t, nominal=4)
    objects = client.CustomObjectsApi(api)
    for name in ("one", "two"):  # admitted by hand, 4 cpu each, into the one 4-cpu flavor
        body = {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": name, "namespace": ns}, "spec": {
            "queueName": "main", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                {"name": "main", "resources": {"requests": {"cpu": "4"}}}]}}}]}}
        created = objects.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta1", ns, "workloads", body)
        created["status"] = {"admission": {"clusterQueue": f"cq-{t}", "podSetAssignments": [
            {"name": "main", "count": 1, "flavors": {"cpu": f"fl-{t}"}}]}}
        objects.replace_namespaced_custom_object_status("kueue.x-k8s.io", "v1beta1", ns, "workloads", name, created)
    applied = decide_and_apply(api, load_policy(), lease_namespace=LEASE_NS).applied
    assert f"ClusterQueue cq-{t} holds 8 cpu in flavor fl-{t}, more than its quota of 4 (admitted: {ns}/one, {ns}/two)" \
        in "\n".join(applied.warnings), applied.warnings
    assert all((w.get("status") or {}).get("admission") for w in workloads_of(api, ns).values())


def test_a_decider_that_lost_the_lease_stops_writing(api: client.ApiClient) -> None:
    ns = queue_setup(api, tag(), nominal=4)
    create(api, gated_pod(ns, "p"))
    plan = cycle(api)
    with DeciderLease(api, LEASE_NS).acquire(30) as lease:
        leases = client.CoordinationV1Api(api)
        taken = leases.read_namespaced_lease("clueue-decider", LEASE_NS)
        taken.spec.holder_identity = "thief"  # another decider took it over (our renewals were lost)
        leases.replace_namespaced_lease("clueue-decider", LEASE_NS, taken)
        lease.renew()
        result = apply_plan(api, plan, fence=lease.fence)
    assert result.stopped and result.writes == [] and "taken over" in result.errors[-1], result
    assert client.CoreV1Api(api).read_namespaced_pod("p", ns).spec.scheduling_gates
    holder = client.CoordinationV1Api(api).read_namespaced_lease("clueue-decider", LEASE_NS).spec.holder_identity
    assert holder == "thief"  # releasing a lost lease leaves the new holder's alone
    client.CoordinationV1Api(api).delete_namespaced_lease("clueue-decider", LEASE_NS)  # for the next test


def test_a_lease_whose_answers_were_lost_is_still_known_as_ours(api: client.ApiClient) -> None:
    # A take or renewal can reach the server while its answer is lost: the record then names
    # this decider, and it must go on as the holder, not wait for itself nor give up.
    first = DeciderLease(api, LEASE_NS, identity="me").acquire(0)
    first._stop.set()  # this process's first incarnation, cut off without releasing
    with DeciderLease(api, LEASE_NS, identity="me").acquire(0) as again:
        record = client.CoordinationV1Api(api).read_namespaced_lease("clueue-decider", LEASE_NS)
        client.CoordinationV1Api(api).replace_namespaced_lease("clueue-decider", LEASE_NS, record)  # as a lost renewal
        again.renew()  # meets the conflict, reads the record, finds itself
        again.fence()
