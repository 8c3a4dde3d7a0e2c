"""The ``clueue`` command line: parses options and calls the library, nothing more."""

from __future__ import annotations

import sys
from typing import Any, Callable

import click

from clueue.engine import ClueueError, compile_snapshot, load_policy, run_cycle
from clueue.engine.facts import render_facts

from .files import load_config, load_snapshot
from .reference import facts_reference
from .render import render_explanation, render_plan

__all__ = ["main"]

_paths = click.argument("paths", nargs=-1, required=True, metavar="PATH...")
_policy = click.option("--policy", "policies", multiple=True, metavar="PATH",
                       help="Extra policy file or directory; a file named like a built-in one replaces it. Repeatable.")
_config = click.option("--config", "config_path", metavar="FILE", help="A clueue.dev/v1 Configuration file.")
_budget = click.option("--time-budget", type=click.FloatRange(min=0.01), default=None, metavar="SECONDS",
                       help="Solver time budget for the cycle (default 10, or the configuration's).")


def _guard(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn clueue's errors into one line on stderr and exit code 1."""
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ClueueError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


@click.group()
@click.version_option(package_name="clueue")
def main() -> None:
    """Batch admission for Kubernetes, decided by a declarative policy.

    PATH is a YAML or JSON file, a directory of them, or - for standard input.
    """


@main.command()
@_paths
@_policy
@_config
@_budget
@click.option("-o", "--output", "fmt", type=click.Choice(["text", "json", "yaml"]), default="text", show_default=True)
@_guard
def plan(paths: tuple[str, ...], policies: tuple[str, ...], config_path: str | None,
         time_budget: float | None, fmt: str) -> None:
    """Run one decision cycle on a snapshot and print the plan."""
    snapshot = load_snapshot(paths)
    result = run_cycle(snapshot, load_policy(policies), load_config(config_path, time_budget=time_budget))
    click.echo(render_plan(result, fmt), nl=False)


@main.command()
@click.argument("args", nargs=-1, required=True, metavar="PATH... WORKLOAD")
@_policy
@_config
@_budget
@click.option("-o", "--output", "fmt", type=click.Choice(["text", "json", "yaml"]), default="text", show_default=True)
@_guard
def explain(args: tuple[str, ...], policies: tuple[str, ...], config_path: str | None,
            time_budget: float | None, fmt: str) -> None:
    """Explain the decision for one WORKLOAD (namespace/name, or a unique name)."""
    if len(args) < 2:
        raise click.UsageError("give at least one PATH and the WORKLOAD")
    *paths, workload = args
    result = run_cycle(load_snapshot(paths), load_policy(policies), load_config(config_path, time_budget=time_budget))
    try:
        click.echo(render_explanation(result, workload, fmt), nl=False)
    except KeyError:
        names = ", ".join(w.name for w in result.workloads[:20]) or "none"
        raise click.ClickException(f"no single workload {workload!r} in the snapshot; workloads: {names}") from None


@main.command()
@click.argument("paths", nargs=-1, metavar="PATH...")
@_config
@click.option("--reference", is_flag=True, help="Print the reference of every fact predicate instead.")
@_guard
def facts(paths: tuple[str, ...], config_path: str | None, reference: bool) -> None:
    """Print the facts the compiler emits for a snapshot, commented, for policy authors."""
    if reference:
        click.echo(facts_reference(), nl=False)
        return
    if not paths:
        raise click.UsageError("give at least one PATH (or --reference)")
    compiled, _ = compile_snapshot(load_snapshot(paths), load_config(config_path))
    click.echo(render_facts(compiled.facts, commented=True), nl=False)

if __name__ == "__main__":
    main()
