"""Compare benchmark reports of two or more commits (``clueue bench-compare``).

The first report is the reference. For every scenario, the comparison lines up the figures
people compare between commits (cycle time and memory, decision quality, the replay's
makespan, utilization and admission times), each with its change against the reference,
and the targets with whether each is met in every report. A target met in the reference and
missed later, or a new defect against greedy, is a regression.

Timings move by 10-20% between runs on a shared machine (docs/benchmarks.md): compare runs
made one after another, and read a small change in time as noise. Decision-quality figures
are deterministic for a given scenario, seed and scale; replay figures with measured latency
are not (the engine's speed is part of the simulation).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .report import REPORT_VERSION, met_cell

__all__ = ["ReportError", "Report", "Metric", "Comparison", "load_report", "compare", "render_comparison", "METRICS"]


class ReportError(ValueError):
    """A file is not a readable benchmark report; the message names the file and field."""


@dataclass(frozen=True)
class Report:
    """One ``BenchReport``: where it came from, its environment and its entries by scenario."""

    path: str
    environment: Mapping[str, Any]
    scenarios: Mapping[str, Mapping[str, Any]]

    @property
    def label(self) -> str:
        """The git commit the report was made at, or its file name."""
        return str(self.environment.get("gitCommit") or Path(self.path).name)


def load_report(path: str | Path) -> Report:
    """Read and check a ``clueue bench -o json`` report.

    Raises:
        ReportError: the file cannot be read, is not JSON, or is not a BenchReport of this
            version; the message names the file and the field.
    """
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise ReportError(f"{path}: cannot read: {e.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ReportError(f"{path}: not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ReportError(f"{path}: not a BenchReport: the document is not an object")
    for field, want in (("kind", "BenchReport"), ("apiVersion", REPORT_VERSION)):
        if doc.get(field) != want:
            raise ReportError(f"{path}: {field}: expected {want!r}, found {doc.get(field)!r}")
    entries = doc.get("scenarios")
    if not isinstance(entries, list):
        raise ReportError(f"{path}: scenarios: expected a list")
    scenarios: dict[str, Mapping[str, Any]] = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("scenario"), str):
            raise ReportError(f"{path}: scenarios[{i}].scenario: expected a scenario name")
        scenarios[entry["scenario"]] = entry
    environment = doc.get("environment")
    return Report(str(path), environment if isinstance(environment, dict) else {}, scenarios)


def _get(entry: Mapping[str, Any], *keys: str) -> Any:
    value: Any = entry
    for key in keys:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def _evictions(entry: Mapping[str, Any]) -> int | None:
    counts = _get(entry, "replay", "evictions")
    return sum(counts.values()) if isinstance(counts, Mapping) else None


@dataclass(frozen=True)
class Metric:
    """A figure of a scenario entry: how to read it, show it, and which way is better."""

    part: str  # "cycle" or "replay"
    name: str
    read: Callable[[Mapping[str, Any]], Any]
    unit: str = ""  # appended to the shown value
    better: str = "lower"  # "lower", "higher" or "" (neither)
    digits: int = 2


def _at(*keys: str) -> Callable[[Mapping[str, Any]], Any]:
    return lambda entry: _get(entry, *keys)


def _percent(share: Any) -> float | None:
    return None if share is None else 100.0 * share


#: The figures compared, in the order shown.
METRICS: tuple[Metric, ...] = (
    Metric("cycle", "wall (median)", _at("cycle", "timings", "wall", "median"), " s", digits=3),
    Metric("cycle", "peak RSS", _at("cycle", "memory", "peakRssMB"), " MB", digits=0),
    Metric("cycle", "admitted", _at("cycle", "clueue", "admitted"), better="higher", digits=0),
    Metric("cycle", "admitted cpu", _at("cycle", "clueue", "resources", "cpu"), better="higher", digits=0),
    Metric("cycle", "gap to bound (cpu)", lambda e: _percent(_get(e, "cycle", "gap", "clueue", "cpu")), "%"),
    Metric("cycle", "rank order vs greedy", _at("cycle", "rankOrder", "verdict"), better=""),
    Metric("replay", "cycles", _at("replay", "cycles"), better="", digits=0),
    Metric("replay", "cycle wall (median)", _at("replay", "cycleWallSeconds", "median"), " s", digits=3),
    Metric("replay", "makespan / limit", _at("replay", "makespanOverLimit"), "x"),
    Metric("replay", "utilization", lambda e: _percent(_get(e, "replay", "utilization")), "%", better="higher", digits=1),
    *(Metric("replay", f"admission {c} (avg)", _at("replay", "admissionSeconds", c, "average"), " s")
      for c in ("small", "medium", "large")),
    Metric("replay", "evictions", _evictions, digits=0),
)


#: What must be equal for two entries of a scenario to measure the same thing.
_SETTINGS: tuple[tuple[str, Callable[[Mapping[str, Any]], Any]], ...] = (
    ("seed", _at("cycle", "shape", "seed")),
    ("scale", _at("cycle", "shape", "scale")),
    ("workloads", _at("cycle", "shape", "workloads")),
    ("repeat", _at("cycle", "repeat")),
    ("time budget", _at("cycle", "timeBudgetSeconds")),
    ("replay latency", _at("replay", "latency")),
    ("replay interval", _at("replay", "minIntervalMs")),
    ("replay runs", _at("replay", "runs")),
)


@dataclass(frozen=True)
class Comparison:
    """Reports lined up by scenario.

    ``values[scenario][metric name]`` has one value per report (``None`` where absent);
    ``targets[scenario]`` maps ``"part: target"`` to whether each report met it (``None`` where
    absent); ``regressions`` and ``warnings`` are sentences for people.
    """

    reports: tuple[Report, ...]
    scenarios: tuple[str, ...]
    values: Mapping[str, Mapping[str, tuple[Any, ...]]]
    targets: Mapping[str, Mapping[str, tuple[bool | None, ...]]]
    regressions: tuple[str, ...]
    warnings: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """The comparison as a JSON-ready ``BenchComparison`` document."""
        return {"apiVersion": REPORT_VERSION, "kind": "BenchComparison",
                "reports": [{"path": r.path, "label": r.label, "environment": dict(r.environment)} for r in self.reports],
                "scenarios": {s: {"values": {m: list(v) for m, v in self.values[s].items()},
                                  "targets": {t: list(v) for t, v in self.targets[s].items()}}
                              for s in self.scenarios},
                "regressions": list(self.regressions), "warnings": list(self.warnings)}


def compare(reports: Sequence[Report]) -> Comparison:
    """Line up ``reports`` (the first is the reference) scenario by scenario."""
    scenarios = tuple(dict.fromkeys(s for r in reports for s in r.scenarios))
    values: dict[str, dict[str, tuple[Any, ...]]] = {}
    targets: dict[str, dict[str, tuple[bool | None, ...]]] = {}
    regressions: list[str] = []
    warnings: list[str] = []
    for s in scenarios:
        entries = [r.scenarios.get(s) for r in reports]
        present = [(r, e) for r, e in zip(reports, entries) if e is not None]
        if len(present) < len(reports):
            warnings.append(f"{s}: missing from " + ", ".join(r.path for r, e in zip(reports, entries) if e is None))
        for r, e in present:
            if "error" in e:
                warnings.append(f"{s}: {r.path} holds an error: {str(e['error']).splitlines()[0]}")
        for name, read in _SETTINGS:
            seen = {json.dumps(read(e)) for _, e in present if read(e) is not None}
            if len(seen) > 1:
                warnings.append(f"{s}: the reports differ in {name} ({', '.join(sorted(seen))}): "
                                "their figures do not measure the same thing")
        values[s] = {m.name: tuple(None if e is None else m.read(e) for e in entries) for m in METRICS
                     if any(e is not None and m.read(e) is not None for e in entries)}
        met: dict[str, list[bool | None]] = {}
        for i, e in enumerate(entries):
            for part in ("cycle", "replay"):
                for t in _get(e or {}, part, "targets") or ():
                    met.setdefault(f"{part}: {t['name']}", [None] * len(reports))[i] = bool(t["met"])
        targets[s] = {name: tuple(v) for name, v in met.items()}
        for name, v in targets[s].items():
            for r, now in zip(reports[1:], v[1:]):
                if v[0] is True and now is False:
                    regressions.append(f"{s}: {name}: met in {reports[0].label}, missed in {r.label}")
        for r, e in zip(reports[1:], entries[1:]):
            if _get(e or {}, "cycle", "defect") and not _get(entries[0] or {}, "cycle", "defect"):
                regressions.append(f"{s}: {r.label} admits less than greedy in rank order (a defect)")
    return Comparison(tuple(reports), scenarios, values, targets, tuple(regressions), tuple(warnings))


def _change(metric: Metric, reference: Any, value: Any) -> tuple[str, int]:
    """The change of ``value`` against ``reference`` as text, and its direction: 1 better,
    -1 worse, 0 neither (equal, not comparable, or a figure with no better side)."""
    if not isinstance(reference, (int, float)) or not isinstance(value, (int, float)) or value == reference:
        return "", 0
    diff = value - reference
    text = f"{diff:+.{metric.digits}f}{metric.unit}"
    if reference and metric.unit not in ("%",):
        text += f" ({diff / abs(reference):+.0%})"
    if not metric.better:
        return text, 0
    return text, (1 if (diff < 0) == (metric.better == "lower") else -1)


def _shown(metric: Metric, value: Any) -> str:
    """``value`` as a table shows it."""
    if value is None:
        return "–"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:,.{metric.digits}f}{metric.unit}"
    return str(value)


def render_comparison(comparison: Comparison, console: Console) -> None:
    """Print the reports compared, one table per scenario, then regressions and warnings."""
    reports = comparison.reports
    head = Table(title="Reports (the first is the reference)")
    for col in ("#", "file", "commit", "engine", "policies", "clingo", "cpus", "options"):
        head.add_column(col)
    for i, r in enumerate(reports, 1):
        env = r.environment
        head.add_row(str(i), escape(r.path), str(env.get("gitCommit") or "–"), str(env.get("engineDigest") or "–"),
                     str(env.get("policyDigest") or "–"), str(env.get("clingo") or "–"), str(env.get("cpus") or "–"),
                     escape(" ".join(map(str, env.get("argv") or ())) or "–"))
    console.print(head)
    by_name = {m.name: m for m in METRICS}
    for s in comparison.scenarios:
        table = Table(title=escape(s))
        table.add_column("figure")
        for i, _ in enumerate(reports, 1):
            table.add_column(f"#{i}", justify="right")
        for name, values in comparison.values[s].items():
            m = by_name[name]
            cells = [_shown(m, values[0])]
            for v in values[1:]:
                text, direction = _change(m, values[0], v)
                style = {1: "green", -1: "red"}.get(direction)
                delta = f" [{style}]{text}[/]" if style else (f" {text}" if text else "")
                cells.append(_shown(m, v) + delta)
            table.add_row(f"{m.part}: {name}", *cells)
        for name, met in comparison.targets[s].items():
            table.add_row(f"target {name}", *("–" if v is None else met_cell(v) for v in met))
        console.print(table)
    for line in comparison.regressions:
        console.print(f"[bold red]regression[/] {escape(line)}")
    for line in comparison.warnings:
        console.print(f"[yellow]warning[/] {escape(line)}")
