"""The cycle benchmark's comparison with greedy and the bound, and the `clueue bench` command."""

from __future__ import annotations

import json

from click.testing import CliRunner

from clueue.adapters.cli import main
from clueue.bench.cycle import cycle_benchmark, evaluate_targets
from clueue.bench.scenarios import Scenario, workload_object
from tests.builders import cluster_queue, flavor, local_queue


def first_fit_trap():
    """Flavors a (6 CPU) then b (10 CPU); workloads of 4, 6 and 6 CPU in that order.

    Greedy puts the 4 in a, the first 6 in b and cannot place the second 6. Re-choosing the
    flavor of the 4 (to b) admits all three: 4 + 6 in b, 6 in a.
    """
    config = (flavor("a"), flavor("b"), cluster_queue("cq", {"a": {"cpu": 6}, "b": {"cpu": 10}}),
              local_queue("cq", name="lq"))
    workloads = tuple(workload_object("default", f"w{i}", cls="x", priority=0, arrival_ms=1000 * i, runtime_ms=1000,
                                      pod_sets=[("main", 1, {"cpu": cpu})]) for i, cpu in enumerate((4, 6, 6)))
    return Scenario("flavors", 0, "first-fit trap", config, workloads)


def test_clueue_beats_first_fit_and_reaches_the_bound():
    r = cycle_benchmark(first_fit_trap(), repeat=1, time_budget=10)
    assert r["greedy"] == {**r["greedy"], "admitted": 2, "resources": {"cpu": 10.0}}
    assert r["clueue"]["admitted"] == 3 and r["clueue"]["resources"] == {"cpu": 16.0}
    assert r["bound"]["resources"] == {"cpu": 16.0}
    assert r["gap"] == {"clueue": {"cpu": 0.0}, "greedy": {"cpu": 0.375}}
    assert r["rankOrder"] == {"verdict": "better", "firstDifference": "default/w2", "position": 3}
    assert not r["defect"]
    assert all(t["met"] for t in r["targets"])
    assert set(r["timings"]) == {"compile", "ground", "solve", "explain", "total", "wall"}
    assert r["memory"]["peakRssMB"] > 0


def test_a_worse_admitted_set_is_a_defect_and_misses_targets():
    r = cycle_benchmark(first_fit_trap(), repeat=1, time_budget=10)
    worse = {**r, "rankOrder": {"verdict": "worse", "firstDifference": "default/w0", "position": 1}, "defect": True,
             "clueue": {**r["clueue"], "resources": {"cpu": 9.0}}, "gap": {**r["gap"], "clueue": {"cpu": 0.4375}}}
    met = {t["name"]: t["met"] for t in evaluate_targets("flavors", worse)}
    assert met == {"never worse than greedy in rank order": False, "admitted cpu above greedy": False,
                   "gap to upper bound (cpu)": False}


