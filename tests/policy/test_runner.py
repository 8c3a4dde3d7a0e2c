"""`clueue policy test`: the YAML format, passing and failing suites, diffs, filters, exit codes."""

from __future__ import annotations

import json

import pytest

from clueue.adapters.files import read_documents
from clueue.policytools import PolicyTestError, load_tests, run_tests

from .helpers import cli, pod, queue_setup, write, write_yaml

LIFO = """
#program base.
% Younger first: the opposite of the built-in age order.
rank_key(W,(-P,-T,N)) :- candidate(W), workload_priority(W,P), workload_created(W,T), workload_tiebreak(W,N).
"""


def suite(tmp_path, cases, **top):
    return write_yaml(tmp_path / "suite_test.yaml", {"apiVersion": "clueue.dev/v1", "kind": "PolicyTest",
                                                     "objects": queue_setup(4), **top, "cases": cases})


def two_pods_case(name, expect, **extra):
    return {"name": name, "objects": [pod("old", 4, minute=0), pod("new", 4, minute=5)], "expect": expect, **extra}


def test_a_passing_suite_prints_the_summary_and_exits_0(tmp_path):
    path = suite(tmp_path, [two_pods_case("older first", {"workloads": {
        "a/pod-old": {"state": "admitted", "flavors": {"cpu": "default"}},
        "pod-new": {"state": "pending", "reasons": ["InsufficientQuota"]}}})])
    result = cli("policy", "test", str(path))
    assert (result.exit_code, result.output) == (0, "PASS: 1/1\n")


def test_verbose_lists_every_case(tmp_path):
    path = suite(tmp_path, [two_pods_case("one", {}), two_pods_case("two", {})])
    lines = cli("policy", "test", "-v", str(path)).output.splitlines()
    assert [ln.split(" (")[0] for ln in lines[:2]] == [f"PASS {path}: one", f"PASS {path}: two"]
    assert lines[-1] == "PASS: 2/2"


def test_a_failing_case_shows_a_readable_diff_and_exits_1(tmp_path):
    path = suite(tmp_path, [
        two_pods_case("passes", {"summary": {"admitted": 1, "pending": 1}}),
        two_pods_case("expects the wrong workload first", {
            "workloads": {"a/pod-new": {"state": "admitted", "flavors": {"cpu": "default"},
                                        "reasons": [{"code": "Admitted"}], "reasonsAbsent": ["WaitsBehind"]}},
            "actions": [{"kind": "admit", "target": "a/pod-new"}],
            "actionsAbsent": [{"kind": "admit", "target": "a/pod-old"}],
            "summary": {"admitted": 2}}),
    ])
    result = cli("policy", "test", str(path))
    assert result.exit_code == 1
    out = result.output
    assert f"FAIL {path}: expects the wrong workload first\n" in out
    assert "PASS" not in out.split("---")[0]  # without -v, passing cases stay quiet
    assert "  a/pod-new:\n    state:\n      - admitted\n      + pending\n" in out
    assert "    flavors:\n      - cpu=default\n      + (not admitted)\n" in out
    assert "      - Admitted\n      unexpected WaitsBehind\n" in out
    assert "    the plan's reasons:\n      InsufficientQuota: needs 4 cpu" in out
    assert "    - {kind: admit, target: a/pod-new}\n" in out
    assert "    unexpected {kind: admit, target: a/pod-old}: admit a/pod-old\n" in out
    assert "  summary:\n    - admitted=2\n    + admitted=1\n" in out
    assert out.endswith("PASS: 1/2\nFAIL: 1/2\n")


def test_run_filters_cases_by_regex(tmp_path):
    path = suite(tmp_path, [two_pods_case("fast path", {}), two_pods_case("slow path", {"summary": {"admitted": 2}})])
    assert cli("policy", "test", "--run", "fast", str(path)).output == "PASS: 1/1\n"
    assert cli("policy", "test", "--run", "slow", str(path)).exit_code == 1
    nothing = cli("policy", "test", "--run", "nothing-matches", str(path))
    assert nothing.exit_code == 2 and "matches none of the 2 cases" in nothing.stderr
    assert cli("policy", "test", "--run", "(", str(path)).exit_code == 2


def test_case_policy_files_are_relative_to_the_test_file(tmp_path):
    write(tmp_path / "policy" / "ordering.lp", LIFO)
    path = suite(tmp_path, [
        two_pods_case("built-in order", {"workloads": {"a/pod-old": {"state": "admitted"}}}),
        two_pods_case("younger first", {"workloads": {"a/pod-new": {"state": "admitted"},
                                                      "a/pod-old": {"state": "pending"}}},
                      policy=["policy/ordering.lp"]),
    ])
    result = cli("policy", "test", "-v", str(path))
    assert result.exit_code == 0, result.output
    assert result.output.endswith("PASS: 2/2\n")


def test_policy_option_applies_to_every_case(tmp_path):
    lifo = write(tmp_path / "lifo" / "ordering.lp", LIFO)
    path = suite(tmp_path, [two_pods_case("older first", {"workloads": {"a/pod-old": {"state": "admitted"}}})])
    assert cli("policy", "test", str(path)).exit_code == 0
    assert cli("policy", "test", "--policy", str(lifo.parent), str(path)).exit_code == 1


