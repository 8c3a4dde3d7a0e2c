"""Leaving provably inadmissible candidates out of the solve changes nothing in the plan."""

import random
from importlib import resources

import pytest

from tests.builders import cluster_queue, flavor, local_queue, quota, run, workload


def many_shapes(seed, preempt=False):
    """Random queues and workloads; with ``preempt``, queues preempt lower priorities and each
    holds admitted workloads of low priority; with ``preempt="reclaim"`` they also reclaim
    within their cohort, and hold more, so that some borrow; with ``preempt="borrow"`` most
    of them may also preempt in their cohort while they borrow."""
    rng = random.Random(seed)
    objs = [flavor("od"), flavor("spot")]
    for c in range(4):
        strategy = "StrictFIFO" if c == 3 else None
        preemption = {"withinClusterQueue": "LowerPriority"} if preempt else None
        if preempt in ("reclaim", "borrow"):
            preemption["reclaimWithinCohort"] = rng.choice(["Any", "LowerPriority"])
        if preempt == "borrow" and rng.random() < 0.7:
            preemption["borrowWithinCohort"] = {"policy": "LowerPriority",
                                                **({"maxPriorityThreshold": rng.choice([1, 5])} if rng.random() < 0.5 else {})}
        objs.append(cluster_queue(f"cq{c}", {"od": {"cpu": quota(rng.randint(2, 6), rng.choice([None, 2]), rng.choice([None, 1]))},
                                             "spot": {"cpu": rng.randint(0, 3)}},
                                  cohort=f"co{c % 2}", strategy=strategy, preemption=preemption))
        objs.append(local_queue(f"cq{c}", ns=f"ns{c}"))
        if preempt:
            objs += [workload(f"run{i}", ns=f"ns{c}", cpu=1, priority=rng.choice([0, 1, 5]), minute=i,
                              admitted_in=(f"cq{c}", "od")) for i in range(rng.randint(1, 3 if preempt is True else 6))]
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


def pruned_and_unpruned(objs, tmp_path):
    """The plan with candidates left out, and the plan without (a user copy of a rule group
    turns leaving out off)."""
    same_ordering = tmp_path / "ordering.lp"
    same_ordering.write_text(resources.files("clueue.policies").joinpath("ordering.lp").read_text())
    return run(objs), run(objs, policy=[str(same_ordering)])


def same_as_unpruned(objs, tmp_path):
    """The plan with candidates left out, after checking it equals the plan without."""
    pruned, unpruned = pruned_and_unpruned(objs, tmp_path)
    assert comparable(pruned) == comparable(unpruned)
    return pruned


# With preemption, seeds 44, 149, 226 and 353 each once found a plan that differed: a preempting
# workload that counted on another queue's victims (44, past its shape's bound), a preemptor
# that overflowed one flavor counted against another's free quota (149, 226), and a preemptor
# with no victims at all, in a tree with lending limits (353).
@pytest.mark.parametrize("seed,preempt", [(seed, False) for seed in range(12)] +
                         [(seed, True) for seed in (*range(8), 44, 149, 226, 353)] +
                         [(seed, "reclaim") for seed in range(8)] + [(seed, "borrow") for seed in range(8)])
def test_pruned_plan_equals_unpruned_plan(seed, preempt, tmp_path):
    pruned, unpruned = pruned_and_unpruned(many_shapes(seed, preempt), tmp_path)
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
    pruned = same_as_unpruned(borrowing_blocked(), tmp_path)
    assert pruned.solver.rounds > 1
    assert [w.name for w in pruned.workloads if w.state == "admitted"] == ["b/mid5", "b/small0", "b/small1", "b/small2"]


def test_a_budget_that_stops_the_rounds_says_so(monkeypatch):
    # Only one round fits in the budget: the small workloads beyond the first prefix might have
    # fit, so the plan must not claim they do not, and must flag the budget.
    from clueue.engine import cycle
    objs = borrowing_blocked()
    real_round = cycle._round

    def one_round_then_out_of_time(snapshot, selection, units, cut, policy, deadline, memo):
        done = real_round(snapshot, selection, units, cut, policy, deadline, memo)
        monkeypatch.setattr(cycle.time, "monotonic", lambda: deadline + 1)
        return done

    monkeypatch.setattr(cycle, "_round", one_round_then_out_of_time)
    plan = run(objs)
    assert plan.solver.rounds == 1 and plan.solver.budget_exhausted and not plan.solver.optimal
    assert [r.code for r in plan.workload("b/small0").reasons] == ["BudgetExhausted"]