def test_bench_command_json():
    result = CliRunner().invoke(main, ["bench", "--scenario", "baseline", "--scale", "0.01", "--repeat", "1",
                                       "--in-process", "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["kind"] == "BenchReport" and doc["environment"]["engineDigest"].startswith("sha256:")
    (entry,) = doc["scenarios"]
    assert entry["cycle"]["pending"] == 180 and entry["cycle"]["clueue"]["admitted"] == 30
    assert entry["cycle"]["greedy"]["admitted"] == 30 and not entry["cycle"]["defect"]


def test_bench_command_table_and_replay():
    result = CliRunner().invoke(main, ["bench", "--scenario", "baseline", "--scale", "0.01", "--repeat", "1",
                                       "--in-process", "--replay", "--replay-latency", "zero"])
    assert result.exit_code == 0, result.output
    for title in ("One decision cycle", "Decision quality", "Targets", "Replay in virtual time"):
        assert title in result.stdout


def test_bench_replay_interval_and_latency_reach_the_replay():
    result = CliRunner().invoke(main, ["bench", "--scenario", "baseline", "--scale", "0.01", "--repeat", "1",
                                       "--in-process", "--replay", "--replay-latency", "50ms",
                                       "--replay-interval", "50", "-o", "json"])
    assert result.exit_code == 0, result.output
    replayed = json.loads(result.stdout)["scenarios"][0]["replay"]
    assert replayed["minIntervalMs"] == 50 and replayed["latency"] == "50ms"
    assert replayed["finished"] == replayed["workloads"]


def test_bench_replays_as_often_as_asked():
    args = ["bench", "--scenario", "baseline", "--scale", "0.01", "--repeat", "1", "--in-process", "--replay",
            "--replay-latency", "zero", "--replay-runs", "2"]
    result = CliRunner().invoke(main, [*args, "-o", "json"])
    assert result.exit_code == 0, result.output
    replayed = json.loads(result.stdout)["scenarios"][0]["replay"]
    assert replayed["runs"] == 2 and len(replayed["perRun"]) == 2
    # Instant decisions make runs identical: the median is each run's figure.
    assert replayed["admissionSeconds"]["small"]["average"] == replayed["perRun"][0]["admissionSeconds"]["small"]["average"]
    assert all(t["value"].endswith("(median of 2 runs)") for t in replayed["targets"])
    table = CliRunner().invoke(main, args)
    assert table.exit_code == 0, table.output
    assert "Replay in virtual time" in table.stdout


def test_bench_refuses_a_latency_it_cannot_read():
    result = CliRunner().invoke(main, ["bench", "--replay", "--replay-latency", "5s"])
    assert result.exit_code == 2
    assert "'--replay-latency'" in result.output and "'20ms'" in result.output


def test_bench_writes_snapshots(tmp_path):
    result = CliRunner().invoke(main, ["bench", "--scenario", "gangs", "--scale", "0.2",
                                       "--write-snapshot", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "gangs").iterdir()) == ["00-config.yaml", "10-workloads.yaml"]
    plan = CliRunner().invoke(main, ["plan", str(tmp_path / "gangs"), "-o", "json"])
    assert plan.exit_code == 0, plan.output


def test_each_scenario_runs_in_its_own_process():
    from clueue.bench.runner import BenchOptions, run_benchmarks

    seen = []
    (r,) = run_benchmarks(["fragmentation"], BenchOptions(repeat=1, scale=0.15, time_budget=10),
                          progress=lambda *a: seen.append(a))
    assert "error" not in r, r.get("error")
    assert r["cycle"]["pending"] == 16 and r["cycle"]["memory"]["peakReset"] in (True, False)
    assert seen[0][:2] == ("fragmentation", "generating") and seen[-1][1] == "done"


def test_bench_measures_a_policy_given_with_policy(tmp_path):
    extra = tmp_path / "no-large.lp"
    extra.write_text("#program decide.\n:- admit(W), pod_request(W,_,\"cpu\",A), A >= 20.\n")
    args = ["bench", "--scenario", "baseline", "--scale", "0.01", "--repeat", "1", "--in-process", "-o", "json"]
    plain = json.loads(CliRunner().invoke(main, args).stdout)["scenarios"][0]["cycle"]
    changed = CliRunner().invoke(main, [*args, "--policy", str(extra)])
    assert changed.exit_code == 0, changed.output
    cycle = json.loads(changed.stdout)["scenarios"][0]["cycle"]
    assert cycle["policyDigest"] != plain["policyDigest"]
    assert cycle["clueue"]["admitted"] > 30  # no large workload: the cohorts fill with medium and small ones


def test_bench_refuses_a_broken_policy(tmp_path):
    broken = tmp_path / "broken.lp"
    broken.write_text("this is not ASP\n")
    result = CliRunner().invoke(main, ["bench", "--scenario", "baseline", "--scale", "0.01", "--policy", str(broken)])
    assert result.exit_code == 1 and "broken.lp" in result.output
