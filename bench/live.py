"""``clueue bench --live``: the controller measured against a real API server, as a process of its own.

Two parts, each with a fresh ``clueue controller`` process (so that each has its own memory
and metrics), run one after the other against one cluster (:mod:`clueue.bench.live_cluster`):

(a) :mod:`clueue.bench.live_pods`: gated Pods created as fast as the API takes them, the rate
    at which the controller ungates them, and beside it the apiserver's own Pod write rate
    measured in the same run with the same client threads (the physical limit: every ungate is
    such a write).
(b) :mod:`clueue.bench.live_workloads`: a generated scenario (Kueue's ``baseline`` by default)
    created as Workload objects at its arrival times, each marked Finished after its run time;
    makespan against the replay's physical limit, average time to admission per class against
    Kueue's thresholds, the controller's peak memory, and its cycles from ``/metrics``.

docs/benchmarks.md ("Live") explains every figure and the targets.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from rich.console import Console
from rich.table import Table

from clueue.engine import AdapterError

from .live_cluster import ControllerProcess, cluster, cycle_summary
from .live_kube import LiveApi, answer, new_api
from .live_pods import create_pods, delete_pods, patch_rate, pod_setup
from .live_workloads import create_config, live_objects, run_workloads
from .replay import ADMISSION_FACTOR, KUEUE_THRESHOLDS
from .report import environment, met_cell
from .scenarios import generate

__all__ = ["LiveOptions", "run_live", "live_targets", "render_live", "LIVE_KIND",
           "PODS_PER_SECOND", "POD_RATE_FACTOR", "MAKESPAN_FACTOR", "PEAK_RSS_MB"]

LIVE_KIND = "LiveBenchReport"
PODS_PER_SECOND = 1000.0  # target (a): ungated per second ...
POD_RATE_FACTOR = 1.5  # ... or within 1.5x of the apiserver's Pod write rate, if that is lower
MAKESPAN_FACTOR = 1.5  # target (b): makespan within 1.5x the physical limit
PEAK_RSS_MB = 300.0  # target (b): the controller's peak resident memory

Say = Callable[[str], None]


@dataclass(frozen=True)
class LiveOptions:
    """What a live run does. ``pods=0`` skips part (a), ``scenario=None`` part (b)."""

    kubeconfig: str | None = None
    pods: int = 5000
    clients: int = 8
    scenario: str | None = "baseline"
    seed: int = 0
    scale: float = 1.0
    timeout_s: float = 900.0  # per part: how long to wait for the controller before reporting what it did
    profile: str | None = None  # write the controller's cProfile statistics to <profile>.<part>
    controller_args: tuple[str, ...] = ()


def _controller(kubeconfig: str, namespace: str, options: LiveOptions, part: str, say: Say) -> ControllerProcess:
    controller = ControllerProcess(kubeconfig, namespace, extra_args=options.controller_args,
                                   profile=f"{options.profile}.{part}" if options.profile else None)
    say(f"started clueue controller (pid {controller.pid}, metrics {controller.url}, log {controller.log_path})")
    controller.wait_ready()
    return controller


def _total(metrics: Mapping[str, float], name: str) -> float:
    """A counter's samples summed over their labels."""
    return sum(v for k, v in metrics.items() if k == name or k.startswith(name + "{"))


def _finish_part(controller: ControllerProcess, before: Mapping[str, float], counter: str, seen: int,
                 settle_s: float = 60.0) -> dict[str, Any]:
    """The controller's peak memory and metrics over the part, read before it is stopped.

    A cycle's metrics are recorded when it ends, after its last write, so the part's last
    ungate or admission is seen while that cycle still runs: the metrics are read once
    ``counter`` has grown by the ``seen`` writes the client saw, or after ``settle_s``.
    """
    deadline = time.monotonic() + settle_s
    metrics = controller.metrics()
    while _total(metrics, counter) - _total(before, counter) < seen and time.monotonic() < deadline:
        time.sleep(0.2)
        metrics = controller.metrics()
    time.sleep(0.5)  # a cycle's counters are not recorded at one instant: read them once its recording is over
    metrics = controller.metrics() or metrics
    rss = controller.peak_rss_mb()
    summary = cycle_summary(metrics, dict(before))
    code = controller.stop()
    return {"controllerPeakRssMB": rss, "controller": summary, "controllerExitCode": code,
            "controllerLog": str(controller.log_path)}


