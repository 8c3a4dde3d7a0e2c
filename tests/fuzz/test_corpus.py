"""The fuzz corpus: every failure the fuzz tests ever found, minimized, replayed with the same
properties (a plan or a clueue error within the limits, within quota, no ungate without an
admission). A case is ``corpus/NAME.yaml`` (a snapshot, with the built-in policy), or a folder
``corpus/NAME/`` of ``snapshot.yaml`` and the user policy files it was found with; each opens
with a comment saying what it found and where it was fixed."""

from __future__ import annotations

from pathlib import Path

import pytest

from clueue.engine import load_policy
from tests.fuzz.properties import check_case, replaces_builtin

CORPUS = Path(__file__).parent / "corpus"
_CASES = sorted(p for p in CORPUS.iterdir() if p.suffix == ".yaml" or p.is_dir())


@pytest.mark.parametrize("case", _CASES, ids=[p.stem for p in _CASES])
def test_a_past_failure_holds_the_properties(case: Path) -> None:
    if case.is_dir():
        # Read as `clueue plan --policy CASE CASE/snapshot.yaml` reads it.
        policy = load_policy([case])
        check_case([str(case / "snapshot.yaml")], policy, additive=not replaces_builtin(policy), guarded=True)
    else:
        check_case([str(case)], load_policy())

