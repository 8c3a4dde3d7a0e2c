"""Extension points: user hard rules in the rank-ordered admission, objective terms at reserved
levels, replacing a rule group by name; the worked examples; the generated facts reference."""

from __future__ import annotations

from clueue.adapters.reference import facts_reference
from clueue.engine import Config, Document, build_snapshot, load_policy, run_cycle
from clueue.engine.facts import FACTS_VERSION, PREDICATES
from clueue.engine.policy import ENGINE_PREDICATES

from .helpers import EXAMPLES, ROOT, cli, pod, queue_setup, write


def plan_of(objects, policy=()):
    docs = [Document(f"test#{i}", o) for i, o in enumerate(objects)]
    return run_cycle(build_snapshot(docs), load_policy(policy))


def states(plan):
    return {w.name: w.state for w in plan.workloads}


def test_a_user_hard_rule_holds_in_rank_order(tmp_path):
    # At most one workload per namespace this cycle: the highest-ranked one of each namespace
    # is admitted, the others are left out, and the ones after them are still tried.
    rule = write(tmp_path / "one_per_namespace.lp", """
        #program decide.
        :- admit(A), admit(B), A < B, workload_namespace(A,NS), workload_namespace(B,NS).
        """)
    objects = queue_setup(16, namespaces=("a", "b")) + [
        pod("first", ns="a", minute=0), pod("second", ns="a", minute=1),
        pod("third", ns="b", minute=2), pod("fourth", ns="b", minute=3)]
    assert set(states(plan_of(objects)).values()) == {"admitted"}
    assert states(plan_of(objects, [rule])) == {
        "a/pod-first": "admitted", "a/pod-second": "pending", "b/pod-third": "admitted", "b/pod-fourth": "pending"}


def test_a_user_hard_rule_never_lets_a_lower_rank_displace_a_higher_one(tmp_path):
    # "big" (rank 1) alone, or "small-1" + "small-2" (ranks 2, 3) together: with a rule that
    # forbids big next to anything, rank order keeps big and leaves both small ones out.
    rule = write(tmp_path / "alone.lp", """
        #program decide.
        :- admit(W), workload_namespace(W,"a"), pod_request(W,_,"cpu",A), A >= 3, admit(V), V != W.
        """)
    objects = queue_setup(8) + [pod("big", 3, minute=0), pod("small-1", 1, minute=1), pod("small-2", 1, minute=2)]
    assert states(plan_of(objects, [rule])) == {
        "a/pod-big": "admitted", "a/pod-small-1": "pending", "a/pod-small-2": "pending"}


def test_replacing_a_rule_group_by_file_name(tmp_path):
    lifo = write(tmp_path / "ordering.lp", """
        #program base.
        rank_key(W,(-P,-T,N)) :- candidate(W), workload_priority(W,P), workload_created(W,T), workload_tiebreak(W,N).
        """)
    policy = load_policy([lifo])
    assert [f.path for f in policy.user_files] == [str(lifo)]
    assert [f.name for f in policy.files].count("ordering.lp") == 1
    objects = queue_setup(4) + [pod("old", 4, minute=0), pod("new", 4, minute=5)]
    assert states(plan_of(objects)) == {"a/pod-new": "pending", "a/pod-old": "admitted"}
    assert states(plan_of(objects, [lifo])) == {"a/pod-new": "admitted", "a/pod-old": "pending"}


def test_objective_levels_leave_room_for_users():
    text = (ROOT / "policies" / "objective.lp").read_text()
    assert "[1@20,Q,F,R]" in text and "[Pos@10,W,PS,G]" in text
    assert "@11 - @19   users" in text and "@1 - @9     users" in text and "@30 and up  users" in text


def test_the_worked_examples_pass_and_each_changes_a_decision():
    examples = sorted(p for p in EXAMPLES.iterdir() if p.is_dir())
    assert [p.name for p in examples] == ["big-gangs-on-batch", "low-priority-on-spot", "research-no-gpu-borrowing"]
    result = cli("policy", "test", "-v", str(EXAMPLES))
    assert result.exit_code == 0, result.output
    assert result.output.endswith("PASS: 6/6\n")
    for example in examples:
        diff = cli("policy", "diff", "--policy", str(example), "--exit-code", str(example / "snapshot"))
        assert diff.exit_code == 1, example.name


def test_docs_facts_md_is_the_generated_reference():
    committed = (ROOT / "docs" / "facts.md").read_text()
    assert committed == facts_reference(), "regenerate: clueue facts --reference > docs/facts.md"
    assert committed.startswith(f"# Facts reference ({FACTS_VERSION})")
    for p in list(PREDICATES.values()) + [e.predicate for e in ENGINE_PREDICATES.values()]:
        assert f"### `{p.name}/{len(p.args)}`" in committed


def test_docs_policies_md_describes_every_extension_point():
    text = (ROOT / "docs" / "policies.md").read_text()
    for topic in ("#program base", "#program decide", "#program explain", "Hard rules", "Objective terms",
                  "Replacing a rule group", "clueue policy check", "clueue policy test", "clueue policy diff",
                  "research-no-gpu-borrowing", "big-gangs-on-batch", "low-priority-on-spot", "#script"):
        assert topic in text, topic


def test_a_cycle_in_which_nothing_preempts_leaves_the_preemption_rules_out(tmp_path, monkeypatch):
    from clueue.bench.scenarios import generate
    from clueue.engine import cycle
    from clueue.engine.policy import Policy

    builtin = load_policy()
    assert [f.name for f in builtin.for_facts({"quota"}).files] == [
        f.name for f in builtin.files if f.name != "preemption.lp"]
    assert builtin.for_facts({"quota", "preemption"}) is builtin
    extended = load_policy([write(tmp_path / "extra.lp", "#program decide.\n:- admit(W), workload_priority(W,-1).\n")])
    assert extended.for_facts({"quota"}) is extended  # a user's file might feed those rules

    loaded: list[list[str]] = []
    real_decide = cycle.decide
    monkeypatch.setattr(cycle, "decide", lambda facts, policy, **kw: (
        loaded.append([f.name for f in policy.files]), real_decide(facts, policy, **kw))[1])
    # Lending limits, StrictFIFO queues and a hierarchy of cohorts; a full backlog whose pending
    # workloads all get their reasons; queues that preempt, with nothing admitted yet to take
    # (no candidate might preempt): each plan is the one the whole policy gives. Each solve is
    # proven optimal, far within its budget (whose shares bound the phases of the search, so a
    # loaded machine needs it large): a search the budget stops could end on either of two plans,
    # whatever the rules loaded.
    for name, seed, scale in (("fragmentation", 1, 0.05), ("baseline", 0, 0.02), ("baseline-preemption", 0, 0.02)):
        snapshot = generate(name, seed=seed, scale=scale).snapshot()
        config = Config(time_budget=600)  # proven within a second quiet: the budget only bounds a hang
        trimmed = run_cycle(snapshot, builtin, config).to_dict()
        assert loaded and "preemption.lp" not in loaded[-1]
        with monkeypatch.context() as m:
            m.setattr(Policy, "for_facts", lambda self, present, idle=(): self)
            whole = run_cycle(snapshot, builtin, config).to_dict()
        assert "preemption.lp" in loaded[-1]
        for plan in (trimmed, whole):
            assert plan.pop("solver")["optimal"]
        assert trimmed == whole
    assert {w["state"] for w in whole["workloads"]} == {"admitted", "pending"}
