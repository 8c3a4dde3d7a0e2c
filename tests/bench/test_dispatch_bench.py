"""The dispatch benchmark's simulation (bench/dispatch.py) counts what it claims: every workload
admitted once, AllAtOnce's copies in every worker, no worker over its quota, Optimized's copies
never fewer than its admissions."""

from __future__ import annotations

from clueue.bench import dispatch


def test_the_simulation_counts_copies_and_admissions(monkeypatch):
    peak: dict[str, int] = {}
    view = dispatch._worker_view

    def watched(name: str, quota: int, used: int):  # what the manager reads each tick
        assert used <= quota, f"{name} over its quota: {used} > {quota}"
        peak[name] = max(peak.get(name, 0), used)
        return view(name, quota, used)

    monkeypatch.setattr(dispatch, "_worker_view", watched)
    every = dispatch.simulate("AllAtOnce", workloads=60, span=60)
    assert every["admitted"] == 60 and every["copiesCreated"] == 60 * len(dispatch.WORKER_QUOTAS)
    best = dispatch.simulate("Optimized", workloads=60, span=60, time_budget=0.5)
    assert best["admitted"] == 60 and best["copiesCreated"] >= 60 and best["duplicateAdmissions"] == 0
    assert peak, "the workers were read"
    result = dispatch.dispatch_benchmark(workloads=20, time_budget=0.5)
    assert set(result["dispatchers"]) == {"Optimized", "AllAtOnce", "Incremental"}
    assert "targets:" in dispatch.render_dispatch(result)
