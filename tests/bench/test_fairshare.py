"""The fair-sharing bench scenario and its share timeline (bench/fairshare.py)."""

from __future__ import annotations

from clueue.bench.fairshare import ShareTimeline
from clueue.bench.replay import replay
from clueue.bench.scenarios import FAIR_WEIGHTS, generate


def test_fair_sharing_is_switched_on_by_kueues_configmap():
    snapshot = generate("fair-sharing", scale=0.05).snapshot()
    assert snapshot.kueue_settings.fair_sharing is not None
    weights = sorted(str(q.fair_weight) for q in snapshot.cluster_queues.values() if not q.name.startswith("lender"))
    assert weights == sorted(str(w) for w in FAIR_WEIGHTS * 3)


def test_the_timeline_reports_each_borrowing_queue_against_its_weighted_fair_share():
    scenario = generate("fair-sharing", scale=0.03)  # 84 workloads: every borrower contends, in a tenth of the time
    timeline = ShareTimeline(scenario.snapshot())
    replayed = replay(scenario, latency="zero", observe=timeline)
    summary = timeline.summary(replayed)
    assert replayed["finished"] == replayed["workloads"]
    assert summary["samples"] > 0 and 0 <= summary["maxDeviation"] <= 1
    queues = summary["queues"]
    assert not any(q.startswith("lender") for q in queues)  # within its nominal quota it does not contend
    for q, figures in queues.items():
        assert figures["weight"] == q.rpartition("-w")[2]
