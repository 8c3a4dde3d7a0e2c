"""A Session reuses work between cycles, and its plans are exactly run_cycle's."""

from dataclasses import replace

import pytest

from clueue.bench.replay import replay
from clueue.bench.scenarios import generate
from clueue.engine import Config, Document, Session, build_snapshot, load_policy, run_cycle
from clueue.engine.memo import Memo
from clueue.engine.workloads import _Builder, build_workloads

from tests.builders import cluster_queue, flatten, flavor, group, local_queue, pod, workload


def decided(plan):
    """The plan without its timings and solver effort."""
    out = plan.to_dict()
    out.pop("solver")
    return out


@pytest.mark.parametrize("scenario,scale", [("baseline", 0.07), ("baseline-preemption", 0.06), ("baseline-kueue", 0.035)])
def test_session_plans_over_a_replay_equal_fresh_cycles(monkeypatch, scenario, scale):
    # A replay feeds a Session a stream of snapshots that share most objects with the one
    # before: arrivals, admissions, evictions and finishes, as a controller sees them.
    policy = load_policy()
    compared = []
    real_run = Session.run

    def checked(session, snapshot):
        plan = real_run(session, snapshot)
        assert decided(plan) == decided(run_cycle(snapshot, policy, session.config))
        compared.append(plan.snapshot_digest)
        return plan

    monkeypatch.setattr(Session, "run", checked)
    # (At most a cycle every 100 virtual ms, so that each can be checked against a fresh one.)
    result = replay(generate(scenario, scale=scale), latency="zero", min_interval_ms=100, policy=policy)
    assert result["finished"] == result["workloads"]
    assert len(compared) > 30 and len(set(compared)) == len(compared)
    if scenario != "baseline":
        assert result["evictions"]  # workloads went from running back to pending


def test_session_follows_pods_and_the_workloads_they_leave_behind():
    # Cycles over plain pods: a group forms, is admitted (ungated, with a Workload object
    # owned by its pods), its pods go away leaving the Workload behind, and the object goes.
    base = [flavor("od"), cluster_queue("cq", {"od": {"cpu": 8}}), local_queue("cq")]
    owner = {"apiVersion": "v1", "kind": "Pod", "name": "g-0", "uid": "u0"}
    leftover = workload("g", cpu="4", count=2, admitted_in=("cq", "od"))
    leftover["metadata"]["ownerReferences"] = [owner]
    states = [
        [*group("g", 1, total=2), pod("solo", cpu="2")],
        [*group("g", 2), pod("solo", cpu="2")],
        [*group("g", 2, gated=False), leftover, pod("solo", cpu="2")],
        [leftover, pod("solo", cpu="2"), pod("late", cpu="6")],
        [pod("solo", cpu="2"), pod("late", cpu="6")],
    ]
    session, policy = Session(load_policy(), Config()), load_policy()
    seen = []
    for objs in states:
        snapshot = build_snapshot([Document(f"t#{i}", o) for i, o in enumerate(flatten(base + objs))])
        plan = session.run(snapshot)
        assert decided(plan) == decided(run_cycle(snapshot, policy))
        seen.append({e.name: e.state for e in plan.workloads})
    assert seen[0]["default/g"] == "pending" and seen[1]["default/g"] == "admitted"
    assert seen[2]["default/g"] == "admitted"
    assert "default/g" not in seen[3] and seen[3]["default/pod-late"] == "admitted"  # the leftover holds nothing


def test_a_changed_configuration_is_not_served_from_memory():
    # The same workload objects, but the LocalQueue now points to a bigger ClusterQueue.
    docs = [flavor("od"), cluster_queue("small", {"od": {"cpu": 1}}), cluster_queue("big", {"od": {"cpu": 4}}),
            local_queue("small"), workload("w", cpu=2)]
    before = build_snapshot([Document(f"t#{i}", o) for i, o in enumerate(flatten(docs))])
    moved = build_snapshot([Document("t", local_queue("big"))]).local_queues
    after = replace(before, local_queues=moved)
    session = Session(load_policy(), Config())
    assert session.run(before).workload("default/w").state == "inadmissible"
    plan = session.run(after)
    assert plan.workload("default/w").state == "admitted"
    assert decided(plan) == decided(run_cycle(after, load_policy()))


