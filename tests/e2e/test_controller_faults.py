"""``clueue controller`` under faults, against a real kube-apiserver of this module's own.

Each test checks what a user relies on, never how fast (durations are printed, not asserted):

- a killed leader is replaced and the new one admits new pods (takeover time printed); a
  paused one (SIGSTOP) resumed after the takeover writes nothing;
- SIGKILL at varied moments, twenty times, loses nothing, never ungates a pod before its
  Workload records an admission, never admits over a ClusterQueue's quota (checked at every
  observation point of a polling loop that also completes admitted pods, as kubelets would),
  and ends where an undisturbed run of the same pods ends;
- an apiserver restart under the controller, mid-apply: it keeps running, its watches recover,
  what it had decided is completed and pods created afterwards are admitted;
- the webhook down (failurePolicy Fail): queued pods are refused, never created ungated,
  other pods are created; after a restart queued pods are gated and admitted again;
- SIGTERM mid-cycle: exit code 0, nothing half-applied, the decider lease released.

The module has its own control plane: a controller decides over the whole cluster. Pods are
created gated, labelled and finalized as the webhook makes them (except in the webhook test);
their phases are set through the status subresource, as a kubelet would.
"""

from __future__ import annotations

import concurrent.futures
import random
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from kubernetes.utils import parse_quantity

from clueue.adapters.kube.apply import GATE
from clueue.adapters.webhook.configuration import MUTATING_NAME, VALIDATING_NAME
from tests.e2e.controller_harness import (  # noqa: F401 - cluster and api are this module's fixtures
    DECIDER_LEASE, LEADER_LEASE, api, cluster, controller_log, lease_holder, start_controller, stop_controller,
    wait_until,
)
from tests.e2e.test_adapter import create, gated_pod, queue_setup, tag
from tests.testenv.control_plane import ControlPlane

KUEUE = ("kueue.x-k8s.io", "v1beta1")
FINALIZER = "kueue.x-k8s.io/managed"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
FAST = ("--batch-window", "0.05", "--max-delay", "0.5")


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Controllers a test starts: whatever is still running at its end is killed."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# -- reading the cluster ---------------------------------------------------------------------------
def is_gated(pod: Any) -> bool:
    return any(g.name == GATE for g in pod.spec.scheduling_gates or [])


def list_pods(api: client.ApiClient, ns: str) -> list[Any]:
    return list(client.CoreV1Api(api).list_namespaced_pod(ns).items)


