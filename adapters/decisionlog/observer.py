"""The controller's recording of its cycles: an observer of each ``CycleResult``.

It never stops admissions: a cycle that cannot be recorded (the volume is full, the file is
locked, a bug) is logged (once while the same error lasts), counted by ``on_error`` (the
metric ``clueue_decision_log_errors_total``) and skipped; the next cycle tries again, opening
the log anew if it had to be closed.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from clueue.engine import ClueueError, Config, Policy
from clueue.engine.config import DecisionLogConfig

from .recorder import Recorder
from .retention import Retention

__all__ = ["CycleRecorder"]

log = logging.getLogger("clueue.decisionlog")


class CycleRecorder:
    """Records each cycle a controller observes into the log ``settings`` names."""

    def __init__(self, settings: DecisionLogConfig, *, policy: Policy, config: Config,
                 on_error: Callable[[], None] = lambda: None) -> None:
        self.settings = settings
        self.policy = policy
        self.config = config
        self.on_error = on_error
        self.recorder: Recorder | None = None  # opened by the first cycle (only a leader decides)
        self._told = ""

    def __call__(self, result: Any) -> None:
        """Record one ``CycleResult`` (duck-typed: ``started``, ``documents``, ``snapshot``,
        ``plan``, ``error``, ``phases``); never raises."""
        try:
            if self.recorder is None:
                self.recorder = Recorder.open(
                    self.settings.path, origin="controller", policy=self.policy, config=self.config,
                    json_lines=self.settings.json_lines,
                    retention=Retention(self.settings.max_age_seconds, self.settings.max_bytes))
            snapshot = result.snapshot
            self.recorder.record(started=result.started, documents=result.documents, plan=result.plan,
                                 snapshot_notices=snapshot.notices if snapshot is not None else (),
                                 error=result.error, phases=result.phases)
            if self._told:
                log.info("decision log %s: recording again", self.settings.path)
            self._told = ""
        except Exception as e:  # noqa: BLE001 - the log must never stop the cycles: said, counted, skipped
            self.on_error()
            message = str(e) if isinstance(e, ClueueError) else f"{type(e).__name__}: {e}"
            if message != self._told:
                log.warning("decision log %s: cycle not recorded: %s", self.settings.path, message)
            self._told = message
            self.close()

    def close(self) -> None:
        recorder, self.recorder = self.recorder, None
        if recorder is not None:
            try:
                recorder.close()
            except Exception:  # noqa: BLE001 - closing after a failure: nothing more to do
                log.debug("closing the decision log failed", exc_info=True)
