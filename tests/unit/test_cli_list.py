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
    research = sorted(v for k, v in waiting.items() if k.startswith("research/"))
    assert research == [(i, i) for i in range(len(research))]  # one LocalQueue: the same positions


def test_status_namespace_and_for_filter():
    pending = _json("workloads", "--status", "pending")
    assert pending and {r["status"] for r in pending} <= {"pending", "inadmissible"}
    assert {r["namespace"] for r in _json("workloads", "-n", "team-b")} == {"team-b"}
    [one] = _json("workloads", "--for", "pod/render-farm")
    assert (one["namespace"], one["name"]) == ("team-a", "pod-render-farm")
    assert _json("workloads", "--status", "quotareserved") == []  # clueue admits without admission checks


def test_text_tables_and_clear_errors():
    result = _run("workloads", "-n", "research")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].split() == ["NAME", "LOCALQUEUE", "CLUSTERQUEUE", "STATUS", "POSITION", "IN",
                                                     "LQ", "POSITION", "IN", "CQ", "PRIORITY", "AGE"]
    result = _run("workloads", "--for", "job/x")
    assert result.exit_code == 2 and "pod/NAME" in result.output
    result = _run("clusterqueues")
    assert result.exit_code == 0 and result.output.splitlines()[0].startswith("NAME")
    assert "team-a" in result.output


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
