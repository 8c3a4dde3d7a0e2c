"""The live benchmark's own API client: many writes at once, watches read as raw JSON.

The benchmark must not be what limits the figures it measures, so it avoids the kubernetes
client's model classes, whose (de)serialisation costs about a millisecond per object: requests
go through the generated API methods with ``_preload_content=False`` (the body is sent as the
plain dict it is, the answer is read as bytes and decoded once with :mod:`json`), and watch
events are decoded line by line the same way. The client's connection pool is sized for the
number of concurrent writers, so that each writer thread keeps its own TLS connection.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from kubernetes import client, config
from kubernetes.watch.watch import iter_resp_lines

from clueue.engine import AdapterError

__all__ = ["LiveApi", "Event", "new_api", "answer", "brief", "json_patch_status", "Watcher", "REQUEST_TIMEOUT"]

REQUEST_TIMEOUT = (10.0, 60.0)  # connect, read: a write that hangs must fail the run, not stall it
WATCH_SECONDS = 3600  # the server ends a watch after this; the watcher resumes it


@dataclass(frozen=True)
class LiveApi:
    """One ApiClient with a pool of ``connections``, and the typed API groups the bench uses."""

    api: Any
    core: Any
    objects: Any


def new_api(kubeconfig: str, connections: int) -> LiveApi:
    """An API client for ``kubeconfig`` whose pool holds ``connections`` connections.

    Raises:
        AdapterError: the kubeconfig cannot be read.
    """
    configuration = client.Configuration()
    try:
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    except (config.ConfigException, OSError, TypeError, ValueError) as e:
        raise AdapterError(f"{kubeconfig}: cannot connect: {e}") from None
    configuration.retries = False  # a failed write is counted, not silently resent
    configuration.connection_pool_maxsize = connections
    api = client.ApiClient(configuration)
    return LiveApi(api, client.CoreV1Api(api), client.CustomObjectsApi(api))


def answer(response: Any) -> dict[str, Any]:
    """The JSON body of a response requested with ``_preload_content=False``.

    Raises:
        AdapterError: the server answered with an error status (its message included).
    """
    raw = response.data if hasattr(response, "data") else response.read()
    status = getattr(response, "status", 200)
    if status >= 400:
        raise AdapterError(f"the apiserver answered {status}: {raw[:500]!r}")
    return dict(json.loads(raw)) if raw else {}


def brief(error: Exception) -> str:
    """An error in one line: the status and the server's message for an API error."""
    if isinstance(error, client.ApiException):
        try:
            message = json.loads(error.body or "{}").get("message") or error.body
        except (TypeError, ValueError):
            message = error.body
        return f"{error.status} {error.reason}: {message}"
    return f"{type(error).__name__}: {error}"


def json_patch_status(api: LiveApi, group: str, version: str, namespace: str, plural: str, name: str,
                      patch: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply a JSON patch (RFC 6902) to a custom object's status subresource."""
    call = api.objects.patch_namespaced_custom_object_status
    try:
        response = call(group, version, namespace, plural, name, patch, _preload_content=False,
                        _request_timeout=REQUEST_TIMEOUT, _content_type="application/json-patch+json")
    except TypeError:  # clients before 33 take no _content_type, and send a list as a JSON patch
        response = call(group, version, namespace, plural, name, patch, _preload_content=False,
                        _request_timeout=REQUEST_TIMEOUT)
    return answer(response)


@dataclass
class Event:
    """One watch event: ``ADDED``, ``MODIFIED``, ``DELETED``; ``at`` is when it was read (monotonic)."""

    type: str
    object: dict[str, Any]
    at: float


@dataclass
class Watcher:
    """Watch a collection in a thread, from a fresh list, resuming after the server ends it.

    ``list_call(**kwargs)`` is a generated list method bound to its collection (e.g.
    ``functools.partial(core.list_namespaced_pod, ns)``). The objects of the first list are
    handed to ``on_event`` as ``ADDED``; then every event, in order, from the watch thread.
    A watch whose resource version expired (410) is relisted: what it lists again is handed
    over as ``MODIFIED``.
    """

    list_call: Callable[..., Any]
    on_event: Callable[[Event], None]
    label_selector: str | None = None
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _response: Any = None

    def start(self) -> None:
        """List, hand the objects over, and start watching (returns once the list is done)."""
        rv = self._relist("ADDED")
        self._thread = threading.Thread(target=self._run, args=(rv,), name="clueue-bench-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching: the stream's socket is shut down, which ends the read in progress.

        Closing the response instead would block on the TLS object the watch thread is reading
        with until the next event arrives.
        """
        self._stop.set()
        response = self._response
        connection = getattr(response, "connection", None) or getattr(response, "_connection", None)
        sock = getattr(connection, "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed
        if self._thread:
            self._thread.join(timeout=10)

    def _kwargs(self) -> dict[str, Any]:
        return {"label_selector": self.label_selector} if self.label_selector else {}

    def _relist(self, kind: str) -> str:
        listing = answer(self.list_call(_preload_content=False, _request_timeout=REQUEST_TIMEOUT, **self._kwargs()))
        now = time.monotonic()
        for item in listing.get("items") or []:
            self.on_event(Event(kind, item, now))
        return str(listing["metadata"]["resourceVersion"])

    def _lines(self, rv: str) -> Iterator[str]:
        response = self.list_call(watch=True, resource_version=rv, allow_watch_bookmarks=True,
                                  timeout_seconds=WATCH_SECONDS, _preload_content=False, **self._kwargs())
        self._response = response
        try:
            yield from iter_resp_lines(response)
        finally:
            self._response = None
            response.release_conn()

    def _run(self, rv: str) -> None:
        while not self._stop.is_set():
            try:
                for line in self._lines(rv):
                    if self._stop.is_set():
                        return
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        if obj.get("code") == 410:  # expired: list again
                            rv = self._relist("MODIFIED")
                            break
                        raise AdapterError(f"watch error: {obj.get('message')}")
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if event["type"] != "BOOKMARK":
                        self.on_event(Event(event["type"], obj, time.monotonic()))
            except Exception as e:  # noqa: BLE001 - a dropped watch is resumed; the error is kept for the report
                if self._stop.is_set():
                    return
                self.errors.append(f"{type(e).__name__}: {e}")
                time.sleep(0.2)
