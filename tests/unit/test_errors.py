"""API failures: retried with back-off when transient, counted, and reported as one actionable line.

The requests here never reach a server (a refused port, or exceptions raised in place of the
client's); tests/e2e/test_faults.py injects the same faults in front of a real apiserver.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import urllib3
from click.testing import CliRunner
from kubernetes.client.exceptions import ApiException

from clueue.adapters.cli import main
from clueue.adapters.kube import errors, retry
from clueue.adapters.kube.apply import ApplyResult


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The back-off waits asked for, instead of sleeping them."""
    asked: list[float] = []
    monkeypatch.setattr(retry, "_sleep", asked.append)
    return asked


def _api_error(status: int, reason: str, message: str = "", headers: dict[str, str] | None = None) -> ApiException:
    error = ApiException(status=status, reason=reason)
    error.body = json.dumps({"kind": "Status", "message": message}) if message else None
    error.headers = headers
    return error


def _failing(*failures: BaseException, result: Any = "done") -> Any:
    """A call that raises ``failures`` one after the other, then returns ``result``."""
    pending = list(failures)

    def fn() -> Any:
        if pending:
            raise pending.pop(0)
        return result
    return fn


def _refused() -> urllib3.exceptions.NewConnectionError:
    try:
        raise ConnectionRefusedError(111, "Connection refused")
    except ConnectionRefusedError as cause:
        error = urllib3.exceptions.NewConnectionError(
            None, "Failed to establish a new connection")  # type: ignore[arg-type]
        error.__cause__ = cause
        return error


# -- retries --------------------------------------------------------------------------------

@pytest.mark.parametrize("failure", [
    _api_error(504, "Gateway Timeout"), _api_error(503, "Service Unavailable"),
    _api_error(500, "Internal Server Error"),
    _api_error(502, "Bad Gateway"), _api_error(429, "Too Many Requests"),
    urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104, "Connection reset by peer")),
], ids=["504", "503", "500", "502", "429", "reset"])
def test_a_transient_failure_is_retried_with_growing_jittered_waits_and_counted(failure: BaseException,
                                                                                 waits: list[float]) -> None:
    with retry.counting_retries() as tally:
        assert retry.call(_failing(failure, failure, failure)) == "done"
    assert tally.retries == 3
    assert len(waits) == 3 and waits[0] < waits[2] and all(0 < w <= retry.MAX_WAIT_S + 1 for w in waits)


def test_throttling_waits_as_long_as_retry_after_asks(waits: list[float]) -> None:
    throttled = _api_error(429, "Too Many Requests", headers={"Retry-After": "3"})
    assert retry.call(_failing(throttled)) == "done"
    assert waits == [3.0]


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422])
def test_a_refusal_is_not_retried(status: int, waits: list[float]) -> None:
    with retry.counting_retries() as tally, pytest.raises(ApiException):
        retry.call(_failing(_api_error(status, "No")))
    assert tally.retries == 0 and waits == []


def test_retrying_gives_up_after_its_attempts_with_the_last_error(waits: list[float]) -> None:
    with pytest.raises(ApiException) as raised:
        retry.call(_failing(*[_api_error(503, "Service Unavailable")] * 10))
    assert raised.value.status == 503 and len(waits) == retry.ATTEMPTS - 1


def test_a_retried_call_inside_another_is_retried_by_the_outer_one_only(waits: list[float]) -> None:
    inner = _failing(*[_api_error(503, "Service Unavailable")] * 3)
    assert retry.call(lambda: retry.call(inner)) == "done"
    assert len(waits) == 3  # not 3 × ATTEMPTS


def test_five_conflicts_in_a_row_give_up_with_the_conflict_each_from_a_fresh_read(waits: list[float]) -> None:
    reads: list[int] = []

    def read() -> dict[str, Any]:
        reads.append(1)
        return {"n": len(reads)}

    def write(obj: dict[str, Any]) -> None:
        raise _api_error(409, "Conflict", "the object has been modified")

    with retry.counting_retries() as tally, pytest.raises(ApiException) as raised:
        retry.update_with_retry(read, lambda obj: obj, write)
    assert raised.value.status == 409 and len(reads) == retry.CONFLICT_TRIES and tally.retries == 4


def test_an_object_deleted_between_read_and_write_is_not_written_and_not_an_error(waits: list[float]) -> None:
    def write(obj: dict[str, Any]) -> None:
        raise _api_error(404, "Not Found")

    assert retry.update_with_retry(lambda: {"a": 1}, lambda obj: obj, write) is False


# -- messages -------------------------------------------------------------------------------

@pytest.mark.parametrize("failure, kind, words", [
    (_refused(), errors.ClusterUnavailable, ["connection refused", "kubectl cluster-info"]),
    (_api_error(504, "Gateway Timeout"), errors.ClusterUnavailable,
     ["HTTP 504 Gateway Timeout", "after retrying", "again"]),
    (_api_error(403, "Forbidden", 'clusterqueues is forbidden: User "bob" cannot list'),
     errors.ApiRefused, ['User "bob" cannot list', "lacks a permission", "docs/errors.md"]),
    (_api_error(404, "Not Found", "the server could not find the requested resource"),
     errors.ApiRefused, ["HTTP 404 Not Found", "clueue crds | kubectl apply -f -"]),
    (_api_error(409, "Conflict", "the object has been modified"), errors.ApiRefused, ["kept changing", "again"]),
])
def test_a_failure_is_one_line_naming_the_operation_the_server_and_what_to_do(
        failure: BaseException, kind: type, words: list[str]) -> None:
    error = errors.describe(failure, "listing clusterqueues", "https://127.0.0.1:6443")
    assert isinstance(error, kind)
    message = str(error)
    assert message.startswith("listing clusterqueues on https://127.0.0.1:6443: ") and "\n" not in message
    assert all(w in message for w in words), message


