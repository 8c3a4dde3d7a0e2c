"""`clueue policy check`: every diagnosis, with real file:line:column, and the CLI contract."""

from __future__ import annotations

import json

import pytest

from clueue.engine import PolicyError
from clueue.engine.guard import Limits
from clueue.policytools import Diagnostic, check_policy

from .helpers import EXAMPLES, cli, write


def only(diagnostics: list[Diagnostic], code: str) -> list[Diagnostic]:
    return [d for d in diagnostics if d.code == code]


def test_the_builtin_policy_and_the_examples_are_clean():
    assert check_policy() == []
    for example in sorted(EXAMPLES.iterdir()):
        assert check_policy([example]) == [], example.name


def test_syntax_error_with_file_line_column(tmp_path):
    f = write(tmp_path / "bad.lp", """
        #program decide.
        :- admit(W), .
        """)
    [d] = check_policy([f])
    assert (d.file, d.line, d.column, d.severity, d.code) == (str(f), 2, 14, "error", "syntax")
    assert "syntax error" in d.message


def test_typo_in_a_predicate_is_undefined_with_a_suggestion(tmp_path):
    f = write(tmp_path / "typo.lp", """
        #program decide.
        :- admit(W), workload_priorty(W,P), P < 0.
        """)
    [d] = check_policy([f])
    assert (d.file, d.line, d.column, d.code) == (str(f), 2, 14, "undefined")
    assert "workload_priorty/2 is never defined" in d.message and "did you mean workload_priority/2?" in d.message


def test_a_predicate_declared_defined_is_not_reported(tmp_path):
    f = write(tmp_path / "defined.lp", """
        #defined on_call/1.
        #program decide.
        :- admit(W), workload_namespace(W,NS), on_call(NS).
        """)
    assert check_policy([f]) == []


def test_wrong_arity_in_a_body_names_the_schema(tmp_path):
    f = write(tmp_path / "arity.lp", """
        #program decide.
        :- admit(W), workload_priority(W,P,_), P < 0.
        """)
    [d] = check_policy([f])
    assert (d.line, d.column, d.code) == (2, 14, "arity")
    assert "workload_priority(W,P)" in d.message and "an input fact" in d.message


def test_wrong_arity_in_a_head_of_a_schema_predicate(tmp_path):
    f = write(tmp_path / "head.lp", """
        admit(W,now) :- candidate(W).
        """)
    [d] = check_policy([f])
    assert (d.line, d.code) == (1, "arity")
    assert "admit(W) has 1" in d.message


def test_a_predicate_of_another_part_is_never_true_here(tmp_path):
    f = write(tmp_path / "parts.lp", """
        #program decide.
        :- admit(W), reason(W,_).
        """)
    [d] = check_policy([f])
    assert d.code == "undefined" and "derived only in the explain part" in d.message
    assert "<builtin>/explain.lp" in d.message


def test_unsafe_variables_point_at_the_variable(tmp_path):
    f = write(tmp_path / "unsafe.lp", """
        #program decide.
        % a comment line
        wide(W,N) :- candidate(W).
        """)
    [d] = check_policy([f])
    assert (d.file, d.line, d.column, d.code, d.severity) == (str(f), 3, 8, "unsafe", "error")
    assert "unsafe variable N in: wide(W,N):-candidate(W)." == d.message


def test_grounding_errors_name_the_right_one_of_several_files(tmp_path):
    write(tmp_path / "a_fine.lp", """
        #program decide.
        fine(W) :- candidate(W).
        """)
    second = write(tmp_path / "b_unsafe.lp", """
        #program decide.
        odd(X) :- fine(W).
        """)
    [d] = check_policy([tmp_path])
    assert (d.file, d.line, d.code) == (str(second), 2, "unsafe")


def test_clingo_warnings_are_warnings(tmp_path):
    f = write(tmp_path / "warn.lp", """
        #program base.
        odd(W) :- workload(W), X = "a" + 1, W != X.
        """)
    [d] = check_policy([f])
    assert (d.severity, d.code, d.line) == ("warning", "operation-undefined", 2)


def test_a_part_clueue_never_grounds_is_a_warning(tmp_path):
    f = write(tmp_path / "part.lp", """
        #program decde.
        :- admit(W), held(W).
        """)
    [d] = check_policy([f])
    assert (d.severity, d.code, d.line) == ("warning", "part", 1)
    assert "#program decde is never grounded" in d.message


def test_forbidden_constructs_are_all_reported(tmp_path):
    f = write(tmp_path / "code.lp", """
        % #script in a comment is fine, and so is "#include" in a string: label("#include").
        #script (python)
        import os
        #end.
        p(@f(1)).
        #include "/etc/passwd".
        """)
    found = only(check_policy([f]), "forbidden")
    assert [(d.line, d.column) for d in found] == [(2, 1), (5, 3), (6, 1)]
    assert all(d.severity == "error" and d.file == str(f) for d in found)


