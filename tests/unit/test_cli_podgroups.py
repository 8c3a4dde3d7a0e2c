"""Coscheduling PodGroups in what users read: ``clueue plan`` (text and ``-o json``) shows each
group's phase change with its reason and numbers, ``explain`` shows the plan's entry, and
``policy diff`` and ``audit replay`` see a phase that a policy changes (docs/plan-format.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner, Result

from clueue.adapters.cli import main
from clueue.engine.kueue_api import POD_GROUP_LABEL
from tests.builders import cluster_queue, flavor, local_queue, namespace, pod

#: A policy under which nothing of namespace hpc is admitted: the gang waits, so its group does not
#: go Scheduling (its pods are not released) but InQueue (its need fits the quota left).
CLOSED = """\
#program decide.
:- admit(W), workload_namespace(W,"hpc").
#program explain.
reason(W,hpc_closed) :- left_out(W), workload_namespace(W,"hpc").
"""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def podgroup(name: str, min_member: int, *, minute: int = 0, min_resources: dict[str, Any] | None = None,
             status: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "hpc", "creationTimestamp": f"2026-01-01T00:{minute:02d}:00Z",
                     "labels": {"kueue.x-k8s.io/queue-name": "main"}},
        "spec": {"minMember": min_member, **({"minResources": min_resources} if min_resources else {})}}
    if status:
        out["status"] = status
    return out


def snapshot(directory: Path) -> str:
    """Gang hpc/mpi of 2 queued pods (2 cpu) that fits, and hpc/later, created after it and
    recorded InQueue, whose minResources no longer fit: of the cpu 8 quota mpi holds 2 first."""
    directory.mkdir(exist_ok=True)
    objs = [namespace("hpc"), flavor("default"), cluster_queue("cq", {"default": {"cpu": 8}}),
            local_queue("cq", ns="hpc"), podgroup("mpi", 2, status={"phase": "InQueue"}),
            podgroup("later", 1, minute=1, min_resources={"cpu": 7}, status={"phase": "InQueue"}),
            *(pod(f"mpi-{i}", ns="hpc", labels={POD_GROUP_LABEL: "mpi"}) for i in range(2))]
    (directory / "cluster.yaml").write_text(yaml.safe_dump_all(objs))
    return str(directory)


def test_plan_shows_each_podgroup_phase_change_with_its_reason(tmp_path: Path) -> None:
    path = snapshot(tmp_path / "snapshot")
    data = json.loads(invoke("plan", path, "-o", "json").output)
    groups = {g["name"]: g for g in data["podGroups"]}
    mpi, later = groups["hpc/mpi"], groups["hpc/later"]
    assert (mpi["recordedPhase"], mpi["phase"], mpi["reason"]["code"]) == ("InQueue", "Scheduling", "PodsPlaced")
    assert mpi["reason"]["details"] == {"placed": 2, "running": 0, "minMember": 2}
    assert mpi["status"]["phase"] == "Scheduling" and "scheduleStartTime" in mpi["status"]
    assert (later["phase"], later["reason"]["code"]) == ("Pending", "MinResourcesUnfit")
    assert later["reason"]["details"] == {"need": {"cpu": "7"}, "resource": "cpu", "asks": "7", "has": "6",
                                          "pool": "the quota of ClusterQueue cq", "backToPending": True}
    as_yaml = yaml.safe_load(invoke("plan", path, "-o", "yaml").output)["podGroups"]
    assert [(g["name"], g["phase"], g["reason"]) for g in as_yaml] == [
        (g["name"], g["phase"], g["reason"]) for g in data["podGroups"]]

    text = invoke("plan", path)
    assert text.exit_code == 0, text.output
    assert "\nPodGroups (2):\n" in text.output
    assert "  hpc/mpi  InQueue -> Scheduling: 2 of minMember 2 pods placed, 0 running\n" in text.output
    assert ("  hpc/later  InQueue -> Pending: back to Pending, minResources do not fit: needs cpu 7, the quota of "
            "ClusterQueue cq has 6\n") in text.output
    # narrowed to another namespace: no group of hpc is shown
    other = json.loads(invoke("plan", path, "-n", "elsewhere", "-o", "json").output)
    assert "podGroups" not in other

    explained = invoke("explain", path, "hpc/later")
    assert explained.exit_code == 0, explained.output
    assert f"PodGroup hpc/later: Pending: {later['reason']['message']}" in explained.output


def test_policy_diff_and_audit_replay_see_a_phase_a_policy_changes(tmp_path: Path) -> None:
    path = snapshot(tmp_path / "snapshot")
    policy = tmp_path / "closed.lp"
    policy.write_text(CLOSED)
    diff = invoke("policy", "diff", "--policy", str(policy), path, "--exit-code")
    assert diff.exit_code == 1, diff.output
    assert "1 of 1 workloads, 1 of 2 PodGroups change" in diff.output
    assert ("  PodGroup hpc/mpi  (phase)\n    - Scheduling\n        PodsPlaced: 2 of minMember 2 pods placed, "
            "0 running\n    + InQueue\n        MinResourcesFit: minResources fit; it holds cpu 2 in ClusterQueue "
            "cq until its pods are admitted\n") in diff.output
    data = json.loads(invoke("policy", "diff", "--policy", str(policy), path, "-o", "json").output)
    [change] = data["snapshots"][0]["podGroupChanges"]
    assert (change["podGroup"], change["changed"]) == ("hpc/mpi", ["phase"])
    assert (change["base"]["phase"], change["new"]["phase"]) == ("Scheduling", "InQueue")

    db = str(tmp_path / "log.db")
    assert invoke("plan", path, "--record", "--db", db).exit_code == 0
    record = json.loads(invoke("audit", "show", "1", "--db", db, "-o", "json").output)
    assert {g["name"]: g["phase"] for g in record["podGroups"]} == {"hpc/later": "Pending", "hpc/mpi": "Scheduling"}
    same = invoke("audit", "replay", "1", "--db", db, "--exit-code")
    assert same.exit_code == 0 and "0 decision(s) change" in same.output, same.output
    flipped = invoke("audit", "replay", "1", "--db", db, "--policy", str(policy), "--exit-code", "-o", "json")
    assert flipped.exit_code == 1, flipped.output
    [change] = json.loads(flipped.output)["snapshots"][0]["podGroupChanges"]
    assert (change["podGroup"], change["base"]["phase"], change["new"]["phase"]) == ("hpc/mpi", "Scheduling",
                                                                                  "InQueue")