def _pods_part(api: LiveApi, kubeconfig: str, namespace: str, run: str, options: LiveOptions, say: Say) -> dict[str, Any]:
    pods_ns = f"{run}-pods"
    pod_setup(api, pods_ns, run, options.pods)
    controller = _controller(kubeconfig, namespace, options, "pods", say)
    try:
        before = controller.metrics()
        result = create_pods(api, pods_ns, run, options.pods, options.clients, options.timeout_s, say)
        result.update(_finish_part(controller, before, "clueue_pods_ungated_total", result["ungated"]))
    finally:
        controller.stop()
    say(f"controller stopped; patching the {options.pods} Pods from {options.clients} clients (the apiserver's write rate)")
    result.update(patch_rate(api, pods_ns, options.pods, options.clients))
    delete_pods(api, pods_ns, run)
    return result


def _workloads_part(api: LiveApi, kubeconfig: str, namespace: str, run: str, options: LiveOptions,
                    say: Say) -> dict[str, Any]:
    assert options.scenario
    scenario = generate(options.scenario, seed=options.seed, scale=options.scale)
    config, _ = live_objects(scenario, run)
    create_config(api, config)
    controller = _controller(kubeconfig, namespace, options, "workloads", say)
    try:
        before = controller.metrics()
        result = {"scenario": scenario.name, "seed": options.seed, "scale": options.scale,
                  **run_workloads(api, scenario, run, options.clients, options.timeout_s, say)}
        result.update(_finish_part(controller, before, "clueue_admitted_workloads_total", result["admitted"]))
    finally:
        controller.stop()
    return result


def run_live(options: LiveOptions, say: Say = lambda _: None) -> dict[str, Any]:
    """Run the live benchmark; returns the report (``kind: LiveBenchReport``) with its targets.

    Raises:
        AdapterError: no cluster to run against, the controller did not start, or the API
            refused the benchmark's setup.
    """
    run = f"bl{uuid.uuid4().hex[:6]}"
    report: dict[str, Any] = {"apiVersion": "clueue.dev/v1", "kind": LIVE_KIND, "environment": environment(),
                              "run": run, "clients": options.clients}
    with cluster(options.kubeconfig, say) as (kubeconfig, description):
        report["cluster"] = description
        api = new_api(kubeconfig, options.clients + 4)  # + the watches and the odd read
        try:
            namespace = f"{run}-system"  # the controller's own namespace (its leases and Events)
            answer(api.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                                             _preload_content=False))
            start = time.monotonic()
            if options.pods:
                report["pods"] = _pods_part(api, kubeconfig, namespace, run, options, say)
            if options.scenario:
                report["workloads"] = _workloads_part(api, kubeconfig, namespace, run, options, say)
            report["seconds"] = round(time.monotonic() - start, 1)
        except Exception as e:
            if isinstance(e, AdapterError):
                raise
            raise AdapterError(f"live benchmark: {type(e).__name__}: {e}") from e
        finally:
            api.api.close()
    report["targets"] = live_targets(report)
    return report


