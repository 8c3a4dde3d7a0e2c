"""Policy files are data: forbidden constructs are refused, and a pathological user rule fails a
cycle clearly, naming the rule, instead of hanging or exhausting the machine."""

from __future__ import annotations

from dataclasses import replace

import pytest

from clueue.adapters.files import load_snapshot
from clueue.engine import PolicyError, SolveError, load_policy, run_cycle
from clueue.engine.policy import Policy
from clueue.engine.guard import Limits, guarded_cycle

from .helpers import CLUSTER, write


@pytest.fixture(scope="module")
def snapshot():
    return load_snapshot([str(CLUSTER)])


@pytest.mark.parametrize("text, construct", [
    ("#script (python)\nimport os\n#end.\n", "#script"),
    ('#include "/etc/hostname".\n', "#include"),
    ("#include <incmode>.\n", "#include"),
    ("p(X) :- X = @getenv(1).\n", "external function"),
    ("p(@now).\n", "external function"),
])
def test_code_and_file_access_are_refused_before_clingo_sees_them(tmp_path, text, construct):
    f = write(tmp_path / "evil.lp", text)
    with pytest.raises(PolicyError, match=f"^{f}:1:.*forbidden: {construct}"):
        load_policy([f])


def test_weak_constraint_levels_are_not_external_calls(tmp_path):
    f = write(tmp_path / "levels.lp", """
        #const lvl = 15.
        #program decide.
        :~ choose(W,PS,G,F), F != "spot". [1@lvl,W,PS,G]
        """)
    assert load_policy([f]).user_files[0].path == str(f)


def test_a_rule_that_exhausts_memory_is_named(tmp_path, snapshot):
    f = write(tmp_path / "explode.lp", """
        #program base.
        n(1..20000).
        % every pair: 400 million atoms
        pair(X,Y) :- n(X), n(Y).
        """)
    with pytest.raises(PolicyError) as caught:
        guarded_cycle(snapshot, load_policy([f]), limits=Limits(seconds=120, memory_mib=256))
    message = str(caught.value)
    assert message.startswith("the cycle exceeded its memory limit of 256 MiB; grounding stopped at ")
    assert f"{f}:4:1: pair(X,Y) :- n(X); n(Y)." in message


def test_a_rule_that_grounds_forever_is_named(tmp_path, snapshot):
    f = write(tmp_path / "slow.lp", """
        #program base.
        n(1..3000).
        #program decide.
        ok(W) :- candidate(W).
        % 27 billion combinations, none kept: slow, not big
        :- n(X), n(Y), n(Z), X+Y+Z < 0.
        """)
    # The limit is far above what the rules before it take (a fraction of a second), so that the
    # probe that names the rule gets there however busy the machine is.
    with pytest.raises(PolicyError) as caught:
        guarded_cycle(snapshot, load_policy([f]), limits=Limits(seconds=20, memory_mib=1024))
    message = str(caught.value)
    assert message.startswith("the cycle exceeded its time limit of 20s; grounding stopped at ")
    assert f"{f}:6:1: #false :- n(X); n(Y); n(Z)" in message


def test_errors_inside_the_child_come_back_as_they_are(tmp_path, snapshot):
    f = write(tmp_path / "never.lp", "#program decide.\n:- not admit(\"nobody/at-all\").\n")
    with pytest.raises(SolveError, match="hard constraints fail"):
        guarded_cycle(snapshot, load_policy([f]), limits=Limits(seconds=60))


def test_a_guarded_cycle_gives_the_same_plan(snapshot):
    example = CLUSTER.parent / "policies" / "low-priority-on-spot"
    policy = load_policy([example])
    guarded = guarded_cycle(snapshot, policy, limits=Limits(seconds=60))
    direct = run_cycle(snapshot, policy)
    assert [w.to_dict() for w in guarded.workloads] == [w.to_dict() for w in direct.workloads]
    assert guarded.actions == direct.actions


def _with_builtin_rule(name: str, rule: str):
    """The built-in policy with ``rule`` appended to its file ``name``, and the rule's line."""
    files = load_policy().files
    line = next(f.text for f in files if f.name == name).count("\n") + 2
    return Policy(tuple(replace(f, text=f"{f.text}\n{rule}\n") if f.name == name else f for f in files)), line


def test_the_builtin_policy_runs_under_the_limits_and_a_rule_group_that_exceeds_them_is_named(snapshot):
    # Hours of grounding (27 billion combinations, none kept), in a built-in rule group; the limit
    # leaves the built-in rules before it (a fraction of a second) room on a loaded machine.
    policy, line = _with_builtin_rule("capacity.lp", ":- slow_n(X), slow_n(Y), slow_n(Z), X+Y+Z < 0. slow_n(1..3000).")
    assert not policy.user_files
    with pytest.raises(PolicyError) as caught:
        guarded_cycle(snapshot, policy, limits=Limits(seconds=20))
    message = str(caught.value)
    assert message.startswith("the cycle exceeded its time limit of 20s; grounding stopped at ")
    assert f"<builtin>/capacity.lp:{line}:1: #false :- slow_n(X); slow_n(Y); slow_n(Z)" in message


@pytest.mark.parametrize("text, error", [
    ("#program decide.\nwide(W,N) :- candidate(W).\n", r":2:1-\d+: error: unsafe variables"),
    ("#program decide.\nwide(W :- candidate(W).\n", r":2:\d+-\d+: error: syntax error"),
])
def test_a_policy_that_does_not_parse_or_ground_fails_the_cycle_naming_its_file(tmp_path, snapshot, text, error):
    f = write(tmp_path / "broken.lp", text)
    for _ in range(2):  # the same again, when a file's parse is kept from the first cycle
        with pytest.raises(PolicyError, match=f"{f}{error}"):
            run_cycle(snapshot, load_policy([f]))
