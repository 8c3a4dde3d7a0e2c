"""``clueue facts``: the facts a snapshot compiles to, commented, for policy authors."""

from __future__ import annotations

import click

from clueue.engine import compile_snapshot
from clueue.engine.facts import render_facts

from ..files import load_config, load_snapshot
from ..reference import facts_reference
from .options import config_option, guard

__all__ = ["facts"]


@click.command(short_help="Print the facts of a snapshot, for policy authors; writes nothing.")
@click.argument("paths", nargs=-1, metavar="PATH...")
@config_option
@click.option("--reference", is_flag=True, help="Print the reference of every fact predicate instead.")
@guard
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