def test_replacing_a_rule_group_without_what_the_engine_reads(tmp_path):
    # An ordering.lp that forgets rank_key/2: the engine could not order candidates.
    write(tmp_path / "ordering.lp", """
        #program base.
        fifo_group(W,cq(Q)) :- candidate(W), workload_cq(W,Q), queueing_strategy(Q,"StrictFIFO").
        """)
    found = check_policy([tmp_path])
    [d] = only(found, "required")
    assert (d.file, d.severity) == ("", "error")
    assert "rank_key(W,K)" in d.message
    # preemption.lp reads the rank order too, and says so where it does
    assert {x.code for x in found} == {"required", "undefined"}
    assert all("rank_key/2" in x.message for x in found if x.code == "undefined")


def test_replacing_a_rule_group_breaks_the_builtin_rules_that_read_it(tmp_path):
    # An eligibility.lp without option/4: admission.lp and explain.lp read it.
    write(tmp_path / "eligibility.lp", """
        #program base.
        workload_cq(W,Q) :- workload_queue(W,LQ), workload_namespace(W,NS), local_queue(NS,LQ,Q).
        candidate(W) :- workload(W), not admitted(W).
        needs_group(W,PS,G) :- pod_request(W,PS,R,_), workload_cq(W,Q), cq_resource(Q,G,R).
        group_of(W,PS,G,R) :- pod_request(W,PS,R,_), workload_cq(W,Q), cq_resource(Q,G,R).
        """)
    found = check_policy([tmp_path])
    assert found and all(d.code == "undefined" for d in found)
    assert {d.file for d in found} >= {"<builtin>/admission.lp"}
    assert all(any(p in d.message for p in ("option/4", "option_at/5", "not_candidate/2", "flavor_unfit/4"))
               for d in found)


# -- the command ------------------------------------------------------------------------------------
def test_a_rule_that_never_stops_grounding_is_an_error_at_the_rule(tmp_path):
    f = write(tmp_path / "count.lp", """
        #program decide.
        count(0).
        count(N+1) :- count(N).
        """)
    [d] = check_policy([f], limits=Limits(seconds=5))  # far above what the statement before takes
    assert (d.file, d.line, d.column, d.severity, d.code) == (str(f), 3, 1, "error", "limit")
    assert d.message == ("grounding the policy without facts exceeded its time limit of 5s at this statement, "
                         "which may never end: count((N+1)) :- count(N).")


def test_cli_reports_a_rule_that_never_stops_grounding_under_its_limit(tmp_path):
    f = write(tmp_path / "count.lp", "count(0).\ncount(N+1) :- count(N).\n")
    result = cli("policy", "check", str(f), "--limit-seconds", "5")
    assert result.exit_code == 1
    assert f"{f}:2:1: error: grounding the policy without facts exceeded its time limit of 5s" in result.output


def test_cli_prints_nothing_on_success():
    result = cli("policy", "check", str(EXAMPLES / "big-gangs-on-batch"))
    assert (result.exit_code, result.output) == (0, "")


def test_cli_reports_errors_on_stderr_and_exits_1(tmp_path):
    f = write(tmp_path / "typo.lp", ":- admit(W), candidat(W).\n")
    result = cli("policy", "check", str(f))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"{f}:1:14: error: candidat/1 is never defined")


def test_cli_json_for_editors(tmp_path):
    f = write(tmp_path / "typo.lp", ":- admit(W), candidat(W).\n")
    result = cli("policy", "check", "--format", "json", str(f))
    assert result.exit_code == 1
    [d] = json.loads(result.stdout)["diagnostics"]
    assert d == {"file": str(f), "line": 1, "column": 14, "severity": "error", "code": "undefined",
                 "message": d["message"]}


def test_cli_warnings_pass_unless_strict(tmp_path):
    f = write(tmp_path / "part.lp", "#program later.\nx.\n")
    assert cli("policy", "check", str(f)).exit_code == 0
    assert cli("policy", "check", "--strict", str(f)).exit_code == 1


def test_cli_usage_errors_exit_2(tmp_path):
    result = cli("policy", "check", str(tmp_path / "missing"))
    assert result.exit_code == 2 and "no such policy file or directory" in result.stderr
    assert cli("policy", "check", "--format", "xml").exit_code == 2


@pytest.mark.parametrize("text", ["#script (lua) x = 1 #end.", "#include \"other.lp\".", "p(@now)."])
def test_loading_refuses_what_check_reports(tmp_path, text):
    from clueue.engine import load_policy
    f = write(tmp_path / "x.lp", text + "\n")
    with pytest.raises(PolicyError, match=rf"^{f}:1:\d+: forbidden"):
        load_policy([f])
