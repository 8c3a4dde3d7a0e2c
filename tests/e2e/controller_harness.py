"""Running ``clueue controller`` as a process of its own against a test ControlPlane.

Shared by the controller's e2e tests, its fault tests and the live benchmarks::

    proc = start_controller(plane, "--leader-elect", "--lease-duration", "4")
    wait_until(lambda: lease_holder(api, "clueue-controller"), 30, "a leader")
    assert stop_controller(proc) == 0

The controller is started with the plane's admin kubeconfig and ``--metrics-bind-address
127.0.0.1:0`` (a free port; :func:`metrics_port` reads it from the log). Its output (logs)
goes to a file, so a chatty controller never blocks on a full pipe: :func:`controller_log`.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from collections.abc import Iterator
from typing import Any, Callable, TypeVar

import pytest
from kubernetes import client

from tests.testenv.build import ensure_binaries
from tests.testenv.control_plane import ControlPlane

__all__ = ["cluster", "api", "start_controller", "stop_controller", "controller_log", "wait_until", "lease_holder", "metrics_port",
           "CONTROLLER_NS", "LEADER_LEASE", "DECIDER_LEASE"]

REPO = Path(__file__).resolve().parents[2]
CONTROLLER_NS = "clueue-system"
LEADER_LEASE = "clueue-controller"
DECIDER_LEASE = "clueue-decider"
T = TypeVar("T")

# `python -m clueue.adapters.cli` would run cli.py as __main__, beside the clueue.adapters.cli
# module its subcommands register on: call the installed entry point instead.
_MAIN = "import sys; from clueue.adapters.cli import main; sys.argv[0] = 'clueue'; main()"


@pytest.fixture(scope="module")
def cluster() -> Iterator[ControlPlane]:
    """A control plane of the test module's own, with the controller's namespace: a controller
    decides over the whole cluster, so it must not run on the shared ``kube`` fixture. Import it
    (and ``api``) into a test module to use it there."""
    with ControlPlane(ensure_binaries()) as plane:
        plane.create_namespace(CONTROLLER_NS)
        yield plane


@pytest.fixture
def api(cluster: ControlPlane) -> Iterator[client.ApiClient]:
    """An admin client of the module's control plane."""
    with cluster.api_client() as admin:
        yield admin


def start_controller(plane: ControlPlane, *args: str, env: dict[str, str] | None = None,
                     kubeconfig: Path | None = None, gating: bool = True) -> subprocess.Popen[bytes]:
    """``clueue controller --kubeconfig <admin> --metrics-bind-address 127.0.0.1:0 *args`` in a
    new process; its logs go to a file (``proc.log_path``). Without ``--webhook`` in ``args`` it
    runs with ``--no-webhook`` (``gating=False``: neither, the controller decides)."""
    log = Path(tempfile.mkstemp(prefix="clueue-controller-", suffix=".log")[1])
    # Without --webhook, explicitly without: outside a cluster the controller refuses to run ungated.
    ungated = () if not gating or "--webhook" in args or "--no-webhook" in args else ("--no-webhook",)
    argv = [sys.executable, "-c", _MAIN, "controller", "--kubeconfig", str(kubeconfig or plane.kubeconfig),
            "--metrics-bind-address", "127.0.0.1:0", *ungated, *args]
    environment = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=environment)
    proc.log_path = log  # type: ignore[attr-defined]
    return proc


def controller_log(proc: subprocess.Popen[bytes]) -> str:
    """Everything the controller wrote so far."""
    return Path(proc.log_path).read_text(errors="replace")  # type: ignore[attr-defined]


def stop_controller(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> int:
    """SIGTERM, then the exit code (SIGKILL and an AssertionError if it does not exit in time)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"the controller did not exit {timeout:g} s after SIGTERM:\n{controller_log(proc)[-3000:]}")


def wait_until(predicate: Callable[[], T], timeout: float, what: str = "the condition",
               interval: float = 0.1, proc: subprocess.Popen[bytes] | None = None) -> T:
    """The first truthy value of ``predicate()``, polled every ``interval`` s; an AssertionError
    naming ``what`` (with the controller's log when ``proc`` is given) after ``timeout`` s.
    A guard against hanging, not a measure of speed."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            log = f"\ncontroller log:\n{controller_log(proc)[-4000:]}" if proc is not None else ""
            raise AssertionError(f"waited {timeout:g} s for {what}{log}")
        time.sleep(interval)


def lease_holder(api: client.ApiClient, name: str, namespace: str = CONTROLLER_NS) -> str:
    """The holderIdentity of a Lease ("" if none, or no such Lease)."""
    try:
        lease: Any = client.CoordinationV1Api(api).read_namespaced_lease(name, namespace)
    except client.ApiException as e:
        if e.status == 404:
            return ""
        raise
    return str((lease.spec and lease.spec.holder_identity) or "")


def metrics_port(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> int:
    """The port the controller serves /metrics on, read from its log."""
    def found() -> int:
        match = re.search(r"serving /metrics.* on [\d.]+:(\d+)", controller_log(proc))
        return int(match.group(1)) if match else 0
    return wait_until(found, timeout, "the controller to serve /metrics", proc=proc)


def free_port() -> int:
    """A TCP port free on loopback now (for a webhook server the test registers by URL)."""
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def metric(port: int, name: str, **labels: str) -> float | None:
    """The value of sample ``name`` with (at least) ``labels`` on the controller's /metrics, or
    None when there is no such sample (summed over the samples the labels leave open)."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    values = [s.value for family in text_string_to_metric_families(text) for s in family.samples
              if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    return sum(values) if values else None


def unregister_webhooks(api: client.ApiClient) -> None:
    """Delete clueue's two webhook configurations: with failurePolicy Fail and no server left
    they would refuse the queued Pods of the tests after."""
    admission = client.AdmissionregistrationV1Api(api)
    for delete, name in ((admission.delete_mutating_webhook_configuration, "clueue-pod-mutating"),
                         (admission.delete_validating_webhook_configuration, "clueue-pod-validating")):
        try:
            delete(name)
        except client.ApiException as e:
            if e.status != 404:
                raise
