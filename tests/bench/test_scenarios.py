"""The scenario generator: Kueue's shapes and counts, reproducible from a seed, loadable as snapshots."""

from __future__ import annotations

from collections import Counter

import pytest

from clueue.adapters.files import load_snapshot
from clueue.bench.scenarios import (
    ARRIVAL_ANNOTATION, CLASS_LABEL, RUNTIME_ANNOTATION, SCENARIO_NAMES, generate, write_snapshot,
)
from clueue.engine.workloads import build_workloads


def _kinds(s):
    return Counter(o["kind"] for o in s.config)


def _cpu(w):
    return sum(int(ps["template"]["spec"]["containers"][0]["resources"]["requests"].get("cpu", 0)) * ps["count"]
               for ps in w["spec"]["podSets"])


def test_baseline_is_kueues_shape():
    s = generate("baseline", seed=0)
    assert _kinds(s)["ClusterQueue"] == 30 and _kinds(s)["LocalQueue"] == 30
    cqs = [o for o in s.config if o["kind"] == "ClusterQueue"]
    assert len({cq["spec"]["cohort"] for cq in cqs}) == 5
    assert Counter(cq["spec"]["cohort"] for cq in cqs).most_common()[-1][1] == 6
    for cq in cqs:
        (q,) = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
        assert q == {"name": "cpu", "nominalQuota": 20, "borrowingLimit": 100}
    assert len(s.workloads) == 15_000
    by_class = Counter(w["metadata"]["labels"][CLASS_LABEL] for w in s.workloads)
    assert by_class == {"small": 10_500, "medium": 3_000, "large": 1_500}
    per_queue = Counter(w["metadata"]["namespace"] for w in s.workloads)
    assert set(per_queue.values()) == {500}
    shapes = {(w["metadata"]["labels"][CLASS_LABEL], _cpu(w), w["spec"]["priority"],
               w["metadata"]["annotations"][RUNTIME_ANNOTATION]) for w in s.workloads}
    assert shapes == {("small", 1, 50, "200"), ("medium", 5, 100, "500"), ("large", 20, 200, "1000")}


@pytest.mark.parametrize("cls,interval", [("small", 100), ("medium", 500), ("large", 1200)])
def test_baseline_arrivals_follow_the_class_interval(cls, interval):
    s = generate("baseline", seed=3)
    arrivals = sorted(int(w["metadata"]["annotations"][ARRIVAL_ANNOTATION]) for w in s.workloads
                      if w["metadata"]["namespace"] == "ns-02-004" and w["metadata"]["labels"][CLASS_LABEL] == cls)
    assert {b - a for a, b in zip(arrivals, arrivals[1:])} == {interval}
    assert 0 <= arrivals[0] < interval


def test_large_scale_shape():
    s = generate("large-scale", seed=0)
    assert _kinds(s)["ClusterQueue"] == 1_000
    assert len({o["spec"]["cohort"] for o in s.config if o["kind"] == "ClusterQueue"}) == 10
    assert len(s.workloads) == 50_000
    assert set(Counter(w["metadata"]["namespace"] for w in s.workloads).values()) == {50}


def test_the_same_seed_gives_the_same_scenario_and_another_seed_another():
    for name in SCENARIO_NAMES:
        if name != "large-scale":
            assert generate(name, seed=7, scale=0.2) == generate(name, seed=7, scale=0.2)
    assert generate("flavors", seed=1).workloads != generate("flavors", seed=2).workloads


def test_scale_shrinks_each_queue_backlog():
    s = generate("baseline", seed=0, scale=0.02)
    assert len(s.workloads) == 30 * (7 + 2 + 1)


@pytest.mark.parametrize("name", [n for n in SCENARIO_NAMES if n != "large-scale"])
def test_every_scenario_loads_through_the_engine(name):
    s = generate(name, seed=0, scale=0.3)
    snap = s.snapshot()
    built = build_workloads(snap).workloads
    assert len(built) == len(s.workloads) == len(snap.workloads)
    assert not snap.notices


def test_choice_heavy_shapes():
    flavors = generate("flavors", seed=0)
    cq = next(o for o in flavors.config if o["kind"] == "ClusterQueue")
    assert [f["name"] for f in cq["spec"]["resourceGroups"][0]["flavors"]] == ["small", "medium", "large"]
    gangs = generate("gangs", seed=0)
    assert {len(w["spec"]["podSets"]) for w in gangs.workloads} == {1, 2, 3}
    frag = generate("fragmentation", seed=0)
    parents = {o["metadata"]["name"]: o["spec"].get("parentName") for o in frag.config if o["kind"] == "Cohort"}
    assert parents["org"] is None and {parents[d] for d in parents if d != "org"} == {"org"}
    assert {_cpu(w) for w in frag.workloads} == {3, 5, 7, 11}


def test_creation_timestamps_carry_the_arrival():
    s = generate("gangs", seed=0, scale=0.2)
    w = s.workloads[0]
    ms = int(w["metadata"]["annotations"][ARRIVAL_ANNOTATION])
    assert w["metadata"]["creationTimestamp"] == f"2025-01-01T00:{ms // 60000:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}Z"


def test_written_snapshot_loads_back(tmp_path):
    s = generate("fragmentation", seed=0, scale=0.25)
    paths = write_snapshot(s, tmp_path / "frag")
    assert [p.name for p in paths] == ["00-config.yaml", "10-workloads.yaml"]
    snap = load_snapshot([str(tmp_path / "frag")])
    direct = s.snapshot()
    assert snap.workloads == direct.workloads and snap.cluster_queues == direct.cluster_queues
    assert len(snap.workloads) == len(s.workloads) and len(snap.cohorts) == 5


def test_unknown_scenario_and_bad_scale_are_refused():
    with pytest.raises(ValueError, match="unknown scenario"):
        generate("nope")
    with pytest.raises(ValueError, match="scale"):
        generate("baseline", scale=0)
