"""Hypothesis strategies for the fuzz tests: cluster snapshots and user policy files, as raw data.

A snapshot is a list of plain documents, as files would hold them (``kind``, ``metadata``,
``spec``...): namespaces, ResourceFlavors with node labels and taints, ClusterQueues with
resource groups and nominal / borrowing / lending quotas, cohorts (named by queues, and Cohort
objects with a parent and quota of their own), LocalQueues, priority classes, Workload objects
(some admitted, with ``status.admission``) and Pods with Kueue's labels (single pods, groups
with a total count, roles, the ``pod-group-sets`` annotation, gates, phases).

Names come from small pools, so that references mostly resolve and objects compete for the same
quota. Most values are valid; an example draws an ``odd`` rate (0-10 %) at which a value is
replaced by an odd one (huge, fractional or malformed quantities, wrong types, missing
references), and a few mutations that put a value of another type anywhere in a document. Both
shrink towards the valid snapshot, so a minimized failure keeps only the odd values it needs.
"""

from __future__ import annotations

import copy
import re
from datetime import date, datetime
from typing import Any, Callable, Iterator

from hypothesis import strategies as st

KUEUE = "kueue.x-k8s.io/v1beta1"
GATE = "kueue.x-k8s.io/admission"

NAMESPACES = ("default", "team-a")
QUEUES = ("main", "other")
CLUSTER_QUEUES = ("cq-a", "cq-b", "cq-c")
COHORTS = ("co-1", "co-2", "org")
FLAVORS = ("f-1", "f-2", "f-3")
RESOURCES = ("cpu", "memory", "example.com/gpu")
PRIORITY_CLASSES = (("high", 100), ("low", 1))

# Ordinary quantities per resource: what quotas and requests usually are.
_QUANTITIES = {
    "cpu": st.one_of(st.integers(0, 10), st.sampled_from(["1", "2", "500m", "1500m", "250m", "4"])),
    "memory": st.sampled_from(["4Gi", "8Gi", "2Gi", "16Gi", "1G", "100M", 0]),
    "example.com/gpu": st.integers(0, 4),
}
# What a pod usually asks for: less than a queue holds, so that several compete for it.
_REQUESTS = {
    "cpu": st.sampled_from([0, 1, 1, 2, 3, "500m", "1500m", "100m"]),
    "memory": st.sampled_from(["1Gi", "512Mi", "2Gi", "100M"]),
    "example.com/gpu": st.integers(0, 2),
}
# Quantities Kubernetes accepts or clueue might be given that stress units and arithmetic.
ODD_QUANTITIES: tuple[Any, ...] = (
    "1e400", "1e18", "8Ei", "1e12", "1e-9", "1n", "999999999999999999999", 10**20, 2**31, 2**63, 1.5, 0.1,
    float("inf"), float("-inf"), float("nan"), "-1", "1e999999999", "0.000001", "3.3333333333", "1Ki",
    "abc", "", True, None, [], {},
)
# Values of another type than expected, for any field.
ODD_VALUES: tuple[Any, ...] = ("x", 7, -1, 1.5, True, None, [], {}, [1], ["x"], {"a": 1}, {1: "x"}, [{}],
                               datetime(1, 1, 1), date(1, 1, 1), "1e400", 2**70, "[{name: main, count: 1")
# Names that might not resolve, or are odd as names.
ODD_NAMES: tuple[Any, ...] = ("missing", "", "UPPER", "a" * 300, 'quote"d', "back\\slash", "new\nline", 5)


