"""Ctrl-C stops `clueue plan` and `clueue policy check` while clingo grounds, and a grounding
failure always says why."""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clueue.engine import PolicyError
from clueue.engine import solver

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "examples" / "cluster"

# 27 billion combinations, none kept: grounds for hours, in little memory.
FOREVER = "n(1..3000).\n:- n(X), n(Y), n(Z), X+Y+Z < 0.\n"


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(c) for c in f.read().split()]


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time ``pid`` has used so far (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(") ", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _interrupt_while_grounding(args: list[str]) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run ``clueue ARGS`` in its own process group, wait until its guarded child process
    exists and has spent half a second of CPU (it grounds: the snapshot and the policy were read
    before it was forked), then press Ctrl-C (SIGINT to the whole
    group, as a terminal sends it). Returns the finished process and the child's pid.

    The waits count what happened, not how fast: on a loaded machine the child needs more wall
    time for its second of CPU, and the bounds (minutes) are there only to end a hung test."""
    proc = subprocess.Popen([sys.executable, "-m", "clueue.adapters.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not _children(proc.pid):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the guarded child process never started"
            time.sleep(0.05)
        [child] = _children(proc.pid)
        while _cpu_seconds(child) < 0.5:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the guarded child process never got to work"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), child


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1].startswith("Z")  # a zombie waiting for init counts as gone
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find the child process")
# Limits far above the test's wait, so that Ctrl-C, not a limit, ends the command however busy the machine is.
@pytest.mark.parametrize("command", [["plan", str(CLUSTER), "--time-budget", "200", "--policy"],
                                     ["policy", "check", "--limit-seconds", "600"]])
def test_ctrl_c_stops_a_command_while_it_grounds(tmp_path, command):
    policy = tmp_path / "forever.lp"
    policy.write_text(FOREVER if command[0] == "plan" else "count(0).\ncount(N+1) :- count(N).\n")
    done, child = _interrupt_while_grounding([*command, str(policy)])
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().startswith("error: interrupted"), done.stderr
    assert "Traceback" not in done.stderr
    deadline = time.monotonic() + 60  # the command has returned: the child is killed, or ends of its CPU limit
    while not _gone(child):
        assert time.monotonic() < deadline, "the child process outlived the command"
        time.sleep(0.05)


class _FailingControl:
    """A clingo control whose grounding fails without logging anything."""

    def ground(self, parts, context=None):
        raise RuntimeError("grounding stopped because of errors")


def test_a_grounding_failure_without_messages_still_says_why():
    with pytest.raises(PolicyError) as caught:
        solver._ground(_FailingControl(), [("base", [])], solver._Messages())
    assert str(caught.value) == "grounding failed: clingo logged no message, only: grounding stopped because of errors"


def test_plan_runs_under_the_configured_limits_and_names_the_rule_that_exceeds_them(tmp_path):
    policy = tmp_path / "forever.lp"
    policy.write_text(FOREVER)
    config = tmp_path / "config.yaml"
    config.write_text("kind: Configuration\nlimits:\n  seconds: 10\n")  # far above the rules before line 2
    done = subprocess.run([sys.executable, "-m", "clueue.adapters.cli", "plan", str(CLUSTER), "--policy", str(policy),
                           "--config", str(config)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr == (f"error: the cycle exceeded its time limit of 10s; grounding stopped at {policy}:2:1: "
                           "#false :- n(X); n(Y); n(Z); ((X+Y)+Z) < 0.\n")


ORPHAN = """
import os, sys
from clueue.engine.guard import run_limited

def grind():
    print(os.getpid(), flush=True)  # the child's pid, for the test
    while True:
        pass

run_limited(grind, seconds=1, memory_mib=None)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to follow the child process")
def test_a_child_whose_parent_was_killed_ends_soon_after_its_limit():
    parent = subprocess.Popen([sys.executable, "-c", ORPHAN], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    parent.kill()  # SIGKILL: the parent cannot kill the child itself
    parent.wait()
    deadline = time.monotonic() + 60
    while not _gone(child):
        assert time.monotonic() < deadline, "the orphaned child kept running"
        time.sleep(0.2)


def test_a_cycle_stopped_before_grounding_says_so(monkeypatch):
    from clueue.adapters.files import load_snapshot
    from clueue.engine import guard, load_policy

    def hang(*args, **kwargs):  # as compiling a snapshot would if some object made it hang
        time.sleep(3600)

    monkeypatch.setattr(guard, "run_cycle", hang)  # the forked children see the patched module
    monkeypatch.setattr(guard, "compile_snapshot", hang)
    with pytest.raises(PolicyError) as caught:
        guard.guarded_cycle(load_snapshot([str(CLUSTER)]), load_policy(), limits=guard.Limits(seconds=1))
    assert str(caught.value) == ("the cycle exceeded its time limit of 1s; it stopped while compiling the snapshot "
                                 "into facts, before grounding")


def _die_of_a_signal():
    faulthandler.disable()  # pytest's would print this deliberate crash's stack into the test output
    os.kill(os.getpid(), signal.SIGSEGV)


def _raise_a_bug():
    raise KeyError("a bug")


def test_a_child_that_dies_or_raises_is_reported_as_such():
    from clueue.engine.guard import ChildFailed, LimitExceeded, run_limited

    with pytest.raises(LimitExceeded) as died:
        run_limited(_die_of_a_signal, seconds=30, memory_mib=None)
    assert (died.value.kind, died.value.detail) == ("crash", f"the process ended with exit code {-signal.SIGSEGV}")
    with pytest.raises(ChildFailed, match=r"(?s)Traceback.*KeyError: 'a bug'"):
        run_limited(_raise_a_bug, seconds=30, memory_mib=None)


def test_a_guarded_cycle_runs_under_its_configurations_limits_by_default(monkeypatch):
    from clueue.adapters.files import load_snapshot
    from clueue.engine import Config, guard, load_policy
    # `apply` (decide_and_apply) calls guarded_cycle without limits: the Configuration's hold.
    seen = {}

    def limited(fn, *args, seconds, memory_mib, **kwargs):
        seen.update(seconds=seconds, memory_mib=memory_mib)
        return fn(*args)
    monkeypatch.setattr(guard, "run_limited", limited)
    config = Config(limits=guard.Limits(seconds=7.0, memory_mib=300))
    guard.guarded_cycle(load_snapshot([str(CLUSTER)]), load_policy(), config)
    assert seen == {"seconds": 7.0, "memory_mib": 300}
