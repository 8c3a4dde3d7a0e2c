"""What clueue's HTTP servers (the controller's probes and metrics, the Pod webhook, the dashboard) share."""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Mapping

__all__ = ["Handler", "BackgroundServer", "parse_bind"]

log = logging.getLogger("clueue.http")


def parse_bind(address: str) -> tuple[str, int]:
    """``host:port`` (``:8080`` is every address) as (host, port).

    Raises:
        ValueError: no port, or not a number.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"{address!r} is not HOST:PORT (e.g. :8080 or 127.0.0.1:8080)")
    return host.strip("[]") or "0.0.0.0", int(port)


class Handler(BaseHTTPRequestHandler):
    """A request handler that keeps connections open (the apiserver and scrapers reuse them)
    and logs each request at debug: probes, scrapes and webhook calls come every few seconds."""

    protocol_version = "HTTP/1.1"

    def send_body(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8",
                  headers: Mapping[str, str] | None = None) -> None:
        """Answer with ``status`` and ``body`` (and ``headers``), sized so that the connection can be reused."""
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        log.debug("%s %s %s", type(self).__module__, self.client_address[0], format % args)


class _OwnedServer(ThreadingHTTPServer):
    daemon_threads = True  # a request in flight never holds the process up
    owner: Any  # the BackgroundServer, for its handler's requests


class BackgroundServer:
    """``handler`` served on ``host:port`` by a stdlib threading server in a daemon thread
    (port 0: a free one, read ``.port`` after :meth:`start`); a handler finds this object as
    ``self.server.owner``. Subclasses set ``handler`` and ``serving``, the line logged at start
    (with ``{host}`` and ``{port}``)."""

    handler: ClassVar[type[BaseHTTPRequestHandler]]
    serving: ClassVar[str] = "serving on {host}:{port}"

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def _bind(self) -> ThreadingHTTPServer:
        """The server, bound to ``host:port`` (a subclass may serve another way: over TLS)."""
        return _OwnedServer((self.host, self.port), self.handler)

    def _close(self, server: Any) -> None:
        """Stop ``server`` serving and release its port."""
        server.shutdown()
        server.server_close()

    def start(self) -> Any:
        """Bind and serve in a daemon thread; returns ``self``.

        Raises:
            OSError: the address cannot be bound (e.g. the port is in use).
        """
        server = self._bind()
        server.owner = self  # type: ignore[attr-defined] - every server _bind makes has the attribute
        self._server, self.port = server, server.server_address[1]
        # A short poll, so that stop() returns at once rather than after the default half second.
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"{type(self).__name__}:{self.port}", daemon=True)
        self._thread.start()
        logging.getLogger(type(self).__module__).info(self.serving.format(host=self.host, port=self.port))
        return self

    def stop(self) -> None:
        """Stop serving and release the port (idempotent)."""
        server, self._server = self._server, None
        if server is None:
            return
        self._close(server)
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
