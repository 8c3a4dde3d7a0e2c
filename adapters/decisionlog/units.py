"""Durations and sizes as people write them in a Configuration or on the command line."""

from __future__ import annotations

import re
from fractions import Fraction

from clueue.engine.quantity import parse_quantity

__all__ = ["parse_duration", "format_duration", "parse_size"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def parse_duration(text: str | int | float) -> float:
    """Seconds in ``90s``, ``15m``, ``1h30m``, ``7d``, ``2w`` or a plain number of seconds.

    >>> parse_duration("1h30m")
    5400.0

    Raises:
        ValueError: not a positive duration.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = float(text)
    elif isinstance(text, str) and text.strip():
        s = text.strip()
        try:
            seconds = float(s)
        except ValueError:
            parts = _DURATION.findall(s)
            if "".join(n + u for n, u in parts) != s:
                raise ValueError(f"{text!r} is not a duration (e.g. 90s, 15m, 1h30m, 7d)") from None
            seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    else:
        raise ValueError(f"{text!r} is not a duration (e.g. 90s, 15m, 1h30m, 7d)")
    if seconds <= 0:
        raise ValueError(f"{text!r} is not a positive duration")
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


def parse_size(text: str | int) -> int:
    """Bytes in a Kubernetes quantity (``512Mi``, ``1Gi``, ``2G``) or a plain number.

    Raises:
        ValueError: not a positive whole number of bytes.
    """
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not a size")
    try:
        value = Fraction(text) if isinstance(text, int) else parse_quantity(str(text))
    except (ValueError, ZeroDivisionError) as e:
        raise ValueError(f"{text!r} is not a size (e.g. 512Mi, 1Gi): {e}") from None
    if value <= 0:
        raise ValueError(f"{text!r} is not a positive size")
    return int(value)
