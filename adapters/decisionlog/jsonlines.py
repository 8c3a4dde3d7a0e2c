"""The second sink: each cycle's record as one line of JSON, to a file or standard output.

For users who ship logs elsewhere. A line is the record the SQLite store holds (records.py),
with ``workloads`` (the states that changed) inline; snapshot objects are not written, only
their count (``objects``). Lines are appended; the file is opened once and flushed per line.
"""

from __future__ import annotations

import json
import sys
from typing import IO, Any, Mapping

from .schema import DecisionLogError

__all__ = ["JsonLinesSink"]


class JsonLinesSink:
    """Appends records to ``target`` (a path, or ``-`` for standard output)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._file: IO[str] | None = None

    def write(self, record: Mapping[str, Any]) -> None:
        """Write one record as one line.

        Raises:
            DecisionLogError: the file cannot be opened or written.
        """
        try:
            if self._file is None:
                self._file = sys.stdout if self.target == "-" else open(self.target, "a", encoding="utf-8")
            self._file.write(json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n")
            self._file.flush()
        except OSError as e:
            raise DecisionLogError(f"cannot write decision records to {self.target}: {e.strerror or e}") from None

    def close(self) -> None:
        if self._file is not None and self._file is not sys.stdout:
            self._file.close()
        self._file = None
