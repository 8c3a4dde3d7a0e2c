"""The greedy placement reference and the placement figures of a plan (bench/greedy_placement.py)."""

from __future__ import annotations

from clueue.bench.greedy_placement import greedy_place, plan_placement
from clueue.bench.scenarios import generate
from clueue.engine import Config, load_policy, run_cycle
from clueue.engine.workloads import build_workloads


def test_greedy_strands_what_waiting_gangs_hold_and_clueue_places_at_least_as_many_gangs():
    snap = generate("placement", seed=0, scale=0.05).snapshot()
    built = {w.key: w for w in build_workloads(snap).workloads}
    greedy = greedy_place(snap, built.values())
    plan = run_cycle(snap, load_policy(), Config(time_budget=30))
    ours = plan_placement(snap, plan, built)
    assert greedy.gangs_admitted > 0 and ours.gangs_admitted >= greedy.gangs_admitted
    assert ours.pods_placed == sum(ps.count for w in ours.admitted for ps in built[w].pod_sets)
    assert ours.to_dict()["gpusHeldByWaitingPods"] == 0
