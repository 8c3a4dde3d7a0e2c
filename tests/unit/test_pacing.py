"""The pending-write limit: a token bucket a controller keeps from cycle to cycle."""

from __future__ import annotations

import pytest

from clueue.adapters.kube.pacing import PendingWriteLimiter


def test_a_full_bucket_lets_a_burst_go_then_refills_at_its_rate():
    now = [0.0]
    limiter = PendingWriteLimiter(rate=50, burst=500, clock=lambda: now[0])
    assert sum(limiter.take() for _ in range(600)) == 500
    now[0] += 1.0
    assert sum(limiter.take() for _ in range(600)) == 50
    now[0] += 3600.0  # never more than the burst saved up
    assert sum(limiter.take() for _ in range(600)) == 500


def test_a_limit_needs_a_positive_rate_and_burst():
    with pytest.raises(ValueError, match="positive rate"):
        PendingWriteLimiter(rate=0)
    with pytest.raises(ValueError, match="burst of at least 1"):
        PendingWriteLimiter(burst=0)
