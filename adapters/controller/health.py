"""The controller's plain-HTTP endpoints: ``/metrics``, ``/healthz`` and ``/readyz``.

A stdlib :class:`~http.server.ThreadingHTTPServer` in a daemon thread: a slow scrape never
delays a probe, and the process never waits on the server to exit.

- ``/metrics``: Prometheus exposition (text, or OpenMetrics when the scraper asks for it).
- ``/healthz``: 200 ``ok`` while ``healthy()``; else 500 with the reason (the message of what
  ``healthy`` raised, or ``not healthy``). Liveness: a failing one gets the Pod restarted.
- ``/readyz``: 200 ``ok`` while ``ready()`` (the cache has synced); else 503. A replica that is
  not the leader is ready too: it serves the webhook.

>>> server = HealthServer("127.0.0.1", 0, Metrics(), ready=lambda: True, healthy=lambda: True).start()  # doctest: +SKIP
>>> server.port  # doctest: +SKIP
40123
"""

from __future__ import annotations

from typing import Callable

from prometheus_client.exposition import choose_encoder

from ..http import BackgroundServer, Handler
from .metrics import Metrics

__all__ = ["HealthServer"]


class _Handler(Handler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        owner: HealthServer = self.server.owner  # type: ignore[attr-defined]
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            self.send_body(200, encoder(owner.metrics.registry), content_type)
        elif path == "/healthz":
            self._probe(owner.healthy, 500, "not healthy")
        elif path == "/readyz":
            self._probe(owner.ready, 503, "not ready")
        else:
            self.send_body(404, b"not found\n")

    def _probe(self, check: Callable[[], bool], failed: int, default: str) -> None:
        try:
            ok, reason = bool(check()), default
        except Exception as e:  # the check's own failure is the reason
            ok, reason = False, f"{default}: {e}"
        self.send_body(200, b"ok\n") if ok else self.send_body(failed, f"{reason}\n".encode())


class HealthServer(BackgroundServer):
    """Serve ``/metrics``, ``/healthz`` and ``/readyz`` on ``host:port`` (port 0: a free one,
    read ``.port`` after :meth:`start`)."""

    handler = _Handler
    serving = "serving /metrics, /healthz and /readyz on {host}:{port}"

    def __init__(self, host: str, port: int, metrics: Metrics, ready: Callable[[], bool],
                 healthy: Callable[[], bool]) -> None:
        super().__init__(host, port)
        self.metrics = metrics
        self.ready = ready
        self.healthy = healthy
