"""The decision-log benchmark: what recording costs a busy controller, per cycle.

A changing cluster is simulated from a scenario's shape (by default the ``baseline`` at a
tenth: 30 ClusterQueues, a backlog of 1,500 Workloads): Workloads arrive about as fast as they
are admitted, the ones a cycle admits get their ``status.admission`` (a new resourceVersion,
as the API server gives it) and finish a few cycles later (deleted), and the backlog comes
back under new names, so every cycle admits, finishes and queues dozens of workloads for as
long as the run lasts. Each cycle is decided by one
:class:`~clueue.engine.cycle.Session`, as the controller decides, and handed to the controller's
observer (:class:`~clueue.adapters.decisionlog.observer.CycleRecorder`), whose writer thread
records it into a fresh SQLite log while the next cycle is decided.

Reported: milliseconds per cycle the loop's thread spends handing the cycle over (mean, p95,
max), the writer's CPU milliseconds recording it (the same; its wall time is longer, as it
shares the interpreter's lock with the loop), beside the decide time of the same cycles (for
scale; the writer runs meanwhile), cycles dropped because the writer was too
far behind, bytes per cycle (the log's file size at the end, WAL checkpointed, divided by the
cycles), and how many workload states and objects were written.
"""

from __future__ import annotations

import copy
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

from clueue.adapters.decisionlog.observer import CycleRecorder
from clueue.adapters.decisionlog.store import DecisionLog
from clueue.engine import Config, Document, build_snapshot, load_policy
from clueue.engine.config import DecisionLogConfig
from clueue.engine.cycle import Session

from .scenarios import generate

__all__ = ["LogBenchResult", "decision_log_benchmark", "render_log_bench"]

Progress = Callable[[str], None]


@dataclass(frozen=True)
class LogBenchResult:
    scenario: str
    cycles: int
    objects: float  # snapshot objects per cycle, on average
    states: int  # workload states recorded in all (changes only)
    objects_stored: int  # distinct objects the log holds
    loop_ms_mean: float  # the loop's thread: handing the cycle to the writer
    loop_ms_p95: float
    loop_ms_max: float
    record_ms_mean: float  # the writer's thread: its CPU time recording the cycle
    record_ms_p95: float
    record_ms_max: float
    decide_ms_mean: float
    dropped: int  # cycles not recorded: the writer was too far behind
    bytes_total: int
    bytes_per_cycle: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Cluster:
    """The simulated cluster: objects by source, each with a resourceVersion bumped on change."""

    def __init__(self, config: tuple[dict[str, Any], ...]) -> None:
        self.version = 0
        self.objects: dict[str, dict[str, Any]] = {}
        for body in config:
            self.put(body)

    def put(self, body: dict[str, Any]) -> None:
        self.version += 1
        body["metadata"]["resourceVersion"] = str(self.version)
        meta = body["metadata"]
        self.objects[f"api:{body['kind']} {meta.get('namespace', '')}/{meta['name']}".replace(" /", " ")] = body

    def documents(self) -> list[Document]:
        return [Document(source, body) for source, body in self.objects.items()]


