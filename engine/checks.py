"""Admission checks: Kueue's two-phase admission (docs/admission-checks.md).

A ClusterQueue may require AdmissionChecks (``spec.admissionChecks``, or per flavor
``spec.admissionChecksStrategy``). A workload admitted there first gets its quota *reserved*
(``status.admission``, ``QuotaReserved=True``) and one ``Pending`` state per check that applies
to its flavors; the checks' controllers, not clueue, turn them ``Ready``, ``Retry`` or
``Rejected``. Only when every check is Ready is the workload *admitted* (``Admitted=True``) and
are its pods ungated, with what the Ready checks ask to add to them (``podSetUpdates``). A check
in ``Retry`` evicts the workload (its quota released, its checks Pending again, requeued); one
in ``Rejected`` evicts and deactivates it. A ClusterQueue whose checks do not all exist and
report ``Active`` is inactive: it admits nothing new.

This module holds those rules as pure functions over snapshot objects; workloads.py,
compiler.py and cycle.py apply them.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from .kueue_api import MULTIKUEUE_CONTROLLER
from .objects import Admission, AdmissionCheck, CheckState, ClusterQueue, KueueWorkload, PodSetUpdate
from .reasons import Reason, make_reason

__all__ = ["required_checks", "admission_flavors", "inactive_checks", "check_states",
           "eviction", "retrying", "ready", "multikueue_check", "pod_set_changes", "PodChanges"]



def required_checks(cq: ClusterQueue | None, flavors: Iterable[str]) -> tuple[str, ...]:
    """The checks ``cq`` requires of a workload using ``flavors``, sorted: those for every
    flavor, and those whose ``onFlavors`` names one of them (Kueue's rule)."""
    if cq is None or not cq.admission_checks:
        return ()
    used = set(flavors)
    return tuple(sorted({r.name for r in cq.admission_checks if not r.on_flavors or used & set(r.on_flavors)}))


def admission_flavors(admission: Admission) -> set[str]:
    """Every flavor an admission names."""
    return {f for a in admission.pod_sets for f in a.flavors.values()}


def inactive_checks(cq: ClusterQueue, checks: Mapping[str, AdmissionCheck]) -> tuple[tuple[str, str, str], ...]:
    """Why ``cq`` is inactive because of its admission checks, as (check, Kueue's reason on the
    ClusterQueue's Active condition, why in words): a check that does not exist or is not Active;
    and, as Kueue refuses them, more than one MultiKueue check, or a MultiKueue check limited to
    some flavors."""
    out = []
    multikueue = []
    for rule in cq.admission_checks:
        check = checks.get(rule.name)
        if check is None:
            out.append((rule.name, "AdmissionCheckNotFound", "does not exist"))
            continue
        if not check.active:
            out.append((rule.name, "AdmissionCheckInactive", "is not Active"))
        if check.controller == MULTIKUEUE_CONTROLLER:
            multikueue.append(rule.name)
            if rule.on_flavors:
                out.append((rule.name, "MultiKueueAdmissionCheckAppliedPerFlavor",
                            "is a MultiKueue check, which cannot be limited to some flavors (onFlavors)"))
    if len(multikueue) > 1:
        out += [(name, "MultipleMultiKueueAdmissionChecks", "is one of several MultiKueue checks; a ClusterQueue "
                 "may have one") for name in multikueue]
    return tuple(sorted(set(out)))


def check_states(obj: KueueWorkload, required: tuple[str, ...]) -> tuple[CheckState, ...]:
    """The state of each check in ``required``, as the Workload records it (``Pending`` if it
    records none yet)."""
    recorded = {c.name: c for c in obj.checks}
    return tuple(recorded.get(name) or CheckState(name, "Pending") for name in required)


def ready(states: Iterable[CheckState]) -> bool:
    """Whether every check passed (vacuously true without checks)."""
    return all(c.state == "Ready" for c in states)


def multikueue_check(states: Iterable[CheckState], checks: Mapping[str, AdmissionCheck]) -> str:
    """The one of ``states`` that is a MultiKueue check (``checks`` by name), "" if none: with
    one, the workload runs in the worker cluster that admits its copy, never here, and its pods
    here stay gated (KEP-693: the manager starts no job; MultiKueue copies the worker's status)."""
    return next((c.name for c in states if (check := checks.get(c.name)) is not None
                 and check.controller == MULTIKUEUE_CONTROLLER), "")


def eviction(states: tuple[CheckState, ...]) -> Reason | None:
    """The eviction a quota reservation's checks call for: ``AdmissionCheckRejected`` if one is
    Rejected (evicted and deactivated, not requeued), else ``AdmissionCheckRetry`` if one asks to
    retry (evicted, quota released, requeued with its checks Pending again); None otherwise."""
    rejected = [c for c in states if c.state == "Rejected"]
    if rejected:
        return make_reason("AdmissionCheckRejected", checks=[c.name for c in rejected],
                           messages=[c.message for c in rejected])
    return retrying(states, evicted=True)


def retrying(states: Iterable[CheckState], *, evicted: bool) -> Reason | None:
    """``AdmissionCheckRetry`` naming the checks in ``Retry``, if any: a reservation is evicted
    for it; a workload without one is not considered while it lasts (Kueue: "a workload having
    at least one check in this state ... will not be considered for admission")."""
    retry = [c for c in states if c.state == "Retry"]
    if not retry:
        return None
    return make_reason("AdmissionCheckRetry", checks=[c.name for c in retry], messages=[c.message for c in retry],
                       evicted=evicted)


class PodChanges:
    """What the Ready checks of a workload add to the pods of one pod set when they are
    ungated: labels, annotations, node selector and tolerations (``podSetUpdates``)."""

    def __init__(self) -> None:
        self.labels: dict[str, str] = {}
        self.annotations: dict[str, str] = {}
        self.node_selector: dict[str, str] = {}
        self.tolerations: list[Mapping[str, Any]] = []

    def details(self) -> dict[str, Any]:
        """The non-empty parts, as an ``ungate`` action carries them."""
        out: dict[str, Any] = {}
        for key, value in (("labels", self.labels), ("annotations", self.annotations),
                           ("nodeSelector", self.node_selector), ("tolerations", self.tolerations)):
            if value:
                out[key] = dict(value) if isinstance(value, dict) else [dict(t) for t in value]
        return out


def pod_set_changes(states: Iterable[CheckState], pod_set: str,
                    node_selector: Mapping[str, str]) -> tuple[PodChanges | None, str]:
    """The changes the Ready checks of ``states`` ask for the pods of ``pod_set``, beside the
    ``node_selector`` of its flavors. Kueue requires them to be additive: a key set to two
    values (by two checks, or by a check and the flavor) gives (None, why)."""
    changes = PodChanges()
    changes.node_selector.update(node_selector)
    for c in states:
        if c.state != "Ready":
            continue
        for update in (u for u in c.pod_set_updates if u.name == pod_set):
            clash = _merge(changes, update)
            if clash:
                return None, f"admission check {c.name} sets {clash} of pod set {pod_set} to another value"
    for key in node_selector:  # the flavor's labels are part of the ungate action already
        del changes.node_selector[key]
    return changes, ""


def _merge(into: PodChanges, update: PodSetUpdate) -> str:
    """Add ``update`` to ``into``; the first key it would change, if any ("" when additive)."""
    for what, have, new in (("label", into.labels, update.labels), ("annotation", into.annotations, update.annotations),
                            ("nodeSelector", into.node_selector, update.node_selector)):
        for k, v in new.items():
            if have.setdefault(k, v) != v:
                return f"{what} {k}"
    into.tolerations += [t for t in update.tolerations if t not in into.tolerations]
    return ""
