"""Seeded, reproducible benchmark scenarios as plain Kubernetes objects.

A scenario is the cluster configuration (Namespaces, ResourceFlavors, Cohorts, ClusterQueues,
LocalQueues) and a backlog of ``kueue.x-k8s.io/v1beta1`` Workload objects, exactly as a user
would write them, so that the engine loads them through its ordinary snapshot loader. Each
Workload carries what a replay needs and the engine ignores:

- label ``clueue.dev/bench-class``: the workload class (``small``, ``medium``, ``gang``, ...);
- annotation ``clueue.dev/bench-arrival-ms``: its arrival, in virtual milliseconds from the
  start of the run (``metadata.creationTimestamp`` holds the same instant, to the millisecond);
- annotation ``clueue.dev/bench-runtime-ms``: how long it runs once admitted.

The shapes:

``baseline``
    Kueue's scheduler performance test: 5 cohorts x 6 ClusterQueues, nominal 20 CPU and
    borrowing limit 100 each, 500 workloads per ClusterQueue: 350 small (1 CPU, runs 200 ms,
    one every 100 ms, priority 50), 100 medium (5 CPU, 500 ms, every 500 ms, priority 100),
    50 large (20 CPU, 1 s, every 1200 ms, priority 200). 15,000 workloads.
``baseline-preemption``
    ``baseline`` with ``preemption.withinClusterQueue: LowerPriority`` on every ClusterQueue.
``baseline-kueue``
    ``baseline`` as Kueue's own configuration of that test sets it: every ClusterQueue also
    reclaims within its cohort (``preemption.reclaimWithinCohort: Any``).
``large-scale``
    Kueue's large-scale shape: 10 cohorts x 100 ClusterQueues with the same quotas, 50
    workloads per ClusterQueue (35 small / 11 medium / 4 large; 150 / 350 / 700 ms run times,
    one every 60 / 300 / 700 ms). 50,000 workloads.
``flavors``
    Choice among flavors of different sizes: each ClusterQueue lists a small, a medium and a
    large flavor (in that order) for cpu and memory; workloads of many sizes. Kueue's
    first-fit puts early small workloads into whichever flavor comes first and strands later
    large ones.
``gangs``
    Pod groups of mixed shapes: workloads of 1 to 3 pod sets (a launcher, workers, an
    evaluator) with different pod counts and requests, two flavors per ClusterQueue.
``placement``
    1,000 GPU nodes of four shapes, a third partly used, and 5,000 pending pods in gangs of 1 to
    32 pods: where the nodes, not the quota, decide.
``fair-sharing``
    Fair sharing by weight, switched on in Kueue's ConfigMap: per cohort, a lender and three
    ClusterQueues of weights 1, 2 and 4 borrowing everything they use, under contention.
``fragmentation``
    Awkward sizes (3, 5, 7, 11 CPU) against flavor quotas they do not divide, under a
    hierarchical cohort with lending limits: what first-fit leaves as holes.

Every generator takes ``seed`` (all randomness comes from one ``random.Random(seed)``) and
``scale`` (the fraction of each ClusterQueue's workloads to generate, for quick runs).

>>> s = generate("baseline", seed=1, scale=0.02)
>>> s.summary()["clusterQueues"], s.summary()["workloads"]
(30, 300)
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import yaml

from clueue.engine import Document, Snapshot, build_snapshot
from clueue.engine.kueue_api import HOSTNAME_LABEL, KUEUE_GROUP

__all__ = [
    "ARRIVAL_ANNOTATION", "RUNTIME_ANNOTATION", "CLASS_LABEL", "EPOCH", "SCENARIO_NAMES",
    "WorkloadClass", "Scenario", "generate", "write_snapshot", "workload_object",
]

ARRIVAL_ANNOTATION = "clueue.dev/bench-arrival-ms"
RUNTIME_ANNOTATION = "clueue.dev/bench-runtime-ms"
CLASS_LABEL = "clueue.dev/bench-class"
#: Virtual time 0 of every scenario.
EPOCH = datetime(2025, 1, 1, tzinfo=timezone.utc)
KUEUE_API = f"{KUEUE_GROUP}/v1beta1"

Obj = dict[str, Any]


@dataclass(frozen=True)
class WorkloadClass:
    """One set of identical single-pod workloads of Kueue's performance test.

    Parameters:
        name: class name (``small``, ``medium``, ``large``).
        count: workloads per ClusterQueue.
        cpu: CPU request of the one pod.
        interval_ms: one arrives every ``interval_ms`` in each ClusterQueue.
        runtime_ms: how long it runs once admitted.
        priority: ``spec.priority``.
    """

    name: str
    count: int
    cpu: int
    interval_ms: int
    runtime_ms: int
    priority: int


@dataclass(frozen=True)
class Scenario:
    """A generated scenario: configuration objects and the Workload backlog."""

    name: str
    seed: int
    description: str
    config: tuple[Obj, ...]
    workloads: tuple[Obj, ...]
    scale: float = 1.0
    meta: Mapping[str, Any] = field(default_factory=dict)

    def documents(self) -> list[Document]:
        """The objects as engine documents, labelled ``bench:<scenario>#<n>``."""
        return [Document(f"bench:{self.name}#{i + 1}", body)
                for i, body in enumerate((*self.config, *self.workloads))]

    def snapshot(self) -> Snapshot:
        """Load the scenario through the engine's ordinary snapshot loader."""
        return build_snapshot(self.documents())

    def summary(self) -> dict[str, Any]:
        kinds: dict[str, int] = {}
        for o in self.config:
            kinds[o["kind"]] = kinds.get(o["kind"], 0) + 1
        classes: dict[str, int] = {}
        for w in self.workloads:
            c = w["metadata"]["labels"][CLASS_LABEL]
            classes[c] = classes.get(c, 0) + 1
        return {"scenario": self.name, "seed": self.seed, "scale": self.scale,
                "clusterQueues": kinds.get("ClusterQueue", 0), "cohorts": len(self.meta.get("cohorts", ())),
                "flavors": kinds.get("ResourceFlavor", 0), "workloads": len(self.workloads),
                "classes": dict(sorted(classes.items()))}


