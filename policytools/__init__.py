"""Policy work as a product, beside the engine: check policy files, run policy unit tests, diff
two policy versions (``clueue policy check|test|diff``, and ``clueue audit replay``'s diff).

Each tool returns data that the command line renders. The package may import the engine (it
decides with it) and never the adapters; it reads the files it is given (policy tests, the
built-in suite), which the pure engine does not.

- :mod:`.check`: :func:`check_policy` and its :class:`Diagnostic`.
- :mod:`.testing`: :func:`load_tests` / :func:`builtin_tests` / :func:`run_tests`.
- :mod:`.diff`: :func:`diff_policies`, :func:`snapshot_diff` and their report.
"""

from .check import Diagnostic, check_policy
from .diff import (
    PodGroupChange, SnapshotDiff, WorkloadChange, diff_document, diff_plans, diff_pod_groups, diff_policies,
    render_diff, snapshot_diff,
)
from .testing import CaseResult, PolicyTestError, TestCase, builtin_tests, compare, load_tests, run_tests

__all__ = [
    "Diagnostic", "check_policy",
    "PolicyTestError", "TestCase", "CaseResult", "load_tests", "builtin_tests", "run_tests", "compare",
    "WorkloadChange", "PodGroupChange", "SnapshotDiff", "diff_plans", "diff_pod_groups", "snapshot_diff",
    "diff_policies", "render_diff", "diff_document",
]
