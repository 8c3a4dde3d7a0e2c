"""Benchmark reports: tables for people (``rich``), JSON for comparing commits.

The JSON document is ``apiVersion: clueue.dev/v1, kind: BenchReport`` with ``environment``
(machine, versions, digests of the engine and policy sources, git commit when known) and one
entry per scenario: ``cycle`` (see :func:`clueue.bench.cycle.cycle_benchmark`), ``replay``
when asked (see :func:`clueue.bench.replay.replay`), or ``error``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

__all__ = ["environment", "to_json", "render", "progress_bar", "met_cell", "REPORT_VERSION"]

REPORT_VERSION = "clueue.dev/v1"


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _source_digest(package: str, suffix: str) -> str | None:
    """sha256 over the package's source files ending in ``suffix``, sorted by name."""
    try:
        module = __import__(package, fromlist=["_"])
    except ImportError:
        return None
    folder = Path(module.__file__ or "").parent
    h = hashlib.sha256()
    for p in sorted(folder.glob(f"*{suffix}")):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return "sha256:" + h.hexdigest()[:16]


def _git_commit() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5, check=False)
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--", "engine", "policies"],
                               capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def environment() -> dict[str, Any]:
    """Where and with what the benchmark ran."""
    return {
        "python": platform.python_version(), "clingo": _version("clingo"), "clueue": _version("clueue"),
        "platform": platform.platform(), "cpus": os.cpu_count(),
        "gitCommit": _git_commit(),
        "engineDigest": _source_digest("clueue.engine", ".py"),
        "policyDigest": _source_digest("clueue.policies", ".lp"),
        "argv": sys.argv[1:],
    }


def to_json(results: Sequence[Mapping[str, Any]], env: Mapping[str, Any] | None = None) -> str:
    """The JSON report (stable key order, two-space indent)."""
    doc = {"apiVersion": REPORT_VERSION, "kind": "BenchReport", "environment": dict(env or environment()),
           "scenarios": list(results)}
    return json.dumps(doc, indent=2) + "\n"


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------

def _s(v: float) -> str:
    return f"{v * 1000:.0f} ms" if v < 1 else f"{v:.2f} s"


def _timing(t: Mapping[str, float]) -> str:
    return _ranged(t["median"], t, _s)


def _ranged(value: float, spread: Mapping[str, float] | None, shown: Callable[[float], str]) -> str:
    """``value`` as ``shown``, followed by the [min–max] of ``spread`` when they differ."""
    if spread and spread["max"] > spread["min"]:
        return f"{shown(value)} [{shown(spread['min'])}–{shown(spread['max'])}]"
    return shown(value)


def _res(r: Mapping[str, float], key: str = "cpu") -> str:
    return f"{r.get(key, 0):g}"


def met_cell(met: bool) -> str:
    """A target's status as a table cell."""
    return "[green]met[/]" if met else "[bold red]MISSED[/]"