def live_targets(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets for a live run, each with its value and whether it is met."""
    out: list[dict[str, Any]] = []
    pods = report.get("pods")
    if pods:
        limit = pods.get("patchPerSecond") or 0.0
        need = limit / POD_RATE_FACTOR if 0 < limit < PODS_PER_SECOND else PODS_PER_SECOND  # the lower bound applies
        got = pods.get("ungatedPerSecond") or 0.0
        out.append({"name": "pods ungated per second, end to end", "value": f"{got:,.0f}/s",
                    "target": f">= {need:,.0f}/s (1,000/s, or the apiserver's {limit:,.0f} writes/s / {POD_RATE_FACTOR:g})",
                    "met": got >= need and pods["ungated"] == pods["pods"]})
    wl = report.get("workloads")
    if wl:
        limit = MAKESPAN_FACTOR * wl["physicalLimitSeconds"]
        out.append({"name": "makespan", "target": f"<= {limit:.1f} s ({MAKESPAN_FACTOR:g}x physical limit)",
                    "value": f"{wl['makespanSeconds']:.1f} s",
                    "met": wl["makespanSeconds"] <= limit and wl["finished"] == wl["workloads"]})
        for cls in ("large", "medium", "small"):
            if cls in wl["admissionSeconds"]:
                bound = KUEUE_THRESHOLDS[cls] / ADMISSION_FACTOR
                v = wl["admissionSeconds"][cls]["average"]
                out.append({"name": f"average admission {cls}", "value": f"{v:.2f} s", "met": v <= bound,
                            "target": f"<= {bound:.1f} s (Kueue {KUEUE_THRESHOLDS[cls]:g} s / {ADMISSION_FACTOR:g})"})
        rss = wl.get("controllerPeakRssMB")
        out.append({"name": "controller peak RSS", "target": f"<= {PEAK_RSS_MB:.0f} MB",
                    "value": f"{rss:.0f} MB" if rss is not None else "unknown", "met": rss is not None and rss <= PEAK_RSS_MB})
    return out


def _n(v: float | None, fmt: str = "{:,.0f}") -> str:
    return "–" if v is None else fmt.format(v)


def _controller_cells(part: Mapping[str, Any]) -> tuple[str, str]:
    c = part.get("controller") or {}
    phases = c.get("phases") or {}
    shown = ", ".join(f"{p} {v['meanSeconds'] * 1000:.0f}" for p, v in phases.items())
    return str(c.get("cycles", "–")), shown or "–"


def render_live(report: Mapping[str, Any], console: Console) -> None:
    """Print the live report: one table per part, then the targets."""
    console.print(f"Live benchmark on the {report['cluster']}, {report['clients']} client threads (run {report['run']})")
    pods = report.get("pods")
    if pods:
        t = Table(title="(a) Gated Pods ungated by the controller, beside the apiserver's Pod write rate")
        for col in ("pods", "created/s", "ungated/s end to end", "steady (middle 80%)", "apiserver writes/s",
                    "gated→ungated median / p99", "cycles", "mean phase ms", "peak RSS"):
            t.add_column(col, justify="right")
        lat = pods.get("gatedToUngatedSeconds") or {}
        cycles, phases = _controller_cells(pods)
        t.add_row(f"{pods['ungated']:,}/{pods['pods']:,}", _n(pods["createPerSecond"]), _n(pods["ungatedPerSecond"]),
                  _n(pods["steadyUngatedPerSecond"]), _n(pods.get("patchPerSecond")),
                  f"{_n(lat.get('median'), '{:.2f}')} / {_n(lat.get('p99'), '{:.2f}')} s", cycles, phases,
                  f"{_n(pods.get('controllerPeakRssMB'))} MB")
        console.print(t)
    wl = report.get("workloads")
    if wl:
        t = Table(title=f"(b) {wl['scenario']} (scale {wl['scale']:g}) as Workload objects at their arrival times; "
                        "admission: average seconds from arrival")
        for col in ("workloads", "finished", "makespan", "limit", "ratio", "utilization", "small", "medium", "large",
                    "evictions", "cycles", "mean phase ms", "peak RSS"):
            t.add_column(col, justify="right")
        adm = wl["admissionSeconds"]
        cycles, phases = _controller_cells(wl)
        t.add_row(f"{wl['workloads']:,}", f"{wl['finished']:,}", f"{wl['makespanSeconds']:.1f} s",
                  f"{wl['physicalLimitSeconds']:.1f} s", _n(wl["makespanOverLimit"], "{:.2f}x"),
                  f"{wl['utilization']:.1%}", *(_n(adm.get(c, {}).get("average"), "{:.2f}") for c in ("small", "medium", "large")),
                  str(sum(wl["evictions"].values())), cycles, phases, f"{_n(wl.get('controllerPeakRssMB'))} MB")
        console.print(t)
        if wl.get("timedOut"):
            console.print(f"[bold red]timed out[/]: {wl['finished']:,} of {wl['workloads']:,} finished within --live-timeout; "
                          "the figures cover those")
    targets = Table(title="Targets")
    for col in ("what", "target", "measured", ""):
        targets.add_column(col)
    for tg in report["targets"]:
        targets.add_row(tg["name"], tg["target"], tg["value"], met_cell(tg["met"]))
    console.print(targets)
    for part in (pods, wl):
        for key in ("createErrors", "patchErrors", "errors", "watchErrors"):
            for e in (part or {}).get(key) or []:
                console.print(f"[red]{key}:[/] {e}")
