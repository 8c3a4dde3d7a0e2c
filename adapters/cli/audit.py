"""``clueue audit``: read the decision log (docs/decision-log.md). Parses options and calls
:mod:`clueue.adapters.decisionlog`; reads the log only, never the cluster.

Exit codes: 0; 1 an error (no log, an unknown cycle or workload, a log of a newer schema); with
``replay --exit-code``, 1 when decisions differ; 2 a usage error.
"""

from __future__ import annotations

import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from clueue.engine import Config, load_policy
from clueue.engine.durations import parse_duration
from clueue.policytools import diff_document, render_diff

from ..decisionlog.config import log_path
from ..decisionlog.store import DecisionLog
from ..decisionlog.timeline import brief, render_timeline, workload_timeline
from ..files import load_config
from ..render import dump
from .options import config_option, guard, output_option

__all__ = ["audit"]


@click.group("audit", short_help="Query the decision log: why a workload waited, cycles, replays.")
def audit() -> None:
    """Query the decision log that the controller, `clueue apply --record` and `clueue plan
    --record` write: a workload's timeline, the cycles, one cycle's record, and a replay of a
    recorded cycle under its own policy or another. Reads the log only."""


_db = click.option("--db", "db", metavar="PATH",
                   help="The decision log (SQLite file); default: the Configuration's decisionLog.path.")


def _open(db: str | None, config_path: str | None) -> DecisionLog:
    """The log named by --db, else by the Configuration's decisionLog.path.

    Raises:
        DecisionLogError: neither names one, or it cannot be opened.
    """
    return DecisionLog.open(log_path(db, load_config(config_path) if db is None else Config()))


def _since(ctx: click.Context, param: click.Parameter, text: str | None) -> float | None:
    """--since as epoch seconds: a duration back from now (2h, 30m) or a time (ISO 8601, UTC if
    it names no zone)."""
    if text is None:
        return None
    try:
        return time.time() - parse_duration(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise click.BadParameter(f"{text!r} is neither a duration (2h, 30m, 7d) nor a time "
                                 "(2026-11-28T10:00:00Z)", ctx, param) from None
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()


def _stdout() -> Console:
    return Console(file=sys.stdout, width=None if sys.stdout.isatty() else 160)


# -- why ----------------------------------------------------------------------------------------
@audit.command(short_help="A workload's states and reasons over time, and how long each held.")
@click.argument("workload", metavar="NAMESPACE/NAME")
@_db
@config_option
@output_option
@click.option("--svg", metavar="FILE", help="Also draw the timeline as a picture: an SVG file written to FILE.")
@guard
def why(workload: str, db: str | None, config_path: str | None, fmt: str, svg: str | None) -> None:
    """The timeline of NAMESPACE/NAME (a workload as the plan names it): each state it was in,
    for how long, and the reasons that held, from the recorded cycles."""
    if "/" not in workload:
        raise click.UsageError(f"give the workload as NAMESPACE/NAME, not {workload!r}")
    with _open(db, config_path) as log:
        data = workload_timeline(log, workload)
    if svg:  # the picture beside the text: the dashboard's own drawing (adapters/dashboard/svg.py)
        from ..dashboard.svg import timeline_svg
        try:
            Path(svg).write_text(timeline_svg(data) + "\n", encoding="utf-8")
        except OSError as e:
            raise click.ClickException(f"cannot write {svg}: {e.strerror or e}") from None
    click.echo(render_timeline(data) if fmt == "text" else dump(data, fmt), nl=False)


# -- cycles -------------------------------------------------------------------------------------
@audit.command(short_help="List the recorded cycles.")
@click.option("--since", callback=_since, metavar="DURATION|TIME",
              help="Only cycles from then on: a duration back from now (30m, 2h, 7d) or a time (ISO 8601).")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True, help="At most the last N.")
@_db
@config_option
@output_option
@guard
def cycles(since: float | None, limit: int, db: str | None, config_path: str | None, fmt: str) -> None:
    """The recorded cycles, oldest first: when, where from, what they decided and did."""
    with _open(db, config_path) as log:
        rows = log.cycles(since=since, limit=limit)
    if fmt != "text":
        click.echo(dump({"cycles": rows}, fmt), nl=False)
        return
    if not rows:
        click.echo("no cycles recorded" + (" in that time" if since is not None else ""))
        return
    table = Table(box=None, pad_edge=False)
    for heading in ("CYCLE", "TIME (UTC)", "ORIGIN", "ADMITTED", "PENDING", "INADMISSIBLE", "ACTIONS", "CHANGES",
                    "OBJECTS", "SOLVE", "OUTCOME"):
        table.add_column(heading, justify="right" if heading not in ("TIME (UTC)", "ORIGIN", "OUTCOME") else "left")
    for r in rows:
        summary, solver = r.get("summary", {}), r.get("solver", {})
        outcome = "failed: " + r["error"] if r.get("error") else \
            "optimal" if solver.get("optimal") else "budget exhausted" if solver.get("budgetExhausted") else "unproven"
        objects = r.get("objects", {})
        table.add_row(str(r["id"]), r["time"][:19].replace("T", " "), r["origin"], str(summary.get("admitted", "")),
                      str(summary.get("pending", "")), str(summary.get("inadmissible", "")), str(r["actionCount"]),
                      str(r["changes"]), f"{objects.get('total', '')}" + (f" +{objects['added']}-{objects['removed']}"
                                                                        if objects else ""),
                      f"{solver.get('totalSeconds', 0):.3f}s" if solver else "", outcome)
    _stdout().print(table)


