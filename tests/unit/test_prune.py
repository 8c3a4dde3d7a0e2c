"""Leaving provably inadmissible candidates out of the solve changes nothing in the plan."""

import random
from importlib import resources

import pytest

from tests.builders import cluster_queue, flavor, local_queue, quota, run, workload


def many_shapes(seed):
    rng = random.Random(seed)
    objs = [flavor("od"), flavor("spot")]
    for c in range(4):
        strategy = "StrictFIFO" if c == 3 else None
        objs.append(cluster_queue(f"cq{c}", {"od": {"cpu": quota(rng.randint(2, 6), rng.choice([None, 2]), rng.choice([None, 1]))},
                                             "spot": {"cpu": rng.randint(0, 3)}},
                                  cohort=f"co{c % 2}", strategy=strategy))
        objs.append(local_queue(f"cq{c}", ns=f"ns{c}"))
        for i in range(rng.randint(10, 30)):
            cpu, prio = rng.choice([(1, 1), (1, 1), (2, 5), (4, 9)])
            objs.append(workload(f"w{i}", ns=f"ns{c}", cpu=cpu, priority=prio, minute=rng.randint(0, 20)))
    return objs


def comparable(plan):
    out = []
    for w in plan.to_dict()["workloads"]:
        w.pop("rank", None)
        out.append(w)
    return out, [a for a in plan.to_dict()["actions"]]


@pytest.mark.parametrize("seed", range(12))
def test_pruned_plan_equals_unpruned_plan(seed, tmp_path):
    objs = many_shapes(seed)
    same_ordering = tmp_path / "ordering.lp"  # a user copy of a rule group turns pruning off
    same_ordering.write_text(resources.files("clueue.policies").joinpath("ordering.lp").read_text())
    pruned, unpruned = run(objs), run(objs, policy=[str(same_ordering)])
    assert pruned.solver.pruned > 0 and unpruned.solver.pruned == 0
    assert comparable(pruned) == comparable(unpruned)


def test_a_prefix_that_leaves_room_is_solved_again(tmp_path):
    # Big high-priority workloads (each its own shape) make the first prefix: 9 + 8 + 7 CPU ask
    # twice the quota of 10. Only the 9 fits, leaving 1 CPU free; a small low-priority workload
    # ranked after all of them fits there, so a second round must admit it.
    objs = [flavor("od"), cluster_queue("cq", {"od": {"cpu": 10}}), local_queue("cq"),
            [workload(f"big{cpu}", cpu=cpu, priority=10, minute=10 - cpu) for cpu in (9, 8, 7, 6, 5)],
            [workload(f"small{i}", cpu=1, priority=1, minute=i) for i in range(3)]]
    same_ordering = tmp_path / "ordering.lp"
    same_ordering.write_text(resources.files("clueue.policies").joinpath("ordering.lp").read_text())
    pruned, unpruned = run(objs), run(objs, policy=[str(same_ordering)])
    assert pruned.solver.rounds > 1
    assert comparable(pruned) == comparable(unpruned)
    assert [w.name for w in pruned.workloads if w.state == "admitted"] == ["default/big9", "default/small0"]


def test_a_budget_that_stops_the_rounds_says_so(monkeypatch):
    # Only one round fits in the budget: the small workload beyond the first prefix might have
    # fit, so the plan must not claim it does not, and must flag the budget.
    from clueue.engine import cycle
    objs = [flavor("od"), cluster_queue("cq", {"od": {"cpu": 10}}), local_queue("cq"),
            [workload(f"big{cpu}", cpu=cpu, priority=10, minute=10 - cpu) for cpu in (9, 8, 7, 6, 5)],
            [workload("small", cpu=1, priority=1, minute=0)]]
    real_round = cycle._round

    def one_round_then_out_of_time(snapshot, selection, units, cut, policy, deadline):
        done = real_round(snapshot, selection, units, cut, policy, deadline)
        monkeypatch.setattr(cycle.time, "monotonic", lambda: deadline + 1)
        return done

    monkeypatch.setattr(cycle, "_round", one_round_then_out_of_time)
    plan = run(objs)
    assert plan.solver.rounds == 1 and plan.solver.budget_exhausted and not plan.solver.optimal
    assert [r.code for r in plan.workload("default/small").reasons] == ["BudgetExhausted"]
