"""What would it take (engine/whatif.py): suggestions hold as counterfactuals.

Small random clusters from a seeded generator (every run sees the same ones): one cohort of two
or three ClusterQueues, one flavor, cpu only, nominal quotas with borrowing and lending limits
now and then, a few Workloads admitted before and a few pending. Checked the way a user would:
make the change a message states, re-plan, and require admission; one unit less must not admit.
"""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from clueue.engine import Config, Document, build_snapshot, load_policy
from clueue.engine.cycle import run_cycle
from clueue.engine.plan import Plan
from clueue.engine.quantity import parse_quantity
from clueue.engine.whatif import Change, admits, apply_changes, what_if, with_suggestions
from tests.builders import TEST_TIME_BUDGET, cluster_queue, flatten, flavor, local_queue, quota, workload

SEEDS = range(60)
POLICY = load_policy(())
# never cut short on a loaded machine: the answers are what is tested
CONFIG = Config(whatif_budget=300.0, time_budget=TEST_TIME_BUDGET)


def _cluster(seed: int) -> list[dict]:
    rnd = random.Random(seed)
    queues = [f"q{i}" for i in range(rnd.choice((2, 3)))]
    objs: list = [flavor("f")]
    nominal = {}
    for q in queues:
        nominal[q] = rnd.randint(2, 8)
        borrowing = rnd.choice((None, None, rnd.randint(0, 4)))
        lending = rnd.choice((None, None, rnd.randint(0, nominal[q])))
        objs += [cluster_queue(q, {"f": {"cpu": quota(nominal[q], borrowing, lending)}}, cohort="all"),
                 local_queue(q, name=q)]
    room = sum(nominal.values())
    for i in range(rnd.randint(0, 3)):  # admitted before this cycle, within their own quota
        q, cpu = rnd.choice(queues), rnd.randint(1, 3)
        if cpu <= nominal[q]:
            nominal[q] -= cpu
            room -= cpu
            objs.append(workload(f"a{i}", queue=q, cpu=str(cpu), priority=rnd.choice((0, 10)), minute=i,
                                 admitted_in=(q, "f")))
    for i in range(rnd.randint(2, 6)):
        objs.append(workload(f"w{i}", queue=rnd.choice(queues), cpu=str(rnd.randint(1, 7)),
                             priority=rnd.choice((0, 10)), minute=10 + i))
    return objs


def _snapshot(objs: list) -> object:
    return build_snapshot([Document(f"test#{i + 1}", o) for i, o in enumerate(flatten(objs))])


def _admitted_after(snapshot, key: str, queue: str, amount: Fraction, flavor: str = "f") -> bool:
    changed = apply_changes(snapshot, [Change(f"cq:{queue}", flavor, "cpu", "nominalQuota", amount)])
    return admits(run_cycle(changed, POLICY, CONFIG), key)


def _holds(snapshot, plan: Plan) -> tuple[int, int]:
    """(InsufficientQuota reasons of ``plan`` whose stated shortfall admits the workload and one
    unit less does not, all such reasons)."""
    good = total = 0
    for e in plan.workloads:
        for r in e.reasons:
            if r.code != "InsufficientQuota" or e.state != "pending":
                continue
            total += 1
            short = parse_quantity(r.details["short"])
            if _admitted_after(snapshot, e.name, r.details["clusterQueue"], short) and \
                    (short == 0 or not _admitted_after(snapshot, e.name, r.details["clusterQueue"], short - 1)):
                good += 1
    return good, total


def test_readme_render_farm_states_the_checked_shortfall() -> None:
    """README's team-a/pod-render-farm: the explanation pass says 6 short, counting as free the
    cpu that team-b's workloads ranked after it borrowed (it said 11 before, issue 24); the
    what-if's re-solves find the same least raise, which admits it, and one less does not."""
    from clueue.adapters.files import load_snapshot
    snapshot = load_snapshot(("examples/cluster",))
    plan = run_cycle(snapshot, POLICY, CONFIG)
    [stated] = [r for r in plan.workload("team-a/pod-render-farm").reasons if r.code == "InsufficientQuota"]
    checked = with_suggestions(plan, what_if(snapshot, POLICY, CONFIG, plan, ["team-a/pod-render-farm"]))
    entry = checked.workload("team-a/pod-render-farm")
    [short] = [r for r in entry.reasons if r.code == "InsufficientQuota"]
    [needs] = [s for s in entry.suggestions if s.code == "NeedsQuota"]
    assert needs.details["name"] == "team-a" and short.details["checked"] is True
    add = parse_quantity(needs.details["add"])
    assert stated.details["short"] == short.details["short"] == needs.details["add"] == "6"
    assert _admitted_after(snapshot, entry.name, "team-a", add, "on-demand")
    assert not _admitted_after(snapshot, entry.name, "team-a", add - 1, "on-demand")


