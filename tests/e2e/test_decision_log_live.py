"""The decision log of a controller against a real kube-apiserver: it records its cycles, and
`clueue audit why` then tells a pod's pending -> admitted timeline; a recorded cycle replays to
the decisions it made, a dispatching one (MultiKueue's workers, each a control plane of its own)
to the same nominations; the JSON-lines sink carries the same records; a controller killed
while it records leaves every record whole, and the next one carries on."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any, Callable

import yaml
from click.testing import CliRunner
from kubernetes import client

from clueue.adapters.cli import main
from clueue.adapters.decisionlog.schema import DecisionLogError
from clueue.adapters.decisionlog.store import DecisionLog
from tests.e2e.controller_harness import (  # noqa: F401 - cluster and api are this module's fixtures
    api, cluster, controller_log, metric, metrics_port, start_controller, stop_controller, wait_until,
)
from tests.e2e.test_adapter import create, gated_pod, queue_setup, tag
from tests.e2e.test_controller import FAST, finish, gated, ungated, waiting_recorded
from tests.e2e.test_dispatch_live import WAIT, _submit, connect_workers, planes  # noqa: F401 - planes: a fixture
from tests.e2e.test_multikueue import get


def audit(*args: str) -> dict:
    result = CliRunner().invoke(main, ["audit", *args, "-o", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def log_config(tmp_path: Path, db: Path, **extra: object) -> Path:
    """A Configuration recording into ``db`` and tmp_path/decisions.jsonl."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"apiVersion": "clueue.dev/v1", "kind": "Configuration", **extra, "decisionLog": {
        "path": str(db), "jsonLines": str(tmp_path / "decisions.jsonl")}}))
    return config


def holds(db: Path, name: str, state: str) -> Callable[[], bool]:
    """Whether the log ``db`` has recorded workload ``name`` in ``state`` (to wait for)."""
    def recorded() -> bool:
        try:
            with DecisionLog.open(db) as log:
                return any(s["state"] == state for _, _, s in log.history(name))
        except DecisionLogError:  # the controller is still creating it: its schema is not written yet
            return False
    return recorded


def one_waits(cluster: Any, api: client.ApiClient, config: Path) -> tuple[str, str, subprocess.Popen[bytes]]:
    """Two pods in a queue with room for one, and a controller deciding them under ``config``:
    the namespace, the pod left waiting and the controller, once the wait is on its Workload."""
    ns = queue_setup(api, tag(), nominal=1)
    create(api, gated_pod(ns, "first"))
    create(api, gated_pod(ns, "second"))
    proc = start_controller(cluster, *FAST, "--config", str(config))
    try:
        wait_until(lambda: len(ungated(api, ns)) == 1, 60, "one of two pods ungated", proc=proc)
        (waiting,) = gated(api, ns)
        wait_until(lambda: waiting_recorded(api, ns, waiting), 30, f"{waiting} recorded as waiting", proc=proc)
    except BaseException:
        stop_controller(proc)
        raise
    return ns, waiting, proc


def admit_the_waiting_one(api: client.ApiClient, db: Path, ns: str, waiting: str, proc: Any) -> str:
    """Finish the running pod; wait until the waiting one is ungated and recorded as admitted.
    Returns its workload's name."""
    finish(api, ns, next(iter(ungated(api, ns))))  # frees the quota
    wait_until(lambda: not gated(api, ns), 30, f"{waiting} ungated once the other finished", proc=proc)
    name = f"{ns}/pod-{waiting}"
    wait_until(holds(db, name, "admitted"), 30, f"{name}'s admission recorded", proc=proc)
    return name


def test_the_controller_records_its_cycles_and_audit_why_tells_the_wait(cluster, api, tmp_path: Path) -> None:
    db, lines = tmp_path / "log" / "decisions.db", tmp_path / "decisions.jsonl"
    ns, waiting, proc = one_waits(cluster, api, log_config(tmp_path, db))
    try:
        name = admit_the_waiting_one(api, db, ns, waiting, proc)
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