class Drawer:
    """Draws from strategies, with an example-wide rate of odd values (0: all valid)."""

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any], odd: int) -> None:
        self.draw = draw
        self.odd = odd  # percent

    def __call__(self, strategy: st.SearchStrategy[Any]) -> Any:
        return self.draw(strategy)

    def is_odd(self) -> bool:
        # Drawn only when odd values are on: an all-valid example spends no choices on it.
        return self.odd > 0 and self.draw(st.integers(0, 99)) < self.odd

    def value(self, normal: st.SearchStrategy[Any], odd: tuple[Any, ...] = ODD_VALUES) -> Any:
        return self.draw(st.sampled_from(odd)) if self.is_odd() else self.draw(normal)

    def quantity(self, resource: str) -> Any:
        return self.value(_QUANTITIES.get(resource, st.integers(0, 4)), ODD_QUANTITIES)

    def name(self, pool: tuple[str, ...]) -> Any:
        return self.value(st.sampled_from(pool), ODD_NAMES)

    def maybe(self, probability: int = 50) -> bool:
        return self.draw(st.integers(0, 99)) < probability

    def subset(self, pool: tuple[str, ...], min_size: int = 0) -> list[str]:
        return self.draw(st.lists(st.sampled_from(pool), min_size=min_size, max_size=len(pool), unique=True))


def _timestamp(d: Drawer) -> Any:
    minute = d(st.integers(0, 59))
    return d.value(st.just(f"2026-11-21T08:{minute:02d}:00Z"), ("yesterday", datetime(1, 1, 1), 0, "0001-01-01T00:00:00Z"))


def _meta(d: Drawer, name: Any, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta.update(extra)
    return meta


# ------------------------------------------------------------------------------------------------
# Configuration: flavors, quota trees, queues, priorities
# ------------------------------------------------------------------------------------------------

def _flavor(d: Drawer, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    labels = {"pool": name} if d.maybe(80) else {}
    if d.maybe(25):
        labels["zone"] = d(st.sampled_from(["a", "b"]))
    if labels:
        spec["nodeLabels"] = labels
    if d.maybe(25):
        spec["nodeTaints"] = [{"key": "spot", "value": "true",
                               "effect": d(st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"]))}]
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": _meta(d, name), "spec": spec}


def _resource_quota(d: Drawer, resource: str, in_cohort: bool) -> dict[str, Any]:
    q: dict[str, Any] = {"name": resource, "nominalQuota": d.quantity(resource)}
    if in_cohort and d.maybe(35):
        q["borrowingLimit"] = d.quantity(resource)
    if in_cohort and d.maybe(35):
        q["lendingLimit"] = d.quantity(resource)
    return q


def _resource_groups(d: Drawer, flavors: list[str], in_cohort: bool) -> list[dict[str, Any]]:
    # Mostly cpu and memory, which most pods ask for: workloads compete rather than not fit.
    covered = ["cpu", "memory"] if d.maybe(60) else d.subset(RESOURCES, min_size=1)
    if "example.com/gpu" not in covered and d.maybe(30):
        covered.append("example.com/gpu")
    split = d(st.integers(1, len(covered)))  # resources of the first group; the rest form a second
    groups = []
    for resources in (covered[:split], covered[split:]):
        if not resources:
            continue
        names = d.subset(tuple(flavors), min_size=1)
        if d.maybe(3):
            names.append("f-missing")  # a ClusterQueue naming a flavor that does not exist
        groups.append({"coveredResources": resources, "flavors": [
            {"name": f, "resources": [_resource_quota(d, r, in_cohort) for r in resources if d.maybe(92)]}
            for f in names]})
    return groups


def _preemption(d: Drawer) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if d.maybe(50):
        out["withinClusterQueue"] = d(st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority"]))
    if d.maybe(40):
        out["reclaimWithinCohort"] = d(st.sampled_from(["Never", "LowerPriority", "Any"]))
        if out["reclaimWithinCohort"] != "Never" and d.maybe(40):
            out["borrowWithinCohort"] = {"policy": "LowerPriority"}
            if d.maybe(50):
                out["borrowWithinCohort"]["maxPriorityThreshold"] = d(st.sampled_from([0, 1, 50, 100]))
    return out


def _cluster_queue(d: Drawer, name: str, flavors: list[str], cohorts: list[str]) -> dict[str, Any]:
    cohort = d(st.sampled_from(cohorts)) if cohorts and d.maybe(70) else None
    spec: dict[str, Any] = {"namespaceSelector": d(st.sampled_from([{}] * 5 + [{"matchLabels": {"team": "a"}}])),
                            "resourceGroups": _resource_groups(d, flavors, cohort is not None)}
    if cohort:
        spec["cohort"] = cohort
    if d.maybe(25):
        spec["queueingStrategy"] = d(st.sampled_from(["StrictFIFO", "BestEffortFIFO"]))
    if d.maybe(20):
        spec["flavorFungibility"] = {"whenCanBorrow": d(st.sampled_from(["Borrow", "TryNextFlavor"])),
                                     "whenCanPreempt": d(st.sampled_from(["Preempt", "TryNextFlavor"]))}
    if d.maybe(50):
        spec["preemption"] = _preemption(d)
    if d.maybe(3):
        spec["stopPolicy"] = d(st.sampled_from(["Hold", "HoldAndDrain", "None"]))
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": _meta(d, name), "spec": spec}


def _cohort(d: Drawer, name: str, flavors: list[str]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    parents = [c for c in COHORTS if c != name]
    if d.maybe(40):
        spec["parentName"] = d(st.sampled_from(parents))
    if d.maybe(50):
        spec["resourceGroups"] = _resource_groups(d, flavors, "parentName" in spec)
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": _meta(d, name), "spec": spec}


def _configuration(d: Drawer) -> tuple[list[dict[str, Any]], list[str]]:
    """Namespaces, flavors, quota trees, queues and priority classes; and the flavors' names."""
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "a"}}}]
    flavors = d.subset(FLAVORS, min_size=1)
    docs += [_flavor(d, f) for f in flavors]
    cohorts = d.subset(COHORTS)
    docs += [_cohort(d, c, flavors) for c in cohorts if d.maybe(50)]
    queues = d.subset(CLUSTER_QUEUES, min_size=1)
    docs += [_cluster_queue(d, q, flavors, cohorts) for q in queues]
    for ns in NAMESPACES:
        for lq in QUEUES:
            if d.maybe(90):
                docs.append({"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": _meta(d, lq, ns),
                             "spec": {"clusterQueue": d.value(st.sampled_from(queues), ODD_NAMES)}})
    for name, value in PRIORITY_CLASSES:
        if d.maybe(70):
            docs.append({"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": name},
                         "value": d.value(st.just(value))})
        if d.maybe(30):
            docs.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                         "value": value, "globalDefault": name == "low" and d.maybe(30)})
    return docs, flavors


