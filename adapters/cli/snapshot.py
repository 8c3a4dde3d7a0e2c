"""``clueue snapshot``: a live cluster's objects as one List, to replay offline."""

from __future__ import annotations

import click

from ..render import dump
from .options import cluster_options, connect_api, find_cluster, guard

__all__ = ["snapshot"]


@click.command(short_help="Print a live cluster's objects, to replay offline; writes nothing.")
@cluster_options
@click.option("-o", "--output", "fmt", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True,
              help="Output format.")
@guard
def snapshot(kubeconfig: str | None, context: str | None, in_cluster: bool, fmt: str) -> None:
    """Print a live cluster's objects (every kind clueue reads) as one List, to replay offline.

    Reads the cluster of the kubeconfig; writes only to standard output.
    """
    from ..kube import snapshot_documents
    documents, notices = snapshot_documents(connect_api(*find_cluster(kubeconfig, context, in_cluster)))
    for notice in notices:
        click.echo(f"notice: {notice}", err=True)
    click.echo(dump({"apiVersion": "v1", "kind": "List", "items": [dict(d.body) for d in documents]}, fmt), nl=False)
