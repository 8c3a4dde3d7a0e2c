"""Share arithmetic of engine/fairsharing.py against Kueue's documented definitions, and the
fair sharing sections of clueue's own configuration file."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from clueue.adapters.files import load_config
from clueue.engine import SnapshotError
from clueue.engine.facts import Node
from clueue.engine.fairsharing import FINITE_CAP, INFINITE, ShareTree, lq_usage, share_value
from clueue.engine.snapshot import Document, build_snapshot
from clueue.engine.workloads import build_workloads
from tests.builders import cluster_queue, flavor, local_queue, quota, workload


def tree(*objs) -> ShareTree:
    snapshot = build_snapshot([Document(f"t#{i}", o) for i, o in enumerate(objs)])
    admitted = [w for w in build_workloads(snapshot).workloads if w.admission is not None]
    return ShareTree(snapshot, admitted)


def test_the_share_is_what_a_queue_borrows_over_what_its_cohort_can_lend_divided_by_weight():
    a = cluster_queue("a", {"f": {"cpu": 4}}, cohort="co")
    a["spec"]["fairSharing"] = {"weight": "2"}
    t = tree(flavor("f"), a, cluster_queue("b", {"f": {"cpu": 4}}, cohort="co"), local_queue("a"),
             workload("w", cpu="6", admitted_in=("a", "f")))
    # a borrows 2 of the 8 its cohort can lend: 0.25, halved by weight 2.
    assert t.share(Node("cq", "a")) == 125_000
    assert t.share(Node("cq", "b")) == 0 and t.share(Node("cohort", "co")) == 0  # a root has no share


def test_a_lending_limit_keeps_quota_out_of_what_the_cohort_can_lend():
    # b lends at most 1 of its 4: the cohort can make 4 + 1 available to a, not 8.
    t = tree(flavor("f"), cluster_queue("a", {"f": {"cpu": 4}}, cohort="co"),
             cluster_queue("b", {"f": {"cpu": quota(4, lending=1)}}, cohort="co"), local_queue("a"),
             workload("w", cpu="5", admitted_in=("a", "f")))
    assert t.lendable(Node("cohort", "co")) == {"cpu": Fraction(5)}
    assert t.share(Node("cq", "a")) == 200_000


def test_weight_zero_while_borrowing_is_above_every_finite_share():
    assert share_value(True, Fraction(1, 4), Fraction(0)) == INFINITE + 250_000
    assert share_value(True, Fraction(1, 4), Fraction(1, 10**9)) == FINITE_CAP
    assert share_value(False, Fraction(0), Fraction(0)) == 0


def test_local_queue_usage_is_weighted_by_resource_and_divided_by_the_queue_weight():
    assert lq_usage({"cpu": Fraction(4), "memory": Fraction(10)}, Fraction(2), {"cpu": 2.0}) == Fraction(9)
    assert lq_usage({"cpu": Fraction(1)}, Fraction(0), {}) is None


def test_clueues_config_sets_the_sections(tmp_path: Path):
    path = tmp_path / "config.yaml"
    path.write_text("apiVersion: clueue.dev/v1\nkind: Configuration\nfairSharing:\n"
                    "  preemptionStrategies: [LessThanInitialShare]\nadmissionFairSharing:\n"
                    "  usageHalfLifeTime: 1h30m\n  resourceWeights: {cpu: 2}\n")
    config = load_config(str(path))
    assert config.fair_sharing is not None and config.fair_sharing.preemption_strategies == ("LessThanInitialShare",)
    assert config.admission_fair_sharing is not None and config.admission_fair_sharing.half_life_seconds == 5400.0
    path.write_text("kind: Configuration\nadmissionFairSharing:\n  resourceWeights: {cpu: -1}\n")
    with pytest.raises(SnapshotError, match="admissionFairSharing.resourceWeights.cpu"):
        load_config(str(path))
