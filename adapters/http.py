"""What clueue's HTTP servers (the controller's probes and metrics, the Pod webhook, the dashboard) share."""

from __future__ import annotations

import logging
from http.server import BaseHTTPRequestHandler
from typing import Any, Mapping

__all__ = ["Handler", "parse_bind"]

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
