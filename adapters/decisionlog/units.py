"""Durations for people, and sizes as people write them in a Configuration or on the command line
(durations as they write them: engine/durations.py)."""

from __future__ import annotations

from fractions import Fraction

from clueue.engine.durations import format_duration
from clueue.engine.quantity import parse_quantity

__all__ = ["format_duration", "parse_size"]


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
