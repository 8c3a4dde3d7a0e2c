"""Live benchmark, part (a): gated Pods through the controller, beside the apiserver's write rate.

``count`` Pods are created at once, as fast as the API takes them from ``clients`` threads,
each as the webhook would have made it (the admission scheduling gate, the ``managed`` label and
finalizer, a queue-name label; one Pod per workload) in a namespace whose ClusterQueue has quota
for all of them. A watch sees each Pod's gate removed. Then, with the controller stopped, the
same threads patch every Pod once (an annotation, and the finalizer off so the Pods can go):
the apiserver's own write rate for Pods in the same run, which bounds the controller's rate
since each ungate is such a write. Finally the Pods and their Workloads are deleted, so that
the next part of the run starts from an empty cluster.
"""

from __future__ import annotations

import functools
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

from clueue.engine import AdapterError
from clueue.engine.kueue_api import ADMISSION_GATE as GATE, KUEUE_GROUP, MANAGED_LABEL, POD_FINALIZER, QUEUE_LABEL

from .live_kube import REQUEST_TIMEOUT, Event, LiveApi, Watcher, answer, brief

__all__ = ["GATE", "RUN_LABEL", "pod_setup", "create_pods", "patch_rate", "delete_pods", "rate", "run_writes"]

RUN_LABEL = "clueue.dev/bench-live-run"
KUEUE = f"{KUEUE_GROUP}/v1beta1"
Say = Callable[[str], None]


def pod_setup(api: LiveApi, namespace: str, run: str, count: int) -> None:
    """The namespace, a flavor, a ClusterQueue with ``count`` CPUs and its LocalQueue ``main``."""
    api.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                              _preload_content=False)
    group, version = KUEUE.split("/")
    api.objects.create_cluster_custom_object(group, version, "resourceflavors", {
        "apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": f"{run}-pods"}, "spec": {}},
        _preload_content=False)
    api.objects.create_cluster_custom_object(group, version, "clusterqueues", {
        "apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": f"{run}-pods"}, "spec": {
            "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": f"{run}-pods", "resources": [{"name": "cpu", "nominalQuota": count}]}]}]}},
        _preload_content=False)
    api.objects.create_namespaced_custom_object(group, version, namespace, "localqueues", {
        "apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "main", "namespace": namespace},
        "spec": {"clusterQueue": f"{run}-pods"}}, _preload_content=False)


