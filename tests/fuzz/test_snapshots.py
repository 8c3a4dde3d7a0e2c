"""Fuzzing the engine with snapshots: a plan or a clueue error, within the quota, no ungate
without an admission (the properties are in ``properties.py``)."""

from __future__ import annotations

from typing import Any

from hypothesis import given

from clueue.engine import load_policy
from tests.fuzz.properties import check_case
from tests.fuzz.strategies import snapshots

_BUILTIN = load_policy()


@given(snapshots())
def test_any_snapshot_gives_a_plan_within_quota_or_a_clueue_error(documents: list[dict[str, Any]]) -> None:
    check_case(documents, _BUILTIN)


@given(snapshots(odd=False))
def test_a_valid_snapshot_gives_a_plan_within_quota(documents: list[dict[str, Any]]) -> None:
    outcome = check_case(documents, _BUILTIN)
    assert outcome.error is None or "cohort parents form a cycle" in outcome.error, outcome.error
