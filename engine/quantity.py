"""Kubernetes resource quantities, parsed and printed exactly.

Quantities are kept as :class:`fractions.Fraction` of the base unit (cores, bytes, ...), so that
``500m`` is exactly one half and ``1Gi`` exactly 1073741824; nothing is rounded on the way in.

>>> parse_quantity("500m")
Fraction(1, 2)
>>> format_quantity(parse_quantity("1536Mi"))
'1536Mi'
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction

__all__ = ["parse_quantity", "format_quantity"]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 10**3), "": Fraction(1),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
}
_PATTERN = re.compile(
    r"^(?P<sign>[+-]?)(?P<number>\d+(?:\.\d*)?|\.\d+)"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?\d+)|(?P<decimal>[numkMGTPE]?))$"
)


def parse_quantity(value: object) -> Fraction:
    """Parse a Kubernetes quantity (``"2"``, ``"500m"``, ``"1Gi"``, ``"1e3"``, ``4``) exactly.

    Raises:
        ValueError: the value is not a quantity; the message quotes it.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a quantity")
    match = _PATTERN.match(value.strip())
    if not match:
        raise ValueError(f"{value!r} is not a quantity (expected e.g. 2, 500m, 1.5Gi, 1e3)")
    number = Fraction(match["number"])
    if match["binary"]:
        number *= _BINARY[match["binary"]]
    elif match["exp"]:
        number *= Fraction(10) ** int(match["exp"][1:])
    else:
        number *= _DECIMAL[match["decimal"] or ""]
    return -number if match["sign"] == "-" else number


@functools.lru_cache(maxsize=1024)
def format_quantity(value: Fraction) -> str:
    """Print a quantity in the shortest exact Kubernetes notation.

    Whole numbers divisible by a power of 1024 (at least Ki) use binary suffixes, other whole
    numbers print plainly, fractions print in milli- or nano-units when exact.
    """
    if value < 0:
        return "-" + format_quantity(-value)
    if value.denominator == 1:
        whole = value.numerator
        for suffix, size in reversed(_BINARY.items()):
            if whole >= size and whole % size == 0:
                return f"{whole // size}{suffix}"
        return str(whole)
    for suffix in ("m", "u", "n"):
        scaled = value / _DECIMAL[suffix]
        if scaled.denominator == 1:
            return f"{scaled.numerator}{suffix}"
    return f"{float(value):g}"
