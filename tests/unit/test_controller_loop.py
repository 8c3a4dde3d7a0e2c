"""The controller's pure parts: debouncing, back-off, resourceVersion order, the cache's
expectations of its own writes, and the write refusal on shutdown or lost leadership."""

from __future__ import annotations

from typing import Any

import pytest

from clueue.adapters.controller.loop import Backoff, Controller, CycleResult, Debounce, monotonic_at, wait_before_cycle
from clueue.adapters.controller.run import parse_bind
from clueue.adapters.kube.apply import ApplyResult
from clueue.adapters.kube.cache import ClusterCache, caught_up, newer_or_equal
from clueue.adapters.kube.kinds import KINDS
from clueue.engine import build_snapshot, load_policy

POD = next(k for k in KINDS if k.kind == "Pod")


def test_a_batch_is_due_a_window_after_the_last_change():
    d = Debounce(window=0.2, max_delay=2.0)
    assert d.due_in(0.0) is None
    d.note(10.0)
    assert d.due_in(10.0) == pytest.approx(0.2)
    d.note(10.15)
    assert d.due_in(10.2) == pytest.approx(0.15)
    assert d.due_in(10.4) == 0.0
    d.reset()
    assert d.due_in(11.0) is None


def test_a_steady_stream_of_changes_is_decided_after_the_maximum_delay():
    d = Debounce(window=0.2, max_delay=1.0)
    now = 5.0
    while now < 5.95:
        d.note(now)
        now += 0.1
    assert d.due_in(now) == pytest.approx(max(0.0, 6.0 - now))
    d.note(6.0)
    assert d.due_in(6.0) == 0.0


def test_backoff_doubles_to_its_maximum_and_resets():
    b = Backoff(initial=1.0, maximum=5.0)
    assert [b.failed() for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    b.succeeded()
    assert b.failed() == 1.0


def test_resource_versions_compare_as_integers_else_only_equal():
    assert newer_or_equal("10", "9") and newer_or_equal("9", "9") and not newer_or_equal("9", "10")
    assert newer_or_equal("abc", "abc") and not newer_or_equal("abd", "abc")


def test_a_write_is_caught_up_when_held_at_its_version_or_later_or_seen_deleted():
    assert caught_up("10", "10", "10") and caught_up("10", "12", "12")
    assert not caught_up("10", "9", "9")
    assert not caught_up("10", None, "9")  # not there yet
    assert caught_up("10", None, "11")  # the watch passed the write: deleted since
    assert caught_up("", None, "") and not caught_up("", "5", "5")  # a delete


def _pod(name: str, version: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns",
                                                            "resourceVersion": version}}


def _cache() -> ClusterCache:
    return ClusterCache(None, version="")  # type: ignore[arg-type] - no API: events are fed by hand


def test_the_cache_waits_for_its_own_writes_and_does_not_count_them_as_changes():
    cache = _cache()
    cache._on_event(POD, "ADDED", _pod("a", "5"), "5")
    assert cache.take_changes() == {"Pod"}

    cache.begin_writes()
    cache._on_event(POD, "MODIFIED", _pod("a", "7"), "7")  # our write, back before the apply ended
    cache.expect([("Pod", "ns/a", "7"), ("Pod", "ns/b", "8")])
    assert cache.take_changes() == set()
    assert cache.pending_expectations() == {("Pod", "ns/b"): "8"}
    assert not cache.wait_changed(0)

    cache._on_event(POD, "ADDED", _pod("b", "8"), "8")  # our own write coming back later
    assert cache.pending_expectations() == {}
    assert cache.take_changes() == set()

    cache._on_event(POD, "MODIFIED", _pod("b", "9"), "9")  # someone else's change
    assert cache.take_changes() == {"Pod"}


def test_changes_during_a_cycle_by_others_still_count():
    cache = _cache()
    cache.begin_writes()
    cache._on_event(POD, "ADDED", _pod("c", "3"), "3")
    cache._on_event(POD, "DELETED", _pod("d", "4"), "4")
    cache.expect([("Pod", "ns/d", "")])  # we deleted d; c is someone else's
    assert cache.take_changes() == {"Pod"}
    assert cache.get("Pod", "ns/c") is not None and cache.get("Pod", "ns/d") is None