def list_workloads(api: client.ApiClient, ns: str) -> list[dict[str, Any]]:
    return list(client.CustomObjectsApi(api).list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"])


def workload_of(pod: Any) -> str:
    """The name of a pod's Workload (KEP-976: ``pod-<name>``, or its group's name)."""
    group = (pod.metadata.labels or {}).get(GROUP_LABEL)
    return group or f"pod-{pod.metadata.name}"


def condition(wl: dict[str, Any], kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in (wl.get("status") or {}).get("conditions") or [])


def admission(wl: dict[str, Any]) -> dict[str, Any] | None:
    return (wl.get("status") or {}).get("admission")


def admitted_usage(workloads: list[dict[str, Any]]) -> dict[tuple[str, str, str], Fraction]:
    """(ClusterQueue, flavor, resource) -> what the admitted, unfinished Workloads hold: each pod
    set's recorded resourceUsage, less its reclaimable (succeeded) pods' share."""
    usage: dict[tuple[str, str, str], Fraction] = {}
    for wl in workloads:
        adm = admission(wl)
        if adm is None or condition(wl, "Finished"):
            continue
        reclaimable = {r["name"]: r["count"] for r in (wl.get("status") or {}).get("reclaimablePods") or []}
        for psa in adm.get("podSetAssignments") or []:
            count = psa.get("count") or 1
            held = Fraction(count - reclaimable.get(psa["name"], 0), count)
            for resource, flavor in (psa.get("flavors") or {}).items():
                amount = Fraction(str(parse_quantity((psa.get("resourceUsage") or {}).get(resource, "0"))))
                key = (adm["clusterQueue"], flavor, resource)
                usage[key] = usage.get(key, Fraction(0)) + amount * held
    return usage


def violations(api: client.ApiClient, namespaces: list[str], quotas: dict[str, int]) -> list[str]:
    """What breaks the controller's promises right now: an ungated pod whose Workload records no
    admission, a ClusterQueue whose admitted cpu exceeds its quota (``quotas``: cq -> cpu).
    Pods are listed before Workloads: a pod seen ungated had its admission recorded before."""
    pods = [p for ns in namespaces for p in list_pods(api, ns)]
    workloads = {(ns, wl["metadata"]["name"]): wl for ns in namespaces for wl in list_workloads(api, ns)}
    found = []
    for pod in pods:
        wl = workloads.get((pod.metadata.namespace, workload_of(pod)))
        if not is_gated(pod) and (wl is None or admission(wl) is None):
            found.append(f"pod {pod.metadata.namespace}/{pod.metadata.name} ungated without its Workload's admission")
    for (cq, flavor, resource), used in admitted_usage(list(workloads.values())).items():
        if cq in quotas and resource == "cpu" and used > quotas[cq]:
            found.append(f"ClusterQueue {cq} admits {float(used):g} cpu of {flavor}, over its quota {quotas[cq]}")
    return found


def mark_succeeded(api: client.ApiClient, pod: Any) -> None:
    """Set a pod's phase Succeeded through the status subresource, as its kubelet would."""
    client.CoreV1Api(api).patch_namespaced_pod_status(pod.metadata.name, pod.metadata.namespace,
                                                      {"status": {"phase": "Succeeded"}})


def create_all(api: client.ApiClient, bodies: list[dict[str, Any]]) -> None:
    """Create many objects at once (the apiserver takes them in parallel)."""
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda body: create(api, body), bodies))


def admitted(api: client.ApiClient, ns: str, name: str) -> bool:
    """Whether pod ``name`` of ``ns`` exists ungated."""
    try:
        return not is_gated(client.CoreV1Api(api).read_namespaced_pod(name, ns))
    except ApiException as e:
        if e.status == 404:
            return False
        raise