def decision_log_benchmark(*, cycles: int = 1000, scenario: str = "baseline", scale: float = 0.1, seed: int = 0,
                           arrivals: int = 30, runtime: int = 5, time_budget: float = 5.0,
                           directory: str | None = None, progress: Progress = lambda _: None) -> LogBenchResult:
    """Run ``cycles`` cycles of a changing cluster and record each; see the module's docstring.

    The whole backlog is there from the start; ``arrivals`` Workloads arrive per cycle (about
    as many as a cycle admits, so the backlog stays); an admitted one finishes ``runtime``
    cycles after its admission.
    """
    shape = generate(scenario, seed=seed, scale=scale)
    cluster = _Cluster(copy.deepcopy(shape.config))
    backlog = [copy.deepcopy(w) for w in shape.workloads]
    start = len(backlog)
    for w in backlog[:start]:
        cluster.put(copy.deepcopy(w))
    arrived, running = start, {}  # running: source -> cycle it finishes
    policy, config = load_policy(), Config(time_budget=time_budget)
    session = Session(policy, config)
    loop_ms: list[float] = []
    record_ms: list[float] = []
    decide_ms: list[float] = []
    objects = 0
    states = [0]

    def written(record: dict[str, Any], wall: float, cpu: float) -> None:
        record_ms.append(cpu * 1000)
        states[0] += len(record["workloads"])

    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        path = str(Path(tmp) / "decisions.db")
        settings = DecisionLogConfig(path, max_age_seconds=None, max_bytes=None)
        observer = CycleRecorder(settings, policy=policy, config=config, on_written=written)
        try:
            for cycle in range(cycles):
                for source in [s for s, end in running.items() if end <= cycle]:  # finished: deleted
                    del running[source], cluster.objects[source]
                for _ in range(arrivals):  # arrivals, the backlog again under new names once it is used up
                    w = copy.deepcopy(backlog[arrived % len(backlog)])
                    w["metadata"]["name"] += f"-r{arrived // len(backlog)}" if arrived >= len(backlog) else ""
                    cluster.put(w)
                    arrived += 1
                docs = cluster.documents()
                t0 = time.perf_counter()
                snapshot = build_snapshot(docs, lenient=True)
                now = int(time.time())
                plan = session.run(snapshot, now=now)
                entries = len(plan.workloads)  # spelled out, as the controller's apply reads them
                t1 = time.perf_counter()
                observer(SimpleNamespace(started=time.time(), documents=docs, worker_documents=None, snapshot=snapshot,
                                         plan=plan, error="", phases={}, now=now))
                t2 = time.perf_counter()
                decide_ms.append((t1 - t0) * 1000)
                loop_ms.append((t2 - t1) * 1000)
                objects += len(docs)
                for action in plan.actions:  # admissions written, as apply writes them
                    if action.kind == "admit":
                        source = f"api:Workload {action.target}"
                        body = copy.deepcopy(cluster.objects[source])
                        body["status"] = {"admission": {"clusterQueue": action.details["clusterQueue"],
                                                        "podSetAssignments": [
                                                            {"name": p["name"], "count": p["count"],
                                                             "flavors": p["flavors"]}
                                                            for p in action.details["podSets"]]}}
                        cluster.put(body)
                        running[source] = cycle + runtime
                if cycle % 100 == 99:
                    progress(f"decision log: {cycle + 1}/{cycles} cycles, {entries} workloads, "
                             f"loop {statistics.fmean(loop_ms[-100:]):.2f} ms, "
                             f"writer {statistics.fmean(record_ms[-100:] or [0]):.1f} ms")
            observer.flush(None)
        finally:
            observer.close()
        with DecisionLog.open(path, write=True) as log:
            log.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            stored = int(log.conn.execute("SELECT count(*) FROM objects").fetchone()[0])
        size = Path(path).stat().st_size
    loop, record = _figures(loop_ms), _figures(record_ms)
    return LogBenchResult(
        scenario=f"{scenario}@{scale:g}", cycles=cycles, objects=round(objects / cycles, 1), states=states[0],
        objects_stored=stored, loop_ms_mean=loop[0], loop_ms_p95=loop[1], loop_ms_max=loop[2],
        record_ms_mean=record[0], record_ms_p95=record[1], record_ms_max=record[2],
        decide_ms_mean=round(statistics.fmean(decide_ms), 2), dropped=observer.dropped, bytes_total=size,
        bytes_per_cycle=round(size / cycles, 1))


def _figures(ms: list[float]) -> tuple[float, float, float]:
    """Mean, p95 and max of ``ms``, rounded (zeros when empty)."""
    if not ms:
        return 0.0, 0.0, 0.0
    ordered = sorted(ms)
    return (round(statistics.fmean(ordered), 3), round(ordered[int(0.95 * (len(ordered) - 1))], 3),
            round(ordered[-1], 3))


def render_log_bench(r: LogBenchResult) -> str:
    """The result for people, one figure a line."""
    return "\n".join([
        f"decision log, {r.cycles} cycles of a changing {r.scenario} ({r.objects:g} objects a cycle on average)",
        f"  loop's thread: {r.loop_ms_mean:g} ms a cycle on average, p95 {r.loop_ms_p95:g} ms, "
        f"max {r.loop_ms_max:g} ms "
        f"(deciding: {r.decide_ms_mean:g} ms a cycle)",
        f"  writer's thread: {r.record_ms_mean:g} ms CPU a cycle on average, p95 {r.record_ms_p95:g} ms, "
        f"max {r.record_ms_max:g} ms; {r.dropped} cycle(s) dropped (the writer too far behind)",
        f"  size: {r.bytes_total / 2**20:.1f} MiB in all, {r.bytes_per_cycle / 1024:.1f} KiB a cycle; "
        f"{r.states} workload states and {r.objects_stored} distinct objects recorded"])
