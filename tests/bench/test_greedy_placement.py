"""The greedy placement reference and the placement figures of a plan (bench/greedy_placement.py)."""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

from clueue.bench.greedy_placement import greedy_place, plan_placement
from clueue.bench.scenarios import generate
from clueue.engine import Config, load_policy, run_cycle
from clueue.engine.workloads import build_workloads


def test_greedy_strands_what_waiting_gangs_hold_and_clueue_overcommits_no_node():
    snap = generate("placement", seed=0, scale=0.05).snapshot()
    built = {w.key: w for w in build_workloads(snap).workloads}
    greedy = greedy_place(snap, built.values())
    plan = run_cycle(snap, load_policy(), Config(time_budget=30))
    ours = plan_placement(snap, plan, built)
    assert greedy.gangs_admitted > 0 and greedy.gpus_waiting > 0
    assert ours.gangs_admitted > 0 and ours.gpus_waiting == 0
    assert ours.pods_placed == sum(ps.count for w in ours.admitted for ps in built[w].pod_sets)
    used: dict[str, dict[str, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    for pod in snap.pods.values():
        for r, v in pod.requests.items():
            used[pod.node_name][r] += v
    for a in plan.actions:
        for ps, nodes in a.details.get("nodes", {}).items() if a.kind == "admit" else ():
            requests = next(p.requests for p in built[a.workload].pod_sets if p.name == ps)
            for n in nodes:
                for r, v in requests.items():
                    used[n][r] += v
    for name, node in snap.nodes.items():
        assert all(v <= node.allocatable.get(r, 0) for r, v in used[name].items()), name
