from fractions import Fraction

import pytest

from clueue.engine.quantity import format_quantity, parse_quantity


@pytest.mark.parametrize("text,value", [
    ("500m", Fraction(1, 2)), ("2", Fraction(2)), ("1Gi", Fraction(2**30)), ("2k", Fraction(2000)),
    ("1e3", Fraction(1000)), ("1.5", Fraction(3, 2)), ("100Mi", Fraction(100 * 2**20)), ("12e-3", Fraction(3, 250)),
    ("250u", Fraction(1, 4000)), ("1E2", Fraction(100)), (".5", Fraction(1, 2)), (4, Fraction(4)), (0.25, Fraction(1, 4)),
])
def test_parse_is_exact(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("bad", ["", "1.2.3", "5 cpu", "Gi", "1Zi", None, True, [1]])
def test_parse_rejects_non_quantities(bad):
    with pytest.raises(ValueError):
        parse_quantity(bad)


@pytest.mark.parametrize("text", ["500m", "1Gi", "1536Mi", "3", "12m", "7Ki"])
def test_format_round_trips(text):
    assert format_quantity(parse_quantity(text)) == text
