"""Durations as the Configuration, Kueue's ConfigMap and the command line write them."""

from __future__ import annotations

import doctest

import pytest

from clueue.engine import durations
from clueue.engine.durations import parse_duration


def test_the_examples_hold() -> None:
    assert doctest.testmod(durations).failed == 0


@pytest.mark.parametrize("text, seconds", [
    ("0", 0.0), (0, 0.0), ("90", 90.0), (1.5, 1.5), ("1m30s", 90.0), ("500ms", 0.5), ("1h0m0s", 3600.0),
    ("2w", 1209600.0), ("1.5h", 5400.0), ("100us", 1e-4),
])
def test_go_durations_days_weeks_and_plain_seconds(text: object, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["soon", "", "1x", "m5", "-5", -1, True, None, "5 m"])
def test_anything_else_is_refused(text: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)
