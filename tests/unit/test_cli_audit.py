"""``clueue plan --record`` and ``clueue audit why|cycles|show|replay`` as users run them: text,
JSON and YAML, and the errors (no log, an unknown cycle or workload, a newer schema)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from clueue.adapters.cli import main
from clueue.adapters.decisionlog.schema import SCHEMA_VERSION
from tests.builders import cluster_queue, flavor, local_queue, namespace, workload


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def write(directory: Path, *objs: dict[str, Any]) -> str:
    directory.mkdir(exist_ok=True)
    for old in directory.glob("*.yaml"):
        old.unlink()
    (directory / "cluster.yaml").write_text(yaml.safe_dump_all(objs))
    return str(directory)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A log of three cycles: team/b waits while team/a holds the quota, then is admitted."""
    tmp = tmp_path_factory.mktemp("audit")
    path = str(tmp / "log.db")
    base = [namespace("team"), flavor("default"), cluster_queue("cq", {"default": {"cpu": 2}}),
            local_queue("cq", ns="team")]
    a = workload("a", ns="team", cpu="2", admitted_in=("cq", "default"))
    b = workload("b", ns="team", cpu="2", minute=1)
    for objs in ([*base, a, b], [*base, a, b], [*base, b]):
        result = invoke("plan", write(tmp / "snapshot", *objs), "--record", "--db", path)
        assert result.exit_code == 0, result.output
    return path


def test_cycles_in_every_format(db: str) -> None:
    text = invoke("audit", "cycles", "--db", db)
    assert text.exit_code == 0, text.output
    assert text.output.splitlines()[0].split()[:3] == ["CYCLE", "TIME", "(UTC)"]
    assert len(text.output.splitlines()) == 4 and " plan " in text.output
    data = json.loads(invoke("audit", "cycles", "--db", db, "-o", "json").output)
    assert [c["id"] for c in data["cycles"]] == [1, 2, 3]
    assert [c["changes"] for c in data["cycles"]] == [2, 0, 2]
    assert yaml.safe_load(invoke("audit", "cycles", "--db", db, "-o", "yaml").output) == data
    assert json.loads(invoke("audit", "cycles", "--db", db, "--since", "1h", "-o", "json").output) == data
    assert json.loads(invoke("audit", "cycles", "--db", db, "--since", "2999-01-01T00:00:00Z", "-o",
                             "json").output) == {"cycles": []}
    bad = invoke("audit", "cycles", "--db", db, "--since", "yesterday")
    assert bad.exit_code == 2 and "neither a duration" in bad.output


def test_why_shows_the_pending_then_admitted_timeline(db: str) -> None:
    text = invoke("audit", "why", "team/b", "--db", db)
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert lines[1].lstrip().startswith("pending ") and "cycle 1" in lines[1]
    assert "InsufficientQuota in cq/default cpu, 2 short" in lines[2]
    assert lines[3].lstrip().startswith("admitted ") and "so far in cq" in lines[3]
    data = json.loads(invoke("audit", "why", "team/b", "--db", db, "-o", "json").output)
    assert [s["state"] for s in data["spans"]] == ["pending", "admitted"]
    assert data["asOfCycle"] == 3 and data["spans"][0]["to"] == data["spans"][1]["from"]
    assert yaml.safe_load(invoke("audit", "why", "team/b", "--db", db, "-o", "yaml").output) == data
    gone = json.loads(invoke("audit", "why", "team/a", "--db", db, "-o", "json").output)
    assert [s["state"] for s in gone["spans"]] == ["admitted", "deleted"]


def test_show_in_every_format(db: str) -> None:
    text = invoke("audit", "show", "3", "--db", db)
    assert text.exit_code == 0, text.output
    assert text.output.startswith("cycle 3 at ") and "admit team/b" in text.output
    assert "team/a: deleted" in text.output and "team/b: admitted - in cq" in text.output
    data = json.loads(invoke("audit", "show", "3", "--db", db, "-o", "json").output)
    assert data["kind"] == "DecisionCycle" and data["id"] == 3 and data["origin"] == "plan"
    assert {w["name"]: w["state"] for w in data["workloads"]} == {"team/a": "deleted", "team/b": "admitted"}
    assert yaml.safe_load(invoke("audit", "show", "3", "--db", db, "-o", "yaml").output) == data