def test_the_summary_counts_retries_and_says_an_apply_stopped_early() -> None:
    result = ApplyResult(writes=["create Workload a/b"], errors=["x"], retries=2, stopped=True)
    assert result.summary() == ("1 written, 0 already in place, 1 failed, 2 retries; "
                                "stopped before the end: run apply again to finish")


# -- the command line -----------------------------------------------------------------------

def _unreachable_kubeconfig(tmp_path: Path) -> Path:
    with socket.socket() as sock:  # a port nothing listens on (a moment ago)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    path = tmp_path / "kubeconfig"
    path.write_text(textwrap.dedent(f"""\
        apiVersion: v1
        kind: Config
        clusters: [{{name: c, cluster: {{server: "https://127.0.0.1:{port}", insecure-skip-tls-verify: true}}}}]
        users: [{{name: u, user: {{token: t}}}}]
        contexts: [{{name: c, context: {{cluster: c, user: u}}}}]
        current-context: c
        """))
    return path


@pytest.mark.parametrize("command", [["plan"], ["apply"], ["snapshot"], ["apply", "-o", "json"]])
def test_an_unreachable_server_is_one_error_line_and_exit_code_3(command: list[str], tmp_path: Path,
                                                                 waits: list[float]) -> None:
    result = CliRunner().invoke(main, [*command, "--kubeconfig", str(_unreachable_kubeconfig(tmp_path))])
    assert result.exit_code == 3, result.output
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(
        "error: discovering the API groups on https://127.0.0.1:"), result.stderr
    assert "connection refused" in result.stderr and len(waits) == retry.ATTEMPTS - 1


def test_a_server_that_never_answers_times_out_instead_of_hanging(tmp_path: Path, waits: list[float],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # the module, not the function of that name the package exports
    connect = importlib.import_module("clueue.adapters.kube.connect")
    monkeypatch.setattr(connect, "CONNECT_TIMEOUT_S", 0.2)  # it bounds the TLS handshake too
    monkeypatch.setattr(connect, "READ_TIMEOUT_S", 0.2)
    kubeconfig = _unreachable_kubeconfig(tmp_path)
    with socket.socket() as silent:  # accepts connections (the kernel does) and never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        kubeconfig.write_text(re.sub(r"127\.0\.0\.1:\d+", f"127.0.0.1:{port}", kubeconfig.read_text()))
        result = CliRunner().invoke(main, ["plan", "--kubeconfig", str(kubeconfig)])
    assert result.exit_code == 3, result.output
    assert result.stderr == (f"error: discovering the API groups on https://127.0.0.1:{port}: timed out, after "
                             "retrying; check that the API server is running and reachable at that address "
                             "(kubectl cluster-info), then run the command again\n")


_WITHOUT = """
import os
import sys
from importlib.abc import MetaPathFinder

class Uninstalled(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == os.environ["UNINSTALLED"]:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Uninstalled())
from clueue.adapters.cli import main
sys.argv = ["clueue", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize("command", [["plan"], ["apply"], ["snapshot"]])
def test_without_the_kubernetes_package_a_live_command_says_how_to_install_it(command: list[str],
                                                                              tmp_path: Path) -> None:
    done = _run_without("kubernetes", [*command, "--kubeconfig", str(_unreachable_kubeconfig(tmp_path))])
    assert done.returncode == 1
    assert done.stderr == ("error: the kubernetes client is not installed: "
                           "pip install 'clueue[kube]'\n")


def test_without_tenacity_a_live_command_says_how_to_install_it(tmp_path: Path) -> None:
    done = _run_without("tenacity", ["apply", "--kubeconfig", str(_unreachable_kubeconfig(tmp_path))])
    assert done.returncode == 1
    assert done.stderr == "error: tenacity, which the kube extra installs, is missing: pip install 'clueue[kube]'\n"


def _run_without(module: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    """The command line run in a Python that cannot import ``module`` (as if not installed)."""
    return subprocess.run([sys.executable, "-c", _WITHOUT, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "UNINSTALLED": module})


def test_ctrl_c_is_one_line_and_exit_code_130(monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt
    monkeypatch.setattr("clueue.adapters.cli.plan.guarded_cycle", interrupted)
    example = Path(__file__).resolve().parents[2] / "examples" / "cluster"
    result = CliRunner().invoke(main, ["plan", str(example)])
    assert result.exit_code == 130
    assert result.stderr.startswith("error: interrupted") and result.stderr.count("\n") == 1


def test_a_tls_failure_names_the_kubeconfig_to_check() -> None:
    failure = ApiException(status=0, reason="SSLError\n[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    error = errors.describe(failure, "discovering the API groups", "https://k:6443")
    assert isinstance(error, errors.ClusterUnavailable)
    assert str(error) == ("discovering the API groups on https://k:6443: [SSL: CERTIFICATE_VERIFY_FAILED] certificate "
                          "verify failed; check the kubeconfig's server address and certificate authority")
