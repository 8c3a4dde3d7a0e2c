"""The controller's logs: ``--log-format json|text`` and the one summary line per cycle.

``json`` writes one object per line: ``time`` (RFC 3339, UTC, milliseconds), ``level``,
``logger``, ``message``, any fields passed as ``extra={...}``, and ``exception`` when there is
one. ``text`` writes ``time level logger: message`` for people; the structured fields are in
``json`` only (the summary line already says them in words).

>>> configure_logging("json", "info")  # doctest: +SKIP
>>> message, fields = cycle_summary(result)  # doctest: +SKIP
>>> logging.getLogger("clueue.controller").info(message, extra={"cycle": fields})  # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, Mapping, TextIO

from .metrics import CycleTally, tally_cycle

__all__ = ["configure_logging", "cycle_summary", "JsonFormatter", "TextFormatter", "FORMATS", "LEVELS"]

FORMATS = ("text", "json")
LEVELS = ("debug", "info", "warning", "error")

# What every LogRecord carries; anything else on a record came from ``extra``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


def _time(record: logging.LogRecord) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{stamp}.{int(record.msecs):03d}Z"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"time": _time(record), "level": record.levelname.lower(), "logger": record.name,
                               "message": record.getMessage()}
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        # default=str: an extra field that is no JSON type (a path, an exception) is still written.
        return json.dumps(out, default=str, separators=(",", ":"))


class TextFormatter(logging.Formatter):
    """``2026-11-21T08:00:00.000Z info clueue.controller: message``."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_time(record)} {record.levelname.lower()} {record.name}: {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure_logging(format: str = "text", level: str = "info", stream: TextIO | None = None) -> None:  # noqa: A002
    """Send every log record at ``level`` or above to ``stream`` (stderr) in ``format``.

    Replaces the root logger's handlers, so calling it again changes the format rather than
    doubling the lines.

    Raises:
        ValueError: an unknown format or level (the message lists the known ones).
    """
    if format not in FORMATS:
        raise ValueError(f"log format {format!r} is not one of {', '.join(FORMATS)}")
    if level.lower() not in LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())


def cycle_summary(result: Any, counted: CycleTally | None = None) -> tuple[str, dict[str, Any]]:
    """The summary line of one ``CycleResult`` and its structured fields (docs/metrics.md).

    ``admitted`` and ``evicted`` are what the plan decided (new this cycle); ``ungated`` and
    ``rejected`` the Pods the apply wrote; ``pending`` and ``inadmissible`` the backlog as planned.
    Pass ``counted`` when :meth:`Metrics.record_cycle <.metrics.Metrics.record_cycle>` made it already.
    """
    c = counted if counted is not None else tally_cycle(result)
    phases = {k: round(v, 4) for k, v in result.phases.items()}
    fields: dict[str, Any] = {
        "outcome": c.outcome, "admitted": len(c.admitted), "pending": c.pending_total,
        "inadmissible": c.inadmissible_total, "unqueued": c.unqueued, "evicted": len(c.evicted),
        "ungated": c.ungated, "rejected": c.rejected, "writes": c.writes, "errors": c.errors,
        "retries": c.retries, "stopped": c.stopped, "phases": phases,
        "seconds": round(sum(result.phases.values()), 4)}
    plan = result.plan
    if plan is not None:
        fields.update(rounds=plan.solver.rounds, candidates=plan.solver.candidates, snapshot=plan.snapshot_digest)
    if c.admitted:
        fields["admittedNames"] = list(_first(sorted(c.admitted)))
    if c.evicted:
        fields["evictedNames"] = list(_first(sorted(c.evicted)))
    if result.error:
        fields["error"] = result.error
    timing = " ".join(f"{k} {v:.3f}s" for k, v in phases.items())
    if plan is None:
        head = f"cycle {c.outcome}" + (f": {result.error}" if result.error else "")
        return f"{head}; {timing}", fields
    message = (f"cycle {c.outcome}: {len(c.admitted)} admitted{_names(c.admitted)}, {c.pending_total} pending, "
               f"{c.inadmissible_total} inadmissible, {len(c.evicted)} evicted{_names(c.evicted)}; "
               f"pods {c.ungated} ungated, {c.rejected} rejected; "
               f"{c.writes} writes, {c.errors} errors, {c.retries} retries"
               f"{', apply stopped' if c.stopped else ''}; {timing}")
    return message, fields


#: How many workload names a summary line spells out ("+N more" for the rest).
NAMES_SHOWN = 3


def _first(names: list[str]) -> list[str]:
    """The first :data:`NAMES_SHOWN` names, then "+N more" if there are others."""
    shown = names[:NAMES_SHOWN]
    return shown + ([f"+{len(names) - NAMES_SHOWN} more"] if len(names) > NAMES_SHOWN else [])


def _names(workloads: Mapping[str, Any]) -> str:
    """`` (a, b, +3 more)`` for the summary line; empty when there are none."""
    return f" ({', '.join(_first(sorted(workloads)))})" if workloads else ""
