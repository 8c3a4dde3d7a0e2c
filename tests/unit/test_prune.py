"""Leaving provably inadmissible candidates out of the solve changes nothing in the plan."""

import random
from importlib import resources

import pytest

from tests.builders import cluster_queue, flavor, local_queue, quota, run, workload


def many_shapes(seed, preempt=False):
    """Random queues and workloads; with ``preempt``, queues preempt lower priorities and each
    holds admitted workloads of low priority."""
    rng = random.Random(seed)
    objs = [flavor("od"), flavor("spot")]
    for c in range(4):
        strategy = "StrictFIFO" if c == 3 else None
        objs.append(cluster_queue(f"cq{c}", {"od": {"cpu": quota(rng.randint(2, 6), rng.choice([None, 2]), rng.choice([None, 1]))},
                                             "spot": {"cpu": rng.randint(0, 3)}},
                                  cohort=f"co{c % 2}", strategy=strategy,
                                  preemption={"withinClusterQueue": "LowerPriority"} if preempt else None))
        objs.append(local_queue(f"cq{c}", ns=f"ns{c}"))
        if preempt:
            objs += [workload(f"run{i}", ns=f"ns{c}", cpu=1, priority=rng.choice([0, 1, 5]), minute=i,
                              admitted_in=(f"cq{c}", "od")) for i in range(rng.randint(1, 3))]
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


@pytest.mark.parametrize("seed,preempt", [(seed, False) for seed in range(12)] + [(seed, True) for seed in range(8)])
def test_pruned_plan_equals_unpruned_plan(seed, preempt, tmp_path):
    objs = many_shapes(seed, preempt)
    same_ordering = tmp_path / "ordering.lp"  # a user copy of a rule group turns pruning off
    same_ordering.write_text(resources.files("clueue.policies").joinpath("ordering.lp").read_text())
    pruned, unpruned = run(objs), run(objs, policy=[str(same_ordering)])
    assert pruned.solver.pruned > 0 and unpruned.solver.pruned == 0
    assert comparable(pruned) == comparable(unpruned)


def borrowing_blocked():
    # The first prefix follows greedy order on the cohort's 20 free CPU: big15 "takes" 15, mid5
    # the rest, so the small ones are left out of it. But cq-a may not borrow: no big one fits,
    # only mid5 is admitted, and the small ones ranked after everything fit in what is left,
    # so a second round must admit them.
    return [flavor("od"),
            cluster_queue("cq-a", {"od": {"cpu": quota(10, 0)}}, cohort="co"), local_queue("cq-a", ns="a"),
            cluster_queue("cq-b", {"od": {"cpu": 10}}, cohort="co"), local_queue("cq-b", ns="b"),
            [workload(f"big{cpu}", ns="a", cpu=cpu, priority=10, minute=20 - cpu) for cpu in (15, 14, 13)],
            workload("mid5", ns="b", cpu=5, priority=5, minute=0),
            [workload(f"small{i}", ns="b", cpu=1, priority=1, minute=i) for i in range(3)]]


def test_a_prefix_that_leaves_room_is_solved_again(tmp_path):
    objs = borrowing_blocked()
    same_ordering = tmp_path / "ordering.lp"
    same_ordering.write_text(resources.files("clueue.policies").joinpath("ordering.lp").read_text())
    pruned, unpruned = run(objs), run(objs, policy=[str(same_ordering)])
    assert pruned.solver.rounds > 1
    assert comparable(pruned) == comparable(unpruned)
    assert [w.name for w in pruned.workloads if w.state == "admitted"] == ["b/mid5", "b/small0", "b/small1", "b/small2"]


def test_a_budget_that_stops_the_rounds_says_so(monkeypatch):
    # Only one round fits in the budget: the small workloads beyond the first prefix might have
    # fit, so the plan must not claim they do not, and must flag the budget.
    from clueue.engine import cycle
    objs = borrowing_blocked()
    real_round = cycle._round

    def one_round_then_out_of_time(snapshot, selection, units, cut, policy, deadline):
        done = real_round(snapshot, selection, units, cut, policy, deadline)
        monkeypatch.setattr(cycle.time, "monotonic", lambda: deadline + 1)
        return done

    monkeypatch.setattr(cycle, "_round", one_round_then_out_of_time)
    plan = run(objs)
    assert plan.solver.rounds == 1 and plan.solver.budget_exhausted and not plan.solver.optimal
    assert [r.code for r in plan.workload("b/small0").reasons] == ["BudgetExhausted"]