def test_memo_tracks_what_changed_by_object_identity():
    memo = Memo()
    a, b, c = ["a"], ["b"], ["c"]

    def changed(mapping, configuration=1):
        memo.start(configuration=configuration)
        state, changes = memo.track("t", mapping, list)
        state.append(len(state))  # the state is kept from call to call
        return len(state), dict(changes.new), set(changes.gone)

    assert changed({"x": a, "y": b}) == (1, {"x": a, "y": b}, set())
    assert changed({"x": a, "y": b}) == (2, {}, set())
    assert changed({"x": a, "z": c}) == (3, {"z": c}, {"y"})  # removed and added
    assert changed({"x": ["a"], "z": c}) == (4, {"x": ["a"]}, {"x"})  # an equal, new object replaces
    assert changed({"x": a, "z": c}, configuration=2) == (1, {"x": a, "z": c}, set())  # all dropped
    assert memo.number(("x", 1)) == memo.number(("x", 1)) != memo.number(("y", 1))


def test_a_memo_that_does_not_remember_reports_everything_new():
    memo = Memo(remember=False)
    for _ in range(2):
        state, changes = memo.track("t", {"x": "a"}, list)
        assert state == [] and dict(changes.new) == {"x": "a"} and not changes.gone


def test_a_table_that_skipped_cycles_gets_every_change_since_it_last_looked():
    memo = Memo()
    a, b, c = ["a"], ["b"], ["c"]
    memo.start(1)
    memo.track("often", {"x": a}, list)
    memo.track("seldom", {"x": a}, list)
    memo.start(1)
    memo.track("often", {"x": a, "y": b}, list)  # "seldom" does not look this cycle
    memo.start(1)
    mapping = {"y": b, "z": c}
    _, often = memo.track("often", mapping, list)
    _, seldom = memo.track("seldom", mapping, list)
    assert (dict(often.new), set(often.gone)) == ({"z": c}, {"x"})
    assert (dict(seldom.new), set(seldom.gone)) == ({"y": b, "z": c}, {"x"})
    memo.start(1)
    again = dict(mapping)
    _, often = memo.track("often", again, list)
    _, seldom = memo.track("seldom", again, list)
    assert often is seldom and not often.new and not often.gone  # one search served both


def test_a_derived_mapping_hands_its_changes_to_consumers_that_kept_up():
    memo = Memo()
    a, b, c, a2 = object(), object(), object(), object()  # equal only to themselves
    current = {"x": a, "y": b}

    def cycle(touched, consume=True):
        memo.start(1)
        derived, changes = memo.update("derived", touched, current.get)
        if not consume:
            return derived, changes, None
        state, handed = memo.follow("consumer", changes, derived, list)
        state.append(0)
        return dict(derived), handed, len(state)

    derived, changes, kept = cycle({"x", "y"})
    assert derived == {"x": a, "y": b} and dict(changes.new) == derived and kept == 1
    current.update(x=a2, z=c)
    del current["y"]
    derived, changes, kept = cycle({"x", "y", "z"})
    assert derived == {"x": a2, "z": c} and kept == 2  # the consumer kept its state
    assert dict(changes.new) == {"x": a2, "z": c} and set(changes.gone) == {"x", "y"}
    derived, changes, kept = cycle({"x"})
    assert not changes.new and not changes.gone and kept == 3  # untouched, or the same object
    cycle({"z"}, consume=False)
    derived, changes, kept = cycle(set())
    assert kept == 1 and dict(changes.new) == {"x": a2, "z": c}  # it missed a cycle: start over


