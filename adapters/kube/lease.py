"""The decider lease: one clueue at a time reads, decides and writes.

Every decider (``clueue apply``, and the controller) holds the coordination.k8s.io/v1 Lease
``clueue-decider`` in the controller's namespace from before it reads the cluster until its
last write. Deciders are thereby serial, and each decides from a snapshot read after the
previous one's last write: no decision rests on a snapshot older than another decider's writes.

How it is held, in the terms of Kubernetes' own leader election (client-go):

- **Taking it.** A Lease that does not exist is created; one without a holder, or whose record
  has not changed for its ``leaseDurationSeconds`` *as this process observed it* (its monotonic
  clock, from its first read of that record), is taken over by an update guarded by the read
  resourceVersion. Clocks of different machines need not agree: a holder's ``renewTime`` is
  written for people (``kubectl get lease``) and never compared with another machine's clock.
  A crashed holder's lease is thus free one lease duration after a waiter first saw it.
- **Keeping it.** A background thread renews it every third of its duration (guarded updates).
- **Fencing.** Before each write the decider calls :meth:`DeciderLease.fence`, which raises
  :class:`LeaseLost` once a renewal failed because another holder took the lease, or once the
  last successful renewal was sent more than two thirds of the duration ago, so that a decider
  stalled (or cut off from the API server) stops writing before anyone else may take over.
- **Releasing it.** At the end the holder clears ``holderIdentity`` (guarded), so that a waiting
  decider takes over at its next poll rather than a lease duration later.

``kubernetes.leaderelection`` is not used: it is made for a process that leads until it dies
(its acquire loop has no time limit and it has no release), which a run-once command is not.

RBAC: a decider needs ``get``, ``create`` and ``update`` on ``leases`` (coordination.k8s.io)
in the lease's namespace.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from datetime import datetime, timezone
from types import TracebackType
from typing import Callable

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from clueue.engine import AdapterError

from .errors import describe, server_of
from .retry import call, is_transient, missing_is_none

__all__ = ["DeciderLease", "LeaseHeld", "LeaseLost", "LEASE_NAME", "DURATION_S"]

LEASE_NAME = "clueue-decider"
DURATION_S = 15  # as client-go's and Kueue's leader election
_POLL_S = 0.5  # how often a waiting decider reads the lease again


class LeaseHeld(AdapterError):
    """Another decider held the lease for longer than this one would wait."""

    exit_code = 4


class LeaseLost(AdapterError):
    """The lease could no longer be shown to be held: stop writing."""


class DeciderLease:
    """The Lease ``name`` in ``namespace``, taken with :meth:`acquire` (or ``with``), fenced
    with :meth:`fence` before each write, renewed meanwhile, and released at the end."""

    def __init__(self, api: client.ApiClient, namespace: str, *, name: str = LEASE_NAME,
                 duration: int | None = None, identity: str | None = None) -> None:
        self.api = client.CoordinationV1Api(api)
        self.namespace = namespace
        self.name = name
        self.duration = duration or DURATION_S
        self.identity = identity or f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:6]}"
        self._lease: client.V1Lease | None = None  # the record as we last wrote it
        self._renewed_at = 0.0  # monotonic time at which the last successful write was sent
        self._lost = ""  # why the lease is lost, once it is
        self._failing = ""  # why the last renewal failed, if it did: the cause a lost lease names
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    # -- taking it --------------------------------------------------------------------------
    def acquire(self, timeout: float) -> DeciderLease:
        """Take the lease, waiting up to ``timeout`` seconds while another decider holds it.

        Raises:
            LeaseHeld: another holder kept it for ``timeout`` seconds (the message names it).
            AdapterError: the lease's namespace does not exist.
        """
        deadline = time.monotonic() + timeout
        seen: tuple[str, str] | None = None  # (resourceVersion, holder) of the record we watch
        seen_at = 0.0
        while True:
            now = time.monotonic()
            lease = missing_is_none(lambda: self.api.read_namespaced_lease(self.name, self.namespace))
            if lease is None:
                if self._write(lambda: self._create()):
                    break
                continue
            spec = lease.spec or client.V1LeaseSpec()
            record = (lease.metadata.resource_version, spec.holder_identity or "")
            if record != seen:
                seen, seen_at = record, now
            duration = spec.lease_duration_seconds or self.duration
            # Ours already: a take whose answer was lost, and whose retry then met a conflict.
            if not spec.holder_identity or spec.holder_identity == self.identity or now - seen_at > duration:
                if self._write(lambda: self._take(lease)):
                    break
                continue
            if now >= deadline:
                raise LeaseHeld(
                    f"Lease {self.namespace}/{self.name} is held by {spec.holder_identity} (renewed at "
                    f"{_stamp(spec.renew_time)}, for {duration} s at a time); waited {timeout:g} s: another clueue "
                    "is deciding; run again later, or wait longer with --lease-timeout")
            time.sleep(_POLL_S)
        self._renewer = threading.Thread(target=self._renew_loop, name=f"lease {self.name}", daemon=True)
        self._renewer.start()
        return self

    def _write(self, write: Callable[[], client.V1Lease]) -> bool:
        """Send a create or guarded update of the lease; False if another decider won the race."""
        sent = time.monotonic()
        try:
            lease = call(write)
        except ApiException as e:
            if e.status == 409:  # created or changed since we read it: read it again
                return False
            if e.status == 404:
                raise AdapterError(
                    f"cannot take Lease {self.namespace}/{self.name}: namespace {self.namespace} does not exist; "
                    "create it (kubectl create namespace), or name another with --lease-namespace") from None
            raise
        with self._lock:
            self._lease, self._renewed_at = lease, sent
        return True

    def _create(self) -> client.V1Lease:
        now = _now()
        return self.api.create_namespaced_lease(self.namespace, client.V1Lease(
            metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
            spec=client.V1LeaseSpec(holder_identity=self.identity, lease_duration_seconds=self.duration,
                                    acquire_time=now, renew_time=now, lease_transitions=0)))

    def _take(self, lease: client.V1Lease) -> client.V1Lease:
        spec = lease.spec or client.V1LeaseSpec()
        now = _now()
        changed = spec.holder_identity != self.identity
        lease.spec = client.V1LeaseSpec(
            holder_identity=self.identity, lease_duration_seconds=self.duration,
            acquire_time=now if changed else spec.acquire_time, renew_time=now,
            lease_transitions=(spec.lease_transitions or 0) + (1 if changed else 0))
        return self.api.replace_namespaced_lease(self.name, self.namespace, lease)  # guarded by its resourceVersion

    # -- keeping it -------------------------------------------------------------------------
    def _renew_loop(self) -> None:
        while not self._stop.wait(self.duration / 3):
            try:
                self.renew()
                self._failing = ""
            except Exception as e:  # noqa: BLE001 - any failure (API, connection) is retried next time, and
                # fence() stops the writes once the last renewal is too old, naming this cause
                doing = f"renewing Lease {self.namespace}/{self.name}"
                self._failing = str(describe(e, doing, server_of(self.api.api_client)))
            if self._lost:
                return

    def renew(self) -> None:
        """Renew the lease now (the background thread does this every third of the duration)."""
        with self._lock:
            lease = self._lease
        if lease is None or self._lost:
            return
        lease.spec.renew_time = _now()
        sent = time.monotonic()
        try:
            renewed = self.api.replace_namespaced_lease(self.name, self.namespace, lease,
                                                        _request_timeout=self.duration / 3)
        except ApiException as e:
            current = missing_is_none(lambda: self.api.read_namespaced_lease(self.name, self.namespace)) \
                if e.status == 409 else None
            if current is not None and current.spec and current.spec.holder_identity == self.identity:
                with self._lock:  # our own renewal, whose answer was lost: keep it, renewed as of then
                    self._lease = current
                return
            if e.status in (404, 409):  # deleted, or changed by another: someone else may hold it now
                self._lost = f"Lease {self.namespace}/{self.name} was taken over or deleted while this decider held it"
                return
            raise
        with self._lock:
            self._lease, self._renewed_at = renewed, sent

    def fence(self) -> None:
        """Check, before a write, that the lease is still surely held.

        Raises:
            LeaseLost: it was taken over, or not renewed for two thirds of its duration.
        """
        if self._lost:
            raise LeaseLost(f"{self._lost}; stopped writing")
        age = time.monotonic() - self._renewed_at
        if age > self.duration * 2 / 3:
            cause = f" ({self._failing})" if self._failing else ""
            raise LeaseLost(f"Lease {self.namespace}/{self.name} was not renewed for {age:.1f} s (of {self.duration} s)"
                            f"{cause}; stopped writing before another decider may take it over")

    # -- releasing it -----------------------------------------------------------------------
    def release(self) -> None:
        """Stop renewing and give the lease up, unless another holder has it by now."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        with self._lock:
            lease, self._lease = self._lease, None
        lost, self._lost = self._lost, "the lease was released"
        if lease is None or lost:
            return
        lease.spec.holder_identity = None
        lease.spec.lease_duration_seconds = 1
        lease.spec.renew_time = _now()
        try:
            call(lambda: self.api.replace_namespaced_lease(self.name, self.namespace, lease))
        except ApiException as e:
            if e.status not in (404, 409) and not is_transient(e):  # 404/409: gone or taken over already
                raise
        except (urllib3.exceptions.HTTPError, ConnectionError):
            pass  # the API server is unavailable: the lease expires on its own after its duration

    def __enter__(self) -> DeciderLease:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _stamp(when: datetime | None) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ") if when else "an unknown time"
