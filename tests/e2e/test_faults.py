"""Faults between clueue and a real apiserver: each is retried or reported, never half-applied.

A fault-injecting proxy (tests/testenv/faults.py) stands between `clueue apply` and the
apiserver and answers chosen requests with 504, 429, 409 or 404, or hangs up on them; one test
restarts the apiserver itself mid-apply. Each test checks what a person sees (the exit code, one
`error:` line naming the operation, the object and the server, the writes done before the fault
in `-o json`, the retries counted) and what the cluster holds: no pod lost, none ungated without
its recorded admission, never more admitted than the quota, and a later apply finishes the job.
"""

from __future__ import annotations

import concurrent.futures
import json
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kubernetes import client

from clueue.adapters.cli import main
from clueue.adapters.kube.apply import GATE
# a control plane of this module's own, with clueue-system where apply takes its Lease: its applies
# see only its objects, and it restarts
from tests.e2e.controller_harness import cluster  # noqa: F401 - this module's fixture
from tests.e2e.test_adapter import create, gated_pod, queue_setup
from tests.testenv.control_plane import ControlPlane
from tests.testenv.faults import Fault, FaultProxy

QUOTA = 4  # cpu of each test's ClusterQueue; its six pods ask 1 cpu each
PODS = 6


@pytest.fixture
def proxy(cluster: ControlPlane) -> Iterator[FaultProxy]:
    with FaultProxy(cluster) as proxy:
        yield proxy


@pytest.fixture
def ns(cluster: ControlPlane) -> str:
    """A namespace with a 4-cpu queue and six gated 1-cpu pods: four to admit, two to wait."""
    with cluster.api_client() as api:
        name = queue_setup(api, uuid.uuid4().hex[:6], nominal=QUOTA)
        for i in range(PODS):
            create(api, gated_pod(name, f"p{i}"))
    return name


def apply(kubeconfig: Path, *, fmt: str = "json") -> tuple[int, Any, str]:
    """`clueue apply -o FMT`: its exit code, its report (parsed, for json) and its stderr."""
    result = CliRunner().invoke(main, ["apply", "--kubeconfig", str(kubeconfig), "-o", fmt])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    report = json.loads(result.stdout) if fmt == "json" and result.stdout else result.stdout
    return result.exit_code, report, result.stderr


def assert_consistent(cluster: ControlPlane, ns: str, *, complete: bool) -> None:
    """No pod lost, no pod ungated without its Workload's admission, the quota never exceeded;
    ``complete``: the plan is fully applied (four admitted and ungated, two waiting)."""
    with cluster.api_client() as api:
        pods = client.CoreV1Api(api).list_namespaced_pod(ns).items
        workloads = client.CustomObjectsApi(api).list_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta1", ns, "workloads")["items"]
    assert sorted(p.metadata.name for p in pods) == [f"p{i}" for i in range(PODS)]
    admitted = {w["metadata"]["name"] for w in workloads if (w.get("status") or {}).get("admission")}
    ungated = {f"pod-{p.metadata.name}" for p in pods if not p.spec.scheduling_gates}
    assert ungated <= admitted and len(admitted) <= QUOTA, (ungated, admitted)
    assert len(workloads) == len({w["metadata"]["name"] for w in workloads}) <= PODS
    if complete:
        assert len(ungated) == len(admitted) == QUOTA and len(workloads) == PODS


def one_error_line(stderr: str, *words: str) -> str:
    lines = stderr.splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr
    assert all(w in errors[0] for w in words), errors[0]
    return errors[0]


def test_504s_and_dropped_connections_mid_apply_are_retried_and_counted(cluster, proxy, ns, tmp_path):
    proxy.inject(Fault("PUT", rf"/namespaces/{ns}/pods/", status=504, times=2))
    proxy.inject(Fault("POST", rf"/namespaces/{ns}/workloads", drop=True, times=1))
    proxy.inject(Fault("PUT", rf"/namespaces/{ns}/workloads/.*/status", status=503, times=1))
    code, report, stderr = apply(proxy.kubeconfig(tmp_path))
    assert code == 0, stderr
    assert report["retries"] >= 4 and report["stopped"] is False and report["errors"] == []
    assert proxy.seen("PUT", rf"/namespaces/{ns}/pods/")[:3] == ["504", "504", "200"]
    assert_consistent(cluster, ns, complete=True)


def test_throttling_waits_as_long_as_retry_after_asks(cluster, proxy, ns, tmp_path):
    proxy.inject(Fault("GET", r"/clusterqueues", status=429, headers={"Retry-After": "2"}, times=1))
    started = time.monotonic()
    code, report, stderr = apply(proxy.kubeconfig(tmp_path))
    assert code == 0 and report["retries"] >= 1, stderr
    assert time.monotonic() - started >= 2
    assert_consistent(cluster, ns, complete=True)


def test_a_write_whose_answer_is_lost_is_not_done_twice(cluster, proxy, ns, tmp_path):
    """The apiserver did the write; the client never heard. The retry finds it done."""
    proxy.inject(Fault("POST", rf"/namespaces/{ns}/workloads", drop_after=True, times=2))
    proxy.inject(Fault("PUT", rf"/namespaces/{ns}/pods/", drop_after=True, times=2))
    proxy.inject(Fault("DELETE", r"/pods/", drop_after=True, times=1))
    code, report, stderr = apply(proxy.kubeconfig(tmp_path))
    assert code == 0 and report["retries"] >= 4, stderr
    assert_consistent(cluster, ns, complete=True)


