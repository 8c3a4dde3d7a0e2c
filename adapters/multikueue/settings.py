"""The ``multiKueue`` section of clueue's Configuration: Kueue's MultiKueue settings, and how
often clueue's MultiKueue loop looks at the clusters.

```yaml
apiVersion: clueue.dev/v1
kind: Configuration
multiKueue:
  gcInterval: 1m            # Kueue's field; 0 turns the garbage collector off
  origin: multikueue        # Kueue's field: the value of kueue.x-k8s.io/multikueue-origin on copies
  workerLostTimeout: 15m    # Kueue's field
  dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-all-at-once   # Kueue's field
  syncPeriod: 1s            # clueue's: how often the loop runs
```

Durations are written as Kueue's (Go's ``1m30s``, ``500ms``) or as a number of seconds. The
section's dispatch fields (``clustersPerRound``, ``roundSeconds``, ...) are the engine's
(docs/dispatch.md) and are left to its parser.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from clueue.engine import SnapshotError

from .api import ALL_AT_ONCE

__all__ = ["MultiKueueSettings", "parse_settings", "load_settings", "go_duration"]

_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


@dataclass(frozen=True)
class MultiKueueSettings:
    """Kueue's MultiKueue configuration (KEP-693 "Configuration"), with Kueue's defaults.

    Parameters:
        gc_interval: seconds between two runs of the garbage collector (0: never).
        origin: the ``kueue.x-k8s.io/multikueue-origin`` label value of this manager's copies.
        worker_lost_timeout: seconds a Ready workload's worker may stay out of contact before
            the workload is put back to pending (check state Retry).
        dispatcher_name: who nominates worker clusters; with AllAtOnce an empty
            ``nominatedClusterNames`` means every active cluster of the check's config.
        sync_period: seconds between two passes of the MultiKueue loop.
        dispatcher_set: whether the Configuration names the dispatcher (else the engine's
            default applies, docs/dispatch.md).
    """

    gc_interval: float = 60.0
    origin: str = "multikueue"
    worker_lost_timeout: float = 900.0
    dispatcher_name: str = ALL_AT_ONCE
    sync_period: float = 1.0
    dispatcher_set: bool = False


def go_duration(value: Any, where: str) -> float:
    """Seconds of a Go duration string (``1m30s``) or a number of seconds.

    >>> go_duration("1m30s", "x"), go_duration(2, "x"), go_duration("250ms", "x")
    (90.0, 2.0, 0.25)

    Raises:
        ValueError: naming ``where``, when it is neither.
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text == "0":
            return 0.0
        parts = _GO_PART.findall(text)
        if parts and "".join(n + u for n, u in parts) == text:
            return sum(float(n) * _GO_UNITS[u] for n, u in parts)
    raise ValueError(f"{where}: expected a duration such as 90s, 1m30s or 500ms, got {value!r}")


def parse_settings(section: Any, source: str = "the Configuration") -> MultiKueueSettings:
    """The ``multiKueue`` section (a mapping; None: the defaults).

    Raises:
        SnapshotError: a field has a wrong type or value, naming the field.
    """
    default = MultiKueueSettings()
    if section is None:
        return default
    if not isinstance(section, Mapping):
        raise SnapshotError(f"multiKueue: expected a mapping, got {type(section).__name__}", source=source)
    try:
        gc = go_duration(section.get("gcInterval", default.gc_interval), "multiKueue.gcInterval")
        lost = go_duration(section.get("workerLostTimeout", default.worker_lost_timeout),
                           "multiKueue.workerLostTimeout")
        sync = go_duration(section.get("syncPeriod", default.sync_period), "multiKueue.syncPeriod")
    except ValueError as e:
        raise SnapshotError(str(e), source=source) from None
    origin = section.get("origin", default.origin)
    if not isinstance(origin, str) or not origin or not _LABEL_VALUE.match(origin):
        raise SnapshotError(f"multiKueue.origin: expected a label value (letters, digits, '-', '_', '.'; at most "
                            f"63), got {origin!r}", source=source)
    dispatcher = section.get("dispatcherName", default.dispatcher_name)
    if not isinstance(dispatcher, str) or "/" not in dispatcher or len(dispatcher) > 63:
        raise SnapshotError("multiKueue.dispatcherName: expected a domain-prefixed name of at most 63 characters "
                            f"(e.g. {ALL_AT_ONCE}), got {dispatcher!r}", source=source)
    if sync <= 0:
        raise SnapshotError("multiKueue.syncPeriod: expected a positive duration", source=source)
    return MultiKueueSettings(gc_interval=gc, origin=origin, worker_lost_timeout=lost, dispatcher_name=dispatcher,
                              sync_period=sync, dispatcher_set="dispatcherName" in section)


def load_settings(path: str | None) -> MultiKueueSettings:
    """The ``multiKueue`` section of the Configuration file at ``path`` (None: the defaults).

    Raises:
        SnapshotError: the file cannot be read, or the section is invalid.
    """
    if path is None:
        return MultiKueueSettings()
    from ..files import read_documents
    docs = read_documents([path])
    body = docs[0].body if docs and isinstance(docs[0].body, Mapping) else {}
    return parse_settings(body.get("multiKueue"), path)
