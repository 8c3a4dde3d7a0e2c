"""A fault-injecting HTTPS proxy in front of a real kube-apiserver.

Every request is forwarded to the apiserver of a :class:`ControlPlane` (as its admin, over TLS),
except those a :class:`Fault` picks: they get an HTTP error of the fault's choice (504, 429 with
Retry-After, 409, ...) or their connection is closed without an answer, before or after the
request reached the apiserver. The apiserver is real; only the wire in between misbehaves, as a
load balancer, an overloaded apiserver or a network might.

Clients reach the proxy with :meth:`FaultProxy.kubeconfig`: the control plane's kubeconfig with
the proxy's address (the proxy serves the apiserver's own certificate, valid for 127.0.0.1).
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from tests.testenv.control_plane import ControlPlane

__all__ = ["Fault", "FaultProxy"]

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


@dataclass
class Fault:
    """What to do instead of answering the requests that match.

    ``method`` and ``path`` (a regular expression searched in the path and query) pick the
    requests; ``times`` is how many of them to hit (None: all, until cleared). ``status`` answers
    with that HTTP status (``headers`` added, e.g. Retry-After); ``drop`` closes the connection
    without an answer; ``drop_after`` forwards the request first (the apiserver does it) and then
    closes without passing the answer on.
    """

    method: str
    path: str
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    drop_after: bool = False
    times: int | None = 1
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        return method == self.method and re.search(self.path, path) is not None


class FaultProxy:
    """An HTTPS proxy on 127.0.0.1 that forwards to ``plane``'s apiserver, except for faults."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.faults: list[Fault] = []
        self.requests: list[tuple[str, str, str]] = []  # (method, path, what happened)
        self.hook: Callable[[str, str], None] | None = None  # called before each request is handled
        self.down = False  # while set, every connection is closed unanswered (an apiserver gone)
        self._lock = threading.Lock()
        pki = plane.workdir / "pki"
        self._upstream = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self._upstream.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        serving = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        serving.load_cert_chain(str(pki / "apiserver.crt"), str(pki / "apiserver.key"))
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the apiserver offers

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
                pass

            def _handle(self) -> None:
                proxy._serve(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle  # noqa: N815

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.handle_error = lambda request, address: None  # type: ignore[method-assign]  # hung up on purpose
        self._server.socket = serving.wrap_socket(self._server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True)

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def kubeconfig(self, directory: Path) -> Path:
        """A kubeconfig that reaches the apiserver through this proxy."""
        config = yaml.safe_load(self.plane.kubeconfig.read_text())
        config["clusters"][0]["cluster"]["server"] = self.url
        path = directory / "kubeconfig-proxy"
        path.write_text(yaml.safe_dump(config))
        return path

    def inject(self, fault: Fault) -> Fault:
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()
            self.down = False

    def seen(self, method: str, path: str) -> list[str]:
        """What happened to the requests so far that match ``method`` and ``path`` (a regex)."""
        return [what for m, p, what in self.requests if m == method and re.search(path, p)]

    # -- serving ----------------------------------------------------------------------------

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        method, path = handler.command, handler.path
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        if self.hook is not None:
            self.hook(method, path)
        with self._lock:
            fault = None if self.down else next((f for f in self.faults if f.matches(method, path)), None)
            if fault is not None:
                fault.hits += 1
            down = self.down
        if down or (fault is not None and fault.drop):
            self.requests.append((method, path, "dropped"))
            return _hang_up(handler)
        if fault is not None and fault.status:
            self.requests.append((method, path, str(fault.status)))
            return _answer(handler, fault.status, _status_body(fault.status), fault.headers)
        try:
            status, headers, answer = self._forward(method, path, handler.headers, body)
        except OSError:  # the apiserver is not there (restarting): as a load balancer without a backend
            self.requests.append((method, path, "dropped: no apiserver"))
            return _hang_up(handler)
        if fault is not None and fault.drop_after:
            self.requests.append((method, path, f"{status}, answer dropped"))
            return _hang_up(handler)
        self.requests.append((method, path, str(status)))
        _answer(handler, status, answer, headers)

    def _forward(self, method: str, path: str, headers: Any, body: bytes) -> tuple[int, dict[str, str], bytes]:
        upstream = urlsplit(self.plane.server)
        connection = http.client.HTTPSConnection(upstream.hostname, upstream.port, context=self._upstream, timeout=60)
        try:
            connection.request(method, path, body=body or None,
                               headers={k: v for k, v in headers.items() if k.lower() not in _HOP_BY_HOP})
            response = connection.getresponse()
            answer = response.read()
            return response.status, {k: v for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP}, answer
        finally:
            connection.close()


def _status_body(status: int) -> bytes:
    reason = http.client.responses.get(status, "Error")
    return json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": status,
                       "reason": reason.replace(" ", ""),
                       "message": f"injected by the test's proxy: {reason}"}).encode()


def _answer(handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str]) -> None:
    handler.send_response(status)
    for key, value in headers.items():
        handler.send_header(key, value)
    if not any(k.lower() == "content-type" for k in headers):
        handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _hang_up(handler: BaseHTTPRequestHandler) -> None:
    """Close the connection without a word, as a crashed server or a broken network does."""
    handler.close_connection = True
    try:
        handler.connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