def test_a_server_gone_mid_apply_stops_with_one_line_keeping_the_writes_done(cluster, proxy, ns, tmp_path):
    kubeconfig = proxy.kubeconfig(tmp_path)

    def gone_at_the_first_ungate(method: str, path: str) -> None:
        if method == "PUT" and f"/namespaces/{ns}/pods/" in path:
            proxy.down = True
    proxy.hook = gone_at_the_first_ungate
    code, report, stderr = apply(kubeconfig)
    assert code == 3, stderr
    assert report["stopped"] is True and report["retries"] >= 5
    assert sum(w.startswith(f"status Workload {ns}/") for w in report["writes"]) == PODS  # before the fault
    assert not any(w.startswith(f"ungate Pod {ns}/") for w in report["writes"])
    # The server went away at the first ungate: that write's retries end the apply, or the lease
    # they keep from being renewed does first; either way the line names the server that failed.
    last = report["errors"][-1]
    assert (last.startswith(f"ungating Pod {ns}/p") or last.startswith("Lease ")) and proxy.url in last, last
    assert_consistent(cluster, ns, complete=False)

    proxy.hook = None
    proxy.clear()
    code, report, stderr = apply(kubeconfig)  # the next apply finishes the job
    assert code == 0 and report["errors"] == [], stderr
    assert sum(w.startswith(f"ungate Pod {ns}/") for w in report["writes"]) == QUOTA
    assert_consistent(cluster, ns, complete=True)


def test_a_server_gone_mid_apply_in_text_prints_the_writes_one_error_and_the_summary(cluster, proxy, ns, tmp_path):
    proxy.inject(Fault("PUT", rf"/namespaces/{ns}/pods/", drop=True, times=None))
    code, out, stderr = apply(proxy.kubeconfig(tmp_path), fmt="text")
    assert code == 3
    one_error_line(stderr, f"ungating Pod {ns}/p", f"on {proxy.url}", "after retrying", "run the command again")
    assert f"status Workload {ns}/pod-p0" in out
    assert out.splitlines()[-1].endswith("stopped before the end: run apply again to finish")
    assert_consistent(cluster, ns, complete=False)


def test_five_conflicts_in_a_row_fail_that_object_only(cluster, proxy, ns, tmp_path):
    proxy.inject(Fault("PUT", rf"/namespaces/{ns}/pods/p0(\?|$)", status=409, times=None))
    code, out, stderr = apply(proxy.kubeconfig(tmp_path), fmt="text")
    assert code == 1
    one_error_line(stderr, f"ungating Pod {ns}/p0 on {proxy.url}: HTTP 409 Conflict", "kept changing")
    assert proxy.seen("PUT", rf"/namespaces/{ns}/pods/p0(\?|$)") == ["409"] * 5
    retries = re.search(r", 1 failed, (\d+) retries$", out.splitlines()[-1])
    assert retries and int(retries.group(1)) >= 4, out  # the four conflicts after the first
    assert sum(line.startswith(f"ungate Pod {ns}/") for line in out.splitlines()) == QUOTA - 1
    proxy.clear()
    assert apply(proxy.kubeconfig(tmp_path))[0] == 0
    assert_consistent(cluster, ns, complete=True)


def test_a_404_names_the_list_and_the_remedy(cluster, proxy, ns, tmp_path):
    proxy.inject(Fault("GET", r"/clusterqueues", status=404, times=None))
    code, out, stderr = apply(proxy.kubeconfig(tmp_path), fmt="text")
    assert code == 1 and out == ""
    one_error_line(stderr, f"listing clusterqueues on {proxy.url}: HTTP 404 Not Found", "clueue crds")
    assert_consistent(cluster, ns, complete=False)


def test_an_apiserver_restart_mid_apply_loses_nothing_and_a_later_apply_completes(cluster, proxy, ns, tmp_path):
    kubeconfig = proxy.kubeconfig(tmp_path)
    ungating = threading.Event()

    def restart_at_the_first_ungate(method: str, path: str) -> None:
        if method == "PUT" and f"/namespaces/{ns}/pods/" in path and not ungating.is_set():
            ungating.set()
            time.sleep(0.5)  # the apiserver goes down meanwhile: this request finds none
    proxy.hook = restart_at_the_first_ungate
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        applying = pool.submit(apply, kubeconfig)
        assert ungating.wait(120)
        # From this thread: the kernel kills the new apiserver with the thread that started it.
        cluster.restart_apiserver()
        code, report, stderr = applying.result()
    proxy.hook = None
    # Either the retries outlasted the restart, or the apply stopped, saying so, with its writes.
    assert code in (0, 3), stderr
    assert report["retries"] >= 1 and report["stopped"] is (code == 3)
    assert_consistent(cluster, ns, complete=code == 0)
    code, report, stderr = apply(kubeconfig)
    assert code == 0, stderr
    assert_consistent(cluster, ns, complete=True)


def test_an_unreachable_server_is_one_line_and_exit_code_3(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}",
                                               "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    done = subprocess.run([sys.executable, "-m", "clueue.adapters.cli", "apply", "--kubeconfig", str(kubeconfig)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr == (f"error: discovering the API groups on https://127.0.0.1:{port}: connection refused, "
                           "after retrying; check that the API server is running and reachable at that address "
                           "(kubectl cluster-info), then run the command again\n")