# ------------------------------------------------------------------------------------------------
# Workloads: Workload objects and Pods
# ------------------------------------------------------------------------------------------------

def _pod_spec(d: Drawer, flavors: list[str], shape: int) -> dict[str, Any]:
    """A pod spec; pods of the same ``shape`` ask the same (and so share a role)."""
    resources = ["cpu"] + d.subset(RESOURCES[1:2] if shape % 2 == 0 else RESOURCES[1:])
    requests = {r: d.value(_REQUESTS[r], ODD_QUANTITIES) for r in resources}
    container: dict[str, Any] = {"name": "main", "image": f"registry.example/app:{shape}",
                                 "resources": {"requests": requests}}
    spec: dict[str, Any] = {"containers": [container]}
    if d.maybe(15):
        spec["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": d.quantity("cpu")}}}]
    if d.maybe(25):
        spec["tolerations"] = [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]
    if d.maybe(15):
        spec["nodeSelector"] = {"pool": d(st.sampled_from(flavors))}
    if d.maybe(10):
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": d.subset(tuple(flavors), 1)}]}]}}}
    return spec


def _admission(d: Drawer, cluster_queues: dict[str, dict[str, Any]], cq: Any,
               pod_sets: list[tuple[str, int, dict[str, Any]]]) -> dict[str, Any]:
    """A status.admission for pod sets ``(name, count, requests)``, in flavors of ``cq``."""
    groups = (cluster_queues.get(cq) or {}).get("spec", {}).get("resourceGroups", [])
    assignments = []
    for name, count, requests in pod_sets:
        flavors = {}
        for r in requests:
            group = next((g for g in groups if r in g["coveredResources"]), None)
            options = [f["name"] for f in group["flavors"]] if group else list(FLAVORS)
            flavors[r] = d(st.sampled_from(options))
        assignments.append({"name": name, "count": d.value(st.just(count)), "flavors": flavors})
    return {"clusterQueue": cq, "podSetAssignments": assignments}


