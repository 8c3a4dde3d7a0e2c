"""Whether a Workload object still says what the plan says: its pod sets, owners, recorded
admission and pending reasons, compared by meaning (quantities as numbers, reasons as codes and
data), so that apply rewrites an object when it disagrees and never only because text changed.
"""

from __future__ import annotations

import hashlib
import json
import re
from fractions import Fraction
from typing import Any, Iterable, Mapping

from clueue.engine import ClueueError, Document, WorkloadEntry
from clueue.engine.quantity import parse_quantity
from clueue.engine.reasons import Reason
from clueue.engine.fields import Fields
from clueue.engine.snapshot import parse_pod_shape

__all__ = ["pod_set_difference", "missing_owners", "admission_difference", "reasons_digest", "tagged", "tag_of"]

# Reasons that name what else this cycle admitted, not why the workload itself waits: the next
# cycle, which sees those admitted before, drops them, and that alone is no news.
_CONTEXT_CODES = frozenset({"WaitsBehind"})
_TAG = re.compile(r" \[clueue:([0-9a-f]{12})\]$")


def _pod_sets(obj: Mapping[str, Any]) -> dict[str, tuple[int, dict[str, Fraction]]]:
    """A Workload object's pod sets: name -> (count, effective requests of one pod).

    Raises:
        ClueueError: a pod set cannot be read.
    """
    f = Fields(Document("api:Workload", obj), "Workload")
    out = {}
    for p, ps in f.objects("spec.podSets"):
        template = f.mapping(f"{p}.template", ps.get("template"))
        shape = parse_pod_shape(f, f"{p}.template.spec", template.get("spec"))
        out[str(ps.get("name", "main"))] = (ps.get("count", 1), {r: v for r, v in shape.requests.items() if v})
    return out


def pod_set_difference(obj: Mapping[str, Any], entry: WorkloadEntry) -> str:
    """How the pod sets of Workload ``obj`` differ from the plan's (names, counts, requests),
    in words; empty when they agree."""
    want = {p.name: (p.count, {r: v for r, q in p.requests.items() if (v := parse_quantity(q))}) for p in entry.pod_sets}
    try:
        have = _pod_sets(obj)
    except ClueueError as e:
        return f"its pod sets cannot be read ({e})"
    if have == want:
        return ""
    show = lambda sets: ", ".join(f"{n} x{c}" for n, (c, _) in sorted(sets.items())) or "none"  # noqa: E731
    if {n: c for n, (c, _) in have.items()} != {n: c for n, (c, _) in want.items()}:
        return f"it has pod sets {show(have)}, its pods make {show(want)}"
    return f"its pod sets request other resources than its pods ({show(want)})"


def missing_owners(obj: Mapping[str, Any], entry: WorkloadEntry) -> list[dict[str, str]]:
    """Owner references to add to Workload ``obj`` for the plan's pods that lack one."""
    owned = {o.get("uid") for o in (obj.get("metadata") or {}).get("ownerReferences") or [] if isinstance(o, Mapping)}
    return [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid} for pod, uid in entry.pods
            if uid and uid not in owned]


def admission_difference(recorded: Any, entry: WorkloadEntry) -> str:
    """How the flavors of a recorded ``status.admission`` differ from the plan's admission of
    ``entry`` (the flavors alone make an ungated pod's node selector); empty when they agree."""
    assignments = recorded.get("podSetAssignments") if isinstance(recorded, Mapping) else None
    have = {str(a.get("name")): dict(a.get("flavors") or {}) for a in assignments or [] if isinstance(a, Mapping)}
    want = {a.name: dict(a.flavors) for a in entry.admission}
    if have == want:
        return ""
    return f"its recorded admission uses flavors {have or 'none'}, the plan {want}"


def reasons_digest(reasons: Iterable[Reason]) -> str:
    """A short digest of the reasons' codes and data (not of their rendered text)."""
    data = sorted((r.code, json.dumps(dict(r.details), sort_keys=True, default=str))
                  for r in reasons if r.code not in _CONTEXT_CODES)
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()[:12]


def tagged(message: str, digest: str, limit: int) -> str:
    """``message`` cut to ``limit`` characters with the digest's tag kept at its end."""
    tag = f" [clueue:{digest}]"
    return message[:limit - len(tag)] + tag


def tag_of(message: str) -> str:
    """The digest a message was tagged with by :func:`tagged`, or ``""``."""
    found = _TAG.search(message or "")
    return found.group(1) if found else ""
