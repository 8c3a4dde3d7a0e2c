"""The health server, asked over real HTTP on loopback."""

from __future__ import annotations

import logging
import urllib.error
import urllib.request
from typing import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from clueue.adapters.controller.health import HealthServer
from clueue.adapters.controller.metrics import Metrics


class Flags:
    def __init__(self) -> None:
        self.ready = False
        self.healthy = True
        self.reason = ""

    def is_healthy(self) -> bool:
        if self.reason:
            raise RuntimeError(self.reason)
        return self.healthy


@pytest.fixture
def served() -> Iterator[tuple[HealthServer, Flags]]:
    flags = Flags()
    metrics = Metrics()
    metrics.pod_gated()
    server = HealthServer("127.0.0.1", 0, metrics, ready=lambda: flags.ready, healthy=flags.is_healthy).start()
    try:
        yield server, flags
    finally:
        server.stop()


def get(server: HealthServer, path: str, accept: str | None = None) -> tuple[int, str, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{server.port}{path}",
                                     headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode()


def test_metrics_in_prometheus_text_format(served: tuple[HealthServer, Flags]) -> None:
    server, _ = served
    assert server.port != 0
    status, content_type, body = get(server, "/metrics")
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    samples = {s.name: s.value for f in text_string_to_metric_families(body) for s in f.samples}
    assert samples["clueue_pods_gated_total"] == 1


def test_metrics_in_openmetrics_when_asked(served: tuple[HealthServer, Flags]) -> None:
    status, content_type, body = get(served[0], "/metrics", accept="application/openmetrics-text; version=1.0.0")
    assert status == 200 and content_type.startswith("application/openmetrics-text")
    assert body.endswith("# EOF\n")


def test_readyz_follows_ready(served: tuple[HealthServer, Flags]) -> None:
    server, flags = served
    assert get(server, "/readyz")[0] == 503
    flags.ready = True
    assert get(server, "/readyz")[::2] == (200, "ok\n")


def test_healthz_gives_the_reason(served: tuple[HealthServer, Flags]) -> None:
    server, flags = served
    assert get(server, "/healthz")[::2] == (200, "ok\n")
    flags.healthy = False
    assert get(server, "/healthz")[::2] == (500, "not healthy\n")
    flags.reason = "no cycle for 300 s"
    assert get(server, "/healthz")[::2] == (500, "not healthy: no cycle for 300 s\n")


def test_unknown_path_and_quiet_access_log(served: tuple[HealthServer, Flags], caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="clueue.adapters.controller.health"):
        assert get(served[0], "/nope")[0] == 404
        assert get(served[0], "/healthz?verbose")[0] == 200
    assert not [r for r in caplog.records if "GET" in r.getMessage()]


def test_stop_releases_the_port() -> None:
    server = HealthServer("127.0.0.1", 0, Metrics(), ready=lambda: True, healthy=lambda: True).start()
    port = server.port
    server.stop()
    server.stop()  # idempotent
    again = HealthServer("127.0.0.1", port, Metrics(), ready=lambda: True, healthy=lambda: True).start()
    try:
        assert get(again, "/readyz")[0] == 200
    finally:
        again.stop()