def test_a_key_deleted_then_created_again_in_one_cycle_expects_only_the_create():
    cache = _cache()
    cache._on_event(POD, "ADDED", _pod("e", "5"), "5")
    cache.take_changes()
    cache.begin_writes()
    cache._on_event(POD, "DELETED", _pod("e", "6"), "6")  # our delete and our create, both back
    cache._on_event(POD, "ADDED", _pod("e", "7"), "7")    # before the apply ended
    cache.expect([("Pod", "ns/e", ""), ("Pod", "ns/e", "7")])
    assert cache.pending_expectations() == {}  # no stale "deleted" for an object that exists
    assert cache.wait_for_expectations(0)
    assert cache.take_changes() == set()



def test_a_watch_event_older_than_a_list_is_stale():
    cache = _cache()
    cache._listed_at["Pod"] = "20"
    cache._on_event(POD, "ADDED", _pod("old", "15"), "15")
    assert cache.get("Pod", "ns/old") is None
    cache._on_event(POD, "ADDED", _pod("new", "21"), "21")
    assert cache.get("Pod", "ns/new") is not None


def test_a_cycle_with_errors_or_a_stopped_apply_is_retried_after_a_backoff():
    assert CycleResult(started=0.0, error="boom").failed
    assert CycleResult(started=0.0, applied=ApplyResult(errors=["x"])).failed
    assert CycleResult(started=0.0, applied=ApplyResult(stopped=True)).failed
    assert not CycleResult(started=0.0, applied=ApplyResult(writes=["w"])).failed


def test_writes_are_refused_once_not_leading_or_past_the_shutdown_grace():
    leading = [True]
    controller = Controller(None, None, load_policy(), leading=lambda: leading[0],  # type: ignore[arg-type]
                            shutdown_grace=0.0)
    assert controller._refusal() == ""
    leading[0] = False
    assert "no longer the leader" in controller._refusal()
    leading[0] = True
    controller.stop()
    assert "shutting down" in controller._refusal()


def test_bind_addresses():
    assert parse_bind(":8080") == ("0.0.0.0", 8080)
    assert parse_bind("127.0.0.1:0") == ("127.0.0.1", 0)
    with pytest.raises(ValueError):
        parse_bind("8080x")


def _gated_pod(name: str, version: str, cpu: Any = "1") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": version,
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "labels": {"kueue.x-k8s.io/queue-name": "main"}},
            "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}


def test_the_cache_snapshot_is_the_snapshot_of_its_objects_parsed_once_per_version():
    cache = _cache()
    for i in range(3):
        cache._on_event(POD, "ADDED", _gated_pod(f"p{i}", str(10 + i)), str(10 + i))
    cache._on_event(POD, "ADDED", _gated_pod("bad", "20", cpu="lots"), "20")

    def full() -> Any:
        return build_snapshot([d for docs in cache._objects.values() for d in docs.values()], lenient=True)

    first = cache.snapshot()
    assert first == full() and [r.name for r in first.rejected] == ["bad"]
    assert cache.snapshot().pods["ns/p0"] is first.pods["ns/p0"]  # not parsed again
    cache._on_event(POD, "MODIFIED", _gated_pod("p0", "30", cpu="2"), "30")
    cache._on_event(POD, "DELETED", _gated_pod("p1", "31"), "31")
    again = cache.snapshot()
    assert again == full() and set(again.pods) == {"ns/p0", "ns/p2"}
    assert again.pods["ns/p2"] is first.pods["ns/p2"]


