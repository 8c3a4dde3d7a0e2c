"""``clueue list workloads|clusterqueues|localqueues``: kueuectl's listings, from one decision cycle.

Reads the snapshot files given, or without PATH the live cluster (as ``clueue plan`` does), runs
a guarded cycle and prints what the cluster is once its plan is applied: each workload's status
and, for a waiting one, its position in its LocalQueue and ClusterQueue (from 0, as Kueue's
visibility API and kueuectl number them); each queue's counts and ``Active`` condition, as
clueue writes them in the queues' status (engine/queues.py). Writes nothing.

As kueuectl (and kubectl) do, workloads and LocalQueues of a live cluster are listed in the
kubeconfig context's namespace (``default`` if it names none) unless ``-n`` or ``-A`` is given;
snapshot files are listed whole.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Sequence

import click

from clueue.engine import Document, Plan, Snapshot, build_snapshot
from clueue.engine.plan import WorkloadEntry
from clueue.engine.queues import QueueStatuses, queue_statuses

from ..files import read_documents
from ..render import dump
from ..scope import Scope
from .options import connect_api, cycle_options, decide, find_cluster, guard, scope_options

__all__ = ["list_group"]


@click.group("list", short_help="List workloads or queues as kueuectl does, from one cycle; writes nothing.")
def list_group() -> None:
    """List workloads, ClusterQueues or LocalQueues as kueuectl lists them, from one decision
    cycle over the snapshot files given or, without PATH, the live cluster. Writes nothing."""


#: kueuectl's --status values -> the statuses they select: the plan's states, an admitted entry
#: whose admission checks are not all Ready being ``quotareserved`` (docs/admission-checks.md).
STATUSES = {"all": ("admitted", "quotareserved", "pending", "inadmissible", "finished"),
            "pending": ("pending", "inadmissible"), "quotareserved": ("quotareserved",), "admitted": ("admitted",),
            "finished": ("finished",)}
_POD_TYPES = ("pod", "pods", "po")
_WORKLOAD_TYPES = ("workload", "workloads", "wl", "workload.kueue.x-k8s.io", "workloads.kueue.x-k8s.io")


def _paths(fn: Any) -> Any:
    return click.argument("paths", nargs=-1, metavar="[PATH...]")(fn)


def _decide(paths: tuple[str, ...], kubeconfig: str | None, context: str | None, in_cluster: bool,
            policies: tuple[str, ...], config_path: str | None, time_budget: float | None
            ) -> tuple[Snapshot, Plan, QueueStatuses, dict[tuple[str, str], int]]:
    """The snapshot, its plan, the queues' status, and when each queue was created (for AGE:
    the snapshot keeps no queue's creation time)."""
    if paths:
        if kubeconfig or context or in_cluster:
            raise click.UsageError("give snapshot PATHs or --kubeconfig/--context/--in-cluster, not both")
        documents = read_documents(paths)
        snapshot = build_snapshot(documents)
    else:
        from ..kube.read import snapshot_documents
        api = connect_api(*find_cluster(kubeconfig, context, in_cluster, paths_allowed=True))
        documents, notices = snapshot_documents(api)
        snapshot = build_snapshot(documents, lenient=True)  # as read_cluster: one bad object must not stop the rest
        snapshot = replace(snapshot, notices=tuple(notices) + snapshot.notices)
    plan = decide(snapshot, policies, config_path, time_budget)
    return snapshot, plan, queue_statuses(snapshot, plan), _queues_created(documents)


def _queues_created(documents: Iterable[Document]) -> dict[tuple[str, str], int]:
    """(kind, name or namespace/name) -> creation time (epoch seconds) of each ClusterQueue and
    LocalQueue among ``documents`` (``kind: List`` ones unpacked)."""
    created: dict[tuple[str, str], int] = {}
    bodies = [item for doc in documents if isinstance(doc.body, dict)
              for item in (doc.body.get("items") if isinstance(doc.body.get("items"), list) else [doc.body])]
    for body in bodies:
        kind, meta = body.get("kind") if isinstance(body, dict) else None, (body or {}).get("metadata") or {}
        if kind not in ("ClusterQueue", "LocalQueue") or not meta.get("creationTimestamp"):
            continue
        try:
            stamp = datetime.fromisoformat(str(meta["creationTimestamp"]).replace("Z", "+00:00"))
        except ValueError:
            continue  # the snapshot's own validation names a bad timestamp
        name = f"{meta.get('namespace')}/{meta.get('name')}" if kind == "LocalQueue" else str(meta.get("name"))
        created[(kind, name)] = int(stamp.timestamp())
    return created


def _context_namespace(kubeconfig: str | None, context: str | None, in_cluster: bool) -> str:
    """The namespace kubectl would list in: the kubeconfig context's (the Pod's own inside a
    cluster), else ``default``."""
    if in_cluster:
        try:
            return Path(_SERVICE_ACCOUNT_NAMESPACE).read_text().strip() or "default"
        except OSError:
            return "default"
    from kubernetes import config
    kubeconfig, context, _ = find_cluster(kubeconfig, context, False, paths_allowed=True)
    try:
        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
    except (config.ConfigException, OSError, TypeError, ValueError):
        return "default"  # connecting will say what is wrong with the kubeconfig
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else active
    return str(((chosen or {}).get("context") or {}).get("namespace") or "default")


