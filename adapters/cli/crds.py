"""``clueue crds``: the CustomResourceDefinitions of the kinds clueue reads and writes."""

from __future__ import annotations

import click

__all__ = ["crds"]


@click.command(short_help="Print the CRDs of the kinds clueue reads and writes.")
def crds() -> None:
    """Print the CustomResourceDefinitions of the kinds clueue reads and writes (for kubectl apply).

    Reads nothing; writes only to standard output.
    """
    from importlib import resources
    files = sorted((p for p in resources.files("clueue.adapters").joinpath("crds").iterdir() if p.name.endswith(".yaml")),
                   key=lambda p: p.name)
    click.echo("---\n".join(p.read_text(encoding="utf-8") for p in files), nl=False)
