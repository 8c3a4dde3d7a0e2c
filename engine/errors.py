"""clueue's exceptions: each carries what the user needs to fix the input."""

from __future__ import annotations

__all__ = ["ClueueError", "SnapshotError", "PolicyError", "SolveError", "AdapterError"]


class ClueueError(Exception):
    """Base of every error clueue raises on purpose."""


class SnapshotError(ClueueError):
    """An object of the snapshot is malformed.

    The message names the file, the object (``Kind namespace/name``) and the field.
    """

    def __init__(self, message: str, *, source: str = "", obj: str = "", field: str = "") -> None:
        self.source = source
        self.obj = obj
        self.field = field
        self.detail = message
        where = ": ".join(part for part in (source, obj, field) if part)
        super().__init__(f"{where}: {message}" if where else message)


class PolicyError(ClueueError):
    """A policy file is invalid or forbidden; the message names file:line:column."""


class SolveError(ClueueError):
    """The solver could not produce a plan (unsatisfiable base constraints, grounding failure)."""


class AdapterError(ClueueError):
    """Talking to the outside world (files, the Kubernetes API) failed."""
