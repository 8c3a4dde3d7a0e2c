"""Durations as people and Kueue write them: Go's ``metav1.Duration`` text (``1h30m``,
``500ms``), days and weeks for long horizons (``7d``, ``2w``), or a plain number of seconds.

One parser for every duration of a Configuration, of Kueue's ConfigMap and of the command line.

>>> parse_duration("1h30m"), parse_duration("250ms"), parse_duration(90), parse_duration("7d")
(5400.0, 0.25, 90.0, 604800.0)
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["parse_duration"]

_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0,
            "d": 86400.0, "w": 7 * 86400.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d|w)")


def parse_duration(value: Any) -> float:
    """Seconds in ``value``: a non-negative number, or a string of numbers with units (``ns``,
    ``us``, ``ms``, ``s``, ``m``, ``h``, ``d``, ``w``), ``"0"`` or a number as a string.

    Raises:
        ValueError: anything else, or a negative duration.
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and value.strip():
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            parts = _PART.findall(text)
            if not parts or "".join(n + u for n, u in parts) != text:
                raise ValueError(f"{value!r} is not a duration (e.g. 90s, 15m, 1h30m, 500ms, 7d)") from None
            seconds = sum(float(n) * _SECONDS[u] for n, u in parts)
    else:
        raise ValueError(f"{value!r} is not a duration (e.g. 90s, 15m, 1h30m, 500ms, 7d)")
    if seconds < 0:
        raise ValueError(f"{value!r} is a negative duration")
    return seconds
