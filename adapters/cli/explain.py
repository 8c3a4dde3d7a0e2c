"""``clueue explain``: why one workload (or PodGroup) is decided as it is; writes nothing."""

from __future__ import annotations

import time
from typing import Any

import click

from clueue.engine import load_policy
from clueue.engine.guard import guarded_cycle
from clueue.engine.podgroups import describe_group
from clueue.engine.whatif import what_if, with_suggestions

from ..files import load_config
from ..render import dump, render_explanation
from ..scope import Scope
from .options import cycle_options, guard, read_snapshot, scope_options

__all__ = ["explain"]


@click.command(short_help="Explain one workload's decision; writes nothing.")
@click.argument("args", nargs=-1, required=True, metavar="[PATH...] WORKLOAD")
@scope_options
@cycle_options
@guard
def explain(args: tuple[str, ...], scope: Scope, kubeconfig: str | None, context: str | None, in_cluster: bool,
            policies: tuple[str, ...], config_path: str | None, time_budget: float | None, fmt: str) -> None:
    """Explain the decision for one WORKLOAD; writes nothing.

    WORKLOAD is namespace/name, or a name unique in the plan (in namespace NS with -n). Reads
    the snapshot files given, or without PATH the live cluster, as plan does.
    """
    *paths, workload = args
    snapshot = read_snapshot(tuple(paths), kubeconfig, context, in_cluster)
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