def one_full_tree_beside_one_with_room():
    # Cohort co0 is full: its pending workloads (one shape each, in their own namespaces) cannot
    # be admitted. Cohort co1 has room for four. In rank order the two cohorts' workloads alternate.
    full = [cluster_queue("cq-a", {"od": {"cpu": 2}}, cohort="co0"),
            [workload(f"run{i}", ns="a0", queue="main", minute=0, admitted_in=("cq-a", "od")) for i in range(2)]]
    for i in range(6):
        full += [local_queue("cq-a", ns=f"a{i}"), workload(f"a{i}", ns=f"a{i}", minute=2 * i + 1)]
    room = [cluster_queue("cq-b", {"od": {"cpu": 4}}, cohort="co1"), local_queue("cq-b", ns="b"),
            [workload(f"b{i}", ns="b", minute=2 * i + 2) for i in range(8)]]
    return [flavor("od"), full, room]


def test_each_quota_tree_solves_only_its_own_share_of_the_candidates(tmp_path):
    # Quota trees are independent problems under the built-in policy: the full cohort sends one
    # candidate to the solve, not every one ranked before the other cohort's last admission.
    objs = one_full_tree_beside_one_with_room()
    per_tree = run(objs)
    assert per_tree.solver.candidates == 5 and per_tree.solver.rounds == 1
    assert [a.workload for a in per_tree.actions if a.kind == "admit"] == ["b/b0", "b/b1", "b/b2", "b/b3"]
    # A user rule may tie the trees together (here it does not): then the cut is a prefix of
    # the whole rank order, and the plan is the same.
    user = tmp_path / "extra.lp"
    user.write_text("#program decide.\n:- admit(W), workload_priority(W,P), P > 1000000.\n")
    whole_order = run(objs, policy=[str(user)])
    assert whole_order.solver.candidates == 8
    assert comparable(per_tree) == comparable(whole_order)


def test_a_tree_whose_free_quota_some_candidates_cannot_use_is_asked_twice_over():
    # One flavor and no binding limit: greedy order on the tree's free quota is what the solver
    # admits, so the cut asks for it once. Two flavors (or a lending limit) can leave free quota
    # unusable, so the cut asks twice what is free.
    from clueue.engine import Document, build_snapshot, load_policy
    from clueue.engine.prune import select_candidates
    from clueue.engine.workloads import build_workloads
    from tests.builders import flatten

    def cut(flavors):
        objs = [flavor("od"), flavor("spot"), cluster_queue("cq", flavors), local_queue("cq", ns="n"),
                [workload(f"w{i}", ns="n", priority=20 - i) for i in range(20)]]  # a shape each
        snapshot = build_snapshot([Document(f"t#{i}", o) for i, o in enumerate(flatten(objs))])
        return select_candidates(snapshot, build_workloads(snapshot), load_policy()).prefix()

    assert cut({"od": {"cpu": 4}}) == {"cq/cq": 4}
    assert cut({"od": {"cpu": 2}, "spot": {"cpu": 2}}) == {"cq/cq": 8}


