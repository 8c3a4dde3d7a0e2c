"""``clueue apply``: one decision cycle on a live cluster, written to it (under the decider Lease)."""

from __future__ import annotations

import sys
import time

import click

from clueue.engine import Plan, Snapshot, load_policy
from clueue.engine.guard import guarded_cycle

from ..files import load_config
from ..render import dump
from .options import (
    budget_option, cluster_options, config_option, connect_api, find_cluster, guard, output_option, policy_option,
    record_cycle, record_options,
)

__all__ = ["apply"]


@click.command(short_help="Decide one cycle and write it to the cluster: Workloads, Pods, Events.")
@cluster_options
@policy_option
@config_option
@budget_option
@click.option("--dry-run", type=click.Choice(["none", "server"]), default="none", show_default=True,
              help="server: send every write with dryRun=All; nothing changes.")
@click.option("--lease-namespace", metavar="NS", help="Namespace of the clueue-decider Lease that deciders take "
              "turns with (default: the configuration's controllerNamespace, clueue-system); it must exist.")
@click.option("--lease-timeout", type=click.FloatRange(min=0), default=60, show_default=True, metavar="SECONDS",
              help="How long to wait while another decider holds the lease, then fail with exit code 4.")
@output_option
@record_options
@guard
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
    from ..kube import read_cluster
    from ..kube.decide import decide_and_apply
    from ..kube.retry import counting_retries
    if db and not record:
        raise click.UsageError("--db names the decision log --record writes to: give --record too")
    api = connect_api(*find_cluster(kubeconfig, context, in_cluster))
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
        record_cycle("apply", db, policy, config, started, documents, snapshots[-1] if snapshots else None,
                     decided.plan, decided_at[-1] if decided_at else None)
    if applied.stopped:
        from ..kube.errors import ClusterUnavailable
        sys.exit(ClusterUnavailable.exit_code)
    if applied.errors:
        sys.exit(1)