def render(results: Sequence[Mapping[str, Any]], console: Console) -> None:
    """Print the cycle tables (time, then decision quality), the targets and the replays."""
    ok = [r for r in results if "error" not in r]
    timing = Table(title="One decision cycle over the whole backlog: seconds, median \\[min–max] over repeats")
    for col in ("scenario", "pending", "wall", "compile", "ground", "solve", "explain", "peak RSS"):
        timing.add_column(col, justify="left" if col == "scenario" else "right")
    quality = Table(title="Decision quality: admitted this cycle (cpu = CPUs requested), greedy reference, upper bound")
    for col in ("scenario", "admitted", "cpu", "greedy", "greedy cpu", "bound cpu", "gap", "greedy gap",
                "optimal", "rank order vs greedy"):
        quality.add_column(col, justify="left" if col in ("scenario", "rank order vs greedy") else "right")
    for r in ok:
        c = r["cycle"]
        t = c["timings"]
        timing.add_row(r["scenario"], str(c["pending"]), _timing(t["wall"]), _timing(t["compile"]),
                       _timing(t["ground"]), _timing(t["solve"]), _timing(t["explain"]),
                       f"{c['memory']['peakRssMB']:.0f} MB")
        verdict = c["rankOrder"]["verdict"]
        shown = ("[bold red]DEFECT: worse[/]" if c["defect"] else "[green]better[/]" if verdict == "better" else verdict)
        if c["rankOrder"]["firstDifference"]:
            shown += f" (first at #{c['rankOrder']['position']})"
        optimal = "yes" if c["clueue"]["optimal"] else ("[red]budget hit[/]" if c["clueue"]["budgetExhausted"] else "no")
        quality.add_row(r["scenario"], str(c["clueue"]["admitted"]), _res(c["clueue"]["resources"]),
                        str(c["greedy"]["admitted"]), _res(c["greedy"]["resources"]), _res(c["bound"]["resources"]),
                        f"{c['gap']['clueue'].get('cpu', 0.0):.2%}", f"{c['gap']['greedy'].get('cpu', 0.0):.2%}",
                        optimal, shown)
    if ok:
        console.print(timing)
        console.print(quality)
    placed = [r for r in ok if "placement" in r["cycle"]]
    if placed:
        table = Table(title="Placement on nodes: clueue against greedy per-pod first fit (kube-scheduler with coscheduling)")
        for col in ("scenario", "gangs", "greedy gangs", "pods", "greedy pods", "GPUs stranded", "greedy stranded",
                    "of which held by waiting pods"):
            table.add_column(col, justify="left" if col == "scenario" else "right")
        for r in placed:
            ours, theirs = r["cycle"]["placement"]["clueue"], r["cycle"]["placement"]["greedy"]
            table.add_row(r["scenario"], str(ours["gangsAdmitted"]), str(theirs["gangsAdmitted"]),
                          str(ours["podsPlaced"]), str(theirs["podsPlaced"]), str(ours["gpusStranded"]),
                          str(theirs["gpusStranded"]), str(theirs["gpusHeldByWaitingPods"]))
        console.print(table)

    targets = Table(title="Targets")
    for col in ("scenario", "what", "target", "measured", ""):
        targets.add_column(col)
    for r in results:
        if "error" in r:
            targets.add_row(r["scenario"], "benchmark", "runs", "error", met_cell(False))
            continue
        for part in ("cycle", "replay"):
            for t in r.get(part, {}).get("targets", []):
                targets.add_row(r["scenario"], f"{part}: {t['name']}", t["target"], str(t["value"]), met_cell(t["met"]))
    console.print(targets)

    replays = [r for r in ok if "replay" in r]
    if replays:
        # One command replays every scenario with the same settings: they go in the title.
        first = replays[0]["replay"]
        runs = first.get("runs", 1)
        table = Table(title=f"Replay in virtual time ({first['latency']} latency, interval {first['minIntervalMs']} ms"
                            + (f", median \\[min–max] over {runs} runs" if runs > 1 else "")
                            + "; admission: average seconds from arrival)")
        for col in ("scenario", "cycles", "cycle wall", "makespan", "limit", "ratio", "utilization",
                    "small", "medium", "large", "other classes", "never"):
            table.add_column(col, justify="left" if col in ("scenario", "other classes") else "right")
        for r in replays:
            p = r["replay"]
            adm = p["admissionSeconds"]
            spreads = p.get("spread", {})
            kueue = [_ranged(adm[c]["average"], spreads.get("admissionSeconds", {}).get(c), "{:.2f}".format) if c in adm else "–"
                     for c in ("small", "medium", "large")]
            other = ", ".join(f"{c} {v['average']:.2f}" for c, v in adm.items() if c not in ("small", "medium", "large"))
            table.add_row(r["scenario"], str(p["cycles"]),
                          _timing(p["cycleWallSeconds"]), f"{p['makespanSeconds']:.1f} s", f"{p['physicalLimitSeconds']:.1f} s",
                          _ranged(p["makespanOverLimit"], spreads.get("makespanOverLimit"), "{:.2f}x".format) if p["makespanOverLimit"] else "–",
                          _ranged(p["utilization"], spreads.get("utilization"), "{:.1%}".format), *kueue, other, str(p["neverAdmitted"]))
        console.print(table)
    for r in results:
        if "error" in r:
            console.print(f"[bold red]{r['scenario']}: error[/]\n{r['error']}")


@contextmanager
def progress_bar(console: Console, names: Sequence[str], units: float) -> Iterator[Any]:
    """A progress bar per scenario; yields the callback ``(scenario, what, done, total)``."""
    with Progress(TextColumn("{task.fields[scenario]:<14}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=False) as bar:
        tasks: dict[str, TaskID] = {n: bar.add_task("waiting", total=units, scenario=n) for n in names}

        def update(scenario: str, what: str, done: float, total: float) -> None:
            bar.update(tasks[scenario], description=what, completed=done, total=total)

        yield update
