"""ClusterQueue and LocalQueue status, written by decide_and_apply as Kueue writes it, and
`clueue list` against the live cluster.

Runs on the shared control plane: the cycles it applies decide only over this test's own
namespace (its `decide` leaves other tests' pods and Workloads out), so they write nothing of
theirs but the status of their queues, which no other test reads.
"""

from __future__ import annotations

import dataclasses
import json
import uuid

from click.testing import CliRunner
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from clueue.adapters.cli import main
from clueue.adapters.kube import read_cluster
from clueue.adapters.kube.decide import decide_and_apply
from clueue.adapters.kube.kinds import kueue_version
from clueue.adapters.kube.queue_status import write_queue_status
from clueue.engine import Snapshot, load_policy, run_cycle
from tests.e2e.test_adapter import create, gated_pod, queue_setup
from tests.testenv.control_plane import ControlPlane

GROUP = "kueue.x-k8s.io"


def _ensure_namespace(api: client.ApiClient, name: str) -> None:
    try:
        client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    except ApiException as e:
        if e.status != 409:
            raise


def _only(ns: str):
    """A cycle over the queues and ``ns``'s pods and Workloads alone."""
    def decide(snapshot: Snapshot):
        mine = dataclasses.replace(
            snapshot, pods={k: v for k, v in snapshot.pods.items() if k.startswith(f"{ns}/")},
            workloads={k: v for k, v in snapshot.workloads.items() if k.startswith(f"{ns}/")})
        return run_cycle(mine, load_policy())
    return decide


def test_queue_status_is_written_once_and_list_shows_positions(kube: ControlPlane) -> None:
    t = uuid.uuid4().hex[:6]
    with kube.api_client() as api:
        _ensure_namespace(api, "clueue-system")  # where apply takes its Lease
        ns = queue_setup(api, t, nominal=2)
        for i, cpu in enumerate(("1500m", "1", "1")):
            create(api, gated_pod(ns, f"p{i}", cpu=cpu))
        applied = decide_and_apply(api, load_policy(), decide=_only(ns)).applied
        assert not applied.errors, applied.errors
        assert f"status ClusterQueue cq-{t}" in applied.writes and f"status LocalQueue {ns}/main" in applied.writes

        custom = client.CustomObjectsApi(api)
        cq = custom.get_cluster_custom_object(GROUP, "v1beta1", "clusterqueues", f"cq-{t}")["status"]
        assert (cq["pendingWorkloads"], cq["reservingWorkloads"], cq["admittedWorkloads"]) == (2, 1, 1)
        assert cq["flavorsUsage"] == [{"name": f"fl-{t}", "resources": [{"name": "cpu", "total": "1500m",
                                                                          "borrowed": "0"}]}]
        assert cq["flavorsReservation"] == cq["flavorsUsage"]
        [active] = cq["conditions"]
        assert (active["type"], active["status"], active["reason"]) == ("Active", "True", "Ready")
        lq = custom.get_namespaced_custom_object(GROUP, "v1beta1", ns, "localqueues", "main")["status"]
        assert (lq["pendingWorkloads"], lq["admittedWorkloads"]) == (2, 1)
        # the status writes are among what the cycle wrote, at the versions the server holds, so a
        # controller's cache waits for them before the next cycle and takes them for its own
        versions = {(kind, key): v for kind, key, v in applied.written}
        for kind, key, get in (
                ("ClusterQueue", f"cq-{t}",
                 lambda: custom.get_cluster_custom_object(GROUP, "v1beta1", "clusterqueues", f"cq-{t}")),
                ("LocalQueue", f"{ns}/main",
                 lambda: custom.get_namespaced_custom_object(GROUP, "v1beta1", ns, "localqueues", "main"))):
            assert versions[kind, key] == get()["metadata"]["resourceVersion"], kind
        # the admitted usage is under v1beta1's name and v1beta2's, read through either version
        for version in ("v1beta1", "v1beta2"):
            lq = custom.get_namespaced_custom_object(GROUP, version, ns, "localqueues", "main")["status"]
            assert lq["flavorUsage"] == lq["flavorsUsage"] == [
                {"name": f"fl-{t}", "resources": [{"name": "cpu", "total": "1500m"}]}]

        again = decide_and_apply(api, load_policy(), decide=_only(ns)).applied
        assert not [w for w in again.writes if w.startswith("status ") and t in w], again.writes
        assert custom.get_cluster_custom_object(GROUP, "v1beta1", "clusterqueues", f"cq-{t}")["status"][
            "conditions"][0]["lastTransitionTime"] == active["lastTransitionTime"]

    result = CliRunner().invoke(main, ["list", "workloads", "--kubeconfig", str(kube.kubeconfig), "-n", ns,
                                       "--status", "pending", "-o", "json"])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.output)}
    assert {(r["positionInClusterQueue"], r["positionInLocalQueue"]) for r in rows.values()} == {(0, 0), (1, 1)}
    assert set(rows) == {"pod-p1", "pod-p2"}
    result = CliRunner().invoke(main, ["list", "clusterqueues", "--kubeconfig", str(kube.kubeconfig)])
    assert result.exit_code == 0, result.output
    [row] = [line.split() for line in result.output.splitlines() if line.startswith(f"cq-{t} ")]
    assert row[-4:-1] == ["2", "1", "true"] and row[-1][-1] in "smhd"  # no cohort: PENDING, ADMITTED, ACTIVE, AGE
    # As kueuectl: without -n, the kubeconfig context's namespace (none named: default); -A: all.
    kubeconfig = ["--kubeconfig", str(kube.kubeconfig)]
    here = CliRunner().invoke(main, ["list", "localqueues", *kubeconfig, "-o", "json"])
    assert here.exit_code == 0, here.output
    assert {r["namespace"] for r in json.loads(here.output)} <= {"default"}
    everywhere = CliRunner().invoke(main, ["list", "localqueues", *kubeconfig, "-A"])
    assert everywhere.exit_code == 0, everywhere.output
    header, *rows = everywhere.output.splitlines()
    assert header.split()[0] == "NAMESPACE" and header.split()[-1] == "AGE"
    assert any(line.split()[:2] == [ns, "main"] for line in rows)
