"""The Configuration's ``decisionLog`` section, and a Configuration written back as a document.

```yaml
decisionLog:
  path: /var/lib/clueue/decisions.db     # the SQLite file (required to turn the log on)
  retention: {maxAge: 7d, maxBytes: 1Gi}  # defaults; 0 turns a bound off
  jsonLines: "-"                          # also one JSON line per cycle: a file, or - for stdout
```

A recorded cycle keeps the Configuration it was decided under (:func:`config_document`), so
that a replay decides it as it was decided: :func:`clueue.adapters.files.parse_config` reads it back.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, TypeVar

from clueue.engine import Config
from clueue.engine.config import DecisionLogConfig, PodGroups
from clueue.engine.objects import LabelSelector
from clueue.engine.durations import parse_duration
from clueue.engine.fields import Fields

from .schema import DecisionLogError
from .units import parse_size

__all__ = ["parse_decision_log", "config_document", "config_digest", "log_path"]

T = TypeVar("T")


def parse_decision_log(f: Fields) -> DecisionLogConfig | None:
    """``decisionLog`` of a Configuration; None when it is absent.

    Raises:
        SnapshotError: a field of it has a wrong type or value (named).
    """
    if f.get("decisionLog") is None:
        return None
    section = f.mapping("decisionLog")
    path = f.string("decisionLog.path")
    if not path:
        raise f.fail("decisionLog.path", "expected the path of the decision log's SQLite file")
    default = DecisionLogConfig(path)
    if "retention" in section:
        f.mapping("decisionLog.retention")
    max_age = _bound(f, "maxAge", parse_duration, default.max_age_seconds, "0 keeps cycles whatever their age")
    max_bytes = _bound(f, "maxBytes", parse_size, default.max_bytes, "0 sets no bound")
    json_lines = f.string("decisionLog.jsonLines")
    return DecisionLogConfig(path=path, max_age_seconds=max_age, max_bytes=max_bytes, json_lines=json_lines or None)


def _bound(f: Fields, key: str, parse: Callable[[Any], T], default: T | None, zero: str) -> T | None:
    """``decisionLog.retention.<key>`` parsed; 0 turns the bound off, absent is ``default``."""
    path = f"decisionLog.retention.{key}"
    value = f.get(path)
    if value is None:
        return default
    try:
        return None if value in (0, "0") else parse(value)
    except ValueError as e:
        raise f.fail(path, f"{e}; {zero}") from None


def _selector(selector: LabelSelector) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if selector.match_labels:
        out["matchLabels"] = dict(selector.match_labels)
    if selector.match_expressions:
        out["matchExpressions"] = [{"key": r.key, "operator": r.operator, "values": list(r.values)}
                                   for r in selector.match_expressions]
    return out


def config_document(config: Config) -> dict[str, Any]:
    """The Configuration a cycle was decided under, as a document (what decides; the decision
    log's own section is left out: it decides nothing)."""
    doc: dict[str, Any] = {
        "apiVersion": "clueue.dev/v1", "kind": "Configuration",
        "controllerNamespace": config.controller_namespace,
        "podIntegration": {"podSelector": _selector(config.pod_selector),
                           "managedOwners": list(config.managed_owners)},
        "solver": {"timeBudgetSeconds": config.time_budget},
        "limits": {"memoryMiB": config.limits.memory_mib or 0},
    }
    if config.namespace_selector is not None:
        doc["podIntegration"]["namespaceSelector"] = _selector(config.namespace_selector)
    if config.limits.seconds is not None:
        doc["limits"]["seconds"] = config.limits.seconds
    if config.pod_groups != PodGroups():  # only when set: the digests of cycles recorded before stay
        doc["podGroups"] = {"gangScheduleWithoutQueue": config.pod_groups.gang_schedule_without_queue,
                            "podSelector": _selector(config.pod_groups.pod_selector)}
    return doc


def config_digest(document: dict[str, Any]) -> str:
    """The content digest of a Configuration document (as the plan's digests are written)."""
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def log_path(db: str | None, config: Config) -> str:
    """The decision log to use: ``db`` (``--db``), else the Configuration's ``decisionLog.path``.

    Raises:
        DecisionLogError: neither names one.
    """
    if db:
        return db
    if config.decision_log is None:
        raise DecisionLogError("no decision log: give --db PATH, or --config FILE with decisionLog.path")
    return config.decision_log.path
