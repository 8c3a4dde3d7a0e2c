"""Leader election among controller replicas, with the kubernetes client's own support.

The replicas compete for the coordination.k8s.io/v1 Lease ``clueue-controller`` in the
controller's namespace through ``kubernetes.leaderelection`` (``LeaderElection``,
``electionconfig.Config``, ``resourcelock.leaselock.LeaseLock``). The leader decides and writes;
every replica serves the webhook and its health endpoints. Leading is only a permission to *try*
to decide: the leader then takes the decider lease (adapters/kube/lease.py) as any decider must,
and every write is fenced by both (``leading`` is checked with the decider lease's fence).

The client's election loop has quirks this module works around:

- ``LeaseLock`` talks through the default ``ApiClient`` (global configuration): its API object
  is replaced with one on the controller's client.
- ``LeaderElection.run()`` blocks, and its acquire loop never ends (no stop): it runs in a
  daemon thread, and a lock that is :meth:`closed <_Lock.close>` refuses every create and update
  so that a stopped elector can never take (or keep) the lease again.
- A connection failure or a timeout (not an ``ApiException``) escapes ``run()`` without
  calling ``onstopped_leading``: it is caught here and counts as leadership lost; the thread
  then competes again from the start. Its requests wait forever by default: here they time out
  after half the renew deadline, which the loop checks only between requests.
- There is no release: :meth:`LeaderElector.stop` clears ``holderIdentity`` itself (guarded by
  the read resourceVersion), so that another replica takes over at its next retry rather than
  a lease duration later.

Leadership is lost when the renewals fail for ``renew_deadline`` (two thirds of the lease
duration); ``on_stop`` is then called and :attr:`LeaderElector.leading` is False at once.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from typing import Callable

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from clueue.adapters.kube.lease import DURATION_S

__all__ = ["LeaderElector", "LEADER_LEASE", "make_identity"]

log = logging.getLogger(__name__)

LEADER_LEASE = "clueue-controller"


def make_identity() -> str:
    """This replica's name in both leases: its pod name (the hostname in a pod) and a random
    suffix, so that a restarted pod is a new candidate."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


class _Lock(LeaseLock):
    """A LeaseLock on a given API client, whose requests time out after ``timeout`` seconds
    (the client's wait forever, or a minute with clueue's connection: longer than a renew
    deadline, which the election loop checks only between requests), and that can be closed:
    then it writes nothing."""

    def __init__(self, api: client.ApiClient, name: str, namespace: str, identity: str, timeout: float) -> None:
        super().__init__(name, namespace, identity)
        self.api_instance = client.CoordinationV1Api(api)
        self.timeout = timeout
        self.closed = threading.Event()
        self.told = False

    def close(self) -> None:
        self.closed.set()

    def _refused(self, e: ApiException, verb: str) -> None:
        """Say once why the election cannot go on: the client itself only logs at info, forever."""
        if e.status in (403, 404) and not self.told:
            self.told = True
            why = (f"namespace {self.namespace} does not exist" if e.status == 404 and verb == "create" else
                   f"forbidden to {verb} it; grant get, create and update on leases in {self.namespace}")
            log.error("leader election on Lease %s/%s cannot go on: %s", self.namespace, self.name, why)

    def get(self, name, namespace):  # type: ignore[no-untyped-def]
        try:
            lease = self.api_instance.read_namespaced_lease(name, namespace, _request_timeout=self.timeout)
        except ApiException as e:
            if e.status != 404:
                self._refused(e, "get")
            return False, e
        self.lease_reference = lease
        return True, self.get_lock_object(lease)

    def create(self, name, namespace, election_record):  # type: ignore[no-untyped-def]
        if self.closed.is_set():
            return False
        try:
            self.lease_reference = self.api_instance.create_namespaced_lease(
                namespace, client.V1Lease(metadata=client.V1ObjectMeta(name=name),
                                          spec=self.get_lease_spec(election_record)), _request_timeout=self.timeout)
            return True
        except ApiException as e:
            self._refused(e, "create")
            return False

    def update(self, name, namespace, updated_record):  # type: ignore[no-untyped-def]
        if self.closed.is_set() or self.lease_reference is None:
            return False
        try:
            self.lease_reference.spec = self.get_lease_spec(updated_record, self.lease_reference.spec)
            self.api_instance.replace_namespaced_lease(name, namespace, self.lease_reference,
                                                       _request_timeout=self.timeout)
            return True
        except ApiException as e:
            self._refused(e, "update")
            log.debug("updating Lease %s/%s failed: %s", namespace, name, e.reason)
            return False