def _listing_scope(scope: Scope, paths: tuple[str, ...], kubeconfig: str | None, context: str | None,
                   in_cluster: bool) -> Scope:
    """``scope``, narrowed to the context's namespace on a live cluster when neither -n nor -A was given."""
    all_namespaces = bool(click.get_current_context().params.get("all_namespaces"))
    if paths or scope.namespace is not None or all_namespaces:
        return scope
    return replace(scope, namespace=_context_namespace(kubeconfig, context, in_cluster))


_SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def _age(created: int | None, now: float) -> str:
    """How long ago, as kubectl's AGE column abbreviates it."""
    if not created:
        return "<unknown>"
    seconds = max(0, int(now - created))
    for limit, unit, size in ((120, "s", 1), (2 * 3600, "m", 60), (48 * 3600, "h", 3600)):
        if seconds < limit:
            return f"{seconds // size}{unit}"
    return f"{seconds // 86400}d"


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Left-aligned columns three spaces apart, as kubectl prints them."""
    cells = [list(headers)] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "".join("   ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n" for r in cells)


def _emit(headers: Sequence[str], rows: list[dict[str, Any]], keys: Sequence[str], fmt: str, empty: str) -> None:
    if fmt != "text":
        click.echo(dump(rows, fmt), nl=False)
    elif not rows:
        click.echo(empty, err=True)
    else:
        click.echo(_table(headers, ([r.get(k) for k in keys] for r in rows)), nl=False)


def _created(entry: WorkloadEntry, snapshot: Snapshot) -> int | None:
    """When the workload was created: its Workload object's time, else its oldest pod's."""
    obj = snapshot.workloads.get(entry.name)
    if obj is not None:
        return obj.created
    ns = entry.name.split("/", 1)[0]
    times = [p.created for p in (snapshot.pods.get(f"{ns}/{name}") for name, _ in entry.pods) if p is not None]
    return min(times) if times else None


def _for(text: str | None) -> tuple[str, str] | None:
    """``--for TYPE/NAME``: ("pod" | "workload", NAME)."""
    if text is None:
        return None
    kind, _, name = text.partition("/")
    kind = kind.lower()
    if not name or "/" in name:
        raise click.BadParameter("must be in TYPE/NAME form (pod/NAME or workload/NAME)", param_hint="--for")
    if kind in _POD_TYPES:
        return "pod", name
    if kind in _WORKLOAD_TYPES:
        return "workload", name
    raise click.BadParameter(f"clueue reads no {kind!r} objects: give pod/NAME (the workload of that pod) or "
                             "workload/NAME", param_hint="--for")


def _owned_by(entry: WorkloadEntry, target: tuple[str, str], namespace: str | None) -> bool:
    ns, name = entry.name.split("/", 1)
    if namespace is not None and ns != namespace:
        return False
    kind, wanted = target
    return name == wanted if kind == "workload" else any(pod == wanted for pod, _ in entry.pods)


@list_group.command("workloads")
@_paths
@scope_options
@click.option("--for", "for_", metavar="TYPE/NAME", help="Only the workload of this object: pod/NAME (the workload "
              "the pod belongs to) or workload/NAME, in namespace -n (default: any namespace).")
@click.option("--status", "statuses", multiple=True, type=click.Choice(sorted(STATUSES), case_sensitive=False),
              help="Only workloads of this status (repeatable): pending (waiting, inadmissible too), admitted, "
                   "finished, quotareserved (none: clueue admits without admission checks) or all.")
@click.option("--clusterqueue", "-c", metavar="NAME", help="Only workloads of this ClusterQueue.")
@click.option("--localqueue", "-q", metavar="NAME", help="Only workloads of LocalQueues of this name.")
@cycle_options
@guard
def workloads(paths: tuple[str, ...], scope: Scope, for_: str | None, statuses: tuple[str, ...],
              clusterqueue: str | None, localqueue: str | None, kubeconfig: str | None, context: str | None,
              in_cluster: bool, policies: tuple[str, ...], config_path: str | None, time_budget: float | None,
              fmt: str) -> None:
    """List workloads with their status and, for waiting ones, their positions in their LocalQueue
    and ClusterQueue (from 0, in the order the cycle would admit them)."""
    target = _for(for_)
    scope = _listing_scope(scope, paths, kubeconfig, context, in_cluster)
    snapshot, plan, queues, _ = _decide(paths, kubeconfig, context, in_cluster, policies, config_path, time_budget)
    wanted = {s for status in (statuses or ("all",)) for s in STATUSES[status.lower()]}
    now = time.time()
    rows = []
    for w in plan.workloads:
        status = "quotareserved" if w.phase == "QuotaReserved" else w.state
        # a group that cannot make its Workload yet (incomplete, ...) is no workload to Kueue's tools
        if (not w.has_workload_object or status not in wanted or not scope.shows(w, snapshot) or (target and not _owned_by(w, target, scope.namespace))
                or (clusterqueue and w.cluster_queue != clusterqueue) or (localqueue and w.queue != localqueue)):
            continue
        ns, name = w.name.split("/", 1)
        cq_position, lq_position = queues.positions.get(w.name, (None, None))
        rows.append({"namespace": ns, "name": name, "localQueue": w.queue, "clusterQueue": w.cluster_queue,
                     "status": status, "positionInLocalQueue": lq_position, "positionInClusterQueue": cq_position,
                     "priority": w.priority, "age": _age(_created(w, snapshot), now)})
    headers = ["NAME", "LOCALQUEUE", "CLUSTERQUEUE", "STATUS", "POSITION IN LQ", "POSITION IN CQ", "PRIORITY", "AGE"]
    keys = ["name", "localQueue", "clusterQueue", "status", "positionInLocalQueue", "positionInClusterQueue",
            "priority", "age"]
    if scope.namespace is None:
        headers, keys = ["NAMESPACE", *headers], ["namespace", *keys]
    for row in rows if fmt == "text" else ():
        row["status"] = row["status"].upper()
    _emit(headers, rows, keys, fmt, "No workloads found" + (f" in namespace {scope.namespace}." if scope.namespace else "."))


@list_group.command("clusterqueues")
@_paths
@click.option("--active", type=click.Choice(["true", "false"], case_sensitive=False),
              help="Only ClusterQueues whose Active condition is this.")
@cycle_options
@guard
def clusterqueues(paths: tuple[str, ...], active: str | None, kubeconfig: str | None, context: str | None,
                  in_cluster: bool, policies: tuple[str, ...], config_path: str | None, time_budget: float | None,
                  fmt: str) -> None:
    """List ClusterQueues with their pending and admitted workloads and whether they are active."""
    snapshot, _, queues, created = _decide(paths, kubeconfig, context, in_cluster, policies, config_path, time_budget)
    now = time.time()
    rows = []
    for name, status in queues.cluster_queues.items():
        if active is not None and status.active.status.lower() != active.lower():
            continue
        rows.append({"name": name, "cohort": snapshot.cluster_queues[name].cohort, "pending": status.pending,
                     "admitted": status.admitted, "active": status.active.status.lower(),
                     "age": _age(created.get(("ClusterQueue", name)), now),
                     "status": {**status.to_dict(), "conditions": [status.active.to_dict()]}})
    _emit(["NAME", "COHORT", "PENDING WORKLOADS", "ADMITTED WORKLOADS", "ACTIVE", "AGE"], rows,
          ["name", "cohort", "pending", "admitted", "active", "age"], fmt, "No ClusterQueues found.")


@list_group.command("localqueues")
@_paths
@scope_options
@click.option("--clusterqueue", "-c", metavar="NAME", help="Only LocalQueues of this ClusterQueue.")
@cycle_options
@guard
def localqueues(paths: tuple[str, ...], scope: Scope, clusterqueue: str | None, kubeconfig: str | None,
                context: str | None, in_cluster: bool, policies: tuple[str, ...], config_path: str | None,
                time_budget: float | None, fmt: str) -> None:
    """List LocalQueues with their ClusterQueue and their pending and admitted workloads."""
    if scope.selector is not None:
        raise click.UsageError("-l/--selector selects workloads; list localqueues takes -n or -A")
    scope = _listing_scope(scope, paths, kubeconfig, context, in_cluster)
    _, _, queues, created = _decide(paths, kubeconfig, context, in_cluster, policies, config_path, time_budget)
    now = time.time()
    rows = [{"namespace": s.namespace, "name": s.name, "clusterQueue": s.cluster_queue, "pending": s.pending,
             "admitted": s.admitted, "active": s.active.status.lower(),
             "age": _age(created.get(("LocalQueue", f"{s.namespace}/{s.name}")), now),
             "status": {**s.to_dict(), "conditions": [s.active.to_dict()]}}
            for s in queues.local_queues.values()
            if (scope.namespace is None or s.namespace == scope.namespace)
            and (clusterqueue is None or s.cluster_queue == clusterqueue)]
    headers = ["NAME", "CLUSTERQUEUE", "PENDING WORKLOADS", "ADMITTED WORKLOADS", "AGE"]
    keys = ["name", "clusterQueue", "pending", "admitted", "age"]
    if scope.namespace is None:
        headers, keys = ["NAMESPACE", *headers], ["namespace", *keys]
    _emit(headers, rows, keys, fmt, "No LocalQueues found" + (f" in namespace {scope.namespace}." if scope.namespace else "."))


# The shared -n/-A help speaks of plan and explain (every namespace by default): say what list does.
for _command in (workloads, localqueues):
    for _param in _command.params:
        if _param.name == "namespace":
            _param.help = ("List only namespace NS (default: the kubeconfig context's namespace, or default, "
                           "on a live cluster; every namespace of snapshot files).")
        elif _param.name == "all_namespaces":
            _param.help = "List every namespace."
