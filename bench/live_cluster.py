"""Where the live benchmark runs: a cluster, and the controller as a process of its own.

:func:`cluster` yields a kubeconfig: the one given, or, when none is, a throwaway control plane
(etcd + kube-apiserver with clueue's CRDs) from the test environment of a clueue checkout
(``tests/testenv``). That environment is not part of the installed package: it is imported only
when it can be found (the current directory or the checkout this package was installed from),
and a clear error says what to do otherwise.

:class:`ControllerProcess` runs ``clueue controller --kubeconfig K --namespace NS
--metrics-bind 127.0.0.1:PORT`` in a child process, waits until it is ready (``/readyz``),
reads its peak resident memory from ``/proc/<pid>/status`` (``VmHWM``) and its metrics from
``/metrics``, and stops it with SIGTERM. With ``profile`` it runs under :mod:`cProfile`,
whose statistics are written to that file when the controller exits.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator

from prometheus_client.parser import text_string_to_metric_families

from clueue.engine import AdapterError

__all__ = ["cluster", "ControllerProcess", "cycle_summary", "profiled_main"]

Say = Callable[[str], None]
READY_TIMEOUT_S = 120.0


def _import_testenv() -> Any:
    """``tests.testenv.control_plane`` and ``tests.testenv.build``, from a clueue checkout, or None."""
    checkout = Path(__file__).resolve().parents[1]  # an editable install: bench/ sits in the checkout
    for root in (Path.cwd(), checkout):
        if (root / "tests" / "testenv" / "control_plane.py").is_file() and str(root) not in sys.path:
            sys.path.insert(0, str(root))
    try:
        return (importlib.import_module("tests.testenv.control_plane"), importlib.import_module("tests.testenv.build"))
    except ImportError:
        return None


@contextlib.contextmanager
def cluster(kubeconfig: str | None, say: Say) -> Iterator[tuple[str, str]]:
    """Yield ``(kubeconfig path, description)`` of the cluster to run against.

    Without ``kubeconfig`` a test control plane is started for the run and stopped after it.

    Raises:
        AdapterError: no kubeconfig and no test environment to start a control plane from, or it
            did not start.
    """
    if kubeconfig:
        if not Path(kubeconfig).is_file():
            raise AdapterError(f"--kubeconfig {kubeconfig}: no such file")
        yield kubeconfig, f"cluster of {kubeconfig}"
        return
    modules = _import_testenv()
    if modules is None:
        raise AdapterError("no --kubeconfig given, and the test control plane (tests/testenv of a clueue checkout) "
                           "cannot be imported: pass --kubeconfig, or run from the root of a clueue checkout whose "
                           "etcd and kube-apiserver are built (python -m tests.testenv.build)")
    control_plane, build = modules
    try:
        binaries = build.ensure_binaries(progress=say)
        plane = control_plane.ControlPlane(binaries, progress=say)
        plane.start()
    except (build.BuildError, control_plane.ControlPlaneError) as e:
        raise AdapterError(f"could not start the test control plane: {e}") from None
    try:
        yield str(plane.kubeconfig), f"test control plane (etcd + kube-apiserver {binaries.kubernetes_version}, loopback)"
    finally:
        plane.stop()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """In the child, before exec: Linux sends it SIGTERM should the benchmark die first.

    The controller runs in a session of its own (a Ctrl-C meant for the benchmark must not stop
    it mid-measurement), so nothing else would stop it if the benchmark were killed outright.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # 1: PR_SET_PDEATHSIG


