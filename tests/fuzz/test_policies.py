"""Fuzzing user policies: generated policy files (rules over the documented predicates, objective
terms, reasons, directives, forbidden constructs and random text) through ``load_policy`` and a
guarded cycle, as ``clueue plan --policy`` runs them: a plan or a clueue error (a PolicyError,
most often), never another exception or a hang; where the files only add rules, the plan is
within quota and ungates only admitted pods (``properties.py``)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings

from clueue.engine import PolicyError, load_policy
from tests.fuzz.properties import check_case, replaces_builtin
from tests.fuzz.strategies import policy_files, snapshots


# Each cycle forks twice and grounds the whole policy: the costliest fuzz test, given a share of the budget.
@settings(settings.default, max_examples=max(1, settings.default.max_examples * 3 // 10))
@given(snapshots(odd=False), policy_files())
def test_any_user_policy_gives_a_plan_or_a_clueue_error(documents: list[dict[str, Any]], files: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        for name, text in files.items():
            (Path(folder) / name).write_text(text)
        try:
            policy = load_policy([folder])
        except PolicyError:
            return  # refused (a forbidden construct) before any cycle: what a user sees too
        check_case(documents, policy, additive=not replaces_builtin(policy), guarded=True)
