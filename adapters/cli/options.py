"""The options and helpers that clueue's commands share: which cluster or snapshot files, which
policy and Configuration, the output format, the decision log, and :func:`guard`, which turns
clueue's errors into one line on stderr and an exit code (docs/errors.md).

Each command module (``clueue.adapters.cli.<command>``) imports what it needs from here; this
module imports no command.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import click

from clueue.engine import ClueueError, Config, Document, Plan, Policy, Snapshot, load_policy
from clueue.engine.guard import guarded_cycle

from ..files import load_config, load_snapshot
from ..scope import Scope
from ..selector import parse_label_selector

__all__ = [
    "policy_option", "config_option", "budget_option", "output_option", "cluster_options", "cycle_options",
    "scope_options", "record_options", "guard", "EXIT_INTERRUPTED", "connect_api", "find_cluster",
    "read_snapshot", "record_cycle", "decide",
]

policy_option = click.option("--policy", "policies", multiple=True, metavar="PATH",
                       help="Extra policy file or directory; a file named like a built-in one replaces it. Repeatable.")
config_option = click.option("--config", "config_path", metavar="FILE", help="A clueue.dev/v1 Configuration file.")
budget_option = click.option("--time-budget", type=click.FloatRange(min=0.01), default=None, metavar="SECONDS",
                       help="Solver time budget for the cycle (default 10, or the configuration's).")
output_option = click.option("-o", "--output", "fmt", type=click.Choice(["text", "json", "yaml"]), default="text",
                       show_default=True, help="Output format.")


def cluster_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--kubeconfig, --context and --in-cluster: which live cluster, found as kubectl finds it."""
    fn = click.option("--in-cluster", is_flag=True, help="Use the pod's service account instead of a kubeconfig.")(fn)
    fn = click.option("--context", metavar="NAME", help="The kubeconfig context to use (default: its current one).")(fn)
    return click.option("--kubeconfig", metavar="FILE",
                        help="The kubeconfig of the cluster (default: $KUBECONFIG, then ~/.kube/config).")(fn)


def cycle_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The options of every command that runs a decision cycle."""
    for option in reversed((cluster_options, policy_option, config_option, budget_option, output_option)):
        fn = option(fn)
    return fn


def _selector(ctx: click.Context, param: click.Parameter, text: str | None) -> Any:
    """-l/--selector parsed when the command line is, so that a bad selector is a usage error."""
    try:
        return None if text is None else (text, parse_label_selector(text))
    except ValueError as e:
        raise click.BadParameter(str(e), ctx, param) from None


def scope_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """-n/--namespace, -A/--all-namespaces and -l/--selector, passed on as one ``scope`` (a Scope)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, namespace: str | None, all_namespaces: bool, selector: Any, **kwargs: Any) -> Any:
        if namespace is not None and all_namespaces:
            raise click.UsageError("give -n/--namespace or -A/--all-namespaces, not both")
        text, parsed = selector or ("", None)
        return fn(*args, scope=Scope(namespace, parsed, text), **kwargs)
    wrapper = click.option("-l", "--selector", metavar="SELECTOR", callback=_selector,
                           help="Show only the workloads whose labels match SELECTOR, as kubectl reads it "
                                "(a=b,c!=d,e in (x,y),!f); a pod or pod group matches if one of its pods does.")(wrapper)
    wrapper = click.option("-A", "--all-namespaces", is_flag=True,
                           help="Show the workloads of every namespace (the default).")(wrapper)
    return click.option("-n", "--namespace", metavar="NS",
                        help="Show only the workloads of namespace NS (default: all namespaces).")(wrapper)


_KUBE_MODULES = ("kubernetes", "tenacity")  # what the `kube` extra installs
EXIT_INTERRUPTED = 130  # as a shell reports a command stopped by SIGINT


