"""``clueue bench --scenario whatif``: the time to answer "what would it take" for every pending
workload of the ``baseline`` backlog (engine/whatif.py; target at most 2 s, docs/benchmarks.md).

One decision cycle over the backlog, then the checked suggestions for every workload it leaves
pending, under the what-if budget; reported: the cycle's time, the what-if's time, how many
pending workloads got an answer before the budget ran out.
"""

from __future__ import annotations

import time
from typing import Any

from clueue.engine import Config, load_policy
from clueue.engine.cycle import run_cycle
from clueue.engine.whatif import what_if

from .scenarios import generate

__all__ = ["whatif_benchmark", "render_whatif"]

TARGET_SECONDS = 2.0


def whatif_benchmark(*, seed: int = 0, scale: float = 1.0, time_budget: float = 10.0,
                     whatif_budget: float = 60.0) -> dict[str, Any]:
    """Plan the ``baseline`` backlog, then answer "what would it take" for every pending workload."""
    snapshot = generate("baseline", seed=seed, scale=scale).snapshot()
    policy = load_policy(())
    config = Config(time_budget=time_budget, whatif_budget=whatif_budget)
    started = time.monotonic()
    plan = run_cycle(snapshot, policy, config)
    pending = [e.name for e in plan.workloads if e.state == "pending"]
    cycle = time.monotonic() - started
    started = time.monotonic()
    out = what_if(snapshot, policy, config, plan, pending)
    seconds = time.monotonic() - started
    answered = sum(1 for v in out.values() if not any(s.code == "WhatIfCutShort" for s in v))
    quota = sum(1 for v in out.values() if any(s.code == "NeedsQuota" for s in v))
    return {"scenario": "baseline", "seed": seed, "scale": scale, "workloads": len(plan.workloads),
            "pending": len(pending), "cycleSeconds": round(cycle, 3), "whatIfSeconds": round(seconds, 3),
            "answered": answered, "withQuotaSuggestion": quota,
            "whatIfBudgetSeconds": whatif_budget, "targetSeconds": TARGET_SECONDS,
            "met": seconds <= TARGET_SECONDS and answered == len(pending)}


def render_whatif(r: dict[str, Any]) -> str:
    return (f"what-if over the {r['scenario']} backlog (seed {r['seed']}, scale {r['scale']}): "
            f"{r['workloads']} workloads, {r['pending']} pending\n"
            f"  cycle {r['cycleSeconds']:.3f} s; what-if {r['whatIfSeconds']:.3f} s, "
            f"{r['answered']}/{r['pending']} answered within the budget of {r['whatIfBudgetSeconds']} s "
            f"({r['withQuotaSuggestion']} with a quota suggestion)\n"
            f"  target: every pending workload answered in at most {r['targetSeconds']} s: "
            f"{'met' if r['met'] else 'NOT met'}\n")
