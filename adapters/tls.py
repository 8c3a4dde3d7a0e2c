"""What clueue's HTTPS servers (the Pod webhook, the visibility API) share: a TLS context that
follows its files, a threading server that does each handshake in the request's thread, and
its run in a background thread (:class:`TlsServer`).

The certificate files are reloaded when they change (rotation), on the next connection; so is
the CA that client certificates must chain to, for a server that asks for one (the visibility
API trusts the front proxy's CA, which the API server publishes and may rotate).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, ClassVar

from .http import BackgroundServer

__all__ = ["ReloadingTls", "TlsHTTPServer", "TlsServer"]

log = logging.getLogger(__name__)


class ReloadingTls:
    """A server's SSL context, rebuilt when the certificate or key file (or the client CA) changes.

    Parameters:
        cert_file, key_file: the serving certificate and key (PEM).
        what: what serves, for the log lines ("webhook", "visibility API").
        client_ca: the PEM of the CAs that client certificates must chain to; a client that
            presents a certificate that does not is refused at the handshake, one that presents
            none is let through (``CERT_OPTIONAL``) and its handler decides. None: no client
            certificates are asked for.

    Raises:
        ssl.SSLError: the files are missing or do not match.
    """

    def __init__(self, cert_file: Path, key_file: Path, *, what: str = "webhook",
                 client_ca: Callable[[], bytes] | None = None) -> None:
        self.cert_file, self.key_file = Path(cert_file), Path(key_file)
        self.what = what
        self.client_ca = client_ca
        self._lock = threading.Lock()
        self._stamp: tuple[float, float, int, int, bytes] | None = None
        self._context: ssl.SSLContext | None = None
        self.context()  # fail at once when the files are missing or do not match
        if self._context is None:
            raise ssl.SSLError(f"cannot load the {what} certificate {self.cert_file} with key {self.key_file}")

    def _files_stamp(self) -> tuple[float, float, int, int, bytes]:
        c, k = self.cert_file.stat(), self.key_file.stat()
        return c.st_mtime, k.st_mtime, c.st_size, k.st_size, self.client_ca() if self.client_ca else b""

    def context(self) -> ssl.SSLContext | None:
        """The current context (the last good one while the files are mid-rotation)."""
        with self._lock:
            try:
                stamp = self._files_stamp()
                if stamp != self._stamp:
                    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                    context.minimum_version = ssl.TLSVersion.TLSv1_2
                    context.load_cert_chain(self.cert_file, self.key_file)
                    if stamp[4]:
                        context.load_verify_locations(cadata=stamp[4].decode())
                        context.verify_mode = ssl.CERT_OPTIONAL
                    if self._context is not None:
                        log.info("%s certificate %s reloaded", self.what, self.cert_file)
                    self._context, self._stamp = context, stamp
            except (OSError, ssl.SSLError, ValueError) as e:
                # Mid-rotation (the key written, the certificate not yet): keep serving the old
                # pair; the stamp is not recorded, so the next connection tries again.
                log.warning("%s certificate %s not reloaded: %s", self.what, self.cert_file, e)
            return self._context


class TlsHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server over TLS (``tls``, set before serving): the handshake runs in the
    request's thread, a connection that sends nothing for ``socket_timeout`` seconds is dropped,
    and :meth:`close_connections` ends the kept-alive ones when the server stops."""

    daemon_threads = True
    tls: ReloadingTls
    socket_timeout: float = 30.0
    owner: Any  # the TlsServer, for its handler's requests

    def server_activate(self) -> None:
        super().server_activate()
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = self.socket.accept()
        sock.settimeout(self.socket_timeout)
        context = self.tls.context()
        assert context is not None  # ReloadingTls refuses to start without one
        # The handshake runs in the request's thread (finish_request), not in the accept loop.
        wrapped = context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        with self.connections_lock:
            self.connections.add(wrapped)
        return wrapped, address

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """End the kept-alive connections too: a stopped server must answer nothing more."""
        with self.connections_lock:
            open_ = list(self.connections)
        for sock in open_:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def finish_request(self, request: Any, client_address: Any) -> None:
        request.do_handshake()
        super().finish_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up or fails the handshake is not the server's failure.
        log.debug("%s connection from %s failed", self.tls.what, client_address, exc_info=True)


class TlsServer(BackgroundServer):
    """A :class:`~clueue.adapters.http.BackgroundServer` over HTTPS, on a :class:`TlsHTTPServer`
    with ``tls``; stopping it ends the kept-alive connections too. Subclasses set ``handler`` and
    ``serving`` (the line logged at start, with ``{host}`` and ``{port}``).

    Parameters:
        tls: the serving certificate (and the client CA, if any).
        host, port: where to listen; port 0 takes a free one (read ``.port`` after ``start``).
    """

    serving: ClassVar[str] = "serving on https://{host}:{port}"

    def __init__(self, tls: ReloadingTls, host: str, port: int) -> None:
        super().__init__(host, port)
        self.tls = tls

    def _bind(self) -> TlsHTTPServer:
        server = TlsHTTPServer((self.host, self.port), self.handler)
        server.tls = self.tls
        return server

    def _close(self, server: Any) -> None:
        super()._close(server)
        server.close_connections()
