"""The built-in policies' own suite (policies/tests/*.yaml) runs green, and can fail."""

from __future__ import annotations

from clueue.adapters.files import read_documents
from clueue.policytools import builtin_tests, run_tests

from .helpers import ROOT, cli, write

RULE_GROUPS = {"eligibility", "quota", "ordering", "admission", "preemption", "holds", "topology"}


def test_the_builtin_suite_passes():
    result = cli("policy", "test")
    assert result.exit_code == 0, result.output
    cases = builtin_tests(read_documents=read_documents)
    assert result.output == f"PASS: {len(cases)}/{len(cases)}\n"


def test_the_suite_covers_every_rule_group_and_ships_with_the_package():
    # One file per rule group, or more, each named for its group: preemption-reclaim.yaml.
    shipped = {p.stem.split("-")[0] for p in (ROOT / "policies" / "tests").glob("*.yaml")}
    assert shipped == RULE_GROUPS
    titles = " | ".join(c.title for c in builtin_tests(read_documents=read_documents))
    for topic in ("namespace selector", "missing flavor", "taint", "node selector", "borrowingLimit",
                  "lendingLimit", "hierarchical cohorts", "BestEffortFIFO", "StrictFIFO", "priority",
                  "whole or not at all", "flavors are tried in order", "TryNextFlavor", "preempts",
                  "LowerOrNewerEqualPriority", "does not preempt, though it could borrow",
                  "fits does not preempt", "may borrow", "reclaims from one that borrows",
                  "reclaims no more than its own nominal quota", "one workload of a ClusterQueue preempts per cycle",
                  "could never preempt does not hold back", "could never free enough",
                  "borrowWithinCohort preempts a lower priority", "maxPriorityThreshold keeps",
                  "takes no workload of its own priority or above", "keeps its free nominal quota for its head",
                  "requiring one rack"):
        assert topic in titles, topic


def test_the_suite_catches_a_changed_rule_group(tmp_path):
    # Younger first instead of older first: the ordering cases must notice.
    write(tmp_path / "ordering.lp", """
        #program base.
        rank_key(W,(-P,-T,N)) :- candidate(W), workload_priority(W,P), workload_created(W,T), workload_tiebreak(W,N).
        fifo_group(W,cq(Q)) :- candidate(W), workload_cq(W,Q), queueing_strategy(Q,"StrictFIFO").
        """)
    results = run_tests(builtin_tests(read_documents=read_documents), policy=[tmp_path])
    failed = {r.case.name for r in results if r.status == "fail"}
    assert "at equal priority the older workload goes first, whatever the names" in failed
    assert all(r.status != "error" for r in results)
    result = cli("policy", "test", "--policy", str(tmp_path), "--run", "older workload")
    assert result.exit_code == 1
    assert "  a/pod-zulu:\n    state:\n      - admitted\n      + pending\n" in result.output


def test_the_suite_catches_a_policy_that_never_preempts(tmp_path):
    write(tmp_path / "preemption.lp", """
        #program decide.
        evict(V) :- evict(V).
        preempting(P) :- preempting(P).
        """)
    results = run_tests(builtin_tests(read_documents=read_documents), policy=[tmp_path])
    failed = {r.case.name for r in results if r.status == "fail"}
    assert "a higher priority preempts the newest lower-priority workload, and waits for it" in failed
    assert "LowerOrNewerEqualPriority preempts an equal priority created later" in failed
