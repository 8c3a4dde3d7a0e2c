"""The ``clueue`` command line: parses options and calls the library, nothing more."""

from __future__ import annotations

import functools
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import click

from clueue.engine import (
    ClueueError, Config, Document, Plan, Policy, Snapshot, compile_snapshot, load_policy,
)
from clueue.engine.facts import render_facts
from clueue.engine.podgroups import describe_group
from clueue.engine.guard import guarded_cycle
from clueue.engine.whatif import what_if, with_suggestions

from .files import load_config, load_snapshot
from .reference import facts_reference
from .render import dump, render_explanation, render_plan
from .scope import Scope
from .selector import parse_label_selector

__all__ = ["main"]

_policy = click.option("--policy", "policies", multiple=True, metavar="PATH",
                       help="Extra policy file or directory; a file named like a built-in one replaces it. Repeatable.")
_config = click.option("--config", "config_path", metavar="FILE", help="A clueue.dev/v1 Configuration file.")
_budget = click.option("--time-budget", type=click.FloatRange(min=0.01), default=None, metavar="SECONDS",
                       help="Solver time budget for the cycle (default 10, or the configuration's).")
_output = click.option("-o", "--output", "fmt", type=click.Choice(["text", "json", "yaml"]), default="text",
                       show_default=True, help="Output format.")


def _cluster_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--kubeconfig, --context and --in-cluster: which live cluster, found as kubectl finds it."""
    fn = click.option("--in-cluster", is_flag=True, help="Use the pod's service account instead of a kubeconfig.")(fn)
    fn = click.option("--context", metavar="NAME", help="The kubeconfig context to use (default: its current one).")(fn)
    return click.option("--kubeconfig", metavar="FILE",
                        help="The kubeconfig of the cluster (default: $KUBECONFIG, then ~/.kube/config).")(fn)


def _cycle_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The options of every command that runs a decision cycle."""
    for option in reversed((_cluster_options, _policy, _config, _budget, _output)):
        fn = option(fn)
    return fn


def _selector(ctx: click.Context, param: click.Parameter, text: str | None) -> Any:
    """-l/--selector parsed when the command line is, so that a bad selector is a usage error."""
    try:
        return None if text is None else (text, parse_label_selector(text))
    except ValueError as e:
        raise click.BadParameter(str(e), ctx, param) from None


def _scope_options(fn: Callable[..., Any]) -> Callable[..., Any]:
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


def _guard(fn: Callable[..., Any]) -> Callable[..., Any]:
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


def _api(kubeconfig: str | None, context: str | None, in_cluster: bool) -> Any:
    from .kube import connect  # the kubernetes client is only needed when talking to a cluster
    return connect(kubeconfig, context, in_cluster=in_cluster)