def test_reasons_hold_as_counterfactuals() -> None:
    """Every InsufficientQuota reason, once checked by the what-if, states a shortfall that
    admits the workload, and one less does not; and nearly every one of the explanation pass
    alone does (docs/what-if.md)."""
    before = after = total = 0
    for seed in SEEDS:
        snapshot = _snapshot(_cluster(seed))
        plan = run_cycle(snapshot, POLICY, CONFIG)
        good, n = _holds(snapshot, plan)
        before, total = before + good, total + n
        checked = with_suggestions(plan, what_if(snapshot, POLICY, CONFIG, plan))
        good, n2 = _holds(snapshot, checked)
        assert n2 == n
        after += good
    print(f"InsufficientQuota as counterfactual: before {before}/{total}, after {after}/{total}")
    assert total > 20
    # the explanation pass alone: what ranked after it took is given back, and those ahead in
    # line take added quota first (88 of 95 when measured; 50 before issue 24's fix). The rest:
    # a workload sharing the reason of another of its shape, and the line's one-pool model.
    assert before >= 0.9 * total, (before, total)
    # a reason is left as the explanation pass gave it only where no raise of that ClusterQueue's
    # nominal quota up to the bound admits the workload (the other suggestions say what does)
    assert after == total


@pytest.mark.parametrize("seed", SEEDS)
def test_least_quota_matches_brute_force(seed: int) -> None:
    """Try every raise of the own ClusterQueue's nominal cpu up to a bound: the least one that
    admits the workload is the suggestion, and none admits it when no suggestion is made."""
    snapshot = _snapshot(_cluster(seed))
    plan = run_cycle(snapshot, POLICY, CONFIG)
    suggested = what_if(snapshot, POLICY, CONFIG, plan)
    for e in plan.workloads:
        if e.state != "pending" or e.name not in suggested:
            continue
        own = [s for s in suggested[e.name] if s.code == "NeedsQuota" and s.details["name"] == e.cluster_queue]
        bound = 8 + sum(int(ps.requests["cpu"]) * ps.count for x in plan.workloads if x.state == "pending"
                        for ps in x.pod_sets)
        least = next((n for n in range(bound + 1) if _admitted_after(snapshot, e.name, e.cluster_queue, Fraction(n))),
                     None)
        if own:
            assert least == int(own[0].details["add"]), (e.name, least, own[0].message)
        elif any(r.code == "InsufficientQuota" for r in e.reasons):
            # the search's own bound (what every pending workload asks) is 8 below this one
            assert least is None or least > bound - 8, (e.name, least)


def test_finished_and_position() -> None:
    """Which admitted workloads would have to finish, and the position in line, each checked."""
    objs = [flavor("f"), cluster_queue("q", {"f": {"cpu": 4}}), local_queue("q", name="q"),
            workload("old", queue="q", cpu="3", admitted_in=("q", "f")),
            workload("first", queue="q", cpu="3", priority=10, minute=1),
            workload("second", queue="q", cpu="2", minute=2)]
    snapshot = _snapshot(objs)
    plan = run_cycle(snapshot, POLICY, CONFIG)
    out = what_if(snapshot, POLICY, CONFIG, plan)
    codes = {k: {s.code: s for s in v} for k, v in out.items()}
    assert codes["default/first"]["NeedsFinished"].details["workloads"] == ["default/old"]
    assert codes["default/first"]["NeedsQuota"].details["add"] == "2"
    assert codes["default/second"]["PositionInLine"].details["position"] == 2
    # second: raising by 1 gives room to nothing ahead of it (first needs 3 free): 1 admits it
    assert codes["default/second"]["NeedsQuota"].details["add"] == "1"


def test_cli_plan_what_if_and_explain_show_checked_suggestions() -> None:
    from click.testing import CliRunner

    from clueue.adapters.cli import main
    plan = CliRunner().invoke(main, ["plan", "--what-if", "examples/cluster"])
    assert plan.exit_code == 0 and "more nominal cpu in flavor on-demand of ClusterQueue team-a" in plan.output
    assert "admits it" not in CliRunner().invoke(main, ["plan", "examples/cluster"]).output
    explain = CliRunner().invoke(main, ["explain", "examples/cluster", "team-a/pod-render-farm", "-o", "json"])
    assert explain.exit_code == 0 and '"whatIf"' in explain.output and '"NeedsQuota"' in explain.output