def guard(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn clueue's errors into one line on stderr and an exit code (docs/errors.md): 1, or the
    error's own (3: the cluster is unavailable); 130 on Ctrl-C."""
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ClueueError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(getattr(e, "exit_code", 1))
        except ModuleNotFoundError as e:
            if e.name not in _KUBE_MODULES:
                raise
            missing = "the kubernetes client is not installed" if e.name == "kubernetes" else \
                f"{e.name}, which the kube extra installs, is missing"
            click.echo(f"error: {missing}: pip install 'clueue[kube]'", err=True)
            sys.exit(1)
        except KeyboardInterrupt:
            # An apply stopped halfway leaves only writes that stand on their own (apply.py's order).
            click.echo("error: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


def connect_api(kubeconfig: str | None, context: str | None, in_cluster: bool) -> Any:
    """A Kubernetes API client for the cluster :func:`find_cluster` found."""
    from ..kube import connect  # the kubernetes client is only needed when talking to a cluster
    return connect(kubeconfig, context, in_cluster=in_cluster)


def find_cluster(kubeconfig: str | None, context: str | None, in_cluster: bool, *,
                 paths_allowed: bool = False) -> tuple[str | None, str | None, bool]:
    """The cluster to connect to, found as kubectl finds it: ``--in-cluster``, else ``--kubeconfig``,
    else ``$KUBECONFIG`` (a list of files, merged by the kubernetes client), else ``~/.kube/config``.

    Raises:
        click.UsageError: no kubeconfig can be found, or ``--in-cluster`` is given with one.
    """
    if in_cluster:
        if kubeconfig or context:
            raise click.UsageError("--in-cluster uses the pod's service account: give no --kubeconfig or --context with it")
        return None, None, True
    alternatives = "give snapshot PATHs, or " if paths_allowed else "give "
    if kubeconfig:
        return kubeconfig, context, False
    env = os.environ.get("KUBECONFIG", "")
    if env:  # as for kubectl, a set $KUBECONFIG is the only place looked at
        if not any(Path(p).expanduser().is_file() for p in env.split(os.pathsep) if p):
            raise click.UsageError(f"$KUBECONFIG ({env}) names no existing file; {alternatives}--kubeconfig FILE")
        return env, context, False
    default = Path("~/.kube/config").expanduser()
    if not default.is_file():
        raise click.UsageError(f"no kubeconfig: $KUBECONFIG is not set and {default} does not exist; "
                               f"{alternatives}--kubeconfig FILE, or --in-cluster inside a pod")
    return str(default), context, False


def read_snapshot(paths: tuple[str, ...], kubeconfig: str | None, context: str | None, in_cluster: bool,
                  read: list[Document] | None = None, worker_read: dict[str, list[Document]] | None = None) -> Snapshot:
    """The snapshot files given, or with no PATH the live cluster (see :func:`find_cluster`);
    ``read`` and ``worker_read``, if given, receive the documents it is built from, the
    manager's and each MultiKueue worker's of the files (for the decision log)."""
    if paths:
        if kubeconfig or context or in_cluster:
            raise click.UsageError("give snapshot PATHs or --kubeconfig/--context/--in-cluster, not both")
        return load_snapshot(paths, read, worker_read)
    from ..kube import read_cluster
    return read_cluster(connect_api(*find_cluster(kubeconfig, context, in_cluster, paths_allowed=True)), read)


def record_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--record and --db: record the cycle in the decision log (docs/decision-log.md)."""
    fn = click.option("--db", metavar="PATH", help="The decision log --record writes to (default: the "
                      "Configuration's decisionLog.path); created if missing.")(fn)
    return click.option("--record", is_flag=True, help="Record the cycle in the decision log (see --db).")(fn)


def record_cycle(origin: str, db: str | None, policy: Policy, config: Config, started: float,
                 documents: list[Document], snapshot: Snapshot | None, plan: Plan | None, now: int | None = None,
                 worker_documents: dict[str, list[Document]] | None = None) -> None:
    """Record one cycle of ``plan`` or ``apply``, decided at ``now``, in the decision log (--db,
    else the Configuration's), with the MultiKueue workers' views it read and their documents."""
    from ..decisionlog.config import log_path
    from ..decisionlog.recorder import record_once
    record_once(log_path(db, config), origin=origin, policy=policy, config=config, started=started,
                documents=documents if snapshot is not None else None, plan=plan,
                snapshot_notices=snapshot.notices if snapshot is not None else (), now=now,
                workers=snapshot.workers if snapshot is not None else None, worker_documents=worker_documents)


def decide(snapshot: Snapshot, policies: tuple[str, ...], config_path: str | None, time_budget: float | None) -> Plan:
    """One guarded decision cycle over ``snapshot``, now, under the options' policy and Configuration."""
    config = load_config(config_path, time_budget=time_budget)
    return guarded_cycle(snapshot, load_policy(policies), config, now=int(time.time()))
