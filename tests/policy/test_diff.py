"""`clueue policy diff`: the decisions two policy versions take on the same snapshots."""

from __future__ import annotations

import json

import yaml

from clueue.adapters.files import load_snapshot
from clueue.engine import load_policy, run_cycle
from clueue.policytools import diff_plans, diff_policies

from .helpers import CLUSTER, EXAMPLES, cli

GPU = EXAMPLES / "research-no-gpu-borrowing"
SPOT = EXAMPLES / "low-priority-on-spot"


def test_diff_plans_lists_changed_decisions_with_reasons_on_both_sides():
    snapshot = load_snapshot([str(GPU / "snapshot")])
    before = run_cycle(snapshot, load_policy())
    after = run_cycle(snapshot, load_policy([GPU]))
    [change] = diff_plans(before, after)
    assert change.workload == "research/finetune"
    assert change.changed == ("state", "admission")
    assert change.base["state"] == "admitted" and change.new["state"] == "pending"
    assert change.base["admission"][0]["flavors"] == {"cpu": "a100", "nvidia.com/gpu": "a100"}
    assert [r["code"] for r in change.base["reasons"]] == ["Admitted"]
    assert [r["code"] for r in change.new["reasons"]] == ["no_gpu_borrowing"]


def test_same_policy_no_changes():
    snapshot = load_snapshot([str(CLUSTER)])
    assert diff_plans(run_cycle(snapshot, load_policy()), run_cycle(snapshot, load_policy())) == []


def test_flavor_only_changes_are_decisions_too():
    snapshots = [(str(CLUSTER), load_snapshot([str(CLUSTER)])), (str(SPOT), load_snapshot([str(SPOT / "snapshot")]))]
    [cluster, spot] = diff_policies(snapshots, load_policy(), load_policy([SPOT]))
    assert cluster.changes == ()
    [change] = spot.changes
    assert (change.workload, change.changed) == ("media/pod-render", ("admission",))
    assert change.new["admission"][0]["flavors"] == {"cpu": "spot", "memory": "spot"}


def test_cli_text():
    result = cli("policy", "diff", "--policy", str(GPU), str(CLUSTER), str(GPU / "snapshot"))
    assert result.exit_code == 0
    out = result.output
    assert out.startswith(f"--- base: built-in policy\n+++ new:  {GPU}\n")
    assert f"snapshot {CLUSTER} (" in out and "0 of 11 workloads change" in out
    assert "  research/finetune  (state, admission)\n    - admitted [" in out
    assert "        Admitted: admitted in ClusterQueue research" in out
    assert "    + pending\n        no_gpu_borrowing: policy reason no_gpu_borrowing(research,a100)\n" in out
    assert out.endswith("1 decision(s) change in 1 of 2 snapshot(s).\n")


def test_cli_json_yaml_and_exit_code():
    args = ["policy", "diff", "--base", str(GPU), "--policy", str(GPU), str(GPU / "snapshot")]
    same = cli(*args, "--exit-code", "-o", "json")
    assert same.exit_code == 0
    data = json.loads(same.output)
    assert data["kind"] == "PolicyDiff" and data["base"]["policyDigest"] == data["new"]["policyDigest"]
    assert data["snapshots"][0]["changes"] == []

    differs = cli("policy", "diff", "--base", str(GPU), str(GPU / "snapshot"), "--exit-code", "-o", "yaml")
    assert differs.exit_code == 1
    [snap] = yaml.safe_load(differs.output)["snapshots"]
    assert snap["changes"][0]["workload"] == "research/finetune"
    assert snap["changes"][0]["base"]["state"] == "pending" and snap["changes"][0]["new"]["state"] == "admitted"
    assert cli("policy", "diff", "--base", str(GPU), str(GPU / "snapshot")).exit_code == 0


def test_cli_errors_exit_2(tmp_path):
    missing = cli("policy", "diff", "--policy", str(tmp_path / "nope"), str(CLUSTER))
    assert missing.exit_code == 2 and "no such policy file or directory" in missing.stderr
    assert cli("policy", "diff", str(tmp_path / "no-snapshot")).exit_code == 2
    assert cli("policy", "diff").exit_code == 2  # a snapshot is required