# -- show ---------------------------------------------------------------------------------------
@audit.command(short_help="One cycle's record: digests, solver, actions, the decisions that changed.")
@click.argument("cycle", type=int)
@_db
@config_option
@output_option
@guard
def show(cycle: int, db: str | None, config_path: str | None, fmt: str) -> None:
    """The record of CYCLE (a number from `clueue audit cycles`): its digests, solver
    statistics, actions, and the workloads whose state or reasons it changed."""
    with _open(db, config_path) as log:
        record = log.record(cycle)
    click.echo(_render_record(record) if fmt == "text" else dump(record, fmt), nl=False)


def _render_record(r: dict[str, Any]) -> str:
    lines = [f"cycle {r['id']} at {r['time']} ({r['origin']})",
             f"  snapshot {r['snapshotDigest'] or '-'}  policy {r['policyDigest']}  config {r['configDigest']}"]
    if r.get("error"):
        lines.append(f"  failed: {r['error']}")
    if "summary" in r:
        lines.append("  " + ", ".join(f"{n} {s}" for s, n in r["summary"].items()))
    if r.get("solver"):
        s = r["solver"]
        lines.append(f"  solver: {s['totalSeconds']:.3f}s, {s['candidates']} candidates, {s['rounds']} rounds, "
                     f"{'optimal' if s['optimal'] else 'not proven optimal'}"
                     + (", budget exhausted" if s["budgetExhausted"] else ""))
    if r.get("objects"):
        o = r["objects"]
        lines.append(f"  snapshot objects: {o['total']} ({o['added']} added, {o['removed']} removed since the "
                     "previous cycle)")
    actions = r.get("actions", [])
    lines.append(f"actions ({len(actions)}):")
    lines += [f"  {a['kind']} {a['target']}" + (f" (workload {a['workload']})" if a["workload"] != a["target"] else "")
              for a in actions]
    lines.append(f"changed decisions ({len(r['workloads'])}):")
    for w in r["workloads"]:
        reasons = "; ".join(brief(x) for x in w.get("reasons", []))
        lines.append(f"  {w['name']}: {w['state']}" + (f" - {reasons}" if reasons else ""))
    return "\n".join(lines) + "\n"


# -- replay -------------------------------------------------------------------------------------
@audit.command(short_help="Decide a recorded cycle again, optionally under another policy; print the diff.")
@click.argument("cycle", type=int)
@click.option("--policy", "policies", multiple=True, metavar="PATH",
              help="Decide under the built-in policy extended by these files instead of the recorded policy. "
                   "Repeatable.")
@click.option("--exit-code", is_flag=True, help="Exit with 1 when some decision differs (for CI).")
@_db
@config_option
@output_option
@guard
def replay(cycle: int, policies: tuple[str, ...], exit_code: bool, db: str | None, config_path: str | None,
           fmt: str) -> None:
    """Rebuild CYCLE's snapshot, policy and Configuration from the log, decide it again (under
    --policy if given) and print how the decisions differ from the recorded ones, as `clueue
    policy diff` prints them. Without --policy an exact replay shows no change."""
    from ..decisionlog.replay import replay as replay_cycle
    policy = load_policy(policies) if policies else None
    with _open(db, config_path) as log:
        result = replay_cycle(log, cycle, policy=policy)
    record = result.recorded.record
    base = {"cycle": cycle, "time": record["time"], "policyDigest": record["policyDigest"],
            "snapshotDigest": record["snapshotDigest"]}
    new = {"paths": list(policies), "policyDigest": result.plan.policy_digest,
           "snapshotDigest": result.plan.snapshot_digest, "sameSnapshot": result.same_snapshot}
    if fmt == "text":
        label = " ".join(policies) if policies else f"the recorded policy {record['policyDigest']}"
        if not result.same_snapshot:
            click.echo(f"warning: the rebuilt snapshot's digest {result.plan.snapshot_digest} differs from the "
                       f"recorded {record['snapshotDigest']}", err=True)
        click.echo(render_diff([result.diff], f"cycle {cycle} as recorded ({record['time']})", f"replayed under {label}"),
                   nl=False)
        if result.nominations:
            click.echo(f"\n{len(result.nominations)} dispatched workload(s) nominated to other workers:")
            for c in result.nominations:
                click.echo(f"  {c.workload}  - {', '.join(c.recorded) or '(none)'}  "
                           f"+ {', '.join(c.replayed) or '(none)'}")
    else:
        document = diff_document([result.diff], base, new)
        document["nominations"] = [c.to_dict() for c in result.nominations]
        click.echo(dump(document, fmt), nl=False)
    if exit_code and (result.diff.changed or result.nominations):
        sys.exit(1)
