"""What clueue's two HTTP servers (the controller's probes and metrics, the Pod webhook) share."""

from __future__ import annotations

import logging
from http.server import BaseHTTPRequestHandler
from typing import Any

__all__ = ["Handler"]

log = logging.getLogger("clueue.http")


class Handler(BaseHTTPRequestHandler):
    """A request handler that keeps connections open (the apiserver and scrapers reuse them)
    and logs each request at debug: probes, scrapes and webhook calls come every few seconds."""

    protocol_version = "HTTP/1.1"

    def send_body(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        """Answer with ``status`` and ``body``, sized so that the connection can be reused."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        log.debug("%s %s %s", type(self).__module__, self.client_address[0], format % args)
