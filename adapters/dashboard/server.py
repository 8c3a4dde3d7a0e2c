"""The dashboard's HTTP server: read-only pages rendered on the server (Jinja2, autoescaped).

Routes (GET only: any other method is answered 501, nothing is ever written):

- ``/``: ClusterQueues and cohorts, their quota, usage and borrowing as bars;
- ``/pending``: each ClusterQueue's waiting workloads in order, with their reasons;
- ``/workload?name=NS/NAME``: a workload's decision now and its timeline from the decision log;
- ``/style.css``: the one style sheet.

Pages come from ``current()`` (the snapshot and plan to show, or None while there is none yet)
and, for timelines, the decision log at ``log_path`` (opened for reading per request). Every
response forbids scripts and outside resources (Content-Security-Policy): the pages have none.
Served in a daemon thread by adapters/http.py's :class:`~clueue.adapters.http.BackgroundServer`
and request handler, as the controller's other servers are.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

import jinja2

from clueue.engine import ClueueError

from ..decisionlog.units import format_duration
from ..http import BackgroundServer, Handler
from .svg import timeline_svg
from .views import Current, overview, pending, workload_entry

__all__ = ["DashboardServer", "LatestCycle", "render_page"]

log = logging.getLogger(__name__)

_env = jinja2.Environment(loader=jinja2.PackageLoader("clueue.adapters", "templates/dashboard"),
                          autoescape=True, undefined=jinja2.StrictUndefined)
_env.filters["duration"] = format_duration
_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _timeline(log_path: str | None, name: str) -> tuple[dict[str, Any] | None, str]:
    """The ``audit why`` data of ``name`` from the log, or None and why not."""
    if not log_path:
        return None, ""
    from ..decisionlog.store import DecisionLog
    from ..decisionlog.timeline import workload_timeline
    try:
        with DecisionLog.open(log_path) as log_:
            return workload_timeline(log_, name), ""
    except ClueueError as e:
        return None, str(e)


def render_page(path: str, current: Current | None, log_path: str | None) -> tuple[int, str]:
    """The page at ``path`` (with its query) as (HTTP status, HTML)."""
    url = urlsplit(path)
    query = parse_qs(url.query)
    context: dict[str, Any] = {"current": current, "log_path": log_path, "query": None,
                               "page": "overview" if url.path == "/" else url.path.strip("/"),
                               "taken": datetime.fromtimestamp(current.taken, timezone.utc).strftime(
                                   "%Y-%m-%d %H:%M:%S") if current else ""}
    if url.path == "/workload":
        name = (query.get("name") or [""])[0].strip()
        context["query"] = name
        if "/" not in name:
            return 400, _env.get_template("error.html.j2").render(
                **context, status="400 Bad Request", message="give the workload as namespace/name")
        timeline, error = _timeline(log_path, name)
        return 200, _env.get_template("workload.html.j2").render(
            **context, entry=workload_entry(current, name) if current else None, timeline=timeline,
            timeline_error=error, chart=timeline_svg(timeline) if timeline else None)
    pages = {"/": ("overview.html.j2", overview), "/pending": ("pending.html.j2", pending)}
    if url.path not in pages:
        return 404, _env.get_template("error.html.j2").render(**context, status="404 Not Found",
                                                              message=f"no page {url.path}")
    if current is None:
        return 503, _env.get_template("error.html.j2").render(
            **context, status="503 Service Unavailable", message="no plan yet: the first cycle has not run")
    template, view = pages[url.path]
    return 200, _env.get_template(template).render(**context, view=view(current))


class _Handler(Handler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        if urlsplit(self.path).path == "/style.css":
            css = _env.loader.get_source(_env, "style.css")[0]  # type: ignore[union-attr]
            self._send(200, css.encode(), "text/css; charset=utf-8")
            return
        owner: DashboardServer = self.server.owner  # type: ignore[attr-defined]
        try:
            status, page = render_page(self.path, owner.current(), owner.log_path)
        except Exception as e:  # noqa: BLE001 - one page's failure is that page's 500, not the server's end
            log.exception("rendering %s failed", self.path)
            status, page = 500, _env.get_template("error.html.j2").render(
                current=None, log_path=None, query=None, page="", taken="", status="500 Internal Server Error",
                message=f"{type(e).__name__}: {e}")
        self._send(status, page.encode(), "text/html; charset=utf-8")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_body(status, body, content_type, _HEADERS)


class DashboardServer(BackgroundServer):
    """Serve the dashboard on ``host:port`` (port 0: a free one, read ``.port`` after :meth:`start`)."""

    handler = _Handler
    serving = "serving the dashboard on http://{host}:{port}/"

    def __init__(self, host: str, port: int, current: Callable[[], Current | None], log_path: str | None = None) -> None:
        super().__init__(host, port)
        self.current = current
        self.log_path = log_path


class LatestCycle:
    """An observer of the controller's cycles that keeps the last one that made a plan, for the
    dashboard it serves: its pages show what the controller decided, and read nothing more
    from the cluster. A replica that does not lead runs no cycle, and shows none."""

    def __init__(self) -> None:
        self._current: Current | None = None
        self._cycles = 0

    def __call__(self, result: Any) -> None:
        """Keep ``result`` (a ``CycleResult``: ``snapshot``, ``plan``, ``started``) if it has a plan."""
        self._cycles += 1
        if result.plan is not None and result.snapshot is not None:
            self._current = Current(result.snapshot, result.plan, result.started,
                                    f"the controller's cycle {self._cycles} (this process's count)")

    def current(self) -> Current | None:
        return self._current
