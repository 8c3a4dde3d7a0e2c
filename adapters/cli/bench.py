"""``clueue bench``: measure decision cycles, decision quality and a virtual-time replay.

Only parses options and calls :mod:`clueue.bench`; docs/benchmarks.md explains every number.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from clueue.bench.compare import ReportError, compare, load_report, render_comparison
from clueue.bench.replay import latency_ms
from clueue.bench.report import environment, progress_bar, render, to_json
from clueue.bench.runner import BenchOptions, run_benchmarks, units
from clueue.bench.scenarios import SCENARIO_NAMES, generate, write_snapshot
from clueue.engine import AdapterError, ClueueError, load_policy

__all__ = ["bench", "bench_compare"]


class _Latency(click.ParamType):
    name = "latency"

    def convert(self, value: str, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            latency_ms(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)
        return value


def _stdout() -> Console:
    """Tables on stdout: as wide as the terminal, or 160 columns when piped."""
    return Console(file=sys.stdout, width=None if sys.stdout.isatty() else 160)


@click.command(short_help="Benchmark decision cycles on generated scenarios; prints a report.")
@click.option("--scenario", "scenarios", multiple=True, default=("baseline",), show_default=True,
              type=click.Choice([*SCENARIO_NAMES, "dispatch", "preemption", "whatif", "all"]),
              help="Scenario to run; repeatable; 'all' runs every one but dispatch (MultiKueue's dispatchers "
                   "compared in a simulation of 10 workers; --scale scales its 2,000 workloads) and preemption "
                   "(victims per preemptor, clueue against a model of Kueue's order, on 500 small clusters "
                   "from --seed; --scale scales their number) and whatif (the time to answer \"what would it "
                   "take\" for every pending workload of the baseline backlog; --scale scales the backlog).")
@click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True, help="Cycles per scenario.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the scenario generator.")
@click.option("--scale", type=click.FloatRange(min=0.0, min_open=True, max=1.0), default=1.0, show_default=True,
              help="Fraction of each ClusterQueue's workloads to generate, for quick runs.")
@click.option("--replay", is_flag=True, help="Also replay each scenario in virtual time.")
@click.option("--replay-latency", type=_Latency(), default="measured", show_default=True, metavar="measured|zero|<N>ms",
              help="measured: a cycle's decision takes effect after its wall time; zero: instantly; "
                   "<N>ms: after N ms each, to see how the outcome depends on the engine's speed.")
@click.option("--replay-interval", type=click.IntRange(min=0), default=0, show_default=True, metavar="MS",
              help="Least virtual time between the starts of two replay cycles; 0 runs the next cycle as soon as "
                   "the last one's decision is applied, as Kueue's scheduler does (more: a batching window).")
@click.option("--replay-runs", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="Replays per scenario; figures and targets are then the median over the runs, "
                   "as measured latency makes each run differ.")
@click.option("--time-budget", type=click.FloatRange(min=0.01), default=10.0, show_default=True, metavar="SECONDS",
              help="Solver time budget of each cycle.")
@click.option("--write-snapshot", "write_dir", metavar="DIR",
              help="Write each scenario as snapshot files under DIR/<scenario>/ and exit.")
@click.option("-o", "--output", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="Output format; json is the report bench-compare reads.")
@click.option("--policy", "policies", multiple=True, metavar="PATH",
              help="Extra policy file or directory, as for `clueue plan`; a file named like a built-in one replaces it.")
@click.option("--in-process", is_flag=True, help="Run in this process (memory figures then add up across scenarios).")
@click.option("--live", is_flag=True,
              help="Measure `clueue controller` live instead, as a process of its own against an API server: "
                   "gated Pods ungated per second, then the scenario as Workload objects at their arrival times.")
@click.option("--kubeconfig", metavar="PATH", help="--live: the cluster to run against (default: start a test control "
                                                     "plane from tests/testenv of this checkout).")
@click.option("--live-parts", type=click.Choice(["all", "pods", "workloads"]), default="all", show_default=True,
              help="--live: which parts to run: (a) pods, (b) the scenario's workloads, or both.")
@click.option("--pods", type=click.IntRange(min=1), default=5000, show_default=True, help="--live: gated Pods to create.")
@click.option("--clients", type=click.IntRange(min=1), default=8, show_default=True,
              help="--live: client threads writing at once (the same for Pods, Workloads and the write-rate probe).")
@click.option("--live-timeout", type=click.FloatRange(min=1), default=900.0, show_default=True, metavar="SECONDS",
              help="--live: longest wait for the controller in each part; the report then says what it got done.")
@click.option("--profile-controller", metavar="FILE",
              help="--live: run the controller under cProfile; statistics go to FILE.pods and FILE.workloads.")
@click.option("--controller-arg", "controller_args", multiple=True, metavar="ARG",
              help="--live: one more argument for `clueue controller` (repeatable), e.g. --controller-arg=--log-format=json.")
@click.option("--decision-log", is_flag=True, help="Measure recording instead: bytes and milliseconds per cycle of the "
              "decision log over --cycles cycles of a changing cluster of the --scenario's shape (use --scale 0.1).")
@click.option("--cycles", type=click.IntRange(min=1), default=1000, show_default=True,
              help="--decision-log: cycles to record.")
def bench(scenarios: tuple[str, ...], repeat: int, seed: int, scale: float, replay: bool, replay_latency: str,
          replay_interval: int, replay_runs: int, time_budget: float, write_dir: str | None, fmt: str,
          policies: tuple[str, ...], in_process: bool, live: bool, kubeconfig: str | None, live_parts: str, pods: int,
          clients: int, live_timeout: float, profile_controller: str | None, controller_args: tuple[str, ...],
          decision_log: bool, cycles: int) -> None:
    """Benchmark decision cycles against Kueue's performance shapes and a greedy reference.

    Reads no cluster: it generates its scenarios. Writes only to standard output:
    a table (with a progress bar on stderr) or, with -o json, a JSON report for comparing commits;
    with --write-snapshot, the scenarios' snapshot files under DIR instead. Exits 0 whether or not
    targets are met (the report says which are), 1 if a scenario failed to run.
    """
    names = list(SCENARIO_NAMES) if "all" in scenarios else list(dict.fromkeys(scenarios))
    if "dispatch" in names:
        if len(names) != 1:
            raise click.UsageError("--scenario dispatch runs alone")
        from clueue.bench.dispatch import WORKLOADS, dispatch_benchmark, render_dispatch
        err = Console(stderr=True)
        said: set[tuple[str, int]] = set()

        def say(dispatcher: str, done: int, all_: int) -> None:
            if done % 500 == 0 and (dispatcher, done) not in said:
                said.add((dispatcher, done))
                err.print(f"[dim]{dispatcher}: {done}/{all_} admitted[/]")
        result = dispatch_benchmark(workloads=max(1, round(WORKLOADS * scale)), seed=seed,
                                    time_budget=min(time_budget, 0.1), progress=say)
        click.echo(json.dumps(result, indent=2) if fmt == "json" else render_dispatch(result))
        return
    if "whatif" in names:
        if len(names) != 1:
            raise click.UsageError("--scenario whatif runs alone")
        from clueue.bench.whatif import render_whatif, whatif_benchmark
        result = whatif_benchmark(seed=seed, scale=scale, time_budget=time_budget)
        click.echo(json.dumps(result, indent=2) if fmt == "json" else render_whatif(result))
        return
    if "preemption" in names:
        if len(names) != 1:
            raise click.UsageError("--scenario preemption runs alone")
        from clueue.bench.preemption import render_victims, victim_benchmark
        result = victim_benchmark(seeds=max(1, round(500 * scale)), first=seed)
        click.echo(json.dumps(result, indent=2) if fmt == "json" else render_victims(result))
        return
    if decision_log:
        if len(names) != 1:
            raise click.UsageError("--decision-log runs one --scenario")
        from clueue.bench.decisionlog import decision_log_benchmark, render_log_bench
        err = Console(stderr=True)
        result = decision_log_benchmark(cycles=cycles, scenario=names[0], scale=scale, seed=seed,
                                        time_budget=time_budget, progress=lambda m: err.print(f"[dim]{m}[/]"))
        click.echo(json.dumps(result.to_dict(), indent=2) if fmt == "json" else render_log_bench(result))
        return
    if live:
        if len(names) != 1:
            raise click.UsageError("--live runs one --scenario")
        from clueue.bench.live import LiveOptions  # needs the kube extra: imported only when asked for

        _live(LiveOptions(kubeconfig=kubeconfig, pods=pods if live_parts != "workloads" else 0, clients=clients,
                          scenario=names[0] if live_parts != "pods" else None, seed=seed, scale=scale,
                          timeout_s=live_timeout, profile=profile_controller, controller_args=controller_args), fmt)
        return
    if write_dir:
        for name in names:
            for path in write_snapshot(generate(name, seed=seed, scale=scale), f"{write_dir}/{name}"):
                click.echo(str(path))
        return
    options = BenchOptions(repeat=repeat, seed=seed, scale=scale, time_budget=time_budget, replay=replay,
                           latency=replay_latency, interval_ms=replay_interval, replay_runs=replay_runs,
                           policies=tuple(str(Path(p).resolve()) for p in policies))
    try:
        load_policy(options.policies)  # fail here, not in every benchmark process
    except ClueueError as e:
        raise click.ClickException(str(e)) from None
    err = Console(stderr=True)
    env = environment()
    with progress_bar(err, names, units(options)) as update:
        results = run_benchmarks(names, options, progress=update, isolate=not in_process)
    if fmt == "json":
        click.echo(to_json(results, env), nl=False)
    else:
        render(results, _stdout())
    if any("error" in r for r in results):
        sys.exit(1)


def _live(options: Any, fmt: str) -> None:
    """Run the live benchmark (``options``: a LiveOptions); progress lines on stderr, the report on stdout."""
    from clueue.bench.live import render_live, run_live

    err = Console(stderr=True)

    def interrupted(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # so that SIGTERM stops the controller and the control plane too

    previous = signal.signal(signal.SIGTERM, interrupted)
    try:
        report = run_live(options, say=lambda m: err.print(f"[dim]{m}[/]"))
    except AdapterError as e:
        raise click.ClickException(str(e)) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    if fmt == "json":
        click.echo(json.dumps(report, indent=2))
    else:
        render_live(report, _stdout())


@click.command("bench-compare", short_help="Compare `clueue bench -o json` reports; writes nothing.")
@click.argument("reports", nargs=-1, required=True, metavar="REFERENCE.json OTHER.json...")
@click.option("-o", "--output", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="Output format.")
@click.option("--fail-on-regression", is_flag=True,
              help="Exit 1 when a target the reference meets is missed, or a new defect against greedy appears.")
def bench_compare(reports: tuple[str, ...], fmt: str, fail_on_regression: bool) -> None:
    """Compare `clueue bench -o json` reports, the first one as the reference.

    Reads the report files; writes only to standard output. Lines up each scenario's figures
    with their change against the reference, and the
    targets with whether each report meets them; warns when reports differ in seed, scale,
    repeats, time budget or replay settings. Compare runs made one after another: timings
    move by 10-20% between runs on a shared machine.
    """
    if len(reports) < 2:
        raise click.UsageError("give at least two reports: the reference, then the ones to compare with it")
    try:
        comparison = compare([load_report(p) for p in reports])
    except ReportError as e:
        raise click.ClickException(str(e)) from None
    if fmt == "json":
        click.echo(json.dumps(comparison.to_dict(), indent=2))
    else:
        render_comparison(comparison, _stdout())
    if fail_on_regression and comparison.regressions:
        sys.exit(1)
