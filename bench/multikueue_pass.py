"""What a MultiKueue pass costs: a manager and two workers (real control planes), N Workloads.

``python3 -m bench.multikueue_pass [N]`` (default 300) starts three control planes
(tests/testenv), makes N manager Workloads hold quota with the MultiKueue check Pending (as the
engine would), and times the passes of :class:`~clueue.adapters.multikueue.MultiKueue`
(AllAtOnce): the one that dispatches 2N copies, a pass with nothing to do, the one that sees
every copy admitted in one worker (N copies deleted in the other, N checks made Ready), and a
pass over N running workloads. A measure for people, not a test.
"""

from __future__ import annotations

import base64
import sys
import time
from typing import Any

from kubernetes import client

from clueue.adapters.kube.connect import connect
from clueue.adapters.multikueue import MultiKueue
from clueue.adapters.multikueue.api import now
from clueue.engine.config import ALL_AT_ONCE, MultiKueue as Settings
from clueue.engine.kueue_api import KUEUE_GROUP, MULTIKUEUE_CONTROLLER
from tests.testenv.build import ensure_binaries
from tests.testenv.control_plane import ControlPlane

G, V, NS = KUEUE_GROUP, "v1beta1", "bench"


def _kueue(api: client.ApiClient, plural: str, kind: str, name: str, spec: dict[str, Any]) -> None:
    client.CustomObjectsApi(api).create_cluster_custom_object(G, V, plural, {
        "apiVersion": f"{G}/{V}", "kind": kind, "metadata": {"name": name}, "spec": spec})


def _condition(type_: str) -> dict[str, str]:
    return {"type": type_, "status": "True", "reason": type_, "message": "", "lastTransitionTime": now()}


def main(n: int) -> None:
    binaries = ensure_binaries()
    with ControlPlane(binaries) as manager, ControlPlane(binaries) as w1, ControlPlane(binaries) as w2:
        manager.create_namespace("clueue-system")
        manager.create_namespace(NS)
        api = connect(str(manager.kubeconfig))
        custom = client.CustomObjectsApi(api)
        for name, plane in (("w1", w1), ("w2", w2)):
            plane.create_namespace(NS)
            client.CoreV1Api(api).create_namespaced_secret("clueue-system", {"metadata": {"name": name}, "data": {
                "kubeconfig": base64.b64encode(plane.kubeconfig.read_bytes()).decode()}})
            _kueue(api, "multikueueclusters", "MultiKueueCluster", name, {"kubeConfig": {"location": name}})
        _kueue(api, "multikueueconfigs", "MultiKueueConfig", "both", {"clusters": ["w1", "w2"]})
        _kueue(api, "admissionchecks", "AdmissionCheck", "mk", {"controllerName": MULTIKUEUE_CONTROLLER,
               "parameters": {"apiGroup": G, "kind": "MultiKueueConfig", "name": "both"}})
        for i in range(n):
            wl = custom.create_namespaced_custom_object(G, V, NS, "workloads", {
                "apiVersion": f"{G}/{V}", "kind": "Workload", "metadata": {"name": f"job-{i}", "namespace": NS},
                "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                    "containers": [{"name": "c", "image": "busybox"}]}}}]}})
            wl["status"] = {"conditions": [_condition("QuotaReserved")],
                            "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 1}]},
                            "admissionChecks": [{"name": "mk", "state": "Pending", "message": "",
                                                 "lastTransitionTime": now()}]}
            custom.replace_namespaced_custom_object_status(G, V, NS, "workloads", f"job-{i}", wl)
        loop = MultiKueue(api, "clueue-system", Settings(gc_interval=0, dispatcher_name=ALL_AT_ONCE))
        loop.run_once()  # connects to the workers

        def timed(what: str) -> None:
            start = time.monotonic()
            loop.run_once()
            print(f"{what}: {time.monotonic() - start:.2f} s", flush=True)

        timed(f"dispatch: {2 * n} copies created")
        timed("nothing to do, all pending")
        worker = client.CustomObjectsApi(connect(str(w1.kubeconfig)))
        for copy in worker.list_namespaced_custom_object(G, V, NS, "workloads")["items"]:
            copy["status"] = {"conditions": [_condition("Admitted")]}
            worker.replace_namespaced_custom_object_status(G, V, NS, "workloads", copy["metadata"]["name"], copy)
        timed(f"first admissions: {n} copies deleted, {n} checks Ready")
        timed("nothing to do, all running")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
