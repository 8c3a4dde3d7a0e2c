"""Admission fair sharing's consumed usage (engine/admission_usage.py): the decay with a
half-life, sampled every usageSamplingInterval, and when the next sample is due."""

from __future__ import annotations

from fractions import Fraction

import pytest

from clueue.engine import Document, SnapshotError, build_snapshot
from clueue.engine.admission_usage import decayed, entry_penalty, next_sample, sample, sampled_queues
from clueue.engine.config import AdmissionFairSharing
from clueue.engine.objects import LocalQueue
from tests.scenarios.test_fair_sharing import kueue_config
from tests.scenarios.test_fair_sharing_status import afs_snapshot

HOUR = 3600
AFS = AdmissionFairSharing(half_life_seconds=HOUR, sampling_seconds=300)


def test_unused_consumption_halves_every_half_life():
    consumed = {"cpu": Fraction(16), "memory": Fraction(2**30)}
    for halvings in range(1, 4):
        assert decayed(consumed, {}, halvings * HOUR, HOUR) == {r: v / 2**halvings for r, v in consumed.items()}


def test_usage_is_approached_by_the_part_of_the_half_life_that_passed():
    # a half-life: halfway from what was consumed to what is used now
    assert decayed({"cpu": Fraction(2)}, {"cpu": Fraction(10)}, HOUR, HOUR) == {"cpu": Fraction(6)}
    # a new resource enters from 0; one gone from both leaves the map
    assert decayed({"gpu": Fraction(0)}, {"cpu": Fraction(4)}, 2 * HOUR, HOUR) == {"cpu": Fraction(3)}
    # nothing elapsed: nothing moves; half-life 0: forgotten (as Kueue resets it)
    assert decayed({"cpu": Fraction(2)}, {"cpu": Fraction(10)}, 0, HOUR) == {"cpu": Fraction(2)}
    assert decayed({"cpu": Fraction(2)}, {"cpu": Fraction(10)}, 60, 0) == {}


def test_amounts_are_kept_to_a_thousandth():
    got = decayed({"cpu": Fraction(1)}, {}, 1, HOUR)["cpu"]
    assert got.denominator in (1, 2, 4, 5, 8, 10, 20, 25, 40, 50, 100, 125, 200, 250, 500, 1000)
    assert abs(float(got) - 0.5 ** (1 / HOUR)) < 0.001


def test_a_sample_is_taken_once_the_interval_passed():
    lq = LocalQueue("ns", "q", "cq", consumed={"cpu": Fraction(8)}, consumed_at=1000)
    assert sample(lq, {"cpu": Fraction(8)}, 1299, AFS) is None  # younger than the interval
    got = sample(lq, {}, 1000 + HOUR, AFS)
    assert got is not None and got.last_update == 1000 + HOUR and got.resources == {"cpu": Fraction(4)}
    # no status yet: it starts empty, stamped now, as Kueue's first sample folds in nothing
    fresh = sample(LocalQueue("ns", "q", "cq"), {"cpu": Fraction(8)}, 5000, AFS)
    assert fresh is not None and (fresh.resources, fresh.last_update) == ({}, 5000)


@pytest.mark.parametrize("last, now, due", [(0, 10_000, 10_300), (9_900, 10_000, 10_200), (9_000, 10_000, 10_300)])
def test_the_next_sample_is_due_an_interval_after_the_last(last, now, due):
    snapshot = afs_snapshot(x_at=last, y_at=last)
    assert next_sample(snapshot, now) == due


def test_without_the_section_nothing_is_sampled():
    snapshot = afs_snapshot(section=False)
    assert sampled_queues(snapshot) == [] and next_sample(snapshot, 100) is None



def test_a_sampling_interval_must_be_positive():
    bad = kueue_config("kind: Configuration\nadmissionFairSharing:\n  usageSamplingInterval: 0s\n")
    with pytest.raises(SnapshotError, match="admissionFairSharing.usageSamplingInterval"):
        build_snapshot([Document("cm#1", bad)])


def test_an_admission_is_sampled_at_once_with_its_entry_penalty():
    # one sampling interval of a half-life of 5 min moves usage halfway: the penalty is half the requests
    afs = AdmissionFairSharing(half_life_seconds=300, sampling_seconds=300)
    assert entry_penalty({"cpu": Fraction(4), "memory": Fraction(2**30)}, afs) == {"cpu": 2, "memory": 2**29}
    lq = LocalQueue("ns", "q", "cq", consumed={"cpu": Fraction(8)}, consumed_at=1000)
    # within the interval (here at its very start: nothing decays), sampled anyway with the penalty
    got = sample(lq, {"cpu": Fraction(4)}, 1000, afs, entry_penalty({"cpu": Fraction(4)}, afs))
    assert got is not None and (got.resources, got.last_update) == ({"cpu": 10}, 1000)
    # no status yet: the penalty alone
    fresh = sample(LocalQueue("ns", "q", "cq"), {"cpu": Fraction(4)}, 5000, afs, {"cpu": Fraction(2)})
    assert fresh is not None and fresh.resources == {"cpu": 2}
    assert entry_penalty({"cpu": Fraction(4)}, AdmissionFairSharing(half_life_seconds=0)) == {}