def kill(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()


# -- 1. leader failover ----------------------------------------------------------------------------
def test_a_killed_leader_is_replaced_and_the_new_leader_admits_new_pods(cluster, api, procs):
    ns = queue_setup(api, tag(), nominal=10)
    procs += [start_controller(cluster, *FAST, "--leader-elect", "--lease-duration", "5") for _ in range(2)]
    leader = wait_until(lambda: lease_holder(api, LEADER_LEASE), 60, "a leader", proc=procs[0])
    (leading,) = [p for p in procs if leader in controller_log(p)]  # each logs its identity at start
    (follower,) = [p for p in procs if p is not leading]
    create(api, gated_pod(ns, "before"))
    wait_until(lambda: admitted(api, ns, "before"), 60, "the leader to admit a pod", proc=leading)

    kill(leading)
    killed = time.monotonic()
    create(api, gated_pod(ns, "after"))
    wait_until(lambda: lease_holder(api, LEADER_LEASE) not in ("", leader), 60, "the other replica to lead",
               proc=follower)
    elected = time.monotonic() - killed
    wait_until(lambda: admitted(api, ns, "after"), 60, "the other replica to admit a new pod", proc=follower)
    print(f"\nleader failover (lease duration 5 s): SIGKILL to the new leader {elected:.2f} s, to its first new "
          f"admission {time.monotonic() - killed:.2f} s")
    assert follower.poll() is None
    assert lease_holder(api, LEADER_LEASE) not in ("", leader)
    assert lease_holder(api, DECIDER_LEASE) == lease_holder(api, LEADER_LEASE)
    assert stop_controller(follower) == 0, controller_log(follower)[-3000:]


def test_a_paused_leader_resumed_after_a_takeover_writes_nothing(cluster, api, procs):
    """SIGSTOP (a long GC pause, a frozen VM) rather than SIGKILL: once the other replica took
    over, the old leader wakes with a stale cache and stale leases; its fence must refuse every
    write, so the quota is never exceeded and no pod is ungated without its admission."""
    t = tag()
    ns = queue_setup(api, t, nominal=2)
    quotas = {f"cq-{t}": 2}
    create(api, gated_pod(ns, "p0"))
    old = start_controller(cluster, *FAST, "--leader-elect", "--lease-duration", "3")
    procs.append(old)
    wait_until(lambda: admitted(api, ns, "p0"), 60, "the first leader to admit p0", proc=old)
    new = start_controller(cluster, *FAST, "--leader-elect", "--lease-duration", "3")
    procs.append(new)
    wait_until(lambda: " started" in controller_log(new), 60, "the second replica started", proc=new)

    old.send_signal(signal.SIGSTOP)
    paused = time.monotonic()
    create_all(api, [gated_pod(ns, f"p{i}") for i in (1, 2, 3)])
    wait_until(lambda: sum(not is_gated(p) for p in list_pods(api, ns)) == 2, 60,
               "the other replica to take over and admit one more pod", proc=new)
    print(f"\nleader paused: the other replica admitted a pod {time.monotonic() - paused:.1f} s later")
    old.send_signal(signal.SIGCONT)
    wait_until(lambda: "stopped leading" in controller_log(old), 30, "the resumed leader to see it lost", proc=old)
    for _ in range(20):  # both run: watch them for a while
        assert violations(api, [ns], quotas) == []
        time.sleep(0.1)
    mark_succeeded(api, client.CoreV1Api(api).read_namespaced_pod("p0", ns))
    wait_until(lambda: sum(not is_gated(p) for p in list_pods(api, ns)) == 3, 60,
               "the new leader to admit a pod into the quota p0 freed", proc=new)
    assert violations(api, [ns], quotas) == []
    assert old.poll() is None and new.poll() is None
    identity = lease_holder(api, LEADER_LEASE)
    assert identity in controller_log(new) and lease_holder(api, DECIDER_LEASE) == identity
    for proc in (new, old):
        assert stop_controller(proc) == 0, controller_log(proc)[-3000:]


# -- 2. SIGKILL twenty times -----------------------------------------------------------------------
WAVES = 20
QUOTAS = {"a": 6, "b": 4}  # cpu of the two ClusterQueues; every pod asks 1 cpu


@dataclass
class Run:
    """One run of the backlog scenario: its two namespaces and ClusterQueues (``a`` and ``b``)."""

    api: client.ApiClient
    t: str = field(default_factory=tag)
    created: set[tuple[str, str]] = field(default_factory=set)  # (role, pod name)
    broken: list[str] = field(default_factory=list)
    observations: int = 0
    ungates: int = 0
    threads: list[threading.Thread] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.namespaces = {role: queue_setup(self.api, f"{self.t}{role}", nominal=n) for role, n in QUOTAS.items()}
        self.quotas = {f"cq-{self.t}{role}": n for role, n in QUOTAS.items()}

    def wave(self, i: int) -> None:
        """Wave ``i`` of the backlog: a single pod in each namespace, and every fifth wave a
        group of two pods in one of them."""
        pods = [("a", f"s{i}", None), ("b", f"s{i}", None)]
        if i % 5 in (0, 2):
            role = "a" if i % 5 == 0 else "b"
            pods += [(role, f"g{i}-{k}", f"g{i}") for k in range(2)]
        create_all(self.api, [gated_pod(self.namespaces[role], name, group=group, total=2 if group else None)
                              for role, name, group in pods])
        self.created |= {(role, name) for role, name, _ in pods}

    def start(self) -> Run:
        """Follow the run in the background: :meth:`follow`, and :meth:`watch` each namespace."""
        self.threads = [threading.Thread(target=self.follow, name="kubelets", daemon=True)]
        self.threads += [threading.Thread(target=self.watch, args=(ns,), name=f"watch {ns}", daemon=True)
                         for ns in self.namespaces.values()]
        for thread in self.threads:
            thread.start()
        return self

    def stop(self) -> None:
        self.done.set()
        for thread in self.threads:
            thread.join()

    def watch(self, ns: str) -> None:
        """Until ``done``: at each pod event showing a pod ungated for the first time, read its
        Workload, which must record an admission already (it is written before the ungate)."""
        core, checked, version = client.CoreV1Api(self.api), set(), ""
        while not self.done.is_set():
            try:
                for event in watch.Watch().stream(core.list_namespaced_pod, ns, resource_version=version,
                                                  timeout_seconds=2):
                    pod = event["object"]
                    version = pod.metadata.resource_version
                    if is_gated(pod) or pod.metadata.name in checked:
                        continue
                    checked.add(pod.metadata.name)
                    self.ungates += 1
                    wl = _workload(self.api, ns, workload_of(pod))
                    if wl is None or admission(wl) is None:
                        self.broken.append(f"pod {ns}/{pod.metadata.name} ungated (event {event['type']}) without "
                                           "its Workload's admission")
            except ApiException as e:
                if e.status != 410:
                    raise
                version = ""  # expired: list again from now
            except (OSError, urllib3.exceptions.HTTPError):  # a broken stream: watch again from where it was
                time.sleep(0.1)

    def follow(self) -> None:
        """Until ``done``: observe the cluster, record what breaks a promise, and complete each
        pod seen ungated (as if it ran at once)."""
        while not self.done.wait(0.15):
            try:
                self.broken += violations(self.api, list(self.namespaces.values()), self.quotas)
                self.observations += 1
                for pod in (p for ns in self.namespaces.values() for p in list_pods(self.api, ns)):
                    if not is_gated(pod) and pod.status.phase not in ("Succeeded", "Failed"):
                        mark_succeeded(self.api, pod)
            except ApiException as e:  # noqa: PERF203 - a conflict or a vanished pod: look again
                if e.status not in (404, 409):
                    raise

    def quiescent(self) -> bool:
        """Every pod succeeded with its finalizer removed, every Workload finished."""
        for ns in self.namespaces.values():
            pods, workloads = list_pods(self.api, ns), list_workloads(self.api, ns)
            if any(p.status.phase != "Succeeded" or FINALIZER in (p.metadata.finalizers or []) for p in pods):
                return False
            if not workloads or not all(condition(wl, "Finished") for wl in workloads):
                return False
        return True

    def final_state(self) -> tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]:
        """The pods (role, name, gated, phase, finalized) and Workloads (role, name, admitted to
        this run's ClusterQueue of role, finished), with this run's names taken out."""
        roles = {ns: role for role, ns in self.namespaces.items()}
        cqs = {f"cq-{self.t}{role}": role for role in QUOTAS}
        pods = {(roles[ns], p.metadata.name, is_gated(p), p.status.phase, FINALIZER in (p.metadata.finalizers or []))
                for ns in self.namespaces.values() for p in list_pods(self.api, ns)}
        workloads = {(roles[ns], wl["metadata"]["name"], cqs.get((admission(wl) or {}).get("clusterQueue", "")),
                      condition(wl, "Finished"))
                     for ns in self.namespaces.values() for wl in list_workloads(self.api, ns)}
        return pods, workloads


