"""The ``clueue`` command group: the top of the command line, with clueue's way of printing
click's own errors. The commands are registered on it by :mod:`clueue.adapters.cli`."""

from __future__ import annotations

import sys
from typing import Any

import click

from .options import EXIT_INTERRUPTED

__all__ = ["main"]


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
