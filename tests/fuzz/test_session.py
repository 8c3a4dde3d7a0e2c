"""Fuzzing a controller's cycles: a ``Session`` over successive snapshots gives, each cycle, the
plan ``run_cycle`` gives on that snapshot alone (what it keeps from cycle to cycle, memo.py,
never changes a decision)."""

from __future__ import annotations

import functools
from typing import Any, Callable

from hypothesis import given, settings

from clueue.engine import ClueueError, Document, Session, build_snapshot, load_policy, run_cycle
from clueue.engine.guard import run_limited
from tests.fuzz.properties import CONFIG, MEMORY_MIB, WALL_SECONDS
from tests.fuzz.strategies import successive_snapshots

_BUILTIN = load_policy()


def _comparable(cycle: Callable[[], Any]) -> dict[str, Any] | None:
    """The plan a cycle gives, without its timings, or the clueue error it raises; None for a
    plan the time budget cut short (a busy machine cuts two searches at different points: their
    plans may differ without either deciding wrongly)."""
    try:
        data: dict[str, Any] = cycle().to_dict()
    except ClueueError as e:
        return {"error": f"{type(e).__name__}: {e}"}
    if not data.pop("solver")["optimal"]:
        return None
    return data


def _differences(cycles: list[list[dict[str, Any]]]) -> list[str]:
    """In the child: each cycle of one Session against a cycle of its own."""
    session = Session(_BUILTIN, CONFIG)
    out = []
    for i, documents in enumerate(cycles):
        snapshot = build_snapshot([Document(f"cycle{i}.yaml#{j + 1}", d) for j, d in enumerate(documents)])
        kept = _comparable(functools.partial(session.run, snapshot))
        alone = _comparable(functools.partial(run_cycle, snapshot, _BUILTIN, CONFIG))
        if kept is not None and alone is not None and kept != alone:
            out.append(f"cycle {i}: " + ", ".join(k for k in alone if kept.get(k) != alone[k]) + " differ")
    return out


@settings(settings.default, max_examples=max(1, settings.default.max_examples // 10))  # several cycles each
@given(successive_snapshots())
def test_a_session_decides_each_cycle_as_a_cycle_of_its_own(cycles: list[list[dict[str, Any]]]) -> None:
    assert not run_limited(_differences, cycles, seconds=3 * WALL_SECONDS, memory_mib=MEMORY_MIB)