def preemptor_beside_borrowers(victims, held_by_peers, hi_cpu):
    # The cohort has 40 CPU; cq-p holds ``victims`` (CPU each, priority 0), cq-o holds
    # ``held_by_peers`` CPU of priority 20, and "hi" asks ``hi_cpu`` of cq-p. Eight lo of 5 CPU
    # wait in cq-o, ranked after hi.
    return [flavor("od"),
            cluster_queue("cq-p", {"od": {"cpu": 20}}, cohort="co", preemption={"withinClusterQueue": "LowerPriority"}),
            local_queue("cq-p", ns="p"),
            [workload(f"victim{i}", ns="p", cpu=cpu, priority=0, minute=i, admitted_in=("cq-p", "od"))
             for i, cpu in enumerate(victims)],
            workload("hi", ns="p", cpu=hi_cpu, priority=10, minute=10),
            cluster_queue("cq-o", {"od": {"cpu": 20}}, cohort="co"), local_queue("cq-o", ns="o"),
            [workload(f"held{i}", ns="o", cpu=5, priority=20, minute=0, admitted_in=("cq-o", "od"))
             for i in range(held_by_peers // 5)],
            [workload(f"lo{i}", ns="o", cpu=5, priority=1, minute=11 + i) for i in range(8)]]


def admitted_and_preempted(plan):
    return [(a.kind, a.workload) for a in plan.actions if a.kind in ("admit", "preempt")]


def test_a_workload_that_fits_does_not_preempt_and_takes_what_it_needs(tmp_path):
    # 20 CPU are free and hi asks 20: it is admitted as it is, and its victim runs on. (Preempting
    # would leave the free quota to a lo ranked after hi, which admits more in rank order, but a
    # workload only preempts when it does not fit.) The cut stops at hi.
    plan = same_as_unpruned(preemptor_beside_borrowers([5], 15, 20), tmp_path)
    assert admitted_and_preempted(plan) == [("admit", "p/hi")]
    assert plan.solver.rounds == 1 and plan.solver.candidates == 1


def test_a_workload_admitted_by_preempting_keeps_what_it_needs_from_the_others(tmp_path):
    # 10 CPU are free and hi asks 15: it preempts its 10 CPU victim and waits for it. The quota
    # it will hold is its own in this cycle: no lo is admitted now on the 10 free CPU (they fit
    # beside the victim, not beside hi), and none on what the victim frees. The cut reaches hi
    # though it does not fit the free quota, and the check after the solve counts hi in full:
    # one round settles the cycle.
    plan = same_as_unpruned(preemptor_beside_borrowers([10], 20, 15), tmp_path)
    assert admitted_and_preempted(plan) == [("preempt", "p/victim0")]
    assert plan.solver.rounds == 1 and plan.solver.candidates == 3
    # The explanation names the eviction under way, not a quota shortfall that holds only until
    # the victim is gone.
    lo0 = next(w for w in plan.workloads if w.name == "o/lo0")
    assert [r.code for r in lo0.reasons] == ["PreemptionInProgress"]
    assert lo0.reasons[0].details == {"preemptors": ["p/hi"], "victims": ["p/victim0"]}


def test_a_flavor_held_beyond_its_quota_takes_nothing_from_the_others(tmp_path):
    # od's quota was lowered below what its admitted workloads hold (3 of 2 CPU): nothing new
    # fits in od, but spot's 2 CPU are still free. Counting the whole queue's quota at once
    # (4 CPU less 3 held) would keep one workload of the shape and let it stand for the
    # others, though two are admitted.
    objs = [flavor("od"), flavor("spot"), cluster_queue("cq", {"od": {"cpu": 2}, "spot": {"cpu": 2}}),
            local_queue("cq", ns="n"),
            [workload(f"run{i}", ns="n", priority=9, admitted_in=("cq", "od")) for i in range(3)],
            [workload(f"w{i}", ns="n", minute=1 + i) for i in range(4)]]
    pruned = same_as_unpruned(objs, tmp_path)
    assert [w.name for w in pruned.workloads if w.state == "admitted" and w.name.startswith("n/w")] == ["n/w0", "n/w1"]


def full_queue(preemption=None):
    # cq runs a workload of priority 0 that takes all of its 4 CPUs; w1 (priority 5) and w2 wait.
    return [flavor("od"), cluster_queue("cq", {"od": {"cpu": 4}}, preemption=preemption), local_queue("cq"),
            workload("running", cpu=4, priority=0, minute=0, admitted_in=("cq", "od")),
            workload("w1", cpu=2, priority=5, minute=1), workload("w2", cpu=1, priority=0, minute=2)]


def test_a_cycle_in_which_nothing_fits_solves_only_when_asked_why(monkeypatch, tmp_path):
    # Nothing fits and nothing may be preempted: the plan admits and evicts nothing without a
    # solve (a controller applying its actions pays for none); reading why the workloads wait
    # solves once, and the plan is the one a full solve makes.
    from clueue.engine import cycle
    solves = []
    real_decide = cycle.decide
    monkeypatch.setattr(cycle, "decide", lambda *a, **k: solves.append(a) or real_decide(*a, **k))
    plan = run(full_queue())
    assert plan.solver.rounds == 0 and plan.solver.candidates == 0 and plan.solver.optimal
    assert not [a for a in plan.actions if a.kind in ("admit", "preempt")] and not solves
    assert [r.code for r in plan.workload("default/w1").reasons] == ["InsufficientQuota"]
    assert len(solves) == 1
    assert comparable(plan) == comparable(same_as_unpruned(full_queue(), tmp_path))


def test_a_cycle_in_which_nothing_fits_still_solves_when_a_workload_may_preempt(monkeypatch, tmp_path):
    from clueue.engine import cycle
    loaded = []
    real_decide = cycle.decide
    monkeypatch.setattr(cycle, "decide", lambda facts, policy, **kw: (
        loaded.append({f.name for f in policy.files}), real_decide(facts, policy, **kw))[1])
    plan = same_as_unpruned(full_queue({"withinClusterQueue": "LowerPriority"}), tmp_path)
    assert "preemption.lp" in loaded[0]
    assert plan.solver.rounds == 1
    assert [a.workload for a in plan.actions if a.kind == "preempt"] == ["default/running"]


def test_a_workload_whose_possible_victims_hold_too_little_does_not_count_as_a_preemptor(tmp_path):
    # w1 (priority 5) could only take the 1 CPU of "low" (priority 0); "high" (priority 9)
    # holds the other 3 of cq's 4. Evicting "low" cannot make room for w1's 2 CPUs: no solve.
    objs = [flavor("od"), cluster_queue("cq", {"od": {"cpu": 4}}, preemption={"withinClusterQueue": "LowerPriority"}),
            local_queue("cq"), workload("high", cpu=3, priority=9, minute=0, admitted_in=("cq", "od")),
            workload("low", cpu=1, priority=0, minute=0, admitted_in=("cq", "od")),
            workload("w1", cpu=2, priority=5, minute=1)]
    plan = same_as_unpruned(objs, tmp_path)
    assert plan.solver.rounds == 0
    assert plan.workload("default/w1").state == "pending" and not plan.actions
