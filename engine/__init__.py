"""clueue's engine: snapshot in, plan out. Pure: no cluster I/O.

>>> from clueue.engine import build_snapshot, load_policy, run_cycle  # doctest: +SKIP
>>> plan = run_cycle(build_snapshot(documents), load_policy())        # doctest: +SKIP
"""

from .config import Config
from .cycle import Session, compile_snapshot, run_cycle
from .errors import AdapterError, ClueueError, PolicyError, SnapshotError, SolveError
from .plan import PLAN_API_VERSION, Action, Plan, WorkloadEntry
from .policy import Policy, load_policy
from .snapshot import Document, Snapshot, build_snapshot

__all__ = [
    "Config", "run_cycle", "Session", "compile_snapshot", "ClueueError", "SnapshotError", "PolicyError", "SolveError",
    "AdapterError", "PLAN_API_VERSION", "Plan", "Action", "WorkloadEntry", "Policy", "load_policy",
    "Document", "Snapshot", "build_snapshot",
]
