"""Kubernetes resource quantities, parsed and printed exactly.

Quantities are kept as :class:`fractions.Fraction` of the base unit (cores, bytes, ...), so that
``500m`` is exactly one half and ``1Gi`` exactly 1073741824; nothing is rounded on the way in.

Kubernetes bounds what a quantity may be: no magnitude above 2^63-1 (:data:`MAX_QUANTITY`)
and nothing finer than one nano-unit (``1n``, :data:`QUANTUM`; the API server rounds finer
values up to it). A quantity beyond either bound is refused with a message that says which,
and the bounds are checked on the digits before any power of ten is computed, so that an
exponent such as ``1e999999999`` costs nothing.

>>> parse_quantity("500m")
Fraction(1, 2)
>>> format_quantity(parse_quantity("1536Mi"))
'1536Mi'
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction
from math import gcd
from typing import Iterable

__all__ = ["parse_quantity", "format_quantity", "common_divisor", "MAX_QUANTITY", "QUANTUM"]

#: The largest magnitude a Kubernetes quantity may represent (resource.Quantity's cap).
MAX_QUANTITY = 2**63 - 1
#: The finest step a Kubernetes quantity keeps: one nano-unit.
QUANTUM = Fraction(1, 10**9)

_MAX_DIGITS = len(str(MAX_QUANTITY))  # 19: a number with more integer digits is too large
_FINEST_POWER = -9  # 10**-9 is the quantum
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_POWER = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL = {suffix: Fraction(10) ** power for suffix, power in _DECIMAL_POWER.items()}
_NOT_A_NUMBER = re.compile(r"^[+-]?\.?(?:inf|infinity|nan)$", re.IGNORECASE)  # as YAML, JSON or Go spell them
_PATTERN = re.compile(
    r"^(?P<sign>[+-]?)(?:(?P<whole>\d+)(?:\.(?P<frac>\d*))?|\.(?P<onlyfrac>\d+))"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|[eE](?P<exp>[+-]?\d+)|(?P<decimal>[numkMGTPE]?))$"
)


def _shown(value: object) -> str:
    """The value as quoted in a message: a long one is cut short, not repeated in full."""
    text = repr(value)
    return text if len(text) <= 40 else text[:30] + "..." + text[-7:]


def _too_large(value: object) -> ValueError:
    return ValueError(f"quantity {_shown(value)} is larger than {MAX_QUANTITY} (2^63-1), the largest a Kubernetes "
                      "quantity may be")


def _too_fine(value: object) -> ValueError:
    return ValueError(f"quantity {_shown(value)} is finer than 1n (10^-9), the smallest step a Kubernetes quantity keeps")


def _checked(value: object, number: Fraction) -> Fraction:
    if abs(number) > MAX_QUANTITY:
        raise _too_large(value)
    if (number / QUANTUM).denominator != 1:
        raise _too_fine(value)
    return number


def parse_quantity(value: object) -> Fraction:
    """Parse a Kubernetes quantity (``"2"``, ``"500m"``, ``"1Gi"``, ``"1e3"``, ``4``) exactly.

    Raises:
        ValueError: the value is not a quantity, or lies beyond Kubernetes' bounds
            (magnitude above 2^63-1, or finer than ``1n``); the message quotes it and says why.
    """
    if isinstance(value, bool):
        raise ValueError(f"{_shown(value)} is not a quantity")
    if isinstance(value, int):
        return _checked(value, Fraction(value))
    if isinstance(value, float):
        if not math.isfinite(value):  # YAML's .inf and .nan, JSON's 1e400
            raise ValueError(f"{_shown(value)} is not a quantity: infinite and NaN values are not numbers Kubernetes accepts")
        return _checked(value, Fraction(repr(value)))
    if not isinstance(value, str):
        raise ValueError(f"{_shown(value)} is not a quantity")
    text = value.strip()
    if _NOT_A_NUMBER.match(text):
        raise ValueError(f"{_shown(value)} is not a quantity: infinite and NaN values are not numbers Kubernetes accepts")
    match = _PATTERN.match(text)
    if not match:
        raise ValueError(f"{_shown(value)} is not a quantity (expected e.g. 2, 500m, 1.5Gi, 1e3)")
    number = _mantissa(value, match)
    return -number if match["sign"] == "-" else number


def _mantissa(value: object, match: re.Match[str]) -> Fraction:
    """The magnitude of a matched quantity, bounded on its digits before it is computed."""
    whole, frac = match["whole"] or "", match["frac"] or match["onlyfrac"] or ""
    digits = (whole + frac).lstrip("0")
    if not digits:
        return Fraction(0)  # zero, whatever its exponent
    significant = digits.rstrip("0")
    # The number is int(significant) * 10**lowest, whose leading digit is at 10**(top - 1).
    lowest = len(digits) - len(significant) - len(frac)
    if match["exp"] is not None:
        if len(match["exp"].lstrip("+-")) > _MAX_DIGITS:  # far beyond both bounds, and too long to convert
            raise (_too_fine if match["exp"].startswith("-") else _too_large)(value)
        lowest += int(match["exp"])
    elif not match["binary"]:
        lowest += _DECIMAL_POWER[match["decimal"] or ""]
    top = lowest + len(significant)
    if top > _MAX_DIGITS:
        raise _too_large(value)
    # Decimal forms: the lowest digit is the finest step. Binary suffixes multiply by a power of
    # two, which may make a finer decimal exact (0.5Ki), but not one with more digits than any
    # quantity within the bounds has.
    if lowest < _FINEST_POWER - (_MAX_DIGITS if match["binary"] else 0):
        raise _too_fine(value)
    number = int(significant) * Fraction(10) ** lowest
    if match["binary"]:
        number *= _BINARY[match["binary"]]
    return _checked(value, number)


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


def common_divisor(values: Iterable[Fraction]) -> Fraction:
    """The largest quantity that divides every one of ``values`` (zeros ignored; 1 if none).

    >>> common_divisor([Fraction(1, 2), Fraction(3)])
    Fraction(1, 2)
    """
    nums, dens = 0, 1
    for v in values:
        if v:
            nums = gcd(nums, v.numerator)
            dens = dens * v.denominator // gcd(dens, v.denominator)
    return Fraction(nums, dens) if nums else Fraction(1)
