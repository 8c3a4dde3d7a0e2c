"""Durations for people, and sizes as people write them in a Configuration or on the command line
(durations as they write them: engine/durations.py)."""

from __future__ import annotations

from fractions import Fraction

from clueue.engine.quantity import parse_quantity

__all__ = ["format_duration", "parse_size"]


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