def _cluster(kubeconfig: str | None, context: str | None, in_cluster: bool, *,
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


def _snapshot(paths: tuple[str, ...], kubeconfig: str | None, context: str | None, in_cluster: bool,
              read: list[Document] | None = None, worker_read: dict[str, list[Document]] | None = None) -> Snapshot:
    """The snapshot files given, or with no PATH the live cluster (see :func:`_cluster`);
    ``read`` and ``worker_read``, if given, receive the documents it is built from, the
    manager's and each MultiKueue worker's of the files (for the decision log)."""
    if paths:
        if kubeconfig or context or in_cluster:
            raise click.UsageError("give snapshot PATHs or --kubeconfig/--context/--in-cluster, not both")
        return load_snapshot(paths, read, worker_read)
    from .kube import read_cluster
    return read_cluster(_api(*_cluster(kubeconfig, context, in_cluster, paths_allowed=True)), read)


def _record_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--record and --db: record the cycle in the decision log (docs/decision-log.md)."""
    fn = click.option("--db", metavar="PATH", help="The decision log --record writes to (default: the "
                      "Configuration's decisionLog.path); created if missing.")(fn)
    return click.option("--record", is_flag=True, help="Record the cycle in the decision log (see --db).")(fn)


def _record(origin: str, db: str | None, policy: Policy, config: Config, started: float,
            documents: list[Document], snapshot: Snapshot | None, plan: Plan | None, now: int | None = None,
            worker_documents: dict[str, list[Document]] | None = None) -> None:
    """Record one cycle of ``plan`` or ``apply``, decided at ``now``, in the decision log (--db,
    else the Configuration's), with the MultiKueue workers' views it read and their documents."""
    from .decisionlog.config import log_path
    from .decisionlog.recorder import record_once
    record_once(log_path(db, config), origin=origin, policy=policy, config=config, started=started,
                documents=documents if snapshot is not None else None, plan=plan,
                snapshot_notices=snapshot.notices if snapshot is not None else (), now=now,
                workers=snapshot.workers if snapshot is not None else None, worker_documents=worker_documents)


def _cycle(snapshot: Snapshot, policies: tuple[str, ...], config_path: str | None, time_budget: float | None) -> Plan:
    config = load_config(config_path, time_budget=time_budget)
    return guarded_cycle(snapshot, load_policy(policies), config, now=int(time.time()))


class _Clueue(click.Group):
    """The ``clueue`` command group: click's own errors (a usage error, a bad option value) print
    as ``error: ...`` on one line, as clueue's do, with kubectl's hint where to find the usage."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except click.ClickException as e:
            message = e.format_message()
            if message[:2].istitle():  # click's sentences ("No such option"), not a name ("PATH ...")
                message = message[0].lower() + message[1:]
            click.echo(f"error: {message}", err=True)
            if isinstance(e, click.UsageError) and e.ctx is not None:
                click.echo(f"See '{e.ctx.command_path} --help' for usage.", err=True)
            sys.exit(e.exit_code)
        except click.Abort:  # Ctrl-C outside a command's own handling
            click.echo("error: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        sys.exit(code if isinstance(code, int) else 0)  # an int is the code of --help, --version or ctx.exit


@click.group("clueue", cls=_Clueue)
@click.version_option(package_name="clueue")
def main() -> None:
    """Batch admission for Kubernetes, decided by a declarative policy.

    PATH is a YAML or JSON file, a directory of them, or - for standard input. Without PATH,
    plan and explain read the live cluster of the kubeconfig ($KUBECONFIG, then ~/.kube/config),
    as apply and snapshot do; talking to a cluster needs the `kube` extra
    (pip install 'clueue[kube]').
    """


@main.command(short_help="Print the plan of one decision cycle; writes nothing.")
@click.argument("paths", nargs=-1, metavar="[PATH...]")
@_scope_options
@_cycle_options
@_record_options
@click.option("--what-if", "whatif", is_flag=True,
              help="For every workload left out, add checked suggestions of what would admit it (docs/what-if.md).")
@_guard
def plan(paths: tuple[str, ...], scope: Scope, kubeconfig: str | None, context: str | None, in_cluster: bool,
         policies: tuple[str, ...], config_path: str | None, time_budget: float | None, fmt: str, record: bool,
         db: str | None, whatif: bool) -> None:
    """Run one decision cycle and print the plan; writes nothing (but the decision log, with --record).

    Reads the snapshot files given, or without PATH the live cluster. The cycle decides over
    everything it read; -n and -l only narrow which workloads (and their actions) are shown.
    With --record the cycle (its snapshot, policy, Configuration and decisions) is appended to
    the decision log, for `clueue audit`.
    """
    if db and not record:
        raise click.UsageError("--db names the decision log --record writes to: give --record too")
    started = time.time()
    documents: list[Document] = []
    worker_documents: dict[str, list[Document]] = {}
    snapshot = _snapshot(paths, kubeconfig, context, in_cluster, *((documents, worker_documents) if record else ()))
    config, policy = load_config(config_path, time_budget=time_budget), load_policy(policies)
    now = int(time.time())
    result = guarded_cycle(snapshot, policy, config, now=now)
    if whatif:
        shown = [w.name for w in result.workloads if scope.shows(w, snapshot)]
        result = with_suggestions(result, what_if(snapshot, policy, config, result, shown))
    click.echo(render_plan(result, fmt, scope=scope, snapshot=snapshot), nl=False)
    if record:
        _record("plan", db, policy, config, started, documents, snapshot, result, now, worker_documents)


@main.command(short_help="Explain one workload's decision; writes nothing.")
@click.argument("args", nargs=-1, required=True, metavar="[PATH...] WORKLOAD")
@_scope_options
@_cycle_options
@_guard
def explain(args: tuple[str, ...], scope: Scope, kubeconfig: str | None, context: str | None, in_cluster: bool,
            policies: tuple[str, ...], config_path: str | None, time_budget: float | None, fmt: str) -> None:
    """Explain the decision for one WORKLOAD; writes nothing.

    WORKLOAD is namespace/name, or a name unique in the plan (in namespace NS with -n). Reads
    the snapshot files given, or without PATH the live cluster, as plan does.
    """
    *paths, workload = args
    snapshot = _snapshot(tuple(paths), kubeconfig, context, in_cluster)
    config, policy = load_config(config_path, time_budget=time_budget), load_policy(policies)
    result = guarded_cycle(snapshot, policy, config, now=int(time.time()))
    name = workload if "/" in workload or scope.namespace is None else f"{scope.namespace}/{workload}"
    # a coscheduling PodGroup: its phase and what it holds, also before its pods exist (docs/podgroups.md)
    group = describe_group(snapshot, result, name)
    try:
        entry = result.workload(name)
    except KeyError:
        if group is not None:
            click.echo(_render_group(group, fmt), nl=False)
            return
        names = ", ".join(w.name for w in result.workloads[:20]) or "none"
        raise click.ClickException(f"no single workload {name!r} in the snapshot; workloads: {names}") from None
    if not scope.shows(entry, snapshot):
        raise click.ClickException(f"workload {entry.name} is not among those shown: {scope.describe()}")
    if entry.state == "pending":  # what would it take, checked (docs/what-if.md)
        result = with_suggestions(result, what_if(snapshot, policy, config, result, [entry.name]))
    click.echo(render_explanation(result, entry.name, fmt), nl=False)
    if group is not None and fmt == "text":
        click.echo(_render_group(group, fmt), nl=False)


def _render_group(group: dict[str, Any], fmt: str) -> str:
    """A PodGroup's decision (:func:`~clueue.engine.podgroups.describe_group`) for ``explain``."""
    if fmt != "text":
        return dump(group, fmt)
    lines = [f"PodGroup {group['podGroup']}: {group['phase']}" + (f": {group['message']}" if group["message"] else "")]
    lines += [f"  holds {h['amount']} {h['resource']} of ClusterQueue {h['clusterQueue']} in flavor {h['flavor']}"
              for h in group.get("quota", ())]
    lines += [f"  holds {h['amount']} {h['resource']} of node {h['node']}" for h in group.get("nodes", ())]
    return "\n".join(lines) + "\n"


@main.command(short_help="Print a live cluster's objects, to replay offline; writes nothing.")
@_cluster_options
@click.option("-o", "--output", "fmt", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True,
              help="Output format.")
@_guard
def snapshot(kubeconfig: str | None, context: str | None, in_cluster: bool, fmt: str) -> None:
    """Print a live cluster's objects (every kind clueue reads) as one List, to replay offline.

    Reads the cluster of the kubeconfig; writes only to standard output.
    """
    from .kube import snapshot_documents
    documents, notices = snapshot_documents(_api(*_cluster(kubeconfig, context, in_cluster)))
    for notice in notices:
        click.echo(f"notice: {notice}", err=True)
    click.echo(dump({"apiVersion": "v1", "kind": "List", "items": [dict(d.body) for d in documents]}, fmt), nl=False)


@main.command(short_help="Print the CRDs of the kinds clueue reads and writes.")
def crds() -> None:
    """Print the CustomResourceDefinitions of the kinds clueue reads and writes (for kubectl apply).

    Reads nothing; writes only to standard output.
    """
    from importlib import resources
    files = sorted((p for p in resources.files("clueue.adapters").joinpath("crds").iterdir() if p.name.endswith(".yaml")),
                   key=lambda p: p.name)
    click.echo("---\n".join(p.read_text(encoding="utf-8") for p in files), nl=False)


@main.command(short_help="Decide one cycle and write it to the cluster: Workloads, Pods, Events.")
@_cluster_options
@_policy
@_config
@_budget
@click.option("--dry-run", type=click.Choice(["none", "server"]), default="none", show_default=True,
              help="server: send every write with dryRun=All; nothing changes.")
@click.option("--lease-namespace", metavar="NS", help="Namespace of the clueue-decider Lease that deciders take "
              "turns with (default: the configuration's controllerNamespace, clueue-system); it must exist.")
@click.option("--lease-timeout", type=click.FloatRange(min=0), default=60, show_default=True, metavar="SECONDS",
              help="How long to wait while another decider holds the lease, then fail with exit code 4.")
@_output
@_record_options
@_guard
def apply(kubeconfig: str | None, context: str | None, in_cluster: bool, policies: tuple[str, ...],
          config_path: str | None, time_budget: float | None, dry_run: str, lease_namespace: str | None,
          lease_timeout: float, fmt: str, record: bool, db: str | None) -> None:
    """Run one decision cycle on a live cluster and apply its plan: writes to the cluster.

    Reads the cluster of the kubeconfig. Writes Workloads (created for pods and pod groups;
    admissions, evictions and their conditions in status), Pods (the admission gate removed, the
    flavors' node selector added; excess pods and the pods of preempted workloads deleted) and
    Events. --dry-run=server sends the same writes for validation only.

    One decider at a time: apply holds the Lease clueue-decider (--lease-namespace) from before
    it reads the cluster until its last write; a dry run takes no lease. With --record the cycle
    is appended to the decision log, for `clueue audit`.
    """
    from .kube import read_cluster
    from .kube.decide import decide_and_apply
    from .kube.retry import counting_retries
    if db and not record:
        raise click.UsageError("--db names the decision log --record writes to: give --record too")
    api = _api(*_cluster(kubeconfig, context, in_cluster))
    config, policy = load_config(config_path, time_budget=time_budget), load_policy(policies)
    started, documents, snapshots = time.time(), [], []

    decided_at: list[int] = []

    def read() -> Snapshot:
        snapshots.append(read_cluster(api, documents if record else None))
        return snapshots[-1]

    def decide(snapshot: Snapshot) -> Plan:
        decided_at.append(int(time.time()))  # the time it decides at, which the log keeps for a replay
        return guarded_cycle(snapshot, policy, config, now=decided_at[-1])

    with counting_retries() as tally:  # the reads' retries count too, not only apply_plan's
        decided = decide_and_apply(api, policy, config, dry_run=dry_run == "server", lease_namespace=lease_namespace,
                                   lease_timeout=lease_timeout, read=read, decide=decide)
    applied = decided.applied
    applied.retries = tally.retries
    if fmt == "text":
        for line in applied.writes:
            click.echo(("would " if dry_run == "server" else "") + line)
        for line in applied.errors:
            click.echo(f"error: {line}", err=True)
        for line in applied.warnings:
            click.echo(f"warning: {line}", err=True)
        click.echo(f"{'dry run: ' if dry_run == 'server' else ''}{applied.summary()}")
    else:
        click.echo(dump({"writes": applied.writes, "skipped": applied.skipped, "errors": applied.errors,
                         "warnings": applied.warnings, "retries": applied.retries, "stopped": applied.stopped},
                        fmt), nl=False)
    if record:  # after the report: the writes are made whether or not the log can be written
        _record("apply", db, policy, config, started, documents, snapshots[-1] if snapshots else None, decided.plan,
                decided_at[-1] if decided_at else None)
    if applied.stopped:
        from .kube.errors import ClusterUnavailable
        sys.exit(ClusterUnavailable.exit_code)
    if applied.errors:
        sys.exit(1)


@main.command(short_help="Print the facts of a snapshot, for policy authors; writes nothing.")
@click.argument("paths", nargs=-1, metavar="PATH...")
@_config
@click.option("--reference", is_flag=True, help="Print the reference of every fact predicate instead.")
@_guard
def facts(paths: tuple[str, ...], config_path: str | None, reference: bool) -> None:
    """Print the facts the compiler emits for a snapshot, commented, for policy authors.

    Reads the snapshot files given; writes only to standard output.
    """
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

from .cli_list import list_group  # noqa: E402 - `clueue list` lives in its own module
main.add_command(list_group)

from .cli_controller import controller  # noqa: E402 - `clueue controller` lives in its own module
main.add_command(controller)

from .cli_audit import audit  # noqa: E402 - `clueue audit` lives in its own module
main.add_command(audit)

from .cli_dashboard import dashboard  # noqa: E402 - `clueue dashboard` lives in its own module
main.add_command(dashboard)

if __name__ == "__main__":
    main()