def _workload(api: client.ApiClient, ns: str, name: str) -> dict[str, Any] | None:
    try:
        return dict(client.CustomObjectsApi(api).get_namespaced_custom_object(*KUEUE, ns, "workloads", name))
    except ApiException as e:
        if e.status == 404:
            return None
        raise


def _finish(run: Run, proc: subprocess.Popen[bytes]) -> float:
    """Let controller ``proc`` run undisturbed until the run is quiescent; the seconds it took."""
    started = time.monotonic()
    wait_until(run.quiescent, 90, "every pod succeeded and every Workload finished", interval=0.2, proc=proc)
    took = time.monotonic() - started
    run.stop()
    assert stop_controller(proc) == 0, controller_log(proc)[-3000:]
    return took


def test_sigkill_mid_cycle_twenty_times_loses_nothing_and_ends_as_an_undisturbed_run(cluster, api, procs):
    rng = random.Random(21)
    disturbed = Run(api).start()
    started = time.monotonic()
    moments, mid_cycle = [], 0
    for i in range(WAVES):
        disturbed.wave(i)
        proc = start_controller(cluster, *FAST, "--lease-duration", "3")
        procs.append(proc)
        if i % 2:  # at a random moment after the start (often before it holds the lease)...
            delay = rng.uniform(0.05, 1.5)
            time.sleep(delay)
            moments.append(f"{delay:.2f}s after start")
        else:  # ...or after its first write, taking the decider lease: in its first cycle
            wait_until(lambda: "took the decider lease" in controller_log(proc), 30, "the decider lease taken",
                       interval=0.02, proc=proc)
            delay = rng.uniform(0.05, 1.2)
            time.sleep(delay)
            moments.append(f"{delay:.2f}s after taking the lease")
        assert proc.poll() is None, controller_log(proc)[-3000:]
        kill(proc)
        log = controller_log(proc)
        mid_cycle += "took the decider lease" in log and "cycle" not in log.split("took the decider lease")[1]
    killed = time.monotonic() - started
    proc = start_controller(cluster, *FAST, "--lease-duration", "3")
    procs.append(proc)
    settled = _finish(disturbed, proc)

    undisturbed = Run(api).start()
    proc = start_controller(cluster, *FAST, "--lease-duration", "3")
    procs.append(proc)
    for i in range(WAVES):
        undisturbed.wave(i)
    calm = _finish(undisturbed, proc)

    print(f"\n{WAVES} SIGKILLs in {killed:.1f} s ({', '.join(moments)}), {mid_cycle} in the first cycle; converged {settled:.1f} s after the "
          f"restart; {disturbed.observations} observations and {disturbed.ungates} ungates checked; the undisturbed run settled in {calm:.1f} s")
    assert disturbed.broken == [] and undisturbed.broken == []
    # Nothing lost: no pod of this scenario has a reason to be deleted (no excess, no preemption).
    pods, workloads = disturbed.final_state()
    assert {(role, name) for role, name, *_ in pods} == disturbed.created
    assert (pods, workloads) == undisturbed.final_state()
    assert all(not gated and phase == "Succeeded" and not finalized for _, _, gated, phase, finalized in pods)
    assert all(cq == role and finished for role, _, cq, finished in workloads)


