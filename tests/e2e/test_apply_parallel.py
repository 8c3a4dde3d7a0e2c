"""apply_plan's concurrent chains, live: a stop between workloads leaves each whole or untouched,
serial and parallel applies list the same results, and stale cached objects cost a conflict,
never a wrong write."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from kubernetes import client

from clueue.adapters.kube.apply import apply_plan
from clueue.adapters.kube.read import read_cluster, to_document
from clueue.adapters.kube.kinds import KINDS
from clueue.engine import Document, Plan, load_policy, run_cycle
from tests.e2e.test_adapter import create, gated_pod, queue_setup, tag
from tests.e2e.test_plain_pods_live import only
from tests.testenv.control_plane import ControlPlane

POLICY = load_policy()
PODS = 12


@pytest.fixture
def api(kube: ControlPlane) -> Iterator[client.ApiClient]:
    with kube.api_client() as api:
        yield api


def backlog(api: client.ApiClient, count: int = PODS) -> tuple[str, Plan]:
    """A namespace with ``count`` gated 1-cpu pods and quota for all; the plan admitting them."""
    ns = queue_setup(api, tag(), nominal=count)
    for i in range(count):
        create(api, gated_pod(ns, f"p{i:02}"))
    return ns, run_cycle(only(ns, read_cluster(api)), POLICY)


def state(api: client.ApiClient, ns: str) -> tuple[set[str], set[str], set[str]]:
    """(Workloads, admitted Workloads, ungated pods' Workloads) of ``ns``."""
    workloads = client.CustomObjectsApi(api).list_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta1", ns, "workloads")["items"]
    pods = client.CoreV1Api(api).list_namespaced_pod(ns).items
    return ({w["metadata"]["name"] for w in workloads},
            {w["metadata"]["name"] for w in workloads if (w.get("status") or {}).get("admission")},
            {f"pod-{p.metadata.name}" for p in pods if not p.spec.scheduling_gates})


def test_a_stop_between_workloads_leaves_each_whole_or_untouched(api: client.ApiClient) -> None:
    ns, plan = backlog(api)
    asked = [0]
    lock = threading.Lock()

    def should_stop() -> bool:  # the stop comes after five workloads have started
        with lock:
            asked[0] += 1
            return asked[0] > 5

    result = apply_plan(api, plan, should_stop=should_stop, workers=4)
    assert result.stopped and not result.errors, result
    made, admitted, ungated = state(api, ns)
    assert len(made) == 5 and made == admitted == ungated  # five whole, the others untouched

    again = apply_plan(api, run_cycle(only(ns, read_cluster(api)), POLICY), workers=4)  # the next leader
    assert not again.stopped and not again.errors, again
    made, admitted, ungated = state(api, ns)
    assert len(made) == PODS and made == admitted == ungated


def test_serial_and_parallel_applies_list_the_same_results_in_the_same_order(api: client.ApiClient) -> None:
    ns_serial, serial_plan = backlog(api)
    ns_parallel, parallel_plan = backlog(api)
    serial = apply_plan(api, serial_plan, workers=1)
    parallel = apply_plan(api, parallel_plan, workers=8)
    assert [w.replace(ns_serial, "NS") for w in serial.writes] == \
        [w.replace(ns_parallel, "NS") for w in parallel.writes]
    steps = [w.split(" ", 1)[0] for w in parallel.writes]  # every Workload before any pod
    assert steps == ["create", "status"] * PODS + ["ungate"] * PODS, steps
    assert not serial.errors and not parallel.errors


def test_stale_cached_objects_cost_a_conflict_not_a_wrong_write(api: client.ApiClient) -> None:
    ns, plan = backlog(api, 4)
    kinds = {k.kind: k for k in KINDS}
    stale: dict[tuple[str, str], Document] = {}
    for pod in client.CoreV1Api(api).list_namespaced_pod(ns).items:  # as read before a change
        stale[("Pod", f"{ns}/{pod.metadata.name}")] = to_document(api, kinds["Pod"], "v1beta1", pod)
    for name in ("p00", "p01"):  # changed since: the cache's copies are old
        client.CoreV1Api(api).patch_namespaced_pod(name, ns, {"metadata": {"labels": {"touched": "yes"}}})

    def cached(kind: str, key: str) -> Document | None:
        return stale.get((kind, key))

    result = apply_plan(api, plan, cached=cached, workers=4)
    assert not result.errors and result.retries >= 2, result
    made, admitted, ungated = state(api, ns)
    assert len(made) == 4 and made == admitted == ungated
    touched = client.CoreV1Api(api).read_namespaced_pod("p00", ns)
    assert touched.metadata.labels["touched"] == "yes"  # the change of the fresh read, not the stale copy
    pods = client.CoreV1Api(api).list_namespaced_pod(ns).items
    assert touched.spec.node_selector and all(p.metadata.annotations.get("clueue.dev/workload-uid") for p in pods)
