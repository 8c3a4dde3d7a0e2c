"""The ``clueue`` command line: parses options and calls the library, nothing more."""

from __future__ import annotations

import sys
from typing import Any, Callable

import click

from clueue.engine import ClueueError, Plan, Snapshot, compile_snapshot, load_policy
from clueue.engine.facts import render_facts
from clueue.engine.guard import guarded_cycle

from .files import load_config, load_snapshot
from .reference import facts_reference
from .render import dump, render_explanation, render_plan

__all__ = ["main"]

_policy = click.option("--policy", "policies", multiple=True, metavar="PATH",
                       help="Extra policy file or directory; a file named like a built-in one replaces it. Repeatable.")
_config = click.option("--config", "config_path", metavar="FILE", help="A clueue.dev/v1 Configuration file.")
_budget = click.option("--time-budget", type=click.FloatRange(min=0.01), default=None, metavar="SECONDS",
                       help="Solver time budget for the cycle (default 10, or the configuration's).")
_output = click.option("-o", "--output", "fmt", type=click.Choice(["text", "json", "yaml"]), default="text",
                       show_default=True)


def _cluster_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--kubeconfig, --context and --in-cluster: read a live cluster instead of files."""
    fn = click.option("--in-cluster", is_flag=True, help="Use the pod's service account.")(fn)
    fn = click.option("--context", metavar="NAME", help="The kubeconfig context to use.")(fn)
    return click.option("--kubeconfig", metavar="FILE", help="Read a live cluster (read-only) instead of files.")(fn)


def _cycle_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The options of every command that runs a decision cycle."""
    for option in reversed((_cluster_options, _policy, _config, _budget, _output)):
        fn = option(fn)
    return fn


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


def _api(kubeconfig: str | None, context: str | None, in_cluster: bool) -> Any:
    from .kube import connect  # the kubernetes client is only needed when talking to a cluster
    return connect(kubeconfig, context, in_cluster=in_cluster)


def _snapshot(paths: tuple[str, ...], kubeconfig: str | None, context: str | None, in_cluster: bool) -> Snapshot:
    live = bool(kubeconfig or context or in_cluster)
    if live == bool(paths):
        raise click.UsageError("give snapshot PATHs or --kubeconfig/--context/--in-cluster, not both")
    if not live:
        return load_snapshot(paths)
    from .kube import read_cluster
    return read_cluster(_api(kubeconfig, context, in_cluster))


def _cycle(snapshot: Snapshot, policies: tuple[str, ...], config_path: str | None, time_budget: float | None) -> Plan:
    return guarded_cycle(snapshot, load_policy(policies), load_config(config_path, time_budget=time_budget))


@click.group()
@click.version_option(package_name="clueue")
def main() -> None:
    """Batch admission for Kubernetes, decided by a declarative policy.

    PATH is a YAML or JSON file, a directory of them, or - for standard input.
    """


@main.command()
@click.argument("paths", nargs=-1, metavar="[PATH...]")
@_cycle_options
@_guard
def plan(paths: tuple[str, ...], kubeconfig: str | None, context: str | None, in_cluster: bool,
         policies: tuple[str, ...], config_path: str | None, time_budget: float | None, fmt: str) -> None:
    """Run one decision cycle on a snapshot (or a live cluster, read-only) and print the plan."""
    result = _cycle(_snapshot(paths, kubeconfig, context, in_cluster), policies, config_path, time_budget)
    click.echo(render_plan(result, fmt), nl=False)


@main.command()
@click.argument("args", nargs=-1, required=True, metavar="[PATH...] WORKLOAD")
@_cycle_options
@_guard
def explain(args: tuple[str, ...], kubeconfig: str | None, context: str | None, in_cluster: bool,
            policies: tuple[str, ...], config_path: str | None, time_budget: float | None, fmt: str) -> None:
    """Explain the decision for one WORKLOAD (namespace/name, or a unique name)."""
    *paths, workload = args
    result = _cycle(_snapshot(tuple(paths), kubeconfig, context, in_cluster), policies, config_path, time_budget)
    try:
        click.echo(render_explanation(result, workload, fmt), nl=False)
    except KeyError:
        names = ", ".join(w.name for w in result.workloads[:20]) or "none"
        raise click.ClickException(f"no single workload {workload!r} in the snapshot; workloads: {names}") from None


@main.command()
@_cluster_options
@click.option("-o", "--output", "fmt", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True)
@_guard
def snapshot(kubeconfig: str | None, context: str | None, in_cluster: bool, fmt: str) -> None:
    """Save a live cluster's objects (every kind clueue reads) as one List, to replay offline."""
    from .kube import snapshot_documents
    documents, notices = snapshot_documents(_api(kubeconfig, context, in_cluster))
    for notice in notices:
        click.echo(f"notice: {notice}", err=True)
    click.echo(dump({"apiVersion": "v1", "kind": "List", "items": [dict(d.body) for d in documents]}, fmt), nl=False)


@main.command()
def crds() -> None:
    """Print the CustomResourceDefinitions of the kinds clueue reads and writes (for kubectl apply)."""
    from importlib import resources
    files = sorted((p for p in resources.files("clueue.adapters").joinpath("crds").iterdir() if p.name.endswith(".yaml")),
                   key=lambda p: p.name)
    click.echo("---\n".join(p.read_text(encoding="utf-8") for p in files), nl=False)


@main.command()
@_cluster_options
@_policy
@_config
@_budget
@click.option("--dry-run", type=click.Choice(["none", "server"]), default="none", show_default=True,
              help="server: send every write with dryRun=All; nothing changes.")
@_output
@_guard
def apply(kubeconfig: str | None, context: str | None, in_cluster: bool, policies: tuple[str, ...],
          config_path: str | None, time_budget: float | None, dry_run: str, fmt: str) -> None:
    """Run one decision cycle on a live cluster and apply its plan."""
    from .kube import apply_plan, read_cluster
    api = _api(kubeconfig, context, in_cluster)
    result = _cycle(read_cluster(api), policies, config_path, time_budget)
    applied = apply_plan(api, result, dry_run=dry_run == "server")
    if fmt == "text":
        for line in applied.writes:
            click.echo(("would " if dry_run == "server" else "") + line)
        for line in applied.errors:
            click.echo(f"error: {line}", err=True)
        click.echo(f"{'dry run: ' if dry_run == 'server' else ''}{applied.summary()}")
    else:
        click.echo(dump({"writes": applied.writes, "skipped": applied.skipped, "errors": applied.errors}, fmt), nl=False)
    if applied.errors:
        sys.exit(1)


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
    click.echo(render_facts(compiled.lines, commented=True), nl=False)

from .cli_policy import policy  # noqa: E402 - the `clueue policy` commands live in their own module
main.add_command(policy)

from .cli_bench import bench, bench_compare  # noqa: E402 - `clueue bench` lives in its own module
main.add_command(bench)
main.add_command(bench_compare)

if __name__ == "__main__":
    main()
