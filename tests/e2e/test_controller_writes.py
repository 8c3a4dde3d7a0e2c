"""What ``clueue controller`` writes, against a real kube-apiserver (docs/controller.md, "Writes"):
an admitted Workload gets one status write (admission and conditions together); a waiting one
is written when its reason codes change, not when only their numbers do; workloads far down a
long queue are not written at all while their reasons stay readable through ``clueue list``; and
quota given back (a Workload finished) is used without waiting for the batch window.

The Workloads are Kueue Workload objects, as Kueue's own performance runner creates them.
"""

from __future__ import annotations

import threading
from typing import Any

import urllib3
from click.testing import CliRunner
from kubernetes import client, watch

from clueue.adapters.cli import main
from clueue.adapters.kube.cache import ClusterCache
from tests.e2e.controller_harness import (  # noqa: F401 - cluster and api are this module's fixtures
    api, cluster, controller_log, start_controller, stop_controller, wait_until,
)
from tests.e2e.test_adapter import create, queue_setup, tag, workload_object
from tests.e2e.test_preemption import workload

FAST = ("--batch-window", "0.05", "--max-delay", "0.5", "--lease-duration", "4")
GROUP, VERSION = "kueue.x-k8s.io", "v1beta1"


def condition(api: client.ApiClient, ns: str, name: str, kind: str) -> dict[str, Any]:
    status = workload_object(api, ns, name).get("status") or {}
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), {})


def admitted(api: client.ApiClient, ns: str, name: str) -> bool:
    return bool((workload_object(api, ns, name).get("status") or {}).get("admission"))


def waiting(api: client.ApiClient, ns: str, name: str) -> bool:
    return condition(api, ns, name, "QuotaReserved").get("status") == "False"


def finish(api: client.ApiClient, ns: str, name: str) -> None:
    """Mark a Workload Finished, as Kueue's performance runner does when its run time is over."""
    objects = client.CustomObjectsApi(api)
    wl = objects.get_namespaced_custom_object(GROUP, VERSION, ns, "workloads", name)
    conditions = [c for c in wl["status"].get("conditions", []) if c["type"] != "Finished"]
    conditions.append({"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done",
                       "lastTransitionTime": "2026-01-01T00:00:00Z"})
    wl["status"]["conditions"] = conditions
    objects.replace_namespaced_custom_object_status(GROUP, VERSION, ns, "workloads", name, wl)


class Modifications:
    """The MODIFIED events of the Workloads of a namespace, from now on, by name."""

    def __init__(self, api: client.ApiClient, ns: str) -> None:
        self.seen: dict[str, list[dict[str, Any]]] = {}
        self._stopped = False
        self._watch = watch.Watch()
        objects = client.CustomObjectsApi(api)
        listed = objects.list_namespaced_custom_object(GROUP, VERSION, ns, "workloads")
        stream = self._watch.stream(objects.list_namespaced_custom_object, GROUP, VERSION, ns, "workloads",
                                    resource_version=listed["metadata"]["resourceVersion"], timeout_seconds=600)
        self._thread = threading.Thread(target=self._follow, args=(stream,), daemon=True)
        self._thread.start()

    def _follow(self, stream: Any) -> None:
        try:
            for event in stream:
                if event["type"] == "MODIFIED":
                    obj = event["raw_object"]
                    self.seen.setdefault(obj["metadata"]["name"], []).append(obj)
        except urllib3.exceptions.HTTPError:
            if not self._stopped:  # the stream cut while the test still reads it: a missed event shows there
                raise

    def stop(self) -> None:
        self._stopped = True
        self._watch.stop()


def test_an_admitted_workload_gets_one_status_write(cluster, api):
    t = tag()
    ns = queue_setup(api, t, nominal=4)
    changes = Modifications(api, ns)
    proc = start_controller(cluster, *FAST)
    try:
        create(api, workload(ns, "first", 1, cpu="1"))
        wait_until(lambda: admitted(api, ns, "first"), 300, "first admitted", proc=proc)
        # a later decision: every write of the first one's cycle has been sent by then
        create(api, workload(ns, "second", 1, cpu="1"))
        wait_until(lambda: admitted(api, ns, "second"), 300, "second admitted", proc=proc)
        wait_until(lambda: changes.seen.get("second"), 300, "the watch brought second's admission")
    finally:
        changes.stop()
        assert stop_controller(proc) == 0, controller_log(proc)[-3000:]
    writes = changes.seen["first"]
    assert len(writes) == 1, [w["status"] for w in writes]
    status = writes[0]["status"]
    assert status["admission"]["clusterQueue"] == f"cq-{t}"
    kinds = {c["type"]: c["status"] for c in status["conditions"]}
    assert kinds["QuotaReserved"] == "True" and kinds["Admitted"] == "True"


