"""Reasons: why a workload got its decision, as data first and as words second.

Every reason has a stable ``code`` (part of the plan format), the ``details`` behind it, and a
``message`` rendered from the template below. The explanation policy derives reason terms
(``reason(W, insufficient_quota(...))``); :data:`CATALOG` names their arguments.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Mapping

import jinja2

__all__ = ["Reason", "ReasonKind", "CATALOG", "make_reason", "INADMISSIBLE_CODES"]


@dataclass(frozen=True)
class Reason:
    """One reason: a stable code, the numbers and objects behind it, and a sentence."""

    code: str
    message: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, **({"details": dict(self.details)} if self.details else {})}


@dataclass(frozen=True)
class ReasonKind:
    code: str
    term: str | None  # name of the policy term that yields it, None for engine-made reasons
    args: tuple[str, ...]
    template: str
    inadmissible: bool = False  # True: cannot be admitted as configured, whatever the usage


_KINDS = (
    # Derived by policies/explain.lp
    ReasonKind("LocalQueueNotFound", "local_queue_not_found", ("namespace", "localQueue"),
               "LocalQueue {{namespace}}/{{localQueue}} does not exist", True),
    ReasonKind("ClusterQueueNotFound", "cluster_queue_not_found", ("clusterQueue",),
               "ClusterQueue {{clusterQueue}} does not exist", True),
    ReasonKind("ClusterQueueInactive", "cluster_queue_inactive", ("clusterQueue", "flavor"),
               "ClusterQueue {{clusterQueue}} is inactive: its flavor {{flavor}} does not exist", True),
    ReasonKind("AdmissionCheckInactive", "admission_check_inactive", ("clusterQueue", "admissionCheck", "why"),
               "ClusterQueue {{clusterQueue}} is inactive: its admission check {{admissionCheck}} {{why}}", True),
    ReasonKind("ClusterQueueStopped", "cluster_queue_stopped", ("clusterQueue",),
               "ClusterQueue {{clusterQueue}} is stopped (stopPolicy) and admits nothing new", True),
    ReasonKind("LocalQueueStopped", "local_queue_stopped", ("namespace", "localQueue"),
               "LocalQueue {{namespace}}/{{localQueue}} is stopped (stopPolicy) and admits nothing new", True),
    ReasonKind("NamespaceNotSelected", "namespace_not_selected", ("namespace", "clusterQueue"),
               "namespace {{namespace}} is not selected by the namespaceSelector of ClusterQueue {{clusterQueue}}", True),
    ReasonKind("ResourceNotCovered", "resource_not_covered", ("podSet", "resource", "clusterQueue"),
               "pod set {{podSet}} requests {{resource}}, which no resource group of ClusterQueue {{clusterQueue}} covers", True),
    ReasonKind("NoFittingFlavor", "no_fitting_flavor", ("podSet", "resourceGroup"),
               "no flavor of resource group {{resourceGroup}} fits pod set {{podSet}}", True),
    ReasonKind("FlavorUnfit", "flavor_unfit", ("podSet", "flavor", "why"),
               "flavor {{flavor}} does not fit pod set {{podSet}}: {{why}}"),
    ReasonKind("ExceedsCapacity", "exceeds_capacity", ("clusterQueue", "flavor", "resource", "need", "capacity"),
               "needs {{need}} {{resource}} in flavor {{flavor}}, more than ClusterQueue {{clusterQueue}} could ever use ({{capacity}})"),
    ReasonKind("NeverFits", "never_fits", (),
               "too large for every flavor of one of its resource groups, even in an empty cluster", True),
    ReasonKind("HeldForLender", "held_for_lender",
               ("clusterQueue", "flavor", "resource", "need", "holderQueue", "holder", "held", "free"),
               "needs {{need}} {{resource}} in flavor {{flavor}}, which ClusterQueue {{clusterQueue}} would borrow: "
               "ClusterQueue {{holderQueue}} keeps {{held}} of its nominal quota for its head {{holder}}, which is "
               "considered first and could not take it back once lent (reclaimWithinCohort is not Any); beside "
               "that, {{free}} is free in the cohort"),
    ReasonKind("InsufficientQuota", "insufficient_quota",
               ("clusterQueue", "flavor", "resource", "need", "unusedNominal", "lent", "borrowable", "short"),
               "needs {{need}} {{resource}} in flavor {{flavor}} of ClusterQueue {{clusterQueue}}: "
               "{{unusedNominal}} free in its nominal quota{% if lent != '0' %} (another {{lent}} is lent to other queues){% endif %}, "
               "{{borrowable}} can be borrowed, so it is {{short}} short"
               "{% if checked is defined %} once what workloads ranked after it took is given back (checked by a re-solve)"
               "{% endif %}"
               "{% if aheadCount is defined %}, as number {{position}} in line in its quota tree: added quota admits "
               "{{ahead|join(', ')}}{% if aheadCount > ahead|length %} and {{aheadCount - ahead|length}} more{% endif %}, "
               "ranked before it, first{% endif %}"
               "{% if reserved is defined %}; {{reserved}} {{resource}} are reserved for InQueue PodGroup(s) "
               "{{reservedFor|join(', ')}}{% endif %}"),
    # Made by the engine
    ReasonKind("WaitsBehind", None, ("workloads", "preempting"),
               "waits behind higher-ranked workloads {% if preempting %}given the quota first (admitted, or "
               "preempting to be admitted: {{preempting|join(', ')}}){% else %}admitted first{% endif %}: "
               "{{workloads|join(', ')}}"),
    ReasonKind("PreemptionInProgress", None, ("preemptors", "victims"),
               "a preemption is under way in its quota tree: {{preemptors|join(', ')}} wait(s) for "
               "{{victims|join(', ')}} to be evicted; what is free there is decided again once they are gone"),
    ReasonKind("StrictFIFOBlocked", None, ("head",),
               "StrictFIFO: waits until {{head}}, ranked before it in the same ClusterQueue, is admitted"),
    ReasonKind("NoCombinedFit", None, (),
               "each resource fits on its own, but no combination of flavors fits all pod sets together"),
    ReasonKind("NodesUnfit", None, ("podSet", "pods", "request", "flavor", "fit", "nodes"),
               "needs {{pods}} pods x {{request}} on nodes{% if flavor %} of flavor {{flavor}}{% endif %} "
               "(pod set {{podSet}}): {{nodes}}, so only {{fit}} of its pods fit"
               "{% if reserved is defined %}; InQueue PodGroups hold {{reserved}} of the nodes{% endif %}"),
    ReasonKind("TopologyUnfit", None, ("podSet", "pods", "flavor", "level", "fit", "why"),
               "pod set {{podSet}}{% if flavor %} on flavor {{flavor}}{% endif %}: {{why}}"),
    ReasonKind("BudgetExhausted", None, ("budgetSeconds",),
               "not considered: the solver's time budget of {{budgetSeconds}}s ran out first"),
    ReasonKind("GroupIncomplete", None, ("group", "pods", "total"),
               "pod group {{group}} has {{pods}} of {{total}} pods; it is considered once all exist"),
    ReasonKind("GroupNeverFits", None, ("group", "total", "clusterQueue", "resource", "need", "quota"),
               "once complete, its {{total}} pods need at least {{need}} {{resource}}, more than the whole quota "
               "tree of ClusterQueue {{clusterQueue}} holds ({{quota}}): it can never be admitted", True),
    ReasonKind("GroupCountMismatch", None, ("group", "counts"),
               "pods of group {{group}} disagree on pod-group-total-count: {{counts|join(', ')}}", True),
    ReasonKind("InvalidGroupCount", None, ("group", "value"),
               "pod-group-total-count {{value|tojson}} of group {{group}} is not a positive integer", True),
    ReasonKind("TooManyRoles", None, ("group", "roles", "limit"),
               "pod group {{group}} has {{roles}} different pod shapes (roles); at most {{limit}} are allowed", True),
    ReasonKind("InvalidPodGroupSets", None, ("group", "error"),
               "the pod-group-sets annotation of group {{group}} is invalid: {{error}}", True),
    ReasonKind("PodGroupNotFound", None, ("group",),
               "pods name PodGroup {{group}}, which does not exist; they wait for it", False),
    ReasonKind("PodGroupBackoff", None, ("group", "requeues", "until"),
               "PodGroup {{group}} was released {{requeues}} time(s) after its schedule timeout; it waits until {{until}}"),
    # A coscheduling PodGroup's phase after the cycle (podgroups.py; the plan's podGroups[]):
    # why it has the phase it has, with the numbers behind it
    ReasonKind("PodsSucceeded", None, ("succeeded", "minMember"),
               "{{succeeded}} of minMember {{minMember}} pods succeeded"),
    ReasonKind("PodsFailed", None, ("failed",), "{{failed}} pod(s) failed"),
    ReasonKind("PodsRunning", None, ("running", "succeeded", "minMember"),
               "{{running}} running, {{succeeded}} succeeded of minMember {{minMember}}"),
    ReasonKind("PodsPlaced", None, ("placed", "running", "minMember"),
               "{{placed}} of minMember {{minMember}} pods placed, {{running}} running"),
    ReasonKind("PodsPartlyPlaced", None, ("placed", "minMember"),
               "only {{placed}} of minMember {{minMember}} pods placed"),
    ReasonKind("ScheduleTimeout", None, ("running", "minMember", "waitedSeconds", "scheduleTimeoutSeconds",
                                         "requeues", "backoffUntil"),
               "released: {{running}} of minMember {{minMember}} pods running {{waitedSeconds}}s after scheduling "
               "started (scheduleTimeoutSeconds {{scheduleTimeoutSeconds}}); requeue {{requeues}}, held until "
               "{{backoffUntil}}"),
    ReasonKind("BackingOff", None, ("requeues", "backoffUntil"),
               "backing off after release {{requeues}} until {{backoffUntil}}"),
    ReasonKind("MinResourcesFit", None, ("need", "clusterQueue"),
               "minResources fit; it holds {% for r, q in need|dictsort %}{{r}} {{q}}{% if not loop.last %}, "
               "{% endif %}{% else %}nothing{% endfor %}{% if clusterQueue %} in ClusterQueue {{clusterQueue}}"
               "{% endif %} until its pods are admitted"),
    ReasonKind("MinResourcesUnfit", None, ("need", "resource", "asks", "has", "pool"),
               "{% if backToPending is defined and backToPending %}back to Pending, {% endif %}minResources do not fit: needs {{resource}} "
               "{{asks}}, {{pool}} has {{has}}{% if reserved is defined %} ({{reserved}} reserved for InQueue "
               "group{% if reservedCount > 1 %}s{% endif %} {{reservedFor|join(', ')}}{% if reservedCount > 3 %} "
               "and {{reservedCount - 3}} more{% endif %}){% endif %}"),
    ReasonKind("PodGroupQueueNotFound", None, ("localQueue",),
               "{% if backToPending is defined and backToPending %}back to Pending, {% endif %}minResources do not fit: LocalQueue "
               "{{localQueue}} or its ClusterQueue does not exist"),
    ReasonKind("InvalidObject", None, ("kind", "name", "field", "error"),
               "{{kind}} {{name}} cannot be used and is left out: {% if field %}{{field}}: {% endif %}{{error}}", True),
    ReasonKind("ExcessPod", None, ("group", "total"),
               "group {{group}} declares {{total}} pods; this one is in excess and the youngest"),
    ReasonKind("Admitted", None, ("clusterQueue", "flavors"),
               "admitted in ClusterQueue {{clusterQueue}} using {{flavors|join(', ')}}"),
    # Admission checks (checks.py): quota reserved first, admitted once every check is Ready
    ReasonKind("QuotaReserved", None, ("clusterQueue", "flavors", "checks"),
               "quota reserved in ClusterQueue {{clusterQueue}} using {{flavors|join(', ')}}; waiting for admission "
               "checks: {{checks|join(', ')}} (Pending)"),
    ReasonKind("WaitingForAdmissionChecks", None, ("clusterQueue", "checks", "states", "messages"),
               "waiting for admission checks: {% for c in checks %}{{c}} ({{states[loop.index0]}}"
               "{% if messages[loop.index0] %}: {{messages[loop.index0]}}{% endif %}){% if not loop.last %}, "
               "{% endif %}{% endfor %}; quota reserved in ClusterQueue {{clusterQueue}}"),
    ReasonKind("AdmissionCheckRetry", None, ("checks", "messages", "evicted"),
               "{% if evicted %}evicted: {% endif %}admission check {% for c in checks %}{{c}}"
               "{% if messages[loop.index0] %} ({{messages[loop.index0]}}){% endif %}{% if not loop.last %}, {% endif %}"
               "{% endfor %} asks to retry; {% if evicted %}its quota is released and it is queued again"
               "{% else %}it is not considered until the check's controller changes that{% endif %}"),
    ReasonKind("AdmissionCheckRejected", None, ("checks", "messages"),
               "evicted and deactivated: admission check {% for c in checks %}{{c}}{% if messages[loop.index0] %} "
               "({{messages[loop.index0]}}){% endif %}{% if not loop.last %}, {% endif %}{% endfor %} rejected it",
               True),
    ReasonKind("PodSetUpdateConflict", None, ("why",),
               "its pods stay gated: {{why}} (admission checks may only add to pods)"),
    ReasonKind("AlreadyAdmitted", None, ("clusterQueue",),
               "admitted before this cycle in ClusterQueue {{clusterQueue}}; it keeps its quota"),
    # MultiKueue (docs/multikueue.md): in the manager, and in a worker for the pods made there
    ReasonKind("RunsInWorker", None, ("worker", "admissionCheck"),
               "runs in worker {{worker}} (MultiKueue check {{admissionCheck}}): its pods here stay gated, "
               "their status is copied from there"),
    ReasonKind("PrebuiltWorkloadNotFound", None, ("workload", "pods"),
               "pods {{pods|join(', ')}} name Workload {{workload}} (kueue.x-k8s.io/prebuilt-workload-name), "
               "which does not exist; they stay gated until it does"),
    ReasonKind("PrebuiltWorkloadMismatch", None, ("pod", "workload", "field", "why"),
               "pod {{pod}} does not match the Workload {{workload}} it names (prebuilt-workload-name): "
               "{{field}}: {{why}}; it stays gated", True),
    ReasonKind("Finished", None, (),
               "{% if total is defined %}its pods have finished: {{succeeded}} of {{total}} succeeded"
               "{% else %}its Workload is Finished{% endif %}"),
    # Why a pod's finalizer kueue.x-k8s.io/managed is removed (finalize-pod), or why it is deleted
    ReasonKind("WorkloadFinished", None, ("workload",),
               "workload {{workload}} has finished: the pod is no longer tracked"),
    ReasonKind("PodReplaced", None, ("workload", "podSet"),
               "a pod that workload {{workload}} owns replaces this failed pod of pod set {{podSet}}"),
    ReasonKind("WorkloadDeleted", None, ("workload",),
               "the Workload {{workload}} this pod was admitted with is deleted: its group has ended"),
    ReasonKind("PodDeleting", None, ("workload",),
               "the pod of workload {{workload}} is being deleted and no kubelet runs it, or it holds no admission"),
    ReasonKind("Deactivated", None, (), "the Workload is deactivated (spec.active is false)", True),
    # waitForPodsReady (podsready.py)
    ReasonKind("PodsReadyTimeout", None, ("timeout", "recovery", "count", "limit", "requeueAt"),
               "evicted: pods not ready within {{timeout}}{% if recovery %} of losing readiness (recoveryTimeout)"
               "{% endif %}; its quota is released and it is requeued ({{count}}{% if limit is not none %} of "
               "{{limit}}{% endif %}), back-off until {{requeueAt}}"),
    ReasonKind("RequeuingLimitExceeded", None, ("timeout", "recovery", "count", "limit"),
               "evicted and deactivated: pods not ready within {{timeout}}{% if recovery %} of losing readiness"
               "{% endif %} after {{limit}} requeue(s) (backoffLimitCount {{limit}})", True),
    ReasonKind("RequeueBackoff", None, ("requeues", "until"),
               "requeued {{requeues}} time(s) after its pods were not ready in time; it waits until {{until}}"),
    ReasonKind("WaitingForPodsReady", None, ("workloads", "count"),
               "nothing is admitted while an admitted workload's pods are not ready (waitForPodsReady "
               "blockAdmission): {{workloads|join(', ')}}{% if count > workloads|length %} and "
               "{{count - workloads|length}} more{% endif %}"),
    ReasonKind("QuotaUnknown", None, ("clusterQueue", "object"),
               "{{object}}, which clueue cannot read, may hold quota in the quota tree of ClusterQueue "
               "{{clusterQueue}}: how much is unknown, so nothing new is admitted there until it is fixed"),
    ReasonKind("ExceedsQuotaTree", None, ("clusterQueue", "resource", "need", "quota"),
               "needs {{need}} {{resource}} in all, more than the whole quota tree of ClusterQueue {{clusterQueue}} "
               "holds ({{quota}}), and more than the solver's integers can count beside it", True),
    ReasonKind("ClusterQueueDrained", None, ("clusterQueue",),
               "evicted: ClusterQueue {{clusterQueue}} is stopped with stopPolicy HoldAndDrain", True),
    ReasonKind("LocalQueueDrained", None, ("namespace", "localQueue"),
               "evicted: LocalQueue {{namespace}}/{{localQueue}} is stopped with stopPolicy HoldAndDrain", True),
    ReasonKind("Preempted", None, ("clusterQueue", "preemptors", "preemptions", "held"),
               "preempted in ClusterQueue {{clusterQueue}} to make room for {{preemptors|join(', ')}}"
               "{% for p in preemptions %}; {{p.preemptor}} of ClusterQueue {{p.clusterQueue}} by {{p.rule}}"
               "{% if p.needs %}, asking {% for f, rs in p.needs.items() %}{% for r, a in rs.items() %}{{r}} {{a}} in {{f}}"
               "{% if not loop.last %}, {% endif %}{% endfor %}{% if not loop.last %}, {% endif %}{% endfor %}{% endif %}"
               "{% if p.shares %} (share {{p.shares.before}} -> {{p.shares.after}}){% endif %}{% endfor %}"
               "{% if held %}; it held {% for f, rs in held.items() %}{% for r, a in rs.items() %}{{r}} {{a}} in {{f}}"
               "{% if not loop.last %}, {% endif %}{% endfor %}{% if not loop.last %}, {% endif %}{% endfor %}{% endif %}"),
    ReasonKind("Preempting", None, ("clusterQueue", "victims"),
               "fits in ClusterQueue {{clusterQueue}} by preempting {{victims|join(', ')}}; "
               "admitted once they release their quota"),
    # Checked "what would it take" suggestions (whatif.py): each verified by a re-solve
    ReasonKind("NeedsQuota", None, ("kind", "name", "flavor", "resource", "limit", "add", "now", "less", "stated"),
               "{{add}} more nominal {{resource}} in flavor {{flavor}} of {{kind}} {{name}} (now {{now}}) "
               "admits it; {{less}} more does not"),
    ReasonKind("NeedsLimit", None, ("kind", "name", "flavor", "resource", "limit", "add", "now", "less", "stated"),
               "raising the {{limit}} of {{resource}} in flavor {{flavor}} of {{kind}} {{name}} by {{add}} "
               "(now {{now}}) admits it; by {{less}} it does not"),
    ReasonKind("NeedsFinished", None, ("workloads", "count"),
               "admitted once {{workloads|join(', ')}} finish{% if count == 1 %}es{% endif %} (the snapshot has no "
               "run times, so not when)"),
    ReasonKind("PositionInLine", None, ("position", "ahead", "count"),
               "{% if count %}number {{position}} in line in its quota tree: {{count}} pending workload(s) ranked "
               "before it get added quota first ({{ahead|join(', ')}}{% if count > ahead|length %}, ...{% endif %})"
               "{% else %}first in line in its quota tree{% endif %}"),
    ReasonKind("AfterSameShape", None, ("workload",),
               "same shape and ClusterQueue as {{workload}}, which is ahead of it in line: what would admit "
               "{{workload}} comes first (ask about {{workload}}; this one needs at least as much more)"),
    ReasonKind("WhatIfCutShort", None, ("budgetSeconds",),
               "further suggestions not checked: the what-if time budget of {{budgetSeconds}}s ran out"),
)

CATALOG: Mapping[str, ReasonKind] = {k.code: k for k in _KINDS}
BY_TERM: Mapping[str, ReasonKind] = {k.term: k for k in _KINDS if k.term}
INADMISSIBLE_CODES = frozenset(k.code for k in _KINDS if k.inadmissible)

_env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
_templates = {k.code: _env.from_string(k.template) for k in _KINDS}


def make_reason(code: str, **details: Any) -> Reason:
    """Build a reason from its code and details, rendering its message.

    >>> make_reason("GroupIncomplete", group="train", pods=3, total=4).message
    'pod group train has 3 of 4 pods; it is considered once all exist'
    """
    kind = CATALOG[code]
    missing = set(kind.args) - set(details)
    if missing:
        raise ValueError(f"reason {code} lacks {sorted(missing)}")
    key = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in details.items())
    try:
        hash(key)
    except TypeError:  # nested details (a list of mappings): rendered without the cache
        return Reason(code, _templates[code].render(**details), details)
    return Reason(code, _render(code, key), details)


@functools.lru_cache(maxsize=4096)
def _render(code: str, details: tuple[tuple[str, Any], ...]) -> str:
    # Many workloads share a reason word for word (same queue, same shortfall): render it once.
    return _templates[code].render(**{k: list(v) if isinstance(v, tuple) else v for k, v in details})
