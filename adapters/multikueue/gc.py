"""The garbage collector: remote copies whose manager Workload is gone.

Every ``gcInterval`` the copies labelled with this manager's origin, in every worker that
answers, are matched with the manager's Workloads by namespace, name and uid (the
``kueue.x-k8s.io/multikueue-origin-uid`` annotation); a copy with no match is deleted. The
workload controller deletes the copies of a Workload it saw deleted; this catches those it
could not (the worker was out of reach, or the manager's controller was not running).
"""

from __future__ import annotations

from typing import Any, Mapping

from .api import ORIGIN_UID_ANNOTATION
from .workloads import Copies, WorkloadController

__all__ = ["collect_garbage", "orphans"]


def orphans(workloads: Mapping[str, dict[str, Any]], copies: Copies) -> list[tuple[str, dict[str, Any]]]:
    """(worker, copy) of every copy whose manager Workload (same key and uid) does not exist.

    >>> orphans({}, {"w1": {"ns/a": {"metadata": {"name": "a", "namespace": "ns"}}}})[0][0]
    'w1'
    """
    found = []
    for worker, held in sorted(copies.items()):
        for key, copy in sorted(held.items()):
            uid = ((copy.get("metadata") or {}).get("annotations") or {}).get(ORIGIN_UID_ANNOTATION)
            owner = workloads.get(key)
            if owner is None or (owner.get("metadata") or {}).get("uid") != uid:
                found.append((worker, copy))
    return found


def collect_garbage(workloads: Mapping[str, dict[str, Any]], copies: Copies, controller: WorkloadController) -> int:
    """Delete the orphaned copies (that uid only) and their pods; how many were deleted."""
    return sum(controller.delete_copy(worker, copy, None, "garbage collector: no such Workload in the manager")
               for worker, copy in orphans(workloads, copies))