def test_a_waiting_workload_is_written_when_its_reason_codes_change_not_its_numbers(cluster, api):
    t = tag()
    ns = queue_setup(api, t, nominal=4)
    create(api, workload(ns, "a", 1, cpu="1"))
    create(api, workload(ns, "b", 1, cpu="2"))
    proc = start_controller(cluster, *FAST)
    try:
        wait_until(lambda: admitted(api, ns, "a") and admitted(api, ns, "b"), 300, "a and b admitted", proc=proc)
        create(api, workload(ns, "w", 1, cpu="3"))  # 1 cpu free: it waits for quota
        wait_until(lambda: waiting(api, ns, "w"), 300, "w recorded as waiting", proc=proc)
        before = workload_object(api, ns, "w")["metadata"]["resourceVersion"]
        finish(api, ns, "a")  # 2 cpu free: w still waits for quota, only the numbers changed
        queues = client.CustomObjectsApi(api)

        def decided_after_finish() -> bool:  # the queue status of a cycle that saw a finished
            cq = queues.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", f"cq-{t}")
            return (cq.get("status") or {}).get("admittedWorkloads") == 1
        wait_until(decided_after_finish, 300, "a cycle after a finished", proc=proc)
        # a later decision, to be sure the cycle that saw a finished has handed its writes on
        other = queue_setup(api, f"{t}x", nominal=1)
        create(api, workload(other, "later", 1, cpu="1"))
        wait_until(lambda: admitted(api, other, "later"), 300, "a later admission", proc=proc)
        assert workload_object(api, ns, "w")["metadata"]["resourceVersion"] == before

        # Its ClusterQueue stopped: another reason code, written.
        cq = queues.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", f"cq-{t}")
        cq["spec"]["stopPolicy"] = "Hold"
        queues.replace_cluster_custom_object(GROUP, VERSION, "clusterqueues", f"cq-{t}", cq)
        wait_until(lambda: workload_object(api, ns, "w")["metadata"]["resourceVersion"] != before, 300,
                   "w's status rewritten for its new reason", proc=proc)
        assert waiting(api, ns, "w")
        assert "stop" in condition(api, ns, "w", "QuotaReserved")["message"].lower()
    finally:
        assert stop_controller(proc) == 0, controller_log(proc)[-3000:]


def test_workloads_far_down_a_long_queue_are_not_written_and_their_reasons_stay_readable(cluster, api):
    t = tag()
    ns = queue_setup(api, t, nominal=1)
    create(api, workload(ns, "holder", 1, cpu="1"))
    proc = start_controller(cluster, *FAST)
    try:
        wait_until(lambda: admitted(api, ns, "holder"), 300, "holder admitted", proc=proc)
        names = [f"q{i:02d}" for i in range(12)]
        for name in names:
            create(api, workload(ns, name, 1, cpu="1"))
        queues = client.CustomObjectsApi(api)

        def all_seen() -> bool:  # the queue status of a cycle that saw all twelve
            cq = queues.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", f"cq-{t}")
            return (cq.get("status") or {}).get("pendingWorkloads") == 12
        wait_until(all_seen, 300, "a cycle that saw all twelve", proc=proc)
        wait_until(lambda: all(waiting(api, ns, n) for n in names[:5]), 300, "the five heads written", proc=proc)
        assert not any(condition(api, ns, n, "QuotaReserved") for n in names[5:])
        told = CliRunner().invoke(main, ["explain", "--kubeconfig", str(cluster.kubeconfig), "-o", "json",
                                         f"{ns}/q11"])
        assert told.exit_code == 0, told.output
        assert "InsufficientQuota" in told.output
    finally:
        assert stop_controller(proc) == 0, controller_log(proc)[-3000:]


def test_quota_given_back_is_used_without_waiting_for_the_batch_window(cluster, api):
    t = tag()
    ns = queue_setup(api, t, nominal=1)
    create(api, workload(ns, "holder", 1, cpu="1"))
    create(api, workload(ns, "next", 1, cpu="1"))
    # A batch window far longer than any wait below: only a cycle started by the freed quota admits.
    # (A solver budget no load can exhaust: the first cycle must decide, since no second comes soon.)
    proc = start_controller(cluster, "--batch-window", "3000", "--max-delay", "3000", "--lease-duration", "4",
                            "--time-budget", "600")
    try:
        wait_until(lambda: admitted(api, ns, "holder") and waiting(api, ns, "next"), 300,
                   "the first cycle decided", proc=proc)
        finish(api, ns, "holder")
        wait_until(lambda: admitted(api, ns, "next"), 300, "next admitted into the quota given back", proc=proc)
    finally:
        assert stop_controller(proc) == 0, controller_log(proc)[-3000:]


def test_the_cache_takes_its_own_answers_and_marks_quota_given_back_urgent(cluster, api):
    t = tag()
    ns = queue_setup(api, t)
    create(api, workload(ns, "w", 1, cpu="1"))
    cache = ClusterCache(api, watch_seconds=60).start()
    try:
        assert cache.wait_synced(300)
        wait_until(lambda: cache.get("Workload", f"{ns}/w"), 300, "w in the cache")
        objects = client.CustomObjectsApi(api)
        wl = objects.get_namespaced_custom_object(GROUP, VERSION, ns, "workloads", "w")
        wl["status"] = {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                        "message": "waits", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        answer = objects.replace_namespaced_custom_object_status(GROUP, VERSION, ns, "workloads", "w", wl)
        cache.absorb("Workload", [answer])  # held at once, before its watch event comes
        held = cache.get("Workload", f"{ns}/w")
        assert held.body["metadata"]["resourceVersion"] == answer["metadata"]["resourceVersion"]
        cache.take_changes()
        assert not cache.take_urgent()
        generation = cache.generation
        finish(api, ns, "w")  # after the echo of the write, in the watch's order
        wait_until(lambda: any(c.get("type") == "Finished" for c in
                               cache.get("Workload", f"{ns}/w").body["status"]["conditions"]), 300, "w finished")
        assert cache.generation == generation + 1  # the finish is a change; the echo of the write was not
        assert cache.take_urgent()  # and it gives quota back
    finally:
        threading.Thread(target=cache.stop, daemon=True).start()