class ControllerProcess:
    """``clueue controller`` in a child process of its own (see the module docstring)."""

    def __init__(self, kubeconfig: str, namespace: str, *, extra_args: tuple[str, ...] = (),
                 profile: str | None = None, log_dir: str | None = None) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        gating = () if "--webhook" in extra_args or "--no-webhook" in extra_args else ("--no-webhook",)
        argv = ["controller", "--kubeconfig", kubeconfig, "--namespace", namespace,
                "--metrics-bind-address", f"127.0.0.1:{self.port}", *gating, *extra_args]
        if profile:
            code = (f"from clueue.adapters.cli import main; from clueue.bench.live_cluster import profiled_main; "
                    f"profiled_main(main, {argv!r}, {profile!r})")
        else:
            code = f"import sys; from clueue.adapters.cli import main; sys.argv = ['clueue'] + {argv!r}; main()"
        self.log_path = Path(log_dir or tempfile.mkdtemp(prefix="clueue-bench-live-")) / f"controller-{self.port}.log"
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as response:
                return int(response.status), response.read().decode()
        except urllib.error.HTTPError as e:
            return int(e.code), ""
        except (urllib.error.URLError, OSError):
            return 0, ""

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> float:
        """Wait until ``/readyz`` answers 200; returns the seconds it took.

        Raises:
            AdapterError: the controller exited or was not ready in time (its log's tail included).
        """
        start = time.monotonic()
        while True:
            if self.popen.poll() is not None:
                raise AdapterError(f"clueue controller exited with code {self.popen.returncode} before it was ready; "
                                   f"last lines of {self.log_path}:\n{self.log_tail()}")
            if self._get("/readyz")[0] == 200:
                return time.monotonic() - start
            if time.monotonic() - start > timeout_s:
                raise AdapterError(f"clueue controller not ready within {timeout_s:.0f} s; last lines of "
                                   f"{self.log_path}:\n{self.log_tail()}")
            time.sleep(0.1)

    def peak_rss_mb(self) -> float | None:
        """The process's peak resident memory so far (``VmHWM``), in MB (10^6 bytes)."""
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) * 1024 / 1e6, 1)
        except OSError:
            pass
        return None

    def metrics(self) -> dict[str, float]:
        """Every sample of ``/metrics``, keyed ``name{label="value",...}`` ({} if it cannot be read)."""
        status, text = self._get("/metrics")
        if status != 200:
            return {}
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
                out[f"{s.name}{{{labels}}}" if labels else s.name] = float(s.value)
        return out

    def stop(self, grace_s: float = 20.0) -> int | None:
        """SIGTERM the controller (its process group), then SIGKILL after ``grace_s``; its exit code."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()
        return self.popen.returncode


def profiled_main(main: Callable[[], object], argv: list[str], path: str) -> None:
    """Run ``clueue <argv>`` (``main``, the command line's entry point) with every thread under
    :mod:`cProfile`; merged statistics go to ``path``.

    :func:`cProfile.run` sees the main thread only, and the controller decides and writes in
    others: each thread started from here gets a profiler of its own. The child process's code
    hands ``main`` in: the benchmarks sit below the command line and do not import it.
    """
    import cProfile
    import pstats
    import threading

    profiles = [cProfile.Profile()]
    thread_run = threading.Thread.run

    def run(self: threading.Thread) -> None:
        profile = cProfile.Profile()
        profiles.append(profile)
        profile.enable()
        try:
            thread_run(self)
        finally:
            profile.disable()

    threading.Thread.run = run  # type: ignore[method-assign]
    sys.argv = ["clueue", *argv]
    profiles[0].enable()
    try:
        main()
    finally:
        profiles[0].disable()
        stats = pstats.Stats(profiles[0])
        for profile in profiles[1:]:
            with contextlib.suppress(TypeError):  # a thread that never ran code has no statistics
                stats.add(profile)
        stats.dump_stats(path)


def _labels(key: str) -> dict[str, str]:
    """The labels of a sample key made by :meth:`ControllerProcess.metrics` (values hold no commas here)."""
    if "{" not in key:
        return {}
    parts = (part.split("=", 1) for part in key[key.index("{") + 1:-1].split(",") if part)
    return {k: v.strip('"') for k, v in parts}


def cycle_summary(after: dict[str, float], before: dict[str, float] | None = None) -> dict[str, Any]:
    """What the controller's metrics say about a phase of the run (``after`` minus ``before``).

    Cycles by outcome, mean seconds per cycle phase and per solver step, writes by verb, apply
    errors and retries, and the pod counters.
    """
    before = before or {}

    def delta(key: str) -> float:
        return after.get(key, 0.0) - before.get(key, 0.0)

    def by_label(name: str, label: str) -> dict[str, float]:
        return {_labels(k)[label]: delta(k) for k in after if k.startswith(name + "{") and label in _labels(k)}

    def means(histogram: str) -> dict[str, dict[str, float]]:
        counts, sums = by_label(histogram + "_count", "phase"), by_label(histogram + "_sum", "phase")
        return {p: {"count": round(n), "meanSeconds": round(sums.get(p, 0.0) / n, 4), "totalSeconds": round(sums.get(p, 0.0), 2)}
                for p, n in sorted(counts.items()) if n}

    cycles = by_label("clueue_cycles_total", "outcome")
    return {
        "cycles": round(sum(cycles.values())),
        "cyclesByOutcome": {k: round(v) for k, v in sorted(cycles.items()) if v},
        "phases": means("clueue_cycle_phase_duration_seconds"),
        "solverPhases": means("clueue_solver_phase_duration_seconds"),
        "writes": {k: round(v) for k, v in sorted(by_label("clueue_apply_writes_total", "verb").items()) if v},
        "applyErrors": round(delta("clueue_apply_errors_total")),
        "applyRetries": round(delta("clueue_apply_retries_total")),
        "podsUngated": round(delta("clueue_pods_ungated_total")),
        "podsRejected": round(delta("clueue_pods_rejected_total")),
    }