def _workload(d: Drawer, i: int, flavors: list[str], cluster_queues: dict[str, dict[str, Any]],
              local_queues: dict[tuple[str, str], Any]) -> dict[str, Any]:
    ns = d(st.sampled_from(NAMESPACES))
    queue = d.name(QUEUES)
    sets = []
    for name in d(st.sampled_from([["main"], ["main"], ["driver", "workers"]])):
        spec = _pod_spec(d, flavors, d(st.integers(0, 3)))
        sets.append({"name": name, "count": d.value(st.integers(0, 4)), "template": {"spec": spec}})
    body: dict[str, Any] = {"queueName": queue, "podSets": sets}
    if d.maybe(40):
        body["priority"] = d.value(st.sampled_from([0, 0, 10, 100, -5]))
    elif d.maybe(40):
        body["priorityClassName"] = d.name(tuple(n for n, _ in PRIORITY_CLASSES))
    if d.maybe(5):
        body["active"] = False
    out: dict[str, Any] = {"apiVersion": KUEUE, "kind": "Workload",
                           "metadata": _meta(d, f"wl-{i}", ns, creationTimestamp=_timestamp(d)), "spec": body}
    if d.maybe(45):
        # Usually admitted into the ClusterQueue its LocalQueue points to; sometimes elsewhere.
        own = local_queues.get((ns, queue)) if isinstance(queue, str) else None
        cq = own if own is not None and d.maybe(85) else d.name(CLUSTER_QUEUES)
        pod_sets = [(s["name"], s["count"], s["template"]["spec"]["containers"][0]["resources"]["requests"]) for s in sets]
        status: dict[str, Any] = {"admission": _admission(d, cluster_queues, cq, pod_sets)}
        if d.maybe(10):
            status["conditions"] = [{"type": "Finished", "status": "True"}]
        if d.maybe(10):
            status["reclaimablePods"] = [{"name": sets[0]["name"], "count": d.value(st.integers(0, 2))}]
        out["status"] = status
    return out


def _pod(d: Drawer, name: str, ns: str, queue: Any, spec: dict[str, Any], *, gated: bool,
         labels: dict[str, Any] | None = None, annotations: dict[str, Any] | None = None) -> dict[str, Any]:
    meta = _meta(d, name, ns, uid=f"uid-{ns}-{name}", creationTimestamp=_timestamp(d),
                 labels={"kueue.x-k8s.io/queue-name": queue, "kueue.x-k8s.io/managed": "true", **(labels or {})},
                 annotations=dict(annotations or {}))
    if d.maybe(5):
        meta["labels"]["kueue.x-k8s.io/priority-class"] = d.name(tuple(n for n, _ in PRIORITY_CLASSES))
    if d.maybe(5):
        meta["deletionTimestamp"] = "2026-11-21T09:00:00Z"
    spec = copy.deepcopy(spec)  # pods never share nested objects: a mutation changes one
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if d.maybe(30):
        out["status"] = {"phase": d(st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]))}
    return out


def _ungated_spec(d: Drawer, spec: dict[str, Any], flavors: list[str]) -> dict[str, Any]:
    """A pod that started before: usually with the node selector of one of the flavors."""
    if d.maybe(70):
        return {**spec, "nodeSelector": {"pool": d(st.sampled_from(flavors))}}
    return spec


