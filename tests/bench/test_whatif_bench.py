"""``clueue bench --scenario whatif`` (bench/whatif.py): every pending workload of a small
baseline backlog gets an answer, and the searched ones a checked quota suggestion."""

from __future__ import annotations

from clueue.bench.whatif import render_whatif, whatif_benchmark


def test_small_baseline_backlog_is_answered() -> None:
    r = whatif_benchmark(scale=0.01, whatif_budget=600.0)  # never cut short on a loaded machine
    assert r["pending"] > 0 and r["answered"] == r["pending"]
    assert r["withQuotaSuggestion"] > 0
    assert "answered within the budget" in render_whatif(r)
