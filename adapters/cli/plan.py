"""``clueue plan``: one decision cycle, printed; writes nothing (but the decision log, with --record)."""

from __future__ import annotations

import time

import click

from clueue.engine import Document, load_policy
from clueue.engine.guard import guarded_cycle
from clueue.engine.whatif import what_if, with_suggestions

from ..files import load_config
from ..render import render_plan
from ..scope import Scope
from .options import cycle_options, guard, read_snapshot, record_cycle, record_options, scope_options

__all__ = ["plan"]


@click.command(short_help="Print the plan of one decision cycle; writes nothing.")
@click.argument("paths", nargs=-1, metavar="[PATH...]")
@scope_options
@cycle_options
@record_options
@click.option("--what-if", "whatif", is_flag=True,
              help="For every workload left out, add checked suggestions of what would admit it (docs/what-if.md).")
@guard
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
    snapshot = read_snapshot(paths, kubeconfig, context, in_cluster, *((documents, worker_documents) if record else ()))
    config, policy = load_config(config_path, time_budget=time_budget), load_policy(policies)
    now = int(time.time())
    result = guarded_cycle(snapshot, policy, config, now=now)
    if whatif:
        shown = [w.name for w in result.workloads if scope.shows(w, snapshot)]
        result = with_suggestions(result, what_if(snapshot, policy, config, result, shown))
    click.echo(render_plan(result, fmt, scope=scope, snapshot=snapshot), nl=False)
    if record:
        record_cycle("plan", db, policy, config, started, documents, snapshot, result, now, worker_documents)