def test_built_workloads_report_what_changed_including_workloads_made_of_pods():
    docs = [flavor("od"), cluster_queue("cq", {"od": {"cpu": 8}}), local_queue("cq"),
            workload("w1", cpu=1), workload("w2", cpu=1), pod("p1", cpu=1, gated=True)]
    first = build_snapshot([Document(f"t#{i}", o) for i, o in enumerate(flatten(docs))])
    # The next snapshot keeps the very objects of w2 and p1, and w1 is gone.
    second = replace(first, workloads={"default/w2": first.workloads["default/w2"]})
    memo = Memo()
    built = []
    for snapshot in (first, second):
        memo.start(snapshot.configuration())
        built.append(build_workloads(snapshot, Config(), memo))
    assert sorted(built[0].changes.new) == sorted(built[0].by_key) == ["default/pod-p1", "default/w1", "default/w2"]
    # w2 is the workload built last cycle; a workload made of pods is built anew every cycle.
    assert set(built[1].changes.gone) == {"default/w1", "default/pod-p1"}
    assert list(built[1].changes.new) == ["default/pod-p1"]
    assert built[1].by_key["default/w2"] is built[0].by_key["default/w2"]
    assert [w.key for w in built[1].workloads] == ["default/pod-p1", "default/w2"]


def test_a_cycle_that_fails_midway_leaves_nothing_half_remembered(monkeypatch):
    docs = [flavor("od"), cluster_queue("cq", {"od": {"cpu": 8}}), local_queue("cq"),
            workload("w1", cpu=1), workload("w2", cpu=1), workload("w3", cpu=1)]
    everything = build_snapshot([Document(f"t#{i}", o) for i, o in enumerate(flatten(docs))])
    first = replace(everything, workloads={k: v for k, v in everything.workloads.items() if k != "default/w3"})
    second = replace(everything, workloads={k: v for k, v in everything.workloads.items() if k != "default/w1"})
    policy = load_policy()
    session = Session(policy, Config())
    session.run(first)

    def lost(*args, **kwargs):
        raise RuntimeError("the cycle fails while building w3")

    with monkeypatch.context() as m:
        m.setattr(_Builder, "_merge_object", lost)
        with pytest.raises(RuntimeError):
            session.run(second)
    plan = session.run(second)  # w1 is gone and w3 is there, though the failed cycle saw them first
    assert decided(plan) == decided(run_cycle(second, policy))
    assert sorted(e.name for e in plan.workloads) == ["default/w2", "default/w3"]


def test_values_derived_per_object_are_kept_while_asked_for_and_their_inputs_hold():
    memo = Memo()
    derived = []

    def derive(obj):
        derived.append(obj)
        return len(derived)

    a, b = ["a"], ["b"]

    def values(*objs, depends=1, configuration=1):
        memo.start(configuration=configuration)
        table = memo.per_object("t", depends, derive)
        return [table(o) for o in objs]

    assert values(a, b) == [1, 2]
    assert values(a, a) == [1, 1]  # kept from the last cycle, and derived once in this one
    assert values(a) == [1]
    assert values(b) == [3]  # asked for two cycles ago and not since: derived again
    assert values(["a"]) == [4]  # an equal, new object is a new object
    assert values(b, depends=2) == [5]  # what the values also depend on changed: all dropped
    assert values(b, depends=2, configuration=2) == [6]  # so did the configuration


def test_facts_kept_from_a_cycle_before_follow_a_change_of_resource_units():
    # A workload's facts are kept as text between cycles, in the units of their cycle: when a
    # new request of 500m CPU halves the unit, the kept workload's request must double.
    from clueue.engine.compiler import compile_facts
    from clueue.engine.facts import render_facts

    docs = [flavor("od"), cluster_queue("cq", {"od": {"cpu": 4}}), local_queue("cq"), workload("w", cpu=1)]
    before = build_snapshot([Document(f"t#{i}", o) for i, o in enumerate(flatten(docs))])
    half = build_snapshot([Document("h", o) for o in flatten([workload("h", cpu="500m")])]).workloads
    after = replace(before, workloads={**before.workloads, **half})
    memo = Memo()
    for snapshot in (before, after, before):
        memo.start(snapshot.configuration())
        built = build_workloads(snapshot, Config(), memo)
        kept = render_facts(compile_facts(snapshot, built.workloads, memo=memo).lines)
        assert kept == render_facts(compile_facts(snapshot, build_workloads(snapshot, Config()).workloads).lines)
    assert 'pod_request("default/w","main","cpu",2).' in render_facts(
        compile_facts(after, build_workloads(after, Config(), memo).workloads, memo=memo).lines)
