"""Durations as people and Kueue write them: Go's ``metav1.Duration`` text (``1h30m``,
``500ms``), days and weeks for long horizons (``7d``, ``2w``), or a plain number of seconds.

One parser for every duration of a Configuration, of Kueue's ConfigMap and of the command line,
and :func:`format_duration` to write one for people (plans, reports).

>>> parse_duration("1h30m"), parse_duration("250ms"), parse_duration(90), parse_duration("7d")
(5400.0, 0.25, 90.0, 604800.0)
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["parse_duration", "format_duration"]

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


def format_duration(seconds: float) -> str:
    """A duration for people, to the minute past an hour and to the second below.

    >>> format_duration(2280), format_duration(3725), format_duration(42.4)
    ('38m', '1h2m', '42s')
    """
    total = int(round(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m{secs}s" if secs and minutes < 10 else f"{minutes}m"
    return f"{secs}s"
