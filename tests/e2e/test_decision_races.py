"""A decision never outlives what it decided about: objects deleted or replaced mid-cycle.

The controller's turn (:func:`~clueue.adapters.kube.decide.decide_and_apply` over a watch
cache, exactly as adapters/controller/loop.py runs it) is paused at one step while a test
deletes a Workload or a Pod, or replaces it by a new object of the same name, and waits until
the cache shows it; then the turn goes on. The steps:

- ``read``: between the snapshot and the decision;
- ``decide``: between the decision and the writes;
- ``ungate``: between the Workload writes (step 1 of apply) and the first pod ungate.

What each test asserts is what a user relies on: no Workload is made again, or written on,
carrying an admission decided about one since deleted or replaced; recorded admissions never
exceed the quota; no pod runs ungated unless a Workload of its group records an admission (a
Workload the user deletes while its pods run ends the group: its pods, which record its uid,
are deleted, KEP-976); no other pod is lost. Pauses are hooks, not sleeps: deterministic.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from clueue.adapters.kube import ClusterCache
from clueue.adapters.kube import apply as apply_module
from clueue.adapters.kube.decide import Decided, decide_and_apply
from clueue.engine import Config, Plan, Snapshot, load_policy, run_cycle
from clueue.engine.workloads import WORKLOAD_UID_ANNOTATION
# a control plane of this module's own: each turn decides over the whole cluster
from tests.e2e.controller_harness import api, cluster, wait_until  # noqa: F401 - cluster and api are fixtures
from tests.e2e.test_adapter import create, gated_pod, queue_setup, tag
from tests.e2e.test_controller_faults import admitted_usage, is_gated, mark_succeeded

KUEUE = ("kueue.x-k8s.io", "v1beta1")
POLICY = load_policy()
QUOTA = 2  # cpu of each test's ClusterQueue; its pods ask 1 cpu each
WAIT_S = 120  # a guard against hanging, never a measure of speed
STEPS = ("read", "decide")  # the pauses before apply: the snapshot is as old at both


@pytest.fixture
def decider(api: client.ApiClient) -> Iterator[Decider]:
    cache = ClusterCache(api).start()
    assert cache.wait_synced(WAIT_S)
    try:
        yield Decider(api, cache)
    finally:
        cache.stop(timeout=5)


class Decider:
    """The controller's turn, with a hook at each step (loop.py's ``_cycle``, without its timers)."""

    def __init__(self, api: client.ApiClient, cache: ClusterCache) -> None:
        self.api, self.cache = api, cache
        self.ns = ""  # the lease's namespace: the test's own

    def turn(self, pause: str = "", then: Callable[[], None] | None = None) -> Decided:
        """One turn; ``then`` runs (once) at the ``pause`` step: ``read``, ``decide`` or ``ungate``."""
        def at(step: str) -> None:
            if step == pause and then is not None:
                then()

        def read() -> Snapshot:
            snapshot = self.cache.snapshot()
            at("read")
            return snapshot

        def decide(snapshot: Snapshot) -> Plan:
            plan = run_cycle(snapshot, POLICY)
            at("decide")
            return plan

        original = apply_module._Applier.ungate
        lock, done = threading.Lock(), []

        def ungate(applier: Any, *args: Any, **kwargs: Any) -> None:
            with lock:  # every chain's first ungate waits until the hook ran (chains run on threads)
                if not done:
                    done.append(True)
                    at("ungate")
            original(applier, *args, **kwargs)

        assert self.cache.wait_for_expectations(WAIT_S)
        self.cache.begin_writes()
        written: list[tuple[str, str, str]] = []
        apply_module._Applier.ungate = ungate  # type: ignore[method-assign]
        try:
            decided = decide_and_apply(self.api, POLICY, Config(), read=read, decide=decide, lease_namespace=self.ns,
                                       cached=self.cache.get)
            written = decided.applied.written
        finally:
            apply_module._Applier.ungate = original  # type: ignore[method-assign]
            self.cache.expect(written)
        return decided

    def sees(self, kind: str, key: str, uid: str | None) -> None:
        """Wait until the cache holds ``kind`` ``key`` with ``uid`` (None: holds none)."""
        def held() -> bool:
            doc = self.cache.get(kind, key)
            return (doc is None) if uid is None else (doc is not None and dict(doc.body)["metadata"]["uid"] == uid)
        wait_until(held, WAIT_S, f"the cache to hold {kind} {key} as {uid or 'gone'}")


# -- the cluster as a user sees it -----------------------------------------------------------------
def workloads(api: client.ApiClient, ns: str) -> dict[str, dict[str, Any]]:
    items = client.CustomObjectsApi(api).list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"]
    return {w["metadata"]["name"]: w for w in items}


def pods(api: client.ApiClient, ns: str) -> dict[str, Any]:
    return {p.metadata.name: p for p in client.CoreV1Api(api).list_namespaced_pod(ns).items}


def admission(wl: dict[str, Any] | None) -> dict[str, Any] | None:
    return ((wl or {}).get("status") or {}).get("admission")


def uid_of(wl: dict[str, Any] | None) -> str:
    return str(((wl or {}).get("metadata") or {}).get("uid") or "")


def broken(api: client.ApiClient, ns: str) -> list[str]:
    """The promises broken right now. Pods are listed before Workloads: an ungated pod seen had
    its admission recorded before. An ungated pod records the uid of the Workload it runs under,
    and that Workload, while it exists, records an admission; once it is gone (deleted, or
    replaced by another of its name) the group has ended, and the next turn deletes the pod (each
    test checks they are gone). Recorded admissions hold at most the quota."""
    seen = pods(api, ns)
    held = workloads(api, ns)
    found = []
    for name, pod in seen.items():
        if is_gated(pod) or pod.metadata.deletion_timestamp:
            continue
        group = (pod.metadata.labels or {}).get("kueue.x-k8s.io/pod-group-name") or f"pod-{name}"
        recorded = (pod.metadata.annotations or {}).get(WORKLOAD_UID_ANNOTATION, "")
        wl = held.get(group)
        if not recorded:
            found.append(f"pod {name} ungated without recording the Workload it runs under")
        elif wl is not None and uid_of(wl) == recorded and admission(wl) is None:
            found.append(f"pod {name} runs under Workload {group}, which records no admission")
    for (cq, flavor, resource), used in admitted_usage(list(held.values())).items():
        if resource == "cpu" and used > QUOTA:
            found.append(f"ClusterQueue {cq} records {float(used):g} cpu of {flavor} admitted, over its quota {QUOTA}")
    return found


def settle(api: client.ApiClient, ns: str, decider: Decider, done: Callable[[], bool], what: str,
           turns: int = 8) -> None:
    """Turns until ``done()``, the promises checked after each one."""
    for _ in range(turns):
        assert broken(api, ns) == []
        if done():
            return
        decider.turn()
    assert broken(api, ns) == []
    assert done(), f"{turns} turns and not yet: {what}"


def group(api: client.ApiClient, ns: str, name: str, size: int = 2) -> list[str]:
    names = [f"{name}-{i}" for i in range(size)]
    for pod in names:
        create(api, gated_pod(ns, pod, cpu="1", group=name, total=size))
    return names


def running(api: client.ApiClient, ns: str, names: list[str]) -> bool:
    seen = pods(api, ns)
    return all(n in seen and not is_gated(seen[n]) for n in names)


def delete_workload(api: client.ApiClient, ns: str, name: str) -> None:
    client.CustomObjectsApi(api).delete_namespaced_custom_object(*KUEUE, ns, "workloads", name)


def replace_workload(api: client.ApiClient, ns: str, name: str, cpu: str | None = None) -> dict[str, Any]:
    """Delete Workload ``name`` and create a new one of that name with its spec (``cpu`` per pod,
    if given) and no status, as `kubectl replace --force` does; the new one."""
    old = workloads(api, ns)[name]
    delete_workload(api, ns, name)
    spec = old["spec"]
    if cpu is not None:
        for pod_set in spec["podSets"]:
            for container in pod_set["template"]["spec"]["containers"]:
                container["resources"] = {"requests": {"cpu": cpu}}
    meta = {k: v for k, v in old["metadata"].items() if k in ("name", "namespace", "labels", "ownerReferences")}
    return create(api, {"apiVersion": "/".join(KUEUE), "kind": "Workload", "metadata": meta, "spec": spec})


def setup(api: client.ApiClient, decider: Decider) -> str:
    ns = queue_setup(api, tag(), nominal=QUOTA)
    decider.ns = ns  # the decider lease lives in the test's namespace
    return ns


# -- Workloads deleted or replaced ------------------------------------------------------------------
@pytest.mark.parametrize("pause", STEPS)
def test_an_admitted_workload_deleted_mid_turn_is_never_made_again(api, decider, pause):
    ns = setup(api, decider)
    a = group(api, ns, "a")
    settle(api, ns, decider, lambda: running(api, ns, a), "group a admitted")
    old = workloads(api, ns)["a"]
    b = group(api, ns, "b")  # waits: a holds the quota
    settle(api, ns, decider, lambda: "b" in workloads(api, ns), "group b's Workload made, pending")

    def delete() -> None:
        delete_workload(api, ns, "a")
        decider.sees("Workload", f"{ns}/a", None)

    decided = decider.turn(pause, delete)
    assert decided.plan is not None and {e.name: e.state for e in decided.plan.workloads}[f"{ns}/a"] == "admitted"
    assert "a" not in workloads(api, ns), "the deleted admitted Workload was made again"
    assert any(s.startswith(f"status Workload {ns}/a: deleted since") for s in decided.applied.skipped)
    assert broken(api, ns) == []
    # Its group ended (its pods record the deleted uid): they go, and b takes the quota.
    settle(api, ns, decider, lambda: running(api, ns, b), "group b admitted once a's pods are gone")
    left = pods(api, ns)
    assert not set(a) & set(left), "the pods of the deleted admitted Workload still run"
    assert "a" not in workloads(api, ns)
    assert {(left[p].metadata.annotations or {}).get(WORKLOAD_UID_ANNOTATION) for p in b} == \
        {uid_of(workloads(api, ns)["b"])} != {uid_of(old)}


@pytest.mark.parametrize("pause", STEPS)
def test_an_admitted_workload_replaced_mid_turn_gets_no_old_admission(api, decider, pause):
    ns = setup(api, decider)
    a = group(api, ns, "a")
    settle(api, ns, decider, lambda: running(api, ns, a), "group a admitted")
    b = group(api, ns, "b")
    settle(api, ns, decider, lambda: "b" in workloads(api, ns), "group b's Workload made, pending")
    made: list[dict[str, Any]] = []

    def replace() -> None:
        made.append(replace_workload(api, ns, "a"))
        decider.sees("Workload", f"{ns}/a", uid_of(made[0]))

    decided = decider.turn(pause, replace)
    now = workloads(api, ns)["a"]
    assert uid_of(now) == uid_of(made[0])
    assert admission(now) is None, "the decision about the old Workload was written on its replacement"
    assert any(s.startswith(f"status Workload {ns}/a: replaced") for s in decided.applied.skipped)
    assert broken(api, ns) == []
    # a's pods ran under the old uid: their group ended; the replacement, with no pods, never holds quota
    settle(api, ns, decider, lambda: running(api, ns, b), "group b admitted")
    assert admission(workloads(api, ns).get("a")) is None
    assert not set(a) & set(pods(api, ns))


@pytest.mark.parametrize("pause", STEPS)
def test_a_pending_workload_replaced_mid_turn_is_not_admitted_for_the_old_one(api, decider, pause):
    """A user's Workload (a Job's, say) decided on at 1 cpu and replaced by one asking 3 (over the
    quota of 2) before the admission is written: the new one is not admitted."""
    ns = setup(api, decider)
    create(api, {"apiVersion": "/".join(KUEUE), "kind": "Workload", "metadata": {"name": "job", "namespace": ns},
                 "spec": {"queueName": "main", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                     "containers": [{"name": "c", "image": "registry.example/app:1",
                                     "resources": {"requests": {"cpu": "1"}}}]}}}]}})
    decider.sees("Workload", f"{ns}/job", uid_of(workloads(api, ns)["job"]))
    made: list[dict[str, Any]] = []

    def replace() -> None:
        made.append(replace_workload(api, ns, "job", cpu="3"))
        decider.sees("Workload", f"{ns}/job", uid_of(made[0]))

    decided = decider.turn(pause, replace)
    assert decided.plan is not None and {e.name: e.state for e in decided.plan.workloads}[f"{ns}/job"] == "admitted"
    assert admission(workloads(api, ns)["job"]) is None, "the admission decided for 1 cpu was written on 3 cpu"
    assert broken(api, ns) == []
    for _ in range(2):  # decided anew: it does not fit
        decider.turn()
        assert admission(workloads(api, ns)["job"]) is None and broken(api, ns) == []


def test_a_pending_workload_deleted_mid_turn_is_made_anew_by_a_later_decision(api, decider):
    """Group c's Workload waits; the turn that frees the quota (a's pods succeeded: finish a,
    admit c) runs while c's Workload is deleted: nothing is made from that decision, c's pods stay
    gated, and the next turn makes c a new Workload and admits it: no pod lost."""
    ns = setup(api, decider)
    a = group(api, ns, "a")
    settle(api, ns, decider, lambda: running(api, ns, a), "group a admitted")
    c = group(api, ns, "c")
    settle(api, ns, decider, lambda: "c" in workloads(api, ns), "group c's Workload made, pending")
    old = workloads(api, ns)["c"]
    for pod in a:
        mark_succeeded(api, pods(api, ns)[pod])
    decider.sees("Pod", f"{ns}/{a[0]}", pods(api, ns)[a[0]].metadata.uid)
    wait_until(lambda: all((dict(decider.cache.get("Pod", f"{ns}/{p}").body).get("status") or {}).get("phase")
                           == "Succeeded" for p in a), WAIT_S, "the cache to see a's pods succeeded")

    def delete() -> None:
        delete_workload(api, ns, "c")
        decider.sees("Workload", f"{ns}/c", None)

    decided = decider.turn("decide", delete)
    assert decided.plan is not None and {e.name: e.state for e in decided.plan.workloads}[f"{ns}/c"] == "admitted"
    assert "c" not in workloads(api, ns), "the decision about the deleted Workload made it again"
    assert all(is_gated(pods(api, ns)[p]) for p in c)
    assert broken(api, ns) == []
    settle(api, ns, decider, lambda: running(api, ns, c), "group c admitted with a new Workload")
    new = workloads(api, ns)["c"]
    assert uid_of(new) != uid_of(old) and admission(new) is not None
    assert {(pods(api, ns)[p].metadata.annotations or {}).get(WORKLOAD_UID_ANNOTATION) for p in c} == {uid_of(new)}


def test_a_workload_deleted_between_its_admission_and_its_ungates_runs_no_pod(api, decider):
    """Group d's Workload (made while a held the quota) is admitted; before its pods are ungated
    the Workload is deleted: the pods stay gated (no pod runs under a Workload gone), and a later
    turn admits them under a new one."""
    ns = setup(api, decider)
    a = group(api, ns, "a")
    settle(api, ns, decider, lambda: running(api, ns, a), "group a admitted")
    d = group(api, ns, "d")
    settle(api, ns, decider, lambda: "d" in workloads(api, ns), "group d's Workload made, pending")
    for pod in a:
        mark_succeeded(api, pods(api, ns)[pod])
    wait_until(lambda: all((dict(decider.cache.get("Pod", f"{ns}/{p}").body).get("status") or {}).get("phase")
                           == "Succeeded" for p in a), WAIT_S, "the cache to see a's pods succeeded")
    admitted: list[dict[str, Any]] = []

    def delete() -> None:
        admitted.append(workloads(api, ns)["d"])
        delete_workload(api, ns, "d")
        decider.sees("Workload", f"{ns}/d", None)

    decided = decider.turn("ungate", delete)
    assert admission(admitted[0]) is not None  # the pause came after its admission was written
    assert all(is_gated(pods(api, ns)[p]) for p in d), "a pod was ungated under a Workload deleted"
    assert any(f"ungate Pod {ns}/{p}: {ns}/d was deleted" in e for p in d for e in decided.applied.errors)
    assert "d" not in workloads(api, ns)
    assert broken(api, ns) == []
    settle(api, ns, decider, lambda: running(api, ns, d), "group d admitted with a new Workload")
    assert uid_of(workloads(api, ns)["d"]) != uid_of(admitted[0])


# -- Pods deleted or replaced -----------------------------------------------------------------------
@pytest.mark.parametrize("pause", STEPS)
def test_a_pod_deleted_before_its_group_has_a_workload_makes_none(api, decider, pause):
    """Group e's two pods are decided on (a Workload to make and admit); one is deleted first:
    no Workload is made for a group that no longer is, and the other pod stays gated."""
    ns = setup(api, decider)
    e = group(api, ns, "e")
    decider.sees("Pod", f"{ns}/{e[1]}", pods(api, ns)[e[1]].metadata.uid)

    def delete() -> None:
        client.CoreV1Api(api).patch_namespaced_pod(e[1], ns, {"metadata": {"finalizers": None}})
        client.CoreV1Api(api).delete_namespaced_pod(e[1], ns)
        decider.sees("Pod", f"{ns}/{e[1]}", None)

    decided = decider.turn(pause, delete)
    assert decided.plan is not None and {x.name: x.state for x in decided.plan.workloads}[f"{ns}/e"] == "admitted"
    assert "e" not in workloads(api, ns), "a Workload was made for a group whose pod is gone"
    assert any(s.startswith(f"create Workload {ns}/e: its pod {e[1]} was deleted") for s in decided.applied.skipped)
    assert is_gated(pods(api, ns)[e[0]])
    assert broken(api, ns) == []
    decider.turn()  # the group is incomplete now: it waits for its second pod, gated
    assert "e" not in workloads(api, ns) and is_gated(pods(api, ns)[e[0]]) and broken(api, ns) == []


def test_a_pod_replaced_between_its_admission_and_its_ungate_stays_gated_until_decided(api, decider):
    """Group f is admitted; before its ungates, pod f-1 is replaced by a new pod of that name:
    the new pod is not the one decided about and stays gated; f-0 runs under f's admission, and
    a later turn ungates the replacement under it (as Kueue's pod groups take a replacement)."""
    ns = setup(api, decider)
    f = group(api, ns, "f")
    decider.sees("Pod", f"{ns}/{f[1]}", pods(api, ns)[f[1]].metadata.uid)
    replaced: list[str] = []

    def replace() -> None:
        core = client.CoreV1Api(api)
        core.patch_namespaced_pod(f[1], ns, {"metadata": {"finalizers": None}})
        core.delete_namespaced_pod(f[1], ns)
        wait_until(lambda: f[1] not in pods(api, ns), WAIT_S, "the old pod gone")
        replaced.append(create(api, gated_pod(ns, f[1], cpu="1", group="f", total=2)).metadata.uid)
        decider.sees("Pod", f"{ns}/{f[1]}", replaced[0])

    decided = decider.turn("ungate", replace)
    assert f"ungate Pod {ns}/{f[0]}" in decided.applied.writes
    now = pods(api, ns)
    assert now[f[1]].metadata.uid == replaced[0] and is_gated(now[f[1]]), "a pod not decided about was ungated"
    assert broken(api, ns) == []
    settle(api, ns, decider, lambda: running(api, ns, f), "the replacement ungated under f's admission")
    wl = workloads(api, ns)["f"]
    assert admission(wl) is not None
    assert {(pods(api, ns)[p].metadata.annotations or {}).get(WORKLOAD_UID_ANNOTATION) for p in f} == {uid_of(wl)}


def test_without_a_race_nothing_is_skipped(api, decider):
    """The guards cost nothing when nothing changes: a group is made, admitted and ungated in one turn."""
    ns = setup(api, decider)
    g = group(api, ns, "g")
    decider.sees("Pod", f"{ns}/{g[1]}", pods(api, ns)[g[1]].metadata.uid)
    decided = decider.turn()
    assert not decided.applied.errors
    assert f"create Workload {ns}/g" in decided.applied.writes
    assert running(api, ns, g) and broken(api, ns) == []