def _pod(namespace: str, name: str, run: str) -> dict[str, Any]:
    """A single Pod as the webhook leaves it: gated, managed, with its finalizer."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "finalizers": [POD_FINALIZER],
                         "labels": {QUEUE_LABEL: "main", MANAGED_LABEL: "true",
                                    RUN_LABEL: run}},
            "spec": {"schedulingGates": [{"name": GATE}], "containers": [
                {"name": "main", "image": "registry.example/bench:1", "resources": {"requests": {"cpu": "1"}}}]}}


def run_writes(clients: int, items: Sequence[Any], write: Callable[[Any], None]) -> tuple[float, float, list[str]]:
    """``write`` each item from ``clients`` threads; (first sent, last done) monotonic, and errors."""
    errors: list[str] = []
    done: list[float] = []

    def one(item: Any) -> None:
        try:
            write(item)
        except Exception as e:  # noqa: BLE001 - counted and reported, the run goes on
            errors.append(f"{item}: {brief(e)}")
        done.append(time.monotonic())

    start = time.monotonic()
    with ThreadPoolExecutor(clients, thread_name_prefix="clueue-bench-client") as pool:
        list(pool.map(one, items))
    return start, max(done, default=start), errors


def rate(count: int, start: float, end: float) -> float | None:
    """``count`` per second over ``end - start`` (None for an empty span)."""
    return round(count / (end - start), 1) if end > start and count else None


def _gated(pod: dict[str, Any]) -> bool:
    return any(g.get("name") == GATE for g in (pod.get("spec") or {}).get("schedulingGates") or [])


def create_pods(api: LiveApi, namespace: str, run: str, count: int, clients: int, timeout_s: float,
                say: Say) -> dict[str, Any]:
    """Create ``count`` gated Pods and wait until the controller has ungated them all (or ``timeout_s``)."""
    names = [f"p-{i:05d}" for i in range(count)]
    created: dict[str, float] = {}
    ungated: dict[str, float] = {}

    def seen(event: Event) -> None:
        name = event.object["metadata"]["name"]
        if event.type != "DELETED" and name not in ungated and not _gated(event.object):
            ungated[name] = event.at

    watcher = Watcher(functools.partial(api.core.list_namespaced_pod, namespace), seen, label_selector=f"{RUN_LABEL}={run}")
    watcher.start()

    def create(name: str) -> None:
        answer(api.core.create_namespaced_pod(namespace, _pod(namespace, name, run), _preload_content=False,
                                              _request_timeout=REQUEST_TIMEOUT))
        created[name] = time.monotonic()

    try:
        say(f"creating {count} gated Pods from {clients} clients")
        first, last_created, errors = run_writes(clients, names, create)
        say(f"created {len(created)} Pods in {last_created - first:.1f} s; waiting for the controller to ungate them")
        deadline = time.monotonic() + timeout_s
        while len(ungated) < len(created) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        watcher.stop()
    times = sorted(ungated.values())
    latencies = sorted(max(0.0, ungated[n] - created[n]) for n in ungated if n in created)
    steady = None
    if len(times) >= 10:  # the middle 80%: without the ramp-up of the first cycle and the tail
        lo, hi = times[len(times) // 10], times[(9 * len(times)) // 10]
        steady = rate((9 * len(times)) // 10 - len(times) // 10, lo, hi)
    return {
        "pods": count, "clients": clients, "created": len(created), "createErrors": errors[:5],
        "createErrorCount": len(errors), "ungated": len(ungated),
        "createSeconds": round(last_created - first, 3), "createPerSecond": rate(len(created), first, last_created),
        "endToEndSeconds": round(times[-1] - first, 3) if times else None,
        "ungatedPerSecond": rate(len(times), first, times[-1]) if times else None,
        "steadyUngatedPerSecond": steady,
        "firstUngateSeconds": round(times[0] - first, 3) if times else None,
        "gatedToUngatedSeconds": {"median": round(statistics.median(latencies), 3),
                                  "p99": round(latencies[min(len(latencies) - 1, (99 * len(latencies)) // 100)], 3),
                                  "max": round(latencies[-1], 3)} if latencies else None,
        "watchErrors": watcher.errors[:5],
    }


def patch_rate(api: LiveApi, namespace: str, count: int, clients: int) -> dict[str, Any]:
    """Patch each of the ``count`` Pods once from ``clients`` threads: the apiserver's Pod write rate."""
    body = {"metadata": {"annotations": {"clueue.dev/bench-touched": "true"}, "finalizers": None}}

    def patch(name: str) -> None:
        answer(api.core.patch_namespaced_pod(name, namespace, body, _preload_content=False,
                                             _request_timeout=REQUEST_TIMEOUT))

    first, last, errors = run_writes(clients, [f"p-{i:05d}" for i in range(count)], patch)
    return {"patched": count - len(errors), "patchSeconds": round(last - first, 3),
            "patchPerSecond": rate(count - len(errors), first, last), "patchErrors": errors[:5]}


def delete_pods(api: LiveApi, namespace: str, run: str) -> None:
    """Delete the run's Pods and the Workloads made for them (no garbage collector may run)."""
    try:
        answer(api.core.delete_collection_namespaced_pod(namespace, label_selector=f"{RUN_LABEL}={run}",
                                                         grace_period_seconds=0, _preload_content=False))
        group, version = KUEUE.split("/")
        answer(api.objects.delete_collection_namespaced_custom_object(group, version, namespace, "workloads",
                                                                      _preload_content=False))
    except Exception as e:  # noqa: BLE001 - left-overs do not spoil the figures already taken
        raise AdapterError(f"deleting the benchmark's Pods in {namespace}: {e}") from None
