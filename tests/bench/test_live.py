"""`clueue bench --live` completes against a real control plane with the real controller process.

Correctness only: every Pod ungated, every Workload admitted and finished, every field of the
report there. How fast anything was is the benchmark's business, never a test's.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from clueue.adapters.cli import main
from clueue.bench import live_cluster
from clueue.bench.live import live_targets
from clueue.bench.live_cluster import cluster, cycle_summary
from clueue.bench.live_workloads import live_objects
from clueue.bench.scenarios import generate
from clueue.engine import AdapterError


@pytest.mark.e2e
def test_a_tiny_live_run_ungates_every_pod_and_admits_and_finishes_every_workload() -> None:
    result = CliRunner().invoke(main, ["bench", "--live", "--pods", "20", "--scale", "0.005", "--clients", "4",
                                       "--live-timeout", "120", "-o", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["kind"] == "LiveBenchReport" and report["cluster"].startswith("test control plane")

    pods = report["pods"]
    assert pods["pods"] == pods["created"] == pods["ungated"] == pods["patched"] == 20
    assert pods["createErrorCount"] == 0 and not pods["patchErrors"] and not pods["watchErrors"]
    for key in ("createPerSecond", "ungatedPerSecond", "steadyUngatedPerSecond", "patchPerSecond", "endToEndSeconds"):
        assert pods[key] > 0, key
    assert set(pods["gatedToUngatedSeconds"]) == {"median", "p99", "max"}
    assert pods["controller"]["cycles"] >= 1 and pods["controller"]["podsUngated"] == 20
    assert pods["controllerPeakRssMB"] > 0 and pods["controllerExitCode"] == 0

    wl = report["workloads"]
    assert wl["scenario"] == "baseline" and wl["workloads"] == 120  # 30 queues x (2 small, 1 medium, 1 large)
    assert wl["created"] == wl["admitted"] == wl["finished"] == 120 and wl["neverAdmitted"] == 0
    assert wl["errorCount"] == 0 and not wl["timedOut"] and not wl["watchErrors"]
    assert set(wl["admissionSeconds"]) == {"small", "medium", "large"}
    assert sum(a["count"] for a in wl["admissionSeconds"].values()) == 120
    assert wl["makespanSeconds"] > wl["physicalLimitSeconds"] > 0 and wl["makespanOverLimit"] > 1
    assert 0 < wl["utilization"] <= 1
    assert wl["controller"]["cycles"] >= 1 and wl["controller"]["phases"] and wl["controller"]["writes"]
    assert wl["controllerPeakRssMB"] > 0 and wl["controllerExitCode"] == 0

    assert [t["name"] for t in report["targets"]] == [
        "pods ungated per second, end to end", "makespan", "average admission large", "average admission medium",
        "average admission small", "controller peak RSS"]


def test_live_objects_prefix_every_name_the_run_creates() -> None:
    config, workloads = live_objects(generate("baseline", scale=0.005), "blx")
    names = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in config}
    assert ("ResourceFlavor", None, "blx-default") in names and ("Namespace", None, "blx-ns-00-000") in names
    cq = next(o for o in config if o["kind"] == "ClusterQueue")
    assert cq["metadata"]["name"].startswith("blx-cq-") and cq["spec"]["cohort"].startswith("blx-cohort-")
    assert cq["spec"]["resourceGroups"][0]["flavors"][0]["name"] == "blx-default"
    lq = next(o for o in config if o["kind"] == "LocalQueue")
    assert lq["metadata"]["namespace"].startswith("blx-ns-") and lq["spec"]["clusterQueue"].startswith("blx-cq-")
    w = workloads[0]["metadata"]
    assert w["namespace"].startswith("blx-ns-") and "creationTimestamp" not in w
    assert w["labels"]["clueue.dev/bench-live-run"] == "blx"
    assert generate("baseline", scale=0.005).workloads[0]["metadata"]["namespace"] == "ns-00-000"  # not changed


def test_cycle_summary_takes_the_difference_of_two_scrapes() -> None:
    before = {'clueue_cycles_total{outcome="optimal"}': 2.0, 'clueue_cycle_phase_duration_seconds_count{phase="apply"}': 2.0,
              'clueue_cycle_phase_duration_seconds_sum{phase="apply"}': 1.0}
    after = {'clueue_cycles_total{outcome="optimal"}': 5.0, 'clueue_cycle_phase_duration_seconds_count{phase="apply"}': 5.0,
             'clueue_cycle_phase_duration_seconds_sum{phase="apply"}': 2.5, 'clueue_apply_writes_total{verb="patch"}': 7.0,
             "clueue_pods_ungated_total": 4.0}
    s = cycle_summary(after, before)
    assert s["cycles"] == 3 and s["cyclesByOutcome"] == {"optimal": 3}
    assert s["phases"] == {"apply": {"count": 3, "meanSeconds": 0.5, "totalSeconds": 1.5}}
    assert s["writes"] == {"patch": 7} and s["podsUngated"] == 4


def test_targets_take_the_lower_pod_rate_when_the_apiserver_is_slower() -> None:
    report = {"pods": {"patchPerSecond": 300.0, "ungatedPerSecond": 250.0, "ungated": 5, "pods": 5}}
    (target,) = live_targets(report)
    assert target["met"] and target["target"].startswith(">= 200/s")
    report["pods"]["patchPerSecond"] = 1200.0  # a faster apiserver: 1,000/s is the target
    assert live_targets(report)[0]["target"].startswith(">= 1,000/s")


def test_without_a_kubeconfig_or_the_test_environment_the_error_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live_cluster, "_import_testenv", lambda: None)
    with pytest.raises(AdapterError, match="pass --kubeconfig"), cluster(None, print):
        pass
    with pytest.raises(AdapterError, match="no such file"), cluster("/nonexistent/kubeconfig", print):
        pass
