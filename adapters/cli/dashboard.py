"""``clueue dashboard``: serve the read-only dashboard (docs/dashboard.md). Parses options,
picks the source of the pages' plan (adapters/dashboard/sources.py) and serves it with
:class:`~clueue.adapters.dashboard.server.DashboardServer`.

Where the plan comes from:

- snapshot PATHs: decided once, at start (as ``clueue plan PATH...``);
- a live cluster (no PATH and no ``--db``, or ``--kubeconfig``/``--context``/``--in-cluster``):
  read and decided again when a page is asked for and the last plan is older than ``--refresh``;
- ``--db`` alone: the log's last cycle, its snapshot rebuilt and decided again under its recorded
  policy and Configuration (as ``clueue audit replay`` does), again when a newer cycle is recorded.

Timelines come from ``--db``, else the Configuration's ``decisionLog.path`` if it has one.
"""

from __future__ import annotations

import threading
import time

import click

from clueue.engine import load_policy

from ..dashboard.sources import Refreshing, planned, recorded
from ..files import load_config
from ..http import parse_bind
from .options import budget_option, cluster_options, config_option, guard, policy_option, read_snapshot

__all__ = ["dashboard"]


@click.command(short_help="Serve a read-only web dashboard: quotas, pending workloads, timelines.")
@click.argument("paths", nargs=-1, metavar="[PATH...]")
@cluster_options
@policy_option
@config_option
@budget_option
@click.option("--db", metavar="PATH", help="The decision log, for workloads' timelines; alone (no PATH, no "
              "cluster option), its last cycle is what the pages show.")
@click.option("--listen", default="127.0.0.1:8090", show_default=True, metavar="HOST:PORT",
              help="Where to serve (port 0: a free one, printed). Only this machine by default.")
@click.option("--refresh", type=click.FloatRange(min=0), default=30.0, show_default=True, metavar="SECONDS",
              help="A live cluster is read and decided again when a page is asked for and its plan is older.")
@guard
def dashboard(paths: tuple[str, ...], kubeconfig: str | None, context: str | None, in_cluster: bool,
              policies: tuple[str, ...], config_path: str | None, time_budget: float | None, db: str | None,
              listen: str, refresh: float) -> None:
    """Serve a read-only dashboard until Ctrl-C: ClusterQueues and cohorts with their quota,
    usage and borrowing as bars, the pending workloads of each queue in order with their
    reasons, and a workload's timeline from the decision log. Writes nothing.

    The plan shown is decided from the snapshot PATHs given (once), or the live cluster (again
    when older than --refresh), or with --db alone the log's last recorded cycle.
    """
    from ..dashboard.server import DashboardServer
    from ..decisionlog.config import log_path
    from ..decisionlog.schema import DecisionLogError
    try:
        host, port = parse_bind(listen)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--listen") from None
    live = not paths and (db is None or kubeconfig or context or in_cluster)
    if not paths and not live:
        assert db is not None
        source = recorded(db)
    else:
        origin = f"plan of {' '.join(paths)}" if paths else "plan of the live cluster"
        make = planned(lambda: read_snapshot(paths, kubeconfig, context, in_cluster), load_policy(policies),
                       load_config(config_path, time_budget=time_budget), origin)
        source = Refreshing(make, lambda current: bool(live) and time.time() - current.taken >= refresh)
    source()  # the first plan now: a bad PATH, an unreachable cluster or an empty log is said at once
    try:
        logged = log_path(db, load_config(config_path)) if db or config_path else None
    except DecisionLogError:
        logged = None  # a Configuration without decisionLog: no timelines
    try:
        server = DashboardServer(host, port, source, logged).start()
    except OSError as e:
        raise click.ClickException(f"cannot serve on {listen}: {e.strerror or e}; name another address with "
                                   "--listen (port 0 takes a free one)") from None
    click.echo(f"serving the dashboard on http://{host}:{server.port}/ (Ctrl-C stops)", err=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