def test_a_queue_status_change_alone_is_no_change():
    cq_kind = next(k for k in KINDS if k.kind == "ClusterQueue")
    cache = ClusterCache(None, version="v1beta1")  # type: ignore[arg-type]
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
          "metadata": {"name": "cq", "resourceVersion": "1"}, "spec": {"namespaceSelector": {}}}
    cache._on_event(cq_kind, "ADDED", cq, "1")
    assert cache.take_changes() == {"ClusterQueue"}
    cache._on_event(cq_kind, "MODIFIED", {**cq, "metadata": {"name": "cq", "resourceVersion": "2"},
                                          "status": {"pendingWorkloads": 3}}, "2")
    assert cache.take_changes() == set()
    cache._on_event(cq_kind, "MODIFIED", {**cq, "metadata": {"name": "cq", "resourceVersion": "3"},
                                          "spec": {"namespaceSelector": {}, "stopPolicy": "Hold"}}, "3")
    assert cache.take_changes() == {"ClusterQueue"}


def test_apply_is_not_handed_workloads_the_cache_shows_as_planned():
    from clueue.adapters.kube.consistency import reasons_digest, tagged
    from clueue.adapters.kube.decide import unsettled
    from clueue.engine import Document
    from clueue.engine.plan import Action, Plan, SolverInfo, WorkloadEntry
    from clueue.engine.reasons import make_reason

    reasons = (make_reason("NoCombinedFit"),)

    def entry(name: str) -> WorkloadEntry:
        return WorkloadEntry(name=f"ns/{name}", queue="main", cluster_queue="cq", priority=0, state="pending",
                             origin="workload", reasons=reasons)

    def workload(name: str, message: str) -> Document:
        return Document(name, {"metadata": {"name": name, "namespace": "ns"}, "status": {"conditions": [
            {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": message}]}})

    shown = tagged("; ".join(r.message for r in reasons), reasons_digest(reasons), 32 * 1024)
    cached = {"ns/same": workload("same", shown), "ns/other": workload("other", "[clueue:0000]"),
              "ns/acted": workload("acted", shown)}
    solver = SolverInfo(0, 0, 0, 0, 0, True, 1, False, 0, 0, 1, 0, 0)
    plan = Plan(tuple(entry(n) for n in ("same", "other", "acted", "new")),
                (Action("preempt", "ns/acted", "ns/acted", {}),), solver, "", "")
    kept = unsettled(plan, lambda kind, key: cached.get(key) if kind == "Workload" else None)
    assert [e.name for e in kept.workloads] == ["ns/other", "ns/acted", "ns/new"]
    assert kept.actions == plan.actions


def test_the_loop_wakes_when_a_podgroup_timeout_ends_before_the_resync():
    # A schedule timeout ends at epoch 1_000 (Decided.next_due), 5 s from now on the wall clock.
    due = monotonic_at(1_000, wall=995.0, mono=50.0)
    assert due == 55.0
    assert wait_before_cycle(50.0, 350.0, None, None, due) == 5.0  # not the resync's 300 s
    assert wait_before_cycle(55.0, 350.0, None, None, due) == 0.0  # due: a cycle now
    assert wait_before_cycle(50.0, 350.0, 50.2, None, due) == pytest.approx(0.2)  # a batch comes first
    assert wait_before_cycle(50.0, 350.0, None, None, None) == 300.0
    assert monotonic_at(None, wall=995.0, mono=50.0) is None
    assert monotonic_at(990, wall=995.0, mono=50.0) == 50.0  # already past: at once
    assert CycleResult(started=0.0).next_due is None


def test_a_cycle_the_time_budget_cut_short_is_decided_again_with_a_backoff():
    # Under load the first cycle (loading the policy) can spend its whole budget and admit
    # nothing that fits; nothing need change in the cluster for a second, so one is asked for.
    from clueue.adapters.controller.loop import decide_again_in
    from clueue.engine.plan import Plan, SolverInfo

    def result(cut_short: bool) -> CycleResult:
        solver = SolverInfo(0, 0, 0, 0, 0, not cut_short, 10, cut_short, 0, 0, 1, 0, 0)
        return CycleResult(started=0.0, plan=Plan((), (), solver, "", ""))

    unfinished = Backoff()
    assert [decide_again_in(result(True), unfinished) for _ in range(3)] == [1.0, 2.0, 4.0]
    assert decide_again_in(result(False), unfinished) is None  # a finished search ends the back-off
    assert decide_again_in(result(True), unfinished) == 1.0
    assert decide_again_in(CycleResult(started=0.0, error="boom"), unfinished) is None  # failures: their own back-off
