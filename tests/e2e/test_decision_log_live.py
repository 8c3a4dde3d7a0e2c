"""The decision log of a controller against a real kube-apiserver: it records its cycles, and
`clueue audit why` then tells a pod's pending -> admitted timeline; a recorded cycle replays to
the decisions it made; the JSON-lines sink carries the same records."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from clueue.adapters.cli import main
from clueue.adapters.decisionlog.store import DecisionLog
from tests.e2e.controller_harness import (  # noqa: F401 - cluster and api are this module's fixtures
    api, cluster, controller_log, start_controller, stop_controller, wait_until,
)
from tests.e2e.test_adapter import create, gated_pod, queue_setup, tag
from tests.e2e.test_controller import FAST, finish, gated, ungated, waiting_recorded


def audit(*args: str) -> dict:
    result = CliRunner().invoke(main, ["audit", *args, "-o", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_the_controller_records_its_cycles_and_audit_why_tells_the_wait(cluster, api, tmp_path: Path) -> None:
    t = tag()
    ns = queue_setup(api, t, nominal=1)
    db, lines = tmp_path / "log" / "decisions.db", tmp_path / "decisions.jsonl"
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"apiVersion": "clueue.dev/v1", "kind": "Configuration",
                                      "decisionLog": {"path": str(db), "jsonLines": str(lines)}}))
    create(api, gated_pod(ns, "first"))
    create(api, gated_pod(ns, "second"))
    proc = start_controller(cluster, *FAST, "--config", str(config))
    try:
        wait_until(lambda: len(ungated(api, ns)) == 1, 60, "one of two pods ungated", proc=proc)
        (waiting,) = gated(api, ns)
        wait_until(lambda: waiting_recorded(api, ns, waiting), 30, f"{waiting} recorded as waiting", proc=proc)
        finish(api, ns, next(iter(ungated(api, ns))))  # frees the quota
        wait_until(lambda: not gated(api, ns), 30, f"{waiting} ungated once the other finished", proc=proc)
        name = f"{ns}/pod-{waiting}"

        def admitted_recorded() -> bool:
            with DecisionLog.open(db) as log:
                return any(s["state"] == "admitted" for _, _, s in log.history(name))
        wait_until(admitted_recorded, 30, f"{name}'s admission recorded", proc=proc)
    finally:
        code = stop_controller(proc)
    assert code == 0, controller_log(proc)[-3000:]
    assert "cycle not recorded" not in controller_log(proc)

    why = audit("why", name, "--db", str(db))
    states = [s["state"] for s in why["spans"]]
    assert states == ["pending", "admitted"], why
    pending = why["spans"][0]
    assert pending["phases"][0]["reasons"][0]["code"] == "InsufficientQuota"
    assert pending["to"] == why["spans"][1]["from"] and pending["seconds"] > 0

    cycles = audit("cycles", "--db", str(db), "--limit", "100000")["cycles"]
    assert cycles and {c["origin"] for c in cycles} == {"controller"}
    admitted_in = why["spans"][1]["fromCycle"]
    replayed = audit("replay", str(admitted_in), "--db", str(db))
    assert replayed["new"]["sameSnapshot"] is True
    assert replayed["snapshots"][0]["changes"] == [], replayed

    records = [json.loads(line) for line in lines.read_text().splitlines()]
    assert [r["id"] for r in records] == [c["id"] for c in cycles]
    assert records[admitted_in - 1] == audit("show", str(admitted_in), "--db", str(db))


def test_apply_record_appends_its_cycle(cluster, api, tmp_path: Path) -> None:
    t = tag()
    ns = queue_setup(api, t, nominal=1)
    create(api, gated_pod(ns, "only"))
    db = tmp_path / "apply.db"
    args = ["apply", "--kubeconfig", str(cluster.kubeconfig), "--record", "--db", str(db)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert ungated(api, ns) == {"only"}
    (cycle,) = audit("cycles", "--db", str(db))["cycles"]
    assert cycle["origin"] == "apply" and cycle["summary"]["admitted"] >= 1
    assert [s["state"] for s in audit("why", f"{ns}/pod-only", "--db", str(db))["spans"]] == ["admitted"]
    assert audit("replay", "1", "--db", str(db))["snapshots"][0]["changes"] == []
