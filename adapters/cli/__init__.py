"""The ``clueue`` command line: parses options and calls the library, nothing more.

One module per command (or command group), each importing the options it shares with the
others from :mod:`.options` and none from another command's module; this package only registers
them on the ``clueue`` group of :mod:`.group`. ``main`` is the console script.
"""

from __future__ import annotations

from . import apply, audit, bench, controller, crds, dashboard, explain, facts, listing, plan, policy, snapshot
from .group import main

__all__ = ["main"]

for command in (plan.plan, explain.explain, snapshot.snapshot, crds.crds, apply.apply, facts.facts, policy.policy,
                bench.bench, bench.bench_compare, listing.list_group, controller.controller, audit.audit,
                dashboard.dashboard):
    main.add_command(command)
del command
