"""The second sink: each cycle's record as one line of JSON, to a file or standard output.

For users who ship logs elsewhere. A line is the record the SQLite store holds (records.py),
with ``workloads`` (the states that changed) inline; snapshot objects are not written, only
their count (``objects``). Lines are appended; the file is opened once (for appending), and
each line is handed to the system in one write, so a process killed meanwhile leaves the line
whole or absent, not a torn one that a reader would have to skip.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Mapping

from .schema import DecisionLogError

__all__ = ["JsonLinesSink"]


class JsonLinesSink:
    """Appends records to ``target`` (a path, or ``-`` for standard output)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._fd: int | None = None

    def write(self, record: Mapping[str, Any]) -> None:
        """Write one record as one line.

        Raises:
            DecisionLogError: the file cannot be opened or written.
        """
        line = json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n"
        try:
            if self.target == "-":
                sys.stdout.write(line)
                sys.stdout.flush()
                return
            if self._fd is None:
                self._fd = os.open(self.target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            rest = memoryview(line.encode())
            while rest:  # one write but for a line longer than the system takes at once
                rest = rest[os.write(self._fd, rest):]
        except OSError as e:
            raise DecisionLogError(f"cannot write decision records to {self.target}: {e.strerror or e}") from None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd = None