class LeaderElector:
    """Competes for the leader Lease in a background thread while started.

    >>> elector = LeaderElector(api, "clueue-system", on_start=go, on_stop=halt).start()  # doctest: +SKIP
    >>> elector.leading  # doctest: +SKIP
    """

    def __init__(self, api: client.ApiClient, namespace: str, *, on_start: Callable[[], None],
                 on_stop: Callable[[], None], name: str = LEADER_LEASE, identity: str | None = None,
                 duration: int = DURATION_S) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity or make_identity()
        # client-go's proportions (15 / 10 / 2 s); the client insists on whole seconds >= 1.
        self.duration = max(3, int(duration))
        self.renew_deadline = max(2, self.duration * 2 // 3)
        self.retry_period = max(1, min(2, self.renew_deadline // 3))
        self.on_start = on_start
        self.on_stop = on_stop
        # The client logs every retry of every follower at info ("yet to finish lease_duration"):
        # this module logs what changes instead.
        logging.getLogger("leaderelection").setLevel(logging.WARNING)
        self._leading = threading.Event()
        self._stop = threading.Event()
        self._lock: _Lock | None = None
        self._thread: threading.Thread | None = None

    @property
    def leading(self) -> bool:
        """Whether this replica leads now (False as soon as a renewal deadline passed)."""
        return self._leading.is_set()

    def start(self) -> LeaderElector:
        self._thread = threading.Thread(target=self._compete, name="leader-election", daemon=True)
        self._thread.start()
        return self

    def _compete(self) -> None:
        while not self._stop.is_set():
            self._lock = _Lock(self.api, self.name, self.namespace, self.identity, timeout=self.renew_deadline / 2)
            config = electionconfig.Config(self._lock, lease_duration=self.duration,
                                           renew_deadline=self.renew_deadline, retry_period=self.retry_period,
                                           onstarted_leading=self._started, onstopped_leading=self._stopped)
            try:
                leaderelection.LeaderElection(config).run()
            except Exception as e:  # noqa: BLE001 - a connection failure escapes the client's loop
                log.warning("leader election on Lease %s/%s failed (%s); competing again", self.namespace,
                            self.name, e)
            finally:
                self._stopped()
            self._stop.wait(self.retry_period)

    def _started(self) -> None:
        if self._stop.is_set() or self._leading.is_set():
            return
        self._leading.set()
        log.info("leading: %s holds Lease %s/%s", self.identity, self.namespace, self.name)
        self.on_start()

    def _stopped(self) -> None:
        if not self._leading.is_set():
            return
        self._leading.clear()
        log.warning("stopped leading: Lease %s/%s is no longer held by %s", self.namespace, self.name,
                    self.identity)
        self.on_stop()

    def stop(self) -> None:
        """Stop competing and give the lease up if this replica holds it."""
        self._stop.set()
        if self._lock is not None:
            self._lock.close()
        self._stopped()
        self._release()

    def _release(self) -> None:
        api = client.CoordinationV1Api(self.api)
        for _ in range(3):  # a renewal in flight may conflict once: read again
            try:
                lease = api.read_namespaced_lease(self.name, self.namespace, _request_timeout=5)
                if lease.spec is None or lease.spec.holder_identity != self.identity:
                    return
                lease.spec.holder_identity = None
                lease.spec.lease_duration_seconds = 1
                api.replace_namespaced_lease(self.name, self.namespace, lease, _request_timeout=5)
                log.info("released Lease %s/%s", self.namespace, self.name)
                return
            except ApiException as e:
                if e.status != 409:
                    break
            except Exception:  # noqa: BLE001 - unreachable: the lease expires on its own
                break