# -- 3. the apiserver restarted --------------------------------------------------------------------
class Forwarder:
    """A TCP forwarder on a fixed port of 127.0.0.1 to the plane's apiserver wherever it listens
    now (a restarted apiserver gets a new port): clients keep one address, as behind a cluster's
    Service. TLS passes through untouched; the apiserver's certificate names 127.0.0.1."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def kubeconfig(self, directory: Path) -> Path:
        config = yaml.safe_load(self.plane.kubeconfig.read_text())
        config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{self.port}"
        path = directory / "kubeconfig-forwarded"
        path.write_text(yaml.safe_dump(config))
        return path

    def close(self) -> None:
        self.server.close()

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._connect, args=(downstream,), daemon=True).start()

    def _connect(self, downstream: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", int(self.plane.server.rsplit(":", 1)[1])), timeout=5)
        except OSError:  # the apiserver is down: as a Service without endpoints
            downstream.close()
            return
        upstream.settimeout(None)
        for source, sink in ((downstream, upstream), (upstream, downstream)):
            threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def test_the_controller_survives_an_apiserver_restart_mid_apply_and_admits_pods_created_after_it(cluster, procs,
                                                                                                 tmp_path):
    forwarder = Forwarder(cluster)
    try:
        with cluster.api_client() as api:
            ns = queue_setup(api, tag(), nominal=100)
            create_all(api, [gated_pod(ns, f"p{i}") for i in range(60)])
        proc = start_controller(cluster, *FAST, "--lease-duration", "3", kubeconfig=forwarder.kubeconfig(tmp_path))
        procs.append(proc)
        with cluster.api_client() as api:
            wait_until(lambda: any(not is_gated(p) for p in list_pods(api, ns)), 60, "the first pod ungated",
                       interval=0.02, proc=proc)
        cluster.restart_apiserver()  # from this thread: the new apiserver dies with the thread that started it
        restarted = time.monotonic()
        with cluster.api_client() as api:  # the rewritten kubeconfig: the new port
            assert violations(api, [ns], {}) == []
            create(api, gated_pod(ns, "after"))
            wait_until(lambda: not any(is_gated(p) for p in list_pods(api, ns)), 90,
                       "the backlog and a pod created after the restart admitted", proc=proc)
            print(f"\napiserver restarted mid-apply: the backlog and a pod created after it admitted "
                  f"{time.monotonic() - restarted:.1f} s after the restart")
            assert len(list_pods(api, ns)) == 61
            assert violations(api, [ns], {f"cq-{ns.removeprefix('ns-')}": 100}) == []
            assert proc.poll() is None
            assert stop_controller(proc) == 0, controller_log(proc)[-3000:]
            assert lease_holder(api, DECIDER_LEASE) == ""
    finally:
        forwarder.close()


# -- 4. SIGTERM during a busy cycle ----------------------------------------------------------------
BUSY_QUOTA = 90  # cpu: of 150 one-cpu pods, a cycle admits 90


def test_sigterm_during_a_busy_cycle_exits_zero_half_applies_nothing_and_releases_the_lease(cluster, api, procs):
    ns = queue_setup(api, tag(), nominal=BUSY_QUOTA)
    create_all(api, [gated_pod(ns, f"p{i}") for i in range(120)] +
               [gated_pod(ns, f"g{g}-{k}", group=f"g{g}", total=3) for g in range(10) for k in range(3)])
    proc = start_controller(cluster, *FAST, "--lease-duration", "3", "--shutdown-grace", "0.3")
    procs.append(proc)
    wait_until(lambda: any(not is_gated(p) for p in list_pods(api, ns)), 90, "the first pod ungated",
               interval=0.02, proc=proc)
    proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    assert proc.wait(30) == 0, controller_log(proc)[-3000:]
    print(f"\nSIGTERM mid-apply: exited after {time.monotonic() - signalled:.2f} s, with "
          f"{sum(not is_gated(p) for p in list_pods(api, ns))} of 150 pods ungated")
    assert lease_holder(api, DECIDER_LEASE) == ""
    assert violations(api, [ns], {}) == []  # no pod ungated without its Workload's admission

    # Whatever was admitted and not yet ungated, the next controller ungates: it takes the lease at once.
    waiting = {wl["metadata"]["name"] for wl in list_workloads(api, ns) if admission(wl)}
    restarted = time.monotonic()
    proc = start_controller(cluster, *FAST, "--lease-duration", "3")
    procs.append(proc)
    wait_until(lambda: "took the decider lease" in controller_log(proc), 30, "the decider lease taken", proc=proc)
    deciding = time.monotonic() - restarted

    def every_admitted_workload_ungated() -> bool:
        pods = list_pods(api, ns)
        return all(not is_gated(p) for p in pods if workload_of(p) in waiting)
    wait_until(every_admitted_workload_ungated, 60, "the admitted workloads' pods ungated", proc=proc)
    took = time.monotonic() - restarted
    assert "took the decider lease" in controller_log(proc)
    print(f"the next controller took the decider lease {deciding:.1f} s after its start and ungated the "
          f"{len(waiting)} admitted workloads' pods {took:.1f} s after it")
    assert violations(api, [ns], {f"cq-{ns.removeprefix('ns-')}": BUSY_QUOTA}) == []
    assert stop_controller(proc) == 0, controller_log(proc)[-3000:]


def test_sigterm_while_waiting_for_a_crashed_holders_lease_takes_no_lease_and_runs_no_cycle(cluster, api, procs):
    crashed = start_controller(cluster, *FAST, "--lease-duration", "5")
    procs.append(crashed)
    wait_until(lambda: "took the decider lease" in controller_log(crashed), 60, "the decider lease taken",
               proc=crashed)
    kill(crashed)
    waiting = start_controller(cluster, *FAST, "--lease-duration", "5")
    procs.append(waiting)
    wait_until(lambda: " started" in controller_log(waiting), 60, "the second controller started", proc=waiting)
    waiting.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    assert waiting.wait(60) == 0, controller_log(waiting)[-3000:]
    print(f"\nSIGTERM while waiting for a crashed holder's lease: exited after {time.monotonic() - signalled:.1f} s")
    after_stop = controller_log(waiting).split("stopping:", 1)[1].split("\n", 1)[1]  # after the stop's own line
    assert "took the decider lease" not in after_stop and "cycle" not in after_stop, after_stop


# -- 5. the webhook down ---------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _queued_pod(name: str, queue: str | None = "main") -> dict[str, Any]:
    labels = {QUEUE_LABEL: queue} if queue else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "img:1", "resources": {"requests": {"cpu": "1"}}}]}}


def _gating(api: client.ApiClient, ns: str) -> bool:
    """Whether the webhook gates a queued pod now (dry run: nothing is created)."""
    try:
        pod = client.CoreV1Api(api).create_namespaced_pod(ns, _queued_pod("probe"), dry_run="All")
    except ApiException:
        return False
    return is_gated(pod)


def test_with_the_webhook_down_queued_pods_are_refused_and_others_created(cluster, api, procs):
    ns = queue_setup(api, tag(), nominal=10)
    core = client.CoreV1Api(api)
    port = _free_port()
    webhook = ("--webhook", "--webhook-bind-address", f"127.0.0.1:{port}", "--webhook-url", f"https://127.0.0.1:{port}")
    try:
        proc = start_controller(cluster, *FAST, "--lease-duration", "3", *webhook)
        procs.append(proc)
        wait_until(lambda: _gating(api, ns), 60, "the webhook to gate queued pods", interval=0.2, proc=proc)
        core.create_namespaced_pod(ns, _queued_pod("up"))
        wait_until(lambda: admitted(api, ns, "up"), 60, "a pod gated by the webhook admitted", proc=proc)

        kill(proc)
        with pytest.raises(ApiException) as refused:
            core.create_namespaced_pod(ns, _queued_pod("down"))
        assert "clueue" in str(refused.value.body) or "webhook" in str(refused.value.body)
        assert [p.metadata.name for p in list_pods(api, ns)] == ["up"]  # never created ungated
        plain = core.create_namespaced_pod(ns, _queued_pod("plain", queue=None))
        assert not is_gated(plain)

        proc = start_controller(cluster, *FAST, "--lease-duration", "3", *webhook)
        procs.append(proc)
        wait_until(lambda: _gating(api, ns), 60, "the restarted webhook to gate queued pods", interval=0.2, proc=proc)
        created = core.create_namespaced_pod(ns, _queued_pod("again"))
        assert is_gated(created) and FINALIZER in (created.metadata.finalizers or [])
        wait_until(lambda: admitted(api, ns, "again"), 60, "the pod created after the restart admitted", proc=proc)
        assert stop_controller(proc) == 0, controller_log(proc)[-3000:]
    finally:
        # failurePolicy Fail stays registered without a server: unregister it for the tests after.
        admission_api = client.AdmissionregistrationV1Api(api)
        for delete, name in ((admission_api.delete_mutating_webhook_configuration, MUTATING_NAME),
                             (admission_api.delete_validating_webhook_configuration, VALIDATING_NAME)):
            try:
                delete(name)
            except ApiException as e:
                if e.status != 404:
                    raise