def test_a_dispatching_cycle_replays_to_the_same_nomination(planes, tmp_path: Path) -> None:
    manager, workers = planes
    ns = connect_workers(manager, workers)
    db = tmp_path / "decisions.db"
    config = log_config(tmp_path, db, multiKueue={"syncPeriod": "500ms"})
    proc = start_controller(manager, "--config", str(config), "--batch-window", "0.05")
    api = manager.api_client()
    try:
        port = metrics_port(proc)
        wait_until(lambda: all(metric(port, "clueue_multikueue_worker_active", cluster=w) == 1 for w in workers),
                   WAIT, "both workers active", proc=proc)
        _submit(client.CustomObjectsApi(api), ns, cpu="4")
        wait_until(lambda: ((get(api, "workloads", "job", ns) or {}).get("status") or {}).get("nominatedClusterNames")
                   == ["worker2"], WAIT, "the Workload nominated to worker2 alone", proc=proc)
    finally:
        code = stop_controller(proc)
        api.close()
    assert code == 0, controller_log(proc)[-3000:]
    assert "cycle not recorded" not in controller_log(proc)

    with DecisionLog.open(db) as log:
        first, last = log.cycle_ids() or (0, 0)
        records = [log.record(c) for c in range(first, last + 1)]
    # The first cycles may come before the workers' caches have listed everything (no views: a
    # copy to each); the last nomination is worker2 alone, predicted from both workers' views.
    nominating = [r for r in records if any(a["kind"] == "nominate" for a in r.get("actions", []))]
    last = nominating[-1]
    assert [w["name"] for w in last["workers"]] == ["worker1", "worker2"]
    assert all(last["now"] + 1 > w["observedAt"] for w in last["workers"])  # now: whole seconds
    assert [d["nominated"] for d in last["dispatch"]] == [["worker2"]]
    for r in nominating:
        replayed = audit("replay", str(r["id"]), "--db", str(db))
        assert replayed["new"]["sameSnapshot"] is True, replayed
        assert replayed["snapshots"][0]["changes"] == [] and replayed["nominations"] == [], replayed


def test_a_killed_controller_leaves_whole_records_and_the_next_carries_on(cluster, api, tmp_path: Path) -> None:
    db, lines = tmp_path / "decisions.db", tmp_path / "decisions.jsonl"
    config = log_config(tmp_path, db)
    ns, waiting, proc = one_waits(cluster, api, config)
    try:
        name = f"{ns}/pod-{waiting}"
        wait_until(holds(db, name, "pending"), 30, f"{name}'s wait recorded", proc=proc)
    finally:
        proc.send_signal(signal.SIGKILL)  # no flush, no close: whatever was being written is cut
        proc.wait()

    with DecisionLog.open(db) as log:
        first, last = log.cycle_ids() or (0, 0)
        for cycle in range(first, last + 1):  # each record whole: readable, its snapshot complete
            assert log.record(cycle)["id"] == cycle
            log.documents(cycle)
    written = lines.read_text()
    assert written.endswith("\n")  # no torn line
    ids = [json.loads(line)["id"] for line in written.splitlines()]
    assert ids == list(range(first, first + len(ids))) and len(ids) >= last - first  # the last may not be there yet

    proc = start_controller(cluster, *FAST, "--config", str(config))
    try:
        admit_the_waiting_one(api, db, ns, waiting, proc)
    finally:
        code = stop_controller(proc)
    assert code == 0, controller_log(proc)[-3000:]
    assert [s["state"] for s in audit("why", name, "--db", str(db))["spans"]] == ["pending", "admitted"]
    with DecisionLog.open(db) as log:
        _, last = log.cycle_ids() or (0, 0)
    replayed = audit("replay", str(last), "--db", str(db))
    assert replayed["new"]["sameSnapshot"] is True and replayed["snapshots"][0]["changes"] == [], replayed
