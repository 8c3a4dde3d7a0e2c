"""The decision log's store: objects once per content, states only when they change, replay,
retention, schema versions, the JSON-lines sink and the controller's observer."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from clueue.adapters.decisionlog.config import config_document, parse_decision_log
from clueue.adapters.decisionlog.manifests import CHAIN, resolve
from clueue.adapters.decisionlog.observer import CycleRecorder
from clueue.adapters.decisionlog.recorder import Recorder
from clueue.adapters.decisionlog.replay import load_recorded, replay
from clueue.adapters.decisionlog.retention import Retention, enforce
from clueue.adapters.decisionlog.schema import SCHEMA_VERSION, DecisionLogError
from clueue.adapters.decisionlog.store import DecisionLog
from clueue.adapters.decisionlog.timeline import timeline
from clueue.adapters.files import parse_config
from clueue.engine import Config, Document, SnapshotError, build_snapshot, load_policy, run_cycle
from clueue.engine.config import DecisionLogConfig
from clueue.engine.fields import Fields
from tests.builders import cluster_queue, flatten, flavor, local_queue, namespace, workload

POLICY = load_policy()
T0 = 1_800_000_000.0


def objects(*extra: Any, cpu: int = 2) -> list[dict[str, Any]]:
    """A ClusterQueue of ``cpu`` cpus and whatever Workloads are given."""
    return flatten([namespace("default"), flavor("default"), cluster_queue("cq", {"default": {"cpu": cpu}}),
                    local_queue("cq"), *extra])


def documents(objs: list[dict[str, Any]]) -> list[Document]:
    # As a live cluster reads them: named by kind and name, with a resourceVersion.
    docs = []
    for i, o in enumerate(objs):
        o = json.loads(json.dumps(o))
        o["metadata"]["resourceVersion"] = str(abs(hash(json.dumps(o, sort_keys=True))) % 10**9)
        name = f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}".lstrip("/")
        docs.append(Document(f"api:{o['kind']} {name}", o))
    return docs


def record(recorder: Recorder, objs: list[dict[str, Any]], at: float) -> dict[str, Any]:
    docs = documents(objs)
    snapshot = build_snapshot(docs, lenient=True)
    plan = run_cycle(snapshot, POLICY, Config())
    return recorder.record(started=at, documents=docs, plan=plan, snapshot_notices=snapshot.notices)


@pytest.fixture
def recorder(tmp_path: Path) -> Any:
    with Recorder.open(str(tmp_path / "log.db"), origin="controller", policy=POLICY, config=Config()) as r:
        yield r


A = workload("a", cpu="2", admitted_in=("cq", "default"))
B = workload("b", cpu="2", minute=1)


def count(log: DecisionLog, table: str) -> int:
    return int(log.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def test_objects_are_stored_once_per_content_and_unchanged_cycles_share_a_manifest(recorder: Recorder) -> None:
    first = record(recorder, objects(A, B), T0)
    second = record(recorder, objects(A, B), T0 + 60)
    assert first["objects"] == {"total": 6, "added": 6, "removed": 0}
    assert second["objects"] == {"total": 6, "added": 0, "removed": 0}
    log = recorder.log
    assert count(log, "objects") == 6 and count(log, "manifests") == 1 and count(log, "cycles") == 2
    third = record(recorder, objects(B), T0 + 120)  # a finished and went away
    assert third["objects"] == {"total": 5, "added": 0, "removed": 1}
    assert count(log, "objects") == 6 and count(log, "manifests") == 2


def test_a_workload_state_is_recorded_only_when_it_changes(recorder: Recorder) -> None:
    first = record(recorder, objects(A, B), T0)
    assert {w["name"]: w["state"] for w in first["workloads"]} == {"default/a": "admitted", "default/b": "pending"}
    assert record(recorder, objects(A, B), T0 + 60)["workloads"] == []
    third = record(recorder, objects(B), T0 + 120)
    assert {w["name"]: w["state"] for w in third["workloads"]} == {"default/a": "deleted", "default/b": "admitted"}
    assert [c for c, _, _ in recorder.log.history("default/b")] == [1, 3]


def test_a_new_writer_carries_on_from_what_the_log_holds(tmp_path: Path) -> None:
    path = str(tmp_path / "log.db")
    with Recorder.open(path, origin="plan", policy=POLICY, config=Config()) as r:
        record(r, objects(A, B), T0)
    with Recorder.open(path, origin="plan", policy=POLICY, config=Config()) as r:
        again = record(r, objects(A, B), T0 + 60)
    assert again["workloads"] == [] and again["objects"] == {"total": 6, "added": 0, "removed": 0}


def test_a_recorded_cycle_replays_to_the_same_plan(recorder: Recorder) -> None:
    docs = documents(objects(A, B, cpu=4))
    snapshot = build_snapshot(docs, lenient=True)
    plan = run_cycle(snapshot, POLICY, Config())
    assert {w.name: w.state for w in plan.workloads} == {"default/a": "admitted", "default/b": "admitted"}
    recorder.record(started=T0, documents=docs, plan=plan, snapshot_notices=snapshot.notices)
    record(recorder, objects(B), T0 + 60)
    result = replay(recorder.log, 1, limits=None)
    assert result.same_snapshot and result.diff.changes == ()
    mine, theirs = plan.to_dict(), result.plan.to_dict()
    del mine["solver"], theirs["solver"]
    assert mine == theirs
    # Under another policy the diff shows what it would have flipped.
    other = tmp_path_policy(recorder)
    changed = replay(recorder.log, 1, policy=load_policy([other]), limits=None)
    assert [(c.workload, c.new["state"]) for c in changed.diff.changes] == [("default/b", "pending")]


def tmp_path_policy(recorder: Recorder) -> str:
    """A policy file under which a cycle admits nothing."""
    path = Path(recorder.log.path).parent / "nothing.lp"
    path.write_text("% No workload may be admitted by a cycle.\n:- admit(W).\n")
    return str(path)


def test_the_recorded_configuration_reads_back_as_it_was() -> None:
    config = Config(time_budget=3.0, controller_namespace="ops")
    assert parse_config(Document("log", config_document(config))) == config


def test_replay_refuses_a_tampered_policy(recorder: Recorder) -> None:
    record(recorder, objects(A), T0)
    digest = recorder.log.record(1)["policyDigest"]
    files = recorder.log.blob("policy", digest)
    files[0]["text"] += '\n#script (python)\nimport os\n#end.\n'
    recorder.log.conn.execute("UPDATE blobs SET data = ? WHERE kind = 'policy'", (recorder.log.codec.encode(None, files),))
    with pytest.raises(Exception, match="forbidden"):
        load_recorded(recorder.log, 1)


def test_retention_by_age_deletes_old_cycles_and_the_objects_only_they_held(recorder: Recorder) -> None:
    for i in range(5):  # an object of its own in each cycle, and one shared by all
        record(recorder, objects(workload(f"w{i}", cpu="1", minute=i)), T0 + i * 3600)
    log = recorder.log
    before = log.latest_states()
    assert enforce(log, Retention(max_age=2.5 * 3600), T0 + 4 * 3600) == 2
    assert [c["id"] for c in log.cycles()] == [3, 4, 5]
    assert count(log, "objects") == 4 + 3  # the queue objects, and the Workloads of cycles 3 to 5
    assert log.latest_states() == before
    assert replay(log, 3, limits=None).diff.changes == ()
    assert enforce(log, Retention(max_age=2.5 * 3600), T0 + 4 * 3600) == 0  # nothing more is due


def test_retention_by_size_keeps_the_newest_cycle(recorder: Recorder) -> None:
    for i in range(30):
        record(recorder, objects(workload(f"w{i}", cpu="1", minute=i)), T0 + i)
    log = recorder.log
    enforce(log, Retention(max_bytes=1), T0 + 60)
    assert [c["id"] for c in log.cycles()] == [30]
    assert replay(log, 30, limits=None).same_snapshot


def test_manifests_are_deltas_between_keyframes(recorder: Recorder) -> None:
    big = [workload(f"w{i}", cpu="1", minute=i) for i in range(300)]
    for i in range(CHAIN + 3):
        record(recorder, objects(*big, workload(f"new{i}", cpu="1")), T0 + i)
    log = recorder.log
    keyframes = log.conn.execute("SELECT id FROM manifests WHERE base IS NULL").fetchall()
    assert len(keyframes) == 2
    for cycle in (1, CHAIN, CHAIN + 3):
        manifest = log.conn.execute("SELECT manifest FROM cycles WHERE id = ?", (cycle,)).fetchone()[0]
        assert len(resolve(log.conn, manifest)) == 4 + 300 + 1


def test_a_log_of_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    DecisionLog.open(path, write=True).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    for write in (False, True):
        with pytest.raises(DecisionLogError, match=f"schema version {SCHEMA_VERSION + 1}, newer"):
            DecisionLog.open(path, write=write)


def test_a_file_that_is_no_decision_log_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    sqlite3.connect(path).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(DecisionLogError, match="not a clueue decision log"):
        DecisionLog.open(path)
    with pytest.raises(DecisionLogError, match="no decision log at"):
        DecisionLog.open(tmp_path / "missing.db")


def test_an_unknown_cycle_is_a_clear_error(recorder: Recorder) -> None:
    record(recorder, objects(A), T0)
    with pytest.raises(DecisionLogError, match="no cycle 7 .* holds cycles 1 to 1"):
        recorder.log.record(7)


def test_the_json_lines_sink_writes_each_record(tmp_path: Path) -> None:
    lines = tmp_path / "records.jsonl"
    with Recorder.open(str(tmp_path / "log.db"), origin="apply", policy=POLICY, config=Config(),
                       json_lines=str(lines)) as r:
        written = [record(r, objects(A, B), T0), record(r, objects(B), T0 + 60)]
    read = [json.loads(line) for line in lines.read_text().splitlines()]
    assert read == written
    assert read[0]["kind"] == "DecisionCycle" and read[0]["apiVersion"] == "clueue.dev/v1"
    stored = DecisionLog.open(tmp_path / "log.db").record(2)
    assert {k: v for k, v in stored.items()} == {k: v for k, v in read[1].items()}


class _Result:
    """What the controller hands its observers (a CycleResult's fields)."""

    def __init__(self, docs: list[Document]) -> None:
        snapshot = build_snapshot(docs, lenient=True)
        self.started, self.documents, self.snapshot = T0, docs, snapshot
        self.plan, self.error, self.phases = run_cycle(snapshot, POLICY, Config()), "", {"decide": 0.1}
        self.now, self.worker_documents = int(T0), None


def test_the_controller_observer_counts_a_failure_and_never_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    failures: list[int] = []
    observer = CycleRecorder(DecisionLogConfig(str(blocker / "log.db")), policy=POLICY, config=Config(),
                             on_error=lambda: failures.append(1))
    observer(_Result(documents(objects(A))))
    assert observer.flush()
    observer(_Result(documents(objects(A))))
    observer.close()
    assert failures == [1, 1]
    working = CycleRecorder(DecisionLogConfig(str(tmp_path / "log.db")), policy=POLICY, config=Config(),
                            on_error=lambda: failures.append(1))
    working(_Result(documents(objects(A))))
    working.close()
    assert failures == [1, 1] and DecisionLog.open(tmp_path / "log.db").cycle_ids() == (1, 1)


def test_timeline_spans_and_the_time_in_each(recorder: Recorder) -> None:
    record(recorder, objects(A, B), T0)
    record(recorder, objects(A, B), T0 + 600)
    record(recorder, objects(B), T0 + 2280)
    record(recorder, objects(B), T0 + 3000)
    spans = timeline(recorder.log.history("default/b"), last_time=T0 + 3000)
    assert [(s["state"], s["seconds"], s["to"] is None) for s in spans] == [("pending", 2280, False),
                                                                         ("admitted", 720, True)]
    assert spans[0]["phases"][0]["reasons"][0]["code"] == "InsufficientQuota"


def config_fields(section: Any) -> Fields:
    return Fields(Document("config.yaml", {"kind": "Configuration", "metadata": {"name": "c"},
                                           "decisionLog": section}), "Configuration")


def test_the_decision_log_section_of_a_configuration() -> None:
    parsed = parse_decision_log(config_fields({"path": "/var/lib/clueue/log.db", "jsonLines": "-",
                                               "retention": {"maxAge": "2d", "maxBytes": "512Mi"}}))
    assert parsed == DecisionLogConfig("/var/lib/clueue/log.db", 2 * 86400.0, 512 * 2**20, "-")
    assert parse_decision_log(config_fields({"path": "x.db", "retention": {"maxAge": 0, "maxBytes": 0}})) == \
        DecisionLogConfig("x.db", None, None)
    with pytest.raises(SnapshotError, match="decisionLog.retention.maxAge"):
        parse_decision_log(config_fields({"path": "x.db", "retention": {"maxAge": "soon"}}))
    with pytest.raises(SnapshotError, match="decisionLog.path"):
        parse_decision_log(config_fields({"retention": {}}))


def test_rows_of_a_kind_share_a_dictionary(recorder: Recorder) -> None:
    import zlib

    from clueue.adapters.decisionlog.codec import dumps
    many = [workload(f"w{i}", cpu="1", minute=i) for i in range(40)]
    record(recorder, objects(*many), T0)
    log = recorder.log
    rows = log.conn.execute("SELECT data FROM objects WHERE kind = 'Workload'").fetchall()
    stored = sum(len(data) for (data,) in rows)
    alone = sum(len(zlib.compress(dumps(log.codec.decode(data)), 6)) for (data,) in rows)
    assert stored * 3 < alone
    assert {k for (k,) in log.conn.execute("SELECT kind FROM dictionaries")} >= {"Workload", "state", "cycle"}
    assert replay(log, 1, limits=None).same_snapshot  # decoded with their dictionaries


# -- MultiKueue's worker views ------------------------------------------------------------------
NOW = int(T0) + 30


def dispatching(*, observed: dict[str, float]) -> tuple[list[Document], dict[str, list[Document]], Any]:
    """A manager whose Workload default/big (8 cpu) holds quota with its MultiKueue check
    Pending, and three workers observed at the times given: worker-a with 16 cpu free, the
    others 2; its documents, each worker's, and the snapshot with the workers' views."""
    from dataclasses import replace

    from clueue.engine.snapshot import WorkerView
    from tests.scenarios.test_dispatch import WORKERS, manager

    docs = documents(flatten([manager(), workload("big", cpu="8")]))
    by_worker = {k: documents(objects(cpu=16 if k == "worker-a" else 2)) for k in WORKERS}
    snapshot = build_snapshot(docs, lenient=True)
    views = {k: WorkerView(k, build_snapshot(d, lenient=True), observed_at=observed[k]) for k, d in by_worker.items()}
    return docs, by_worker, replace(snapshot, workers=views)


def nominations(actions: Any) -> dict[str, list[str]]:
    return {a["workload"]: a["clusterNames"] for a in actions if a["kind"] == "nominate"}


def test_a_cycle_that_dispatched_replays_to_the_same_nominations(recorder: Recorder) -> None:
    # worker-a has room but was last heard from 200 s before the cycle: stale, so the prediction
    # is uncertain and every worker gets a copy. A replay that lost the workers' views, or took
    # their age as 0, would nominate worker-a alone.
    observed = {"worker-a": NOW - 200.5, "worker-b": NOW - 1.25, "worker-c": float(NOW)}
    docs, by_worker, snapshot = dispatching(observed=observed)
    plan = run_cycle(snapshot, POLICY, Config(), now=NOW)
    assert nominations([a.to_dict() for a in plan.actions]) == {"default/big": ["worker-a", "worker-b", "worker-c"]}
    stored = recorder.record(started=T0, documents=docs, plan=plan, snapshot_notices=snapshot.notices, now=NOW,
                             workers=snapshot.workers, worker_documents=by_worker)
    assert stored["now"] == NOW and [w["name"] for w in stored["workers"]] == ["worker-a", "worker-b", "worker-c"]
    assert {w["name"]: w["observedAt"] for w in stored["workers"]} == observed
    assert stored["dispatch"][0]["nominated"] == ["worker-a", "worker-b", "worker-c"]
    # the same object in three workers (and the manager's namespace, flavor...) is stored apart
    assert stored["objects"]["total"] == len(docs) + sum(len(d) for d in by_worker.values())

    recorded = load_recorded(recorder.log, stored["id"])
    assert recorded.now == NOW and recorded.snapshot.workers == snapshot.workers
    result = replay(recorder.log, stored["id"], limits=None)
    assert result.same_snapshot and result.diff.changes == () and result.nominations == ()
    assert nominations([a.to_dict() for a in result.plan.actions]) == nominations(stored["actions"])
    assert [d.to_dict() for d in result.plan.dispatch] == stored["dispatch"]


def test_replay_tells_a_nomination_that_changed(recorder: Recorder) -> None:
    observed = {"worker-a": NOW - 200.5, "worker-b": float(NOW), "worker-c": float(NOW)}
    docs, by_worker, snapshot = dispatching(observed=observed)
    fresh = {**observed, "worker-a": float(NOW)}  # as if worker-a had been heard from: it alone is nominated
    _, _, other = dispatching(observed=fresh)
    plan = run_cycle(other, POLICY, Config(), now=NOW)
    stored = recorder.record(started=T0, documents=docs, plan=plan, now=NOW, workers=snapshot.workers,
                             worker_documents=by_worker)
    result = replay(recorder.log, stored["id"], limits=None)
    assert [c.to_dict() for c in result.nominations] == [
        {"workload": "default/big", "recorded": ["worker-a"], "replayed": ["worker-a", "worker-b", "worker-c"]}]


def test_a_worker_view_keeps_its_digest_and_its_objects_while_only_time_passes(recorder: Recorder) -> None:
    from clueue.engine.dispatch_workers import worker_capacity

    observed = {"worker-a": T0 - 10.5, "worker-b": T0 - 3.0, "worker-c": T0}
    docs, by_worker, snapshot = dispatching(observed=observed)
    again = dispatching(observed=observed)[2]  # read again, later: nothing changed, only its age
    assert again.digest() == snapshot.digest()
    view = snapshot.workers["worker-a"]
    assert [worker_capacity(view, now=now).age for now in (int(T0), int(T0) + 60)] == [10, 70]
    first = recorder.record(started=T0, documents=docs, plan=run_cycle(snapshot, POLICY, Config(), now=int(T0)),
                            now=int(T0), workers=snapshot.workers, worker_documents=by_worker)
    second = recorder.record(started=T0 + 60, documents=docs,
                             plan=run_cycle(again, POLICY, Config(), now=int(T0) + 60),
                             now=int(T0) + 60, workers=again.workers, worker_documents=by_worker)
    assert first["snapshotDigest"] == second["snapshotDigest"]
    assert second["objects"]["added"] == 0 and second["objects"]["removed"] == 0
    # heard from again: a new observation time is a new snapshot, but no new object
    later = dispatching(observed={**observed, "worker-b": T0 + 59.0})[2]
    assert later.digest() != snapshot.digest()


# -- the controller's writer thread -------------------------------------------------------------
def test_the_observer_hands_cycles_to_a_writer_and_counts_those_it_cannot_queue(tmp_path: Path) -> None:
    import threading

    from clueue.adapters.decisionlog.observer import CycleInputs

    writing, release = threading.Event(), threading.Event()
    failures: list[int] = []

    def written(record: dict[str, Any], wall: float, cpu: float) -> None:
        writing.set()
        release.wait()

    observer = CycleRecorder(DecisionLogConfig(str(tmp_path / "log.db")), policy=POLICY, config=Config(),
                             on_error=lambda: failures.append(1), queue_size=1, on_written=written)
    first = _Result(documents(objects(A)))
    observer(first)
    inputs = CycleInputs.of(first)
    first.documents.clear()  # what the loop does with its lists afterwards does not reach the queued cycle
    assert len(inputs.documents or ()) == 5
    assert writing.wait(60)  # the writer holds the first cycle
    observer(_Result(documents(objects(A, B))))  # queued
    observer(_Result(documents(objects(B))))  # the queue is full: not recorded, counted
    assert failures == [1] and observer.dropped == 1
    assert not observer.flush(timeout=0)
    release.set()
    assert observer.flush()
    observer.close()
    observer(_Result(documents(objects(B))))  # after the close (a cycle past the stop's grace): counted
    assert failures == [1, 1]
    with DecisionLog.open(tmp_path / "log.db") as log:
        assert log.cycle_ids() == (1, 2)
        assert [w["name"] for w in log.record(2)["workloads"]] == ["default/b"]
