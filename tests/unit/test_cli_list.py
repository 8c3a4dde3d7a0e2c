"""`clueue list workloads|clusterqueues|localqueues` on the example cluster's files."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from clueue.adapters.cli import main

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "cluster")


def _run(*args: str):
    result = CliRunner().invoke(main, ["list", *args, EXAMPLE])
    return result


def _json(*args: str):
    result = _run(*args, "-o", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_workloads_show_positions_of_waiting_ones_only():
    rows = {f"{r['namespace']}/{r['name']}": r for r in _json("workloads")}
    waiting = {k: (r["positionInClusterQueue"], r["positionInLocalQueue"]) for k, r in rows.items()
               if r["status"] in ("pending", "inadmissible")}
    assert waiting and all(r["positionInClusterQueue"] is None for r in rows.values() if r["status"] == "admitted")
    # every waiting workload has its place; an incomplete pod group is none yet (it has no Workload)
    assert all(v != (None, None) for v in waiting.values())
    research = sorted(v for k, v in waiting.items() if k.startswith("research/"))
    assert research == [(i, i) for i in range(len(research))]  # one LocalQueue: the same positions


def test_status_namespace_and_for_filter():
    pending = _json("workloads", "--status", "pending")
    assert pending and {r["status"] for r in pending} <= {"pending", "inadmissible"}
    assert {r["namespace"] for r in _json("workloads", "-n", "team-b")} == {"team-b"}
    [one] = _json("workloads", "--for", "pod/render-farm")
    assert (one["namespace"], one["name"]) == ("team-a", "pod-render-farm")
    assert _json("workloads", "--status", "quotareserved") == []  # the example has no admission checks


def test_text_tables_and_clear_errors():
    result = _run("workloads", "-n", "research")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].split() == ["NAME", "LOCALQUEUE", "CLUSTERQUEUE", "STATUS", "POSITION", "IN",
                                                     "LQ", "POSITION", "IN", "CQ", "PRIORITY", "AGE"]
    result = _run("workloads", "--for", "job/x")
    assert result.exit_code == 2 and "pod/NAME" in result.output
    result = _run("clusterqueues")
    assert result.exit_code == 0 and result.output.splitlines()[0].split() == [
        "NAME", "COHORT", "PENDING", "WORKLOADS", "ADMITTED", "WORKLOADS", "ACTIVE", "AGE"]
    assert "team-a" in result.output
    result = _run("localqueues", "-n", "team-a")
    assert result.exit_code == 0 and result.output.splitlines()[0].split()[-1] == "AGE"


def test_snapshot_files_are_listed_in_every_namespace():
    assert len({r["namespace"] for r in _json("workloads")}) > 1
    assert len({r["namespace"] for r in _json("localqueues")}) > 1
    assert all(r["age"] for r in _json("localqueues") + _json("clusterqueues"))


def test_a_live_listing_defaults_to_the_contexts_namespace(tmp_path):
    from clueue.adapters.cli.listing import _context_namespace
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("""
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts:
- {name: with-ns, context: {cluster: c, user: u, namespace: team-b}}
- {name: without, context: {cluster: c, user: u}}
current-context: with-ns
""")
    assert _context_namespace(str(kubeconfig), None, False) == "team-b"
    assert _context_namespace(str(kubeconfig), "without", False) == "default"


def test_queues_counts_match_the_workloads():
    workloads = _json("workloads")
    for cq in _json("clusterqueues"):
        mine = [w for w in workloads if w["clusterQueue"] == cq["name"]]
        assert cq["pending"] == sum(w["status"] in ("pending", "inadmissible") for w in mine)
        assert cq["admitted"] == sum(w["status"] == "admitted" for w in mine)
        assert cq["status"]["conditions"][0]["type"] == "Active"
    lqs = _json("localqueues", "-n", "team-a")
    assert [(q["namespace"], q["name"], q["clusterQueue"]) for q in lqs] == [("team-a", "main", "team-a")]
    assert "flavorsUsage" in lqs[0]["status"]