# --------------------------------------------------------------------------------------------
# Object builders
# --------------------------------------------------------------------------------------------

def _timestamp(ms: int) -> str:
    t = EPOCH + timedelta(milliseconds=ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _namespace(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _flavor(name: str, labels: Mapping[str, str] | None = None) -> Obj:
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": name},
            "spec": {"nodeLabels": dict(labels or {"clueue.dev/flavor": name})}}


def _quota(resource: str, nominal: int | str, borrowing: int | str | None = None,
           lending: int | str | None = None) -> Obj:
    q: Obj = {"name": resource, "nominalQuota": nominal}
    if borrowing is not None:
        q["borrowingLimit"] = borrowing
    if lending is not None:
        q["lendingLimit"] = lending
    return q


def _cluster_queue(name: str, cohort: str | None, flavors: Sequence[tuple[str, list[Obj]]],
                   covered: Sequence[str] = ("cpu",), strategy: str = "BestEffortFIFO",
                   preemption: Obj | None = None) -> Obj:
    spec: Obj = {
        "namespaceSelector": {},
        "queueingStrategy": strategy,
        "resourceGroups": [{"coveredResources": list(covered),
                            "flavors": [{"name": f, "resources": rs} for f, rs in flavors]}],
    }
    if cohort:
        spec["cohort"] = cohort
    if preemption:
        spec["preemption"] = dict(preemption)
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def _cohort(name: str, parent: str | None) -> Obj:
    spec: Obj = {"parentName": parent} if parent else {}
    return {"apiVersion": KUEUE_API, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def _local_queue(namespace: str, cluster_queue: str) -> Obj:
    return {"apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue}}


def _queued(namespace: str, cluster_queue: Obj) -> list[Obj]:
    """``cluster_queue`` fed from a namespace of its own: that Namespace, its LocalQueue, the ClusterQueue."""
    return [_namespace(namespace), _local_queue(namespace, cluster_queue["metadata"]["name"]), cluster_queue]


def _cohort_grid(cohorts: int, queues_per_cohort: int, digits: tuple[int, int] = (1, 1)
                 ) -> Iterator[tuple[str, str, str]]:
    """(cohort, ClusterQueue, namespace) names of ``queues_per_cohort`` ClusterQueues in each of
    ``cohorts`` cohorts: ``cohort-C``, ``cq-C-Q``, ``ns-C-Q``, C and Q written with ``digits``."""
    c_width, q_width = digits
    for c in range(cohorts):
        for q in range(queues_per_cohort):
            yield f"cohort-{c:0{c_width}d}", f"cq-{c:0{c_width}d}-{q:0{q_width}d}", f"ns-{c:0{c_width}d}-{q:0{q_width}d}"


def _cohorts_of(grid: Iterable[tuple[str, str, str]]) -> dict[str, Any]:
    """A scenario's ``meta`` naming the cohorts of ``grid`` (:func:`_cohort_grid`), in order."""
    return {"cohorts": tuple(dict.fromkeys(cohort for cohort, _, _ in grid))}


def workload_object(namespace: str, name: str, *, cls: str, priority: int, arrival_ms: int, runtime_ms: int,
                    pod_sets: Sequence[tuple[str, int, Mapping[str, int | str]]], queue: str = "lq") -> Obj:
    """A Workload object with the bench label and annotations.

    ``pod_sets`` lists ``(name, count, requests per pod)``.

    >>> w = workload_object("ns", "w1", cls="small", priority=50, arrival_ms=1500, runtime_ms=200,
    ...                     pod_sets=[("main", 1, {"cpu": 1})])
    >>> w["metadata"]["creationTimestamp"], w["spec"]["podSets"][0]["count"]
    ('2025-01-01T00:00:01.500Z', 1)
    """
    return {
        "apiVersion": KUEUE_API, "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": _timestamp(arrival_ms),
                     "labels": {CLASS_LABEL: cls},
                     "annotations": {ARRIVAL_ANNOTATION: str(arrival_ms), RUNTIME_ANNOTATION: str(runtime_ms)}},
        "spec": {
            "queueName": queue, "priority": priority,
            "podSets": [{"name": ps, "count": count, "template": {"spec": {"containers": [
                {"name": "c", "image": "registry.example/bench:1",
                 "resources": {"requests": {r: v for r, v in sorted(req.items())}}}]}}}
                for ps, count, req in pod_sets],
        },
    }


# --------------------------------------------------------------------------------------------
# Kueue's performance shapes
# --------------------------------------------------------------------------------------------

BASELINE_CLASSES = (
    WorkloadClass("small", 350, 1, 100, 200, 50),
    WorkloadClass("medium", 100, 5, 500, 500, 100),
    WorkloadClass("large", 50, 20, 1200, 1000, 200),
)
LARGE_SCALE_CLASSES = (
    WorkloadClass("small", 35, 1, 60, 150, 50),
    WorkloadClass("medium", 11, 5, 300, 350, 100),
    WorkloadClass("large", 4, 20, 700, 700, 200),
)


def _scaled(count: int, scale: float) -> int:
    return max(1, round(count * scale)) if count else 0


def _kueue_shape(name: str, description: str, *, cohorts: int, queues_per_cohort: int,
                 classes: Sequence[WorkloadClass], seed: int, scale: float,
                 nominal: int = 20, borrowing: int = 100, preemption: Obj | None = None) -> Scenario:
    rng = random.Random(seed)
    config: list[Obj] = [_flavor("default")]
    workloads: list[Obj] = []
    width = len(str(max(c.count for c in classes)))
    grid = list(_cohort_grid(cohorts, queues_per_cohort, digits=(2, 3)))
    for cohort, cq, ns in grid:
        config += _queued(ns, _cluster_queue(cq, cohort, [("default", [_quota("cpu", nominal, borrowing)])],
                                             preemption=preemption))
        for cls in classes:
            offset = rng.randrange(cls.interval_ms)  # queues do not start in lockstep
            for i in range(_scaled(cls.count, scale)):
                workloads.append(workload_object(
                    ns, f"{cls.name}-{i:0{width}d}", cls=cls.name, priority=cls.priority,
                    arrival_ms=offset + i * cls.interval_ms, runtime_ms=cls.runtime_ms,
                    pod_sets=[("main", 1, {"cpu": cls.cpu})]))
    return Scenario(name, seed, description, _ordered(config), tuple(workloads), scale, _cohorts_of(grid))


def baseline(seed: int = 0, scale: float = 1.0) -> Scenario:
    return _kueue_shape("baseline", "Kueue perf baseline: 30 CQs in 5 cohorts, 500 workloads each",
                        cohorts=5, queues_per_cohort=6, classes=BASELINE_CLASSES, seed=seed, scale=scale)


def baseline_preemption(seed: int = 0, scale: float = 1.0) -> Scenario:
    return _kueue_shape("baseline-preemption", "baseline, whose ClusterQueues preempt lower priorities",
                        cohorts=5, queues_per_cohort=6, classes=BASELINE_CLASSES, seed=seed, scale=scale,
                        preemption={"withinClusterQueue": "LowerPriority"})


def baseline_kueue(seed: int = 0, scale: float = 1.0) -> Scenario:
    return _kueue_shape("baseline-kueue", "baseline with Kueue's preemption settings: also reclaim in the cohort",
                        cohorts=5, queues_per_cohort=6, classes=BASELINE_CLASSES, seed=seed, scale=scale,
                        preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"})


def large_scale(seed: int = 0, scale: float = 1.0) -> Scenario:
    return _kueue_shape("large-scale", "Kueue perf large-scale: 1,000 CQs in 10 cohorts, 50 workloads each",
                        cohorts=10, queues_per_cohort=100, classes=LARGE_SCALE_CLASSES, seed=seed, scale=scale)


# --------------------------------------------------------------------------------------------
# Shapes where the choice of flavors matters
# --------------------------------------------------------------------------------------------

_PRIORITIES = (50, 100, 200)


def _arrivals(rng: random.Random, n: int, span_ms: int) -> list[int]:
    return sorted(rng.randrange(span_ms) for _ in range(n))


def flavors(seed: int = 0, scale: float = 1.0) -> Scenario:
    """8 cohorts x 4 CQs; flavors small (8 CPU), medium (16), large (32) per CQ, in that order.

    About 1.7x as much demand as quota, in chunky sizes with varied memory per CPU.
    """
    rng = random.Random(seed)
    sizes, weights = (2, 3, 4, 6, 8, 12, 16, 24), (2, 3, 4, 4, 4, 3, 2, 1)
    quotas = (("small", 8, 32), ("medium", 16, 64), ("large", 32, 128))
    config: list[Obj] = [_flavor(f) for f, _, _ in quotas]
    workloads: list[Obj] = []
    grid = list(_cohort_grid(8, 4))
    for cohort, cq, ns in grid:
        config += _queued(ns, _cluster_queue(
            cq, cohort, [(f, [_quota("cpu", cpu, cpu), _quota("memory", f"{mem}Gi", f"{mem}Gi")])
                         for f, cpu, mem in quotas], covered=("cpu", "memory")))
        for i, t in enumerate(_arrivals(rng, _scaled(12, scale), 60_000)):
            cpu = rng.choices(sizes, weights)[0]
            mem = cpu * rng.choice((2, 4, 6))
            workloads.append(workload_object(
                ns, f"wl-{i:04d}", cls=f"cpu{cpu}", priority=rng.choice(_PRIORITIES), arrival_ms=t,
                runtime_ms=rng.randrange(2_000, 20_000, 100),
                pod_sets=[("main", 1, {"cpu": cpu, "memory": f"{mem}Gi"})]))
    return Scenario("flavors", seed, "3 flavors of 8/16/32 CPU per CQ, workloads of 2-24 CPU",
                    _ordered(config), tuple(workloads), scale, _cohorts_of(grid))


def gangs(seed: int = 0, scale: float = 1.0) -> Scenario:
    """6 cohorts x 4 CQs; workloads of 1-3 pod sets over an on-demand and a spot flavor.

    Each ClusterQueue may borrow only a little (borrowing limit 4 CPU per flavor), so a gang
    placed pod set by pod set in the first flavor with room can strand the capacity a later
    gang needs whole.
    """
    rng = random.Random(seed)
    quotas = (("on-demand", 16, 64), ("spot", 24, 96))
    config: list[Obj] = [_flavor(f) for f, _, _ in quotas]
    workloads: list[Obj] = []
    grid = list(_cohort_grid(6, 4))
    for cohort, cq, ns in grid:
        config += _queued(ns, _cluster_queue(
            cq, cohort, [(f, [_quota("cpu", cpu, 4), _quota("memory", f"{mem}Gi", "16Gi")])
                         for f, cpu, mem in quotas], covered=("cpu", "memory")))
        for i, t in enumerate(_arrivals(rng, _scaled(8, scale), 60_000)):
            shape = rng.choice(("single", "pair", "triple"))
            pod_sets: list[tuple[str, int, Mapping[str, int | str]]] = []
            if shape != "single":
                pod_sets.append(("launcher", 1, {"cpu": 1, "memory": "2Gi"}))
            per = rng.choice((3, 5))
            pod_sets.append(("workers", rng.choice((2, 3, 4)), {"cpu": per, "memory": f"{4 * per}Gi"}))
            if shape == "triple":
                pod_sets.append(("evaluator", rng.choice((1, 2)), {"cpu": 2, "memory": "8Gi"}))
            workloads.append(workload_object(
                ns, f"gang-{i:04d}", cls=f"gang-{shape}", priority=rng.choice(_PRIORITIES), arrival_ms=t,
                runtime_ms=rng.randrange(2_000, 20_000, 100), pod_sets=pod_sets))
    return Scenario("gangs", seed, "pod groups of 1-3 pod sets over on-demand (16 CPU) and spot (24 CPU)",
                    _ordered(config), tuple(workloads), scale, _cohorts_of(grid))


def fragmentation(seed: int = 0, scale: float = 1.0) -> Scenario:
    """A hierarchical cohort (org -> 4 departments -> 4 CQs each) with lending limits; sizes 3/5/7/11."""
    rng = random.Random(seed)
    config: list[Obj] = [_flavor("a"), _flavor("b"), _cohort("org", None)]
    workloads: list[Obj] = []
    departments = [f"dept-{d}" for d in range(4)]
    for d, dept in enumerate(departments):
        config.append(_cohort(dept, "org"))
        for q in range(4):
            cq, ns = f"cq-{d}-{q}", f"ns-{d}-{q}"
            config += _queued(ns, _cluster_queue(
                cq, dept, [("a", [_quota("cpu", 10, 20, 6)]), ("b", [_quota("cpu", 13, 26, 8)])],
                strategy="StrictFIFO" if q == 3 else "BestEffortFIFO"))
            for i, t in enumerate(_arrivals(rng, _scaled(8, scale), 30_000)):
                cpu = rng.choice((3, 5, 7, 11))
                workloads.append(workload_object(
                    ns, f"frag-{i:04d}", cls=f"cpu{cpu}", priority=rng.choice(_PRIORITIES), arrival_ms=t,
                    runtime_ms=rng.randrange(2_000, 15_000, 100), pod_sets=[("main", 1, {"cpu": cpu})]))
    return Scenario("fragmentation", seed, "sizes 3/5/7/11 CPU against flavors of 10 and 13, hierarchical cohorts",
                    _ordered(config), tuple(workloads), scale, {"cohorts": ("org", *departments)})


#: Node shapes of the ``placement`` scenario: (flavor, GPUs per node, nodes at scale 1).
PLACEMENT_NODES = (("a100", 8, 300), ("a100", 4, 200), ("h100", 8, 300), ("h100", 4, 200))
GPU = "nvidia.com/gpu"
GPU_TYPE_LABEL = "gpu.example/type"


def _node(name: str, gpu_type: str, gpus: int) -> Obj:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {HOSTNAME_LABEL: name, GPU_TYPE_LABEL: gpu_type}},
            "spec": {}, "status": {"allocatable": {"cpu": str(12 * gpus), "memory": f"{64 * gpus}Gi",
                                                   GPU: str(gpus), "pods": "110"}}}


def _running_pod(name: str, node: str, gpus: int) -> Obj:
    """A pod running on ``node`` (not queued): it only takes capacity."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "running", "creationTimestamp": _timestamp(0)},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "registry.example/bench:1", "resources": {
                "requests": {"cpu": str(8 * gpus), "memory": f"{32 * gpus}Gi", GPU: str(gpus)}}}]},
            "status": {"phase": "Running"}}


def placement(seed: int = 0, scale: float = 1.0) -> Scenario:
    """1,000 GPU nodes of four shapes (a100 and h100, 8 and 4 GPUs; a third partly used by
    running pods) and 5,000 pending pods in gangs of 1 to 32 pods of 1 to 8 GPUs each (one
    Workload each) in 4 ClusterQueues of one cohort whose quota exceeds the nodes: the nodes
    decide what runs. Compared with a greedy per-pod first-fit as the coscheduling plugin places
    pods (bench/greedy_placement.py)."""
    rng = random.Random(seed)
    config: list[Obj] = [_flavor("a100", {GPU_TYPE_LABEL: "a100"}), _flavor("h100", {GPU_TYPE_LABEL: "h100"})]
    running: list[Obj] = []
    for gpu_type, gpus, count in PLACEMENT_NODES:
        for i in range(_scaled(count, scale)):
            name = f"{gpu_type}-{gpus}g-{i:04d}"
            config.append(_node(name, gpu_type, gpus))
            if rng.random() < 0.3:  # partly used: a running pod holds some of its GPUs
                running.append(_running_pod(f"run-{name}", name, rng.randrange(1, gpus)))
    teams = [f"team-{t}" for t in range(4)]
    for team in teams:
        config += _queued(team, _cluster_queue(
            team, "gpus", [(f, [_quota("cpu", 20_000, 60_000), _quota("memory", "80Ti", "240Ti"),
                                _quota(GPU, 2_000, 6_000)]) for f in ("a100", "h100")],
            covered=("cpu", "memory", GPU)))
    config.append(_namespace("running"))
    workloads: list[Obj] = []
    total, pods = _scaled(5000, scale), 0
    while pods < total:
        size = min(rng.choice((1, 1, 2, 4, 4, 8, 8, 16, 32)), total - pods)
        gpus = rng.choice((1, 2, 4, 8) if size <= 8 else (4, 8))
        g = len(workloads)
        workloads.append(workload_object(
            rng.choice(teams), f"gang-{g:04d}", cls=f"gang{size}x{gpus}", priority=rng.choice(_PRIORITIES),
            arrival_ms=g * 50, runtime_ms=60_000,
            pod_sets=[("main", size, {"cpu": 8 * gpus, "memory": f"{32 * gpus}Gi", GPU: gpus})]))
        pods += size
    return Scenario("placement", seed, "1,000 GPU nodes (a third partly used), 5,000 pending pods in gangs",
                    _ordered(config + running), tuple(workloads), scale, {"cohorts": ("gpus",)})


_ORDER = {"Namespace": 0, "ResourceFlavor": 1, "Cohort": 2, "ClusterQueue": 3, "LocalQueue": 4}


#: fair-sharing: per cohort, the weights of the ClusterQueues that borrow everything they use.
FAIR_WEIGHTS = (1, 2, 4)


def fair_sharing(seed: int = 0, scale: float = 1.0) -> Scenario:
    """Fair sharing by weight, switched on in Kueue's own ConfigMap: 3 cohorts, each with a
    lender (nominal 40 CPU, an occasional workload of its own) and three ClusterQueues of
    nominal 0 and weights 1, 2 and 4 that borrow all they use, every queue reclaiming in its
    cohort. The borrowers' arrivals (300 each, 1 to 4 CPU, 1 to 4 s, two priorities) ask about
    three times what the cohort holds, so their shares are contended the whole run."""
    rng = random.Random(seed)
    config: list[Obj] = [_flavor("default"), {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
        "data": {"controller_manager_config.yaml": "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
                 "fairSharing:\n  enable: true\n  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]\n"}}]
    workloads: list[Obj] = []
    reclaim = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    cohorts = [f"cohort-{c:02d}" for c in range(3)]
    for c, cohort in enumerate(cohorts):
        queues = [(f"lender-{c:02d}", 40, None, 30, 8000)] + \
                 [(f"cq-{c:02d}-w{w}", 0, w, 300, 50) for w in FAIR_WEIGHTS]
        for cq, nominal, weight, count, interval in queues:
            ns = f"ns-{cq}"
            obj = _cluster_queue(cq, cohort, [("default", [_quota("cpu", nominal)])], preemption=reclaim)
            if weight is not None:
                obj["spec"]["fairSharing"] = {"weight": str(weight)}
            config += _queued(ns, obj)
            offset = rng.randrange(interval)
            for i in range(_scaled(count, scale)):
                cpu = rng.randint(4, 8) if weight is None else rng.randint(1, 4)
                workloads.append(workload_object(
                    ns, f"w-{i:03d}", cls="lender" if weight is None else f"weight-{weight}",
                    priority=rng.choice((50, 100)), arrival_ms=offset + i * interval,
                    runtime_ms=rng.randint(1000, 4000), pod_sets=[("main", 1, {"cpu": cpu})]))
    return Scenario("fair-sharing", seed, "fair sharing by weight (1, 2, 4) among borrowing queues",
                    _ordered(config), tuple(workloads), scale, {"cohorts": tuple(cohorts)})


def _ordered(config: Iterable[Obj]) -> tuple[Obj, ...]:
    return tuple(sorted(config, key=lambda o: (_ORDER.get(o["kind"], 9),
                                               o["metadata"].get("namespace", ""), o["metadata"]["name"])))


_GENERATORS: dict[str, Callable[[int, float], Scenario]] = {
    "baseline": baseline, "baseline-preemption": baseline_preemption, "baseline-kueue": baseline_kueue,
    "large-scale": large_scale, "flavors": flavors, "gangs": gangs, "fragmentation": fragmentation,
    "placement": placement, "fair-sharing": fair_sharing,
}
SCENARIO_NAMES: tuple[str, ...] = tuple(_GENERATORS)


def generate(name: str, *, seed: int = 0, scale: float = 1.0) -> Scenario:
    """Generate scenario ``name`` (one of :data:`SCENARIO_NAMES`).

    Raises:
        ValueError: an unknown name or a scale outside (0, 1].
    """
    if name not in _GENERATORS:
        raise ValueError(f"unknown scenario {name!r}; known: {', '.join(SCENARIO_NAMES)}")
    if not 0 < scale <= 1:
        raise ValueError(f"scale must be in (0, 1], got {scale}")
    return _GENERATORS[name](seed, scale)


def write_snapshot(scenario: Scenario, directory: str | Path) -> list[Path]:
    """Write the scenario as snapshot files that ``clueue plan DIR`` reads.

    Files: ``00-config.yaml`` (every configuration object) and ``10-workloads.yaml``.
    Returns the paths written.
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    written = []
    for fname, objs in (("00-config.yaml", scenario.config), ("10-workloads.yaml", scenario.workloads)):
        path = out / fname
        with path.open("w", encoding="utf-8") as fh:
            fh.write(f"# clueue bench scenario {scenario.name} (seed {scenario.seed}, scale {scenario.scale})\n")
            yaml.dump_all(objs, fh, Dumper=dumper, sort_keys=False, default_flow_style=None, width=120)
        written.append(path)
    return written
