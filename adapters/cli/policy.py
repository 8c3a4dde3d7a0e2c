"""``clueue policy``: check, test and diff policy files. Parses options and calls
:mod:`clueue.policytools`.

Exit codes, as ``opa`` has them: 0 all well; 1 the policy has errors (check), a test fails
(test), or decisions differ with ``--exit-code`` (diff); 2 a usage error or a test/diff that
could not run (a missing path, an invalid snapshot or test file, a policy that does not load);
130 Ctrl-C.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import click

from clueue.engine import ClueueError, Config
from clueue.engine.guard import CHECK_SECONDS, Limits
from clueue.engine.policy import load_policy
from clueue.policytools import (
    CaseResult, builtin_tests, check_policy, diff_document, diff_policies, load_tests, render_diff, run_tests,
)

from ..files import load_config, load_snapshot, read_documents
from ..render import dump

__all__ = ["policy"]

_RULE = "-" * 80


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def _limits(seconds: float | None, memory: int | None, no_limits: bool) -> Limits | None:
    return None if no_limits else Limits(seconds=seconds, memory_mib=memory if memory else None)


def _with_limits(default_seconds: str) -> Any:
    """--limit-seconds, --limit-memory and --no-limits; ``default_seconds`` says what no
    --limit-seconds means."""
    options = [
        click.option("--limit-seconds", type=click.FloatRange(min=0.1), default=None, metavar="SECONDS",
                     help=f"Wall-clock limit of the process that grounds (per cycle; default: {default_seconds})."),
        click.option("--limit-memory", type=click.IntRange(min=0), default=2048, show_default=True, metavar="MIB",
                     help="Memory limit of that process in MiB; 0: none."),
        click.option("--no-limits", is_flag=True, help="Run in this process, without limits (and deaf to Ctrl-C "
                                                       "while grounding)."),
    ]

    def decorate(fn: Any) -> Any:
        for option in reversed(options):
            fn = option(fn)
        return fn
    return decorate


@click.group()
def policy() -> None:
    """Check, test and compare policy files before rolling them out."""


# -- check ----------------------------------------------------------------------------------------
@policy.command()
@click.argument("paths", nargs=-1, metavar="[PATH...]")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--strict", is_flag=True, help="Fail on warnings too.")
@_with_limits(f"{CHECK_SECONDS:g}")
def check(paths: tuple[str, ...], fmt: str, strict: bool, limit_seconds: float | None, limit_memory: int,
          no_limits: bool) -> None:
    """Check policy files as --policy would load them (the built-in ones without PATH).

    Reports syntax errors and clingo's warnings, predicates read but never defined or used with
    a wrong arity, unsafe variables and forbidden constructs, as file:line:column, and a rule
    whose grounding exceeds the limits (one that never ends). Reads the policy files; writes
    nothing but its report. Prints nothing when all is well; exit code 1 on errors (and on
    warnings with --strict).
    """
    try:
        diagnostics = check_policy(paths, limits=_limits(limit_seconds, limit_memory, no_limits))
    except ClueueError as e:
        _fail(str(e))
    if fmt == "json":
        click.echo(json.dumps({"diagnostics": [d.to_dict() for d in diagnostics]}, indent=2))
    else:
        for d in diagnostics:
            click.echo(str(d), err=True)
    failing = [d for d in diagnostics if d.severity == "error" or strict]
    sys.exit(1 if failing else 0)


# -- test -----------------------------------------------------------------------------------------
def _render_results(results: list[CaseResult], verbose: bool) -> str:
    lines: list[str] = []
    for r in results:
        if r.status == "pass":
            if verbose:
                lines.append(f"PASS {r.case.title} ({r.seconds:.3f}s)")
        elif r.status == "fail":
            lines += [f"FAIL {r.case.title}"] + list(r.problems)
        else:
            lines += [f"ERROR {r.case.title}"] + [f"  {p}" for p in r.problems]
    total = len(results)
    counts = {s: sum(1 for r in results if r.status == s) for s in ("pass", "fail", "error")}
    if lines:
        lines.append(_RULE)
    lines.append(f"PASS: {counts['pass']}/{total}")
    for status in ("fail", "error"):
        if counts[status]:
            lines.append(f"{status.upper()}: {counts[status]}/{total}")
    return "\n".join(lines) + "\n"


@policy.command()
@click.argument("paths", nargs=-1, metavar="[PATH...]")
@click.option("--policy", "policies", multiple=True, metavar="PATH",
              help="Policy file or directory every case runs with (besides a case's own). Repeatable.")
@click.option("--run", "pattern", metavar="REGEX", help="Only the cases whose 'file: name' matches REGEX.")
@click.option("-v", "--verbose", is_flag=True, help="Print every case, not only failures.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--time-budget", type=click.FloatRange(min=0.01), default=None, metavar="SECONDS",
              help="Solver time budget per case (default 10).")
@_with_limits("3 x time budget + 10")
def test(paths: tuple[str, ...], policies: tuple[str, ...], pattern: str | None, verbose: bool, fmt: str,
         time_budget: float | None, limit_seconds: float | None, limit_memory: int, no_limits: bool) -> None:
    """Run policy tests: YAML files of kind PolicyTest (the built-in suite without PATH).

    PATH is a test file or a directory searched for them. Reads the tests and policy files;
    writes nothing but its report: a diff for every failing case and a summary; exit code 1 if
    a case fails, 2 if one cannot run.
    """
    try:
        re.compile(pattern or "")
    except re.error as e:
        _fail(f"--run {pattern!r} is not a regular expression: {e}")
    try:
        cases = load_tests(paths, read_documents=read_documents) if paths else builtin_tests(read_documents=read_documents)
        config = load_config(None, time_budget=time_budget)
        results = run_tests(cases, policy=policies, pattern=pattern, config=config,
                            limits=_limits(limit_seconds, limit_memory, no_limits))
    except ClueueError as e:
        _fail(str(e))
    if pattern and not results:
        _fail(f"--run {pattern!r} matches none of the {len(cases)} cases")
    if fmt == "json":
        click.echo(json.dumps({"results": [r.to_dict() for r in results]}, indent=2))
    else:
        click.echo(_render_results(results, verbose), nl=False)
    statuses = {r.status for r in results}
    sys.exit(2 if "error" in statuses else 1 if "fail" in statuses else 0)


# -- diff -----------------------------------------------------------------------------------------
@policy.command()
@click.argument("paths", nargs=-1, required=True, metavar="SNAPSHOT...")
@click.option("--base", "base", multiple=True, metavar="PATH",
              help="The old policy files or directories (default: the built-in policy alone). Repeatable.")
@click.option("--policy", "policies", multiple=True, metavar="PATH",
              help="The new policy files or directories. Repeatable.")
@click.option("--config", "config_path", metavar="FILE", help="A clueue.dev/v1 Configuration file.")
@click.option("--time-budget", type=click.FloatRange(min=0.01), default=None, metavar="SECONDS")
@click.option("-o", "--output", "fmt", type=click.Choice(["text", "json", "yaml"]), default="text", show_default=True)
@click.option("--exit-code", is_flag=True, help="Exit with 1 when some decision differs (for CI).")
@_with_limits("3 x time budget + 10")
def diff(paths: tuple[str, ...], base: tuple[str, ...], policies: tuple[str, ...], config_path: str | None,
         time_budget: float | None, fmt: str, exit_code: bool, limit_seconds: float | None, limit_memory: int,
         no_limits: bool) -> None:
    """Run two policy versions on the same snapshots and list the decisions that change.

    Each SNAPSHOT (a file or a directory of YAML/JSON objects) is one cluster state. Both
    --base and --policy extend the built-in policy, as --policy does for `clueue plan`. Reads
    files only; writes nothing but its report, to standard output.
    """
    try:
        config: Config = load_config(config_path, time_budget=time_budget)
        old, new = load_policy(base), load_policy(policies)
        snapshots = [(p, load_snapshot([p])) for p in paths]
        # both decided at one time: a PodGroup's timeout or back-off ends alike on both sides
        diffs = diff_policies(snapshots, old, new, config=config,
                              limits=_limits(limit_seconds, limit_memory, no_limits), now=int(time.time()))
    except ClueueError as e:
        _fail(str(e))
    base_label = " ".join(base) or "built-in policy"
    new_label = " ".join(policies) or "built-in policy"
    if fmt == "text":
        click.echo(render_diff(diffs, base_label, new_label), nl=False)
    else:
        data = diff_document(diffs, {"paths": [str(Path(p)) for p in base], "policyDigest": old.digest()},
                             {"paths": [str(Path(p)) for p in policies], "policyDigest": new.digest()})
        click.echo(dump(data, fmt), nl=False)
    sys.exit(1 if exit_code and any(d.changed for d in diffs) else 0)