def test_replay_shows_no_change_under_the_recorded_policy_and_the_flips_under_another(db: str,
                                                                                     tmp_path: Path) -> None:
    same = invoke("audit", "replay", "3", "--db", db, "--exit-code")
    assert same.exit_code == 0, same.output
    assert "0 decision(s) change in 0 of 1 snapshot(s)." in same.output
    policy = tmp_path / "frozen.lp"
    policy.write_text("% A cycle admits nothing.\n:- admit(W).\n")
    flipped = invoke("audit", "replay", "3", "--db", db, "--policy", str(policy), "--exit-code")
    assert flipped.exit_code == 1, flipped.output
    assert "  team/b  (state, admission)\n    - admitted [main x1: cpu=default]\n" in flipped.output
    assert "    + pending\n" in flipped.output
    data = json.loads(invoke("audit", "replay", "3", "--db", db, "--policy", str(policy), "-o", "json").output)
    assert data["kind"] == "PolicyDiff" and data["new"]["sameSnapshot"] is True
    assert [c["workload"] for c in data["snapshots"][0]["changes"]] == ["team/b"]
    assert yaml.safe_load(invoke("audit", "replay", "3", "--db", db, "--policy", str(policy), "-o",
                                 "yaml").output) == data


def test_bad_input_is_one_clear_error(db: str, tmp_path: Path) -> None:
    cases = [
        (("audit", "show", "9", "--db", db), 1, "error: no cycle 9 in decision log"),
        (("audit", "replay", "9", "--db", db), 1, "error: no cycle 9 in decision log"),
        (("audit", "why", "team/nobody", "--db", db), 1, "error: workload team/nobody is not in decision log"),
        (("audit", "why", "b", "--db", db), 2, "give the workload as NAMESPACE/NAME"),
        (("audit", "cycles", "--db", str(tmp_path / "none.db")), 1, "error: no decision log at"),
        (("audit", "cycles"), 1, "error: no decision log: give --db PATH"),
        (("plan", str(tmp_path), "--db", db), 2, "--db names the decision log --record writes to"),
    ]
    for args, code, message in cases:
        result = invoke(*args)
        assert result.exit_code == code and message in result.output, (args, result.output)
    newer = tmp_path / "newer.db"
    newer.write_bytes(Path(db).read_bytes())
    conn = sqlite3.connect(newer)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    result = invoke("audit", "cycles", "--db", str(newer))
    assert result.exit_code == 1 and f"schema version {SCHEMA_VERSION + 1}, newer than this clueue" in result.output


def test_the_configuration_names_the_log(db: str, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"apiVersion": "clueue.dev/v1", "kind": "Configuration",
                                      "decisionLog": {"path": db}}))
    result = invoke("audit", "show", "1", "--config", str(config), "-o", "json")
    assert result.exit_code == 0 and json.loads(result.output)["id"] == 1


def test_replay_lists_a_nomination_that_changed_and_exit_code_says_so(tmp_path: Path) -> None:
    from clueue.adapters.decisionlog.recorder import Recorder
    from clueue.engine import Config, load_policy, run_cycle
    from tests.unit.test_decisionlog import NOW, T0, dispatching

    observed = {"worker-a": NOW - 200.5, "worker-b": float(NOW), "worker-c": float(NOW)}
    docs, by_worker, snapshot = dispatching(observed=observed)
    # recorded as decided on a view of worker-a heard from at once: it alone was nominated
    plan = run_cycle(dispatching(observed={**observed, "worker-a": float(NOW)})[2], load_policy(), Config(), now=NOW)
    path = str(tmp_path / "log.db")
    with Recorder.open(path, origin="controller", policy=load_policy(), config=Config()) as recorder:
        recorder.record(started=T0, documents=docs, plan=plan, now=NOW, workers=snapshot.workers,
                        worker_documents=by_worker)
    text = invoke("audit", "replay", "1", "--db", path, "--exit-code")
    assert text.exit_code == 1, text.output
    assert "1 dispatched workload(s) nominated to other workers:\n  default/big  - worker-a  " \
           "+ worker-a, worker-b, worker-c" in text.output
    data = json.loads(invoke("audit", "replay", "1", "--db", path, "-o", "json").output)
    assert data["nominations"] == [{"workload": "default/big", "recorded": ["worker-a"],
                                    "replayed": ["worker-a", "worker-b", "worker-c"]}]


def test_plan_record_of_a_snapshot_with_workers_replays_its_nominations(tmp_path: Path) -> None:
    """``clueue plan --record`` of the bundled multi-cluster example keeps each worker's objects
    apart from the manager's, and the recorded cycle replays to the same nominations."""
    example = str(Path(__file__).resolve().parents[2] / "examples" / "multicluster")
    path = str(tmp_path / "log.db")
    planned = invoke("plan", example, "--record", "--db", path, "-o", "json")
    assert planned.exit_code == 0, planned.output
    nominated = {a["target"] for a in json.loads(planned.output)["actions"] if a["kind"] == "nominate"}
    assert nominated  # the example dispatches
    shown = json.loads(invoke("audit", "show", "1", "--db", path, "-o", "json").output)
    assert sorted(w["name"] for w in shown["workers"]) == ["worker-a", "worker-b", "worker-c"]
    replayed = invoke("audit", "replay", "1", "--db", path, "--exit-code")
    assert replayed.exit_code == 0, replayed.output
    assert "0 decision(s) change" in replayed.output and "nominated to other workers" not in replayed.output