def _single_pod(d: Drawer, i: int, flavors: list[str]) -> dict[str, Any]:
    gated = d.maybe(75)
    spec = _pod_spec(d, flavors, d(st.integers(0, 3)))
    return _pod(d, f"p-{i}", d(st.sampled_from(NAMESPACES)), d.name(QUEUES),
                spec if gated else _ungated_spec(d, spec, flavors), gated=gated)


def _pod_group(d: Drawer, i: int, flavors: list[str]) -> list[dict[str, Any]]:
    ns = d(st.sampled_from(NAMESPACES))
    queue = d.name(QUEUES)
    group = f"g-{i}"
    count = d(st.integers(1, 4))
    total = d.value(st.sampled_from([count, count, count, count + 1, max(1, count - 1)]),
                    ("x", "0", "-1", "1e3", "", 10**12))
    shapes = d(st.lists(st.integers(0, 3), min_size=count, max_size=count))
    specs = {s: _pod_spec(d, flavors, s) for s in set(shapes)}
    started = d.maybe(20)  # the group was admitted before: its pods run ungated
    annotations: dict[str, Any] = {"kueue.x-k8s.io/pod-group-total-count": str(total)}
    if d.maybe(10):
        annotations["kueue.x-k8s.io/retriable-in-group"] = "false"
    pods = []
    for j, shape in enumerate(shapes):
        spec = specs[shape] if not started else _ungated_spec(d, specs[shape], flavors)
        pods.append(_pod(d, f"{group}-{j}", ns, queue, spec, gated=not started or d.maybe(10),
                         labels={"kueue.x-k8s.io/pod-group-name": group}, annotations=annotations))
    if d.maybe(10):
        # A driver declaring the workers it will create (pod-group-sets).
        sets = d.value(st.sampled_from([
            '[{"name": "driver", "count": 1}, {"name": "workers", "count": 2, "template": '
            '{"spec": {"containers": [{"name": "w", "resources": {"requests": {"cpu": "1"}}}]}}}]',
            '[{"name": "main", "count": 2}]',
        ]), ("[{name: main, count: 1", "[]", "{}", '[{"name": "main", "count": "two"}]', "[" * 200 + "]" * 200))
        pods[0]["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-sets"] = sets
        for p in pods[1:]:
            p["metadata"]["labels"]["kueue.x-k8s.io/pod-group-role"] = "workers"
    return pods


# ------------------------------------------------------------------------------------------------
# Mutations: a value of another type anywhere
# ------------------------------------------------------------------------------------------------

def paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path into ``node`` below its root (keys and list indexes), each before those below it."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield path + (k,)
            yield from paths(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield path + (i,)
            yield from paths(v, path + (i,))


def _mutate(d: Drawer, docs: list[dict[str, Any]]) -> None:
    where = [(i, p) for i, doc in enumerate(docs) for p in paths(doc) if p[0] not in ("apiVersion", "kind")]
    if not where:
        return
    i, path = d(st.sampled_from(where))
    node: Any = docs[i]
    for part in path[:-1]:
        node = node[part]
    if isinstance(node, dict) and d.maybe(20):
        del node[path[-1]]
    else:
        node[path[-1]] = d(st.sampled_from(ODD_VALUES))


@st.composite
def snapshots(draw: Callable[[st.SearchStrategy[Any]], Any], *, odd: bool = True) -> list[dict[str, Any]]:
    """A snapshot as a list of raw documents; with ``odd``, some values are odd (see the module)."""
    d = Drawer(draw, draw(st.sampled_from([0, 0, 0, 1, 3, 10])) if odd else 0)
    docs, flavors = _configuration(d)
    cluster_queues = {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == "ClusterQueue"}
    local_queues = {(doc["metadata"]["namespace"], doc["metadata"]["name"]): doc["spec"]["clusterQueue"]
                    for doc in docs if doc["kind"] == "LocalQueue"}
    for i in range(d(st.integers(0, 6))):
        docs.append(_workload(d, i, flavors, cluster_queues, local_queues))
    for i in range(d(st.integers(0, 5))):
        docs.append(_single_pod(d, i, flavors))
    for i in range(d(st.integers(0, 2))):
        docs += _pod_group(d, i, flavors)
    if odd:
        for _ in range(d(st.sampled_from([0, 0, 0, 1, 2]))):
            _mutate(d, docs)
    return docs


# ------------------------------------------------------------------------------------------------
# User policy files
# ------------------------------------------------------------------------------------------------

# Body literals over the documented facts and decision predicates, with the variables they bind.
_DECIDE_LITERALS = (
    "admit(W)", "choose(W,PS,G,F)", "assign(W,PS,R,F)", "use(W,PS,F,R,A)", "candidate(W)",
    "workload_priority(W,P)", "workload_namespace(W,NS)", "workload_queue(W,LQ)", "workload_cq(W,Q)",
    "pod_set(W,PS,C)", "pod_request(W,PS,R,A)", "flavor(F)", "flavor_label(F,K,V)", "option(W,PS,G,F)",
    "cluster_queue(Q)", "quota(cq(Q),F,R,A)", "rank_key(W,K)", "workload_created(W,T)",
)
_EXPLAIN_LITERALS = ("left_out(W)", "admit(W)", "workload_priority(W,P)", "pod_set(W,PS,C)", "workload_cq(W,Q)",
                     "need(W,F,R,A)")
_COMPARISONS = ("P < 50", "P >= 100", "C > 2", "A > 4", 'F != "f-1"', 'NS = "team-a"', 'R = "cpu"', "T > 0",
                "A*C > 8", "P \\ 7 = 1", "X = 1..3")
_VARIABLE = re.compile(r'"[^"]*"|\b([A-Z][A-Za-z0-9_]*)\b')


def _variables(text: str) -> set[str]:
    return {m.group(1) for m in _VARIABLE.finditer(text) if m.group(1)}


def _safe(options: list[str], bound: set[str]) -> list[str]:
    return [o for o in options if _variables(o) <= bound]


def _body(d: Callable[[st.SearchStrategy[Any]], Any], literals: tuple[str, ...]) -> tuple[str, set[str]]:
    """A rule body and the variables it binds. Mostly safe (every variable of a comparison or a
    negated literal bound by a positive literal); one in ten is not, which clingo must refuse."""
    parts = d(st.lists(st.sampled_from(literals), min_size=1, max_size=3))
    bound = set().union(*map(_variables, parts)) | {"X"}  # X = 1..3 binds X
    unsafe = d(st.integers(0, 9)) == 0
    comparisons = list(_COMPARISONS) if unsafe else _safe(list(_COMPARISONS), bound)
    parts += d(st.lists(st.sampled_from(comparisons), max_size=2))
    negated = list(literals) if unsafe else _safe(list(literals), bound)
    if negated and d(st.booleans()):
        parts.append("not " + d(st.sampled_from(negated)))
    return ", ".join(parts), bound - ({"X"} if "X = 1..3" not in parts else set())


def _pick(d: Callable[[st.SearchStrategy[Any]], Any], options: list[str], bound: set[str], fallback: str) -> str:
    return d(st.sampled_from(_safe(options, bound) or [fallback]))


@st.composite
def policy_statement(draw: Callable[[st.SearchStrategy[Any]], Any]) -> str:
    """One statement of a user policy: mostly well-formed rules over the documented predicates
    (hard rules, objective terms, reasons, derived predicates), sometimes unsafe or garbage."""
    kind = draw(st.sampled_from(["constraint", "weak", "derived", "reason", "count", "directive", "garbage"]))
    if kind == "constraint":
        return f"#program decide.\n:- {_body(draw, _DECIDE_LITERALS)[0]}."
    if kind == "weak":
        body, bound = _body(draw, _DECIDE_LITERALS)
        weight = _pick(draw, ["1", "P", "A", "-1", "2**40", "A*C"], bound, "1")
        terms = _pick(draw, ["W", "W,PS", "W,PS,G", "F"], bound, "1")
        return f"#program decide.\n:~ {body}. [{weight}@{draw(st.sampled_from([1, 15, 30, 25]))},{terms}]"
    if kind == "derived":
        body, bound = _body(draw, _DECIDE_LITERALS)
        head = _pick(draw, ["fz_p(W)", "fz_q(W,P)", "fz_n(X)", "fz_big(W) ; fz_small(W)", "fz_f(F,A)"], bound, "fz_o")
        return f"#program {draw(st.sampled_from(['base', 'decide', 'explain']))}.\n{head} :- {body}."
    if kind == "reason":
        body, bound = _body(draw, _EXPLAIN_LITERALS)
        term = _pick(draw, ["fz_reason", "fz_reason(P)", "never_fits", "insufficient_quota(1,2)", '"text"', "fz(A,F)"],
                     bound, "fz_reason")
        return f"#program explain.\nreason(W,{term}) :- {body}." if "W" in bound else f"#program explain.\n:- {body}."
    if kind == "count":
        bound = draw(st.integers(0, 3))
        return f"#program decide.\n:- #count{{ W : admit(W), workload_namespace(W,NS) }} > {bound}, NS = \"team-a\"."
    if kind == "directive":
        return draw(st.sampled_from([
            "#const fz_limit = 3.", "#show fz_p/1.", "#defined fz_r/1.", "#program other.\nfz_o(1).",
            "#minimize { 1,W : admit(W) }.", "#program decide.\n{ fz_pick(W) } :- candidate(W).",
            "#script (python)\ndef f(): pass\n#end.", '#include "other.lp".', "#program decide.\n:- @f(W), admit(W).",
            "#program decide(k).\nfz_k(k).", "#external fz_e(1).", "#program decide.\n:- admit(W), fz_undefined(W).",
        ]))
    return draw(st.text(alphabet=st.sampled_from(list("abWX():-.,;{}#%\"\n <>=!0123456789_@[]")), max_size=40))


@st.composite
def policy_files(draw: Callable[[st.SearchStrategy[Any]], Any]) -> dict[str, str]:
    """A user policy: file name -> text. Mostly one file of its own name, which adds rules; now
    and then a file named after a built-in rule group, which replaces that group."""
    statements = draw(st.lists(policy_statement(), min_size=1, max_size=4))
    name = draw(st.sampled_from(["fuzz.lp"] * 6 + ["objective.lp", "ordering.lp", "explain.lp"]))
    return {name: "\n".join(statements) + "\n"}


@st.composite
def successive_snapshots(draw: Callable[[st.SearchStrategy[Any]], Any]) -> list[list[dict[str, Any]]]:
    """Two to four snapshots of one cluster, as a controller sees it cycle after cycle: the same
    queues and quotas, some workloads and pods staying, others arriving (whose names may join
    the pod groups of earlier ones)."""
    first = draw(snapshots(odd=False))
    config = [d for d in first if d["kind"] not in ("Workload", "Pod")]
    objects = [d for d in first if d["kind"] in ("Workload", "Pod")]
    cycles = [first]
    for i in range(draw(st.integers(1, 3))):
        arriving = [d for d in draw(snapshots(odd=False)) if d["kind"] in ("Workload", "Pod")]
        for d in arriving:
            d["metadata"]["name"] += f"-c{i}"
            d["metadata"]["uid"] = f"uid-{i}-{d['metadata']['name']}"
        objects = [o for o in objects if draw(st.booleans())] + arriving
        cycles.append(config + copy.deepcopy(objects))
    return cycles