def test_snapshot_paths_and_shared_objects(tmp_path):
    write_yaml(tmp_path / "snap" / "queues.yaml", {"apiVersion": "v1", "kind": "List", "items": queue_setup(4)})
    write_yaml(tmp_path / "snap" / "pods.yaml", pod("old", 4, minute=0))
    path = write_yaml(tmp_path / "t.yaml", {"kind": "PolicyTest", "snapshot": "snap", "cases": [
        {"name": "from the snapshot", "expect": {"summary": {"admitted": 1}}},
        {"name": "plus one object", "objects": [pod("new", 4, minute=5)],
         "expect": {"workloads": {"a/pod-new": {"state": "pending"}}, "summary": {"admitted": 1, "pending": 1}}},
    ]})
    assert cli("policy", "test", str(path)).output == "PASS: 2/2\n"


def test_reason_details_and_action_fields_match_partially(tmp_path):
    path = suite(tmp_path, [two_pods_case("details", {
        "workloads": {"a/pod-new": {"reasons": [{"code": "InsufficientQuota", "details": {"need": 4, "short": "4"}}]}},
        "actions": [{"kind": "ungate", "target": "a/old", "nodeSelector": {}}]})])
    assert cli("policy", "test", str(path)).exit_code == 0
    wrong = suite(tmp_path, [two_pods_case("details", {
        "workloads": {"a/pod-new": {"reasons": [{"code": "InsufficientQuota", "details": {"short": "3"}}]}}})])
    assert "      - InsufficientQuota {'short': '3'}" in cli("policy", "test", str(wrong)).output


def test_directories_are_searched_for_test_files_only(tmp_path):
    suite(tmp_path / "deep" / "er", [two_pods_case("found", {})])
    write_yaml(tmp_path / "snapshot.yaml", pod("x"))  # not a test file: skipped
    result = cli("policy", "test", "-v", str(tmp_path))
    assert result.exit_code == 0 and "found" in result.output and result.output.endswith("PASS: 1/1\n")


def test_json_output(tmp_path):
    path = suite(tmp_path, [two_pods_case("ok", {}), two_pods_case("bad", {"summary": {"finished": 1}})])
    data = json.loads(cli("policy", "test", "--format", "json", str(path)).output)
    assert [(r["name"], r["status"]) for r in data["results"]] == [("ok", "pass"), ("bad", "fail")]
    assert data["results"][1]["problems"][0] == "  summary:"


def test_a_case_that_cannot_run_is_an_error_with_exit_2(tmp_path):
    write(tmp_path / "broken.lp", "#program decide.\n:- admit(W) .. .\n")
    path = suite(tmp_path, [two_pods_case("ok", {}), two_pods_case("broken policy", {}, policy=["broken.lp"])])
    result = cli("policy", "test", str(path))
    assert result.exit_code == 2
    assert f"ERROR {path}: broken policy\n  {tmp_path / 'broken.lp'}:2:" in result.output
    assert result.output.endswith("PASS: 1/2\nERROR: 1/2\n")


@pytest.mark.parametrize("data, message", [
    ({"kind": "Snapshot", "cases": []}, "expected kind: PolicyTest"),
    ({"kind": "PolicyTest", "cases": []}, "cases: expected a non-empty list"),
    ({"kind": "PolicyTest", "cases": [{"name": "x", "expects": {}}]}, "cases[0]: unknown field 'expects'"),
    ({"kind": "PolicyTest", "cases": [{"name": "x"}, {"name": "x"}]}, "another case is named 'x'"),
    ({"kind": "PolicyTest", "cases": [{"name": "x", "expect": {"workloads": {"w": {"state": "running"}}}}]},
     "cases[0].expect.workloads.w.state: expected one of admitted, pending, inadmissible, finished"),
    ({"kind": "PolicyTest", "cases": [{"name": "x", "expect": {"workloads": {"w": {"flavor": {}}}}}]},
     "unknown field 'flavor'"),
])
def test_malformed_test_files_name_the_field(tmp_path, data, message):
    path = write_yaml(tmp_path / "t.yaml", data)
    with pytest.raises(PolicyTestError, match="^" + str(path).replace(".", r"\.") + ": .*"):
        load_tests([path], read_documents=read_documents)
    result = cli("policy", "test", str(path))
    assert result.exit_code == 2 and message in result.stderr


def test_missing_paths_are_errors(tmp_path):
    result = cli("policy", "test", str(tmp_path / "nope"))
    assert result.exit_code == 2 and "no such test file or directory" in result.stderr
    assert cli("policy", "test", str(tmp_path)).exit_code == 2  # a directory without test files


def test_run_tests_as_a_library(tmp_path):
    path = suite(tmp_path, [two_pods_case("a", {"summary": {"admitted": 1}}), two_pods_case("b", {"summary": {"admitted": 2}})])
    cases = load_tests([path], read_documents=read_documents)
    results = run_tests(cases, pattern="b$")
    assert [(r.case.name, r.status) for r in results] == [("b", "fail")]
