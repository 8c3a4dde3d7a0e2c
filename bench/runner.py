"""Running benchmarks, each scenario in a fresh process so that memory is measured per scenario.

A child process (``spawn``: a fresh interpreter, nothing inherited) generates the scenario,
runs the cycle benchmark and, if asked, the replay, and sends progress and the result back on
a queue. ``isolate=False`` runs in this process instead (for tests and profiling).
"""

from __future__ import annotations

import multiprocessing as mp
import queue as queue_module
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from clueue.engine import load_policy

from .cycle import cycle_benchmark
from .fairshare import ShareTimeline
from .replay import combine_runs, replay
from .scenarios import generate

__all__ = ["BenchOptions", "run_scenario", "run_benchmarks"]

#: (scenario, what is happening, completed units, total units) - units are cycles and replay %.
Progress = Callable[[str, str, float, float], None]


@dataclass(frozen=True)
class BenchOptions:
    repeat: int = 3
    seed: int = 0
    scale: float = 1.0
    time_budget: float = 10.0
    replay: bool = False
    latency: str = "measured"
    interval_ms: int = 0  # least virtual time between two replay cycles
    replay_runs: int = 1  # replays per scenario, combined by median (replay.combine_runs)
    policies: tuple[str, ...] = ()  # extra or overriding policy files, as for `clueue plan --policy`


def units(options: BenchOptions) -> float:
    """Progress units of one scenario: one per cycle, plus 100 per replay."""
    return options.repeat + (100.0 * options.replay_runs if options.replay else 0.0)


def run_scenario(name: str, options: BenchOptions, progress: Progress | None = None) -> dict[str, Any]:
    """Generate scenario ``name`` and benchmark it in this process."""
    report = progress or (lambda *_: None)
    total = units(options)
    report(name, "generating", 0, total)
    scenario = generate(name, seed=options.seed, scale=options.scale)
    policy = load_policy(options.policies)
    done = [0.0]

    def on_cycle(what: str) -> None:
        if what.startswith("cycle "):  # "cycle i/n" is about to run: i - 1 are done
            done[0] = float(what.split()[1].split("/")[0]) - 1
        report(name, what, done[0], total)

    result: dict[str, Any] = {"scenario": name, "cycle": cycle_benchmark(
        scenario, repeat=options.repeat, time_budget=options.time_budget, policy=policy, progress=on_cycle)}
    done[0] = float(options.repeat)
    report(name, "cycles done", done[0], total)
    if options.replay:
        runs = []
        for i in range(options.replay_runs):
            run = f"replay {i + 1}/{options.replay_runs}" if options.replay_runs > 1 else "replay"

            def on_replay(finished: int, all_: int, run: str = run, before: float = options.repeat + 100.0 * i) -> None:
                report(name, f"{run}: {finished}/{all_} finished", before + 100.0 * finished / max(all_, 1), total)
            # with fair sharing on, how fair the run was (fairshare.py), per run
            timeline = ShareTimeline(scenario.snapshot()) if scenario.snapshot().kueue_settings.fair_sharing else None
            runs.append(replay(scenario, time_budget=options.time_budget, latency=options.latency,
                               min_interval_ms=options.interval_ms, policy=policy, progress=on_replay,
                               observe=timeline))
            if timeline is not None:
                result.setdefault("fairSharing", []).append(timeline.summary(runs[-1]))
        result["replay"] = combine_runs(runs)
    report(name, "done", total, total)
    return result


def _child(name: str, options: BenchOptions, out: Any) -> None:
    try:
        result = run_scenario(name, options, lambda *a: out.put(("progress", a)))
        out.put(("result", result))
    except BaseException:  # noqa: BLE001 - everything goes back to the parent as text
        out.put(("error", traceback.format_exc()))


def run_benchmarks(names: Sequence[str], options: BenchOptions, *, progress: Progress | None = None,
                   isolate: bool = True) -> list[dict[str, Any]]:
    """Benchmark each scenario, in its own process when ``isolate``; results in order.

    A scenario whose child fails yields ``{"scenario": name, "error": traceback}``.
    """
    results = []
    for name in names:
        if not isolate:
            results.append(run_scenario(name, options, progress))
            continue
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        proc = ctx.Process(target=_child, args=(name, options, out), name=f"clueue-bench-{name}")
        proc.start()
        result: dict[str, Any] | None = None
        try:
            while result is None:
                try:
                    kind, payload = out.get(timeout=0.5)
                except queue_module.Empty:
                    if not proc.is_alive():
                        result = {"scenario": name, "error": f"benchmark process exited with code {proc.exitcode}"}
                    continue
                if kind == "progress":
                    if progress:
                        progress(*payload)
                elif kind == "result":
                    result = payload
                else:
                    result = {"scenario": name, "error": payload}
        finally:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
                proc.join()
        results.append(result)
    return results
