"""``clueue bench --scenario preemption`` (bench/preemption.py): the Kueue model and the report."""

from __future__ import annotations

from clueue.bench.preemption import Admitted, Cluster, kueue_victims, render_victims, victim_benchmark


def test_the_kueue_model_takes_borrowed_quota_first():
    # q0 (4 cpu) runs its own low (1 cpu); q1 (2 cpu) runs b1 and b2 (2 cpu each: it borrows 2).
    # The preemptor of q0 asks 2: the newest borrower goes, not q0's own lower-priority work.
    c = Cluster({"q0": 4, "q1": 2}, {"q0": "Any", "q1": "Never"},
                (Admitted("low", "q0", 1, 1, 0, 10), Admitted("b1", "q1", 2, 1, 20, 30),
                 Admitted("b2", "q1", 2, 1, 20, 40)), "q0", 2, 25)
    assert kueue_victims(c) == frozenset({"b2"})


def test_the_report_counts_both_sides_and_clueue_never_loses_more_work_on_these_seeds():
    result = victim_benchmark(seeds=40)
    assert result["clusters"] == 40 and result["clueue"]["preemptions"] > 0 and result["kueue"]["preemptions"] > 0
    assert result["clueueLosesMore"] == 0
    assert "victims/preemptor" in render_victims(result)
