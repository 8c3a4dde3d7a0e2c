"""Small builders for the Kubernetes objects tests feed to clueue (plain dicts, as users write them)."""

from __future__ import annotations

from typing import Any, Iterable

from clueue.engine import Config, Document, Plan, build_snapshot, load_policy, run_cycle

KUEUE = "kueue.x-k8s.io/v1beta1"
GATE = {"name": "kueue.x-k8s.io/admission"}


def ts(minute: int) -> str:
    """A creation timestamp ``minute`` minutes into the test day."""
    return f"2026-11-21T{8 + minute // 60:02d}:{minute % 60:02d}:00Z"


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def flavor(name: str, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if labels:
        spec["nodeLabels"] = labels
    if taints:
        spec["nodeTaints"] = taints
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def quota(nominal: Any, borrowing: Any = None, lending: Any = None) -> dict[str, Any]:
    q: dict[str, Any] = {"nominalQuota": nominal}
    if borrowing is not None:
        q["borrowingLimit"] = borrowing
    if lending is not None:
        q["lendingLimit"] = lending
    return q


def resource_group(flavors: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``{flavor: {resource: nominal or quota(...)}}`` -> one resource group."""
    covered: list[str] = []
    for resources in flavors.values():
        covered += [r for r in resources if r not in covered]
    return {"coveredResources": covered, "flavors": [
        {"name": f, "resources": [{"name": r, **(q if isinstance(q, dict) else quota(q))} for r, q in res.items()]}
        for f, res in flavors.items()]}


def cluster_queue(name: str, flavors: dict[str, dict[str, Any]] | None = None, *, groups: list[dict[str, Any]] | None = None,
                  cohort: str | None = None, strategy: str | None = None, selector: dict[str, Any] | None = None,
                  when_can_borrow: str | None = None, preemption: dict[str, str] | None = None,
                  api: str = KUEUE) -> dict[str, Any]:
    spec: dict[str, Any] = {"namespaceSelector": {} if selector is None else selector,
                            "resourceGroups": groups if groups is not None else [resource_group(flavors or {})]}
    if cohort:
        spec["cohortName" if api.endswith("v1beta2") else "cohort"] = cohort
    if strategy:
        spec["queueingStrategy"] = strategy
    if when_can_borrow:
        spec["flavorFungibility"] = {"whenCanBorrow": when_can_borrow}
    if preemption:
        spec["preemption"] = preemption
    return {"apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def cohort(name: str, parent: str | None = None, flavors: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parent:
        spec["parentName"] = parent
    if flavors:
        spec["resourceGroups"] = [resource_group(flavors)]
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def local_queue(cq: str, name: str = "main", ns: str = "default") -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterQueue": cq}}


def pod(name: str, *, ns: str = "default", queue: str | None = "main", cpu: Any = "1", memory: Any = None,
        gpu: Any = None, group: str | None = None, total: int | str | None = None, gated: bool = True,
        minute: int = 0, phase: str | None = None, labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, tolerations: list[dict[str, str]] | None = None,
        node_selector: dict[str, str] | None = None, priority_class: str | None = None,
        image: str = "registry.example/app:1", owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "creationTimestamp": ts(minute),
                            "labels": dict(labels or {}), "annotations": dict(annotations or {})}
    if queue:
        meta["labels"]["kueue.x-k8s.io/queue-name"] = queue
        meta["labels"]["kueue.x-k8s.io/managed"] = "true"
    if group:
        meta["labels"]["kueue.x-k8s.io/pod-group-name"] = group
    if total is not None:
        meta["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = str(total)
    if owner:
        meta["ownerReferences"] = [owner]
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory), ("nvidia.com/gpu", gpu)) if v is not None}
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": image, "resources": {"requests": requests}}]}
    if gated:
        spec["schedulingGates"] = [GATE]
    if tolerations:
        spec["tolerations"] = tolerations
    if node_selector:
        spec["nodeSelector"] = node_selector
    if priority_class:
        spec["priorityClassName"] = priority_class
    out = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if phase:
        out["status"] = {"phase": phase}
    return out


def group(name: str, count: int, *, total: int | None = None, minute: int = 0, **kw: Any) -> list[dict[str, Any]]:
    """``count`` pods of group ``name`` declaring ``total`` (default ``count``) pods."""
    return [pod(f"{name}-{i}", group=name, total=total or count, minute=minute, **kw) for i in range(count)]


def workload(name: str, *, ns: str = "default", queue: str = "main", cpu: Any = "1", count: int = 1,
             priority: int | None = None, minute: int = 0, admitted_in: tuple[str, str] | None = None,
             pod_sets: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A Kueue Workload; ``admitted_in=(clusterQueue, flavor)`` gives it a status.admission."""
    sets = pod_sets or [{"name": "main", "count": count, "template": {"spec": {"containers": [
        {"name": "main", "image": "registry.example/app:1", "resources": {"requests": {"cpu": cpu}}}]}}}]
    spec: dict[str, Any] = {"queueName": queue, "podSets": sets}
    if priority is not None:
        spec["priority"] = priority
    out: dict[str, Any] = {"apiVersion": KUEUE, "kind": "Workload",
                           "metadata": {"name": name, "namespace": ns, "creationTimestamp": ts(minute)}, "spec": spec}
    if admitted_in:
        cq, fl = admitted_in
        out["status"] = {"admission": {"clusterQueue": cq, "podSetAssignments": [
            {"name": s["name"], "count": s["count"], "flavors": {"cpu": fl}} for s in sets]}}
    return out


def flatten(objs: Iterable[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for o in objs:
        out += flatten(o) if isinstance(o, list) else [o]
    return out


#: The solver's budget of a test's cycle unless it sets one: the phases of a search get shares of
#: the budget, so a loaded machine could cut a search the default 10 s lets finish when quiet.
#: Far above the work (a test's cycle is proven optimal within a second), it only bounds a hang.
TEST_TIME_BUDGET = 600.0


def run(*objs: Any, policy: Iterable[str] = (), **config: Any) -> Plan:
    """One decision cycle over the given objects (lists are flattened)."""
    docs = [Document(f"test#{i + 1}", o) for i, o in enumerate(flatten(objs))]
    config.setdefault("time_budget", TEST_TIME_BUDGET)
    return run_cycle(build_snapshot(docs), load_policy(policy), Config(**config))


def states(plan: Plan) -> dict[str, str]:
    return {w.name: w.state for w in plan.workloads}


def codes(plan: Plan, name: str) -> list[str]:
    return [r.code for r in plan.workload(name).reasons]


def flavors(plan: Plan, name: str) -> dict[str, dict[str, str]]:
    return {a.name: dict(a.flavors) for a in plan.workload(name).admission}
