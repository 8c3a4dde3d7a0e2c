"""The background writer's choice of heads (adapters/controller/writer.py): which waiting
workloads' status is written at all."""

from clueue.adapters.controller.writer import heads
from clueue.engine import WorkloadEntry


def entry(name: str, cq: str | None, rank: int | None) -> WorkloadEntry:
    return WorkloadEntry(name=f"ns/{name}", queue="main", cluster_queue=cq, priority=0, state="pending",
                         origin="workload", rank=rank)


def test_the_first_of_each_cluster_queue_in_rank_order():
    entries = (entry("a3", "a", 5), entry("a1", "a", 1), entry("b1", "b", 2), entry("a2", "a", 3),
               entry("b2", "b", 4), entry("a4", "a", 6))
    assert [e.name for e in heads(entries, per_queue=2)] == ["ns/a1", "ns/b1", "ns/a2", "ns/b2"]


def test_unranked_come_last_and_a_workload_without_cluster_queue_counts_by_its_local_queue():
    entries = (entry("x", None, None), entry("y", None, None), entry("r", "a", 1))
    assert [e.name for e in heads(entries, per_queue=1)] == ["ns/r", "ns/x"]
