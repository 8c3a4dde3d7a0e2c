"""The visibility API's HTTPS server, and its start with the controller.

``GET`` on the paths of :mod:`~clueue.adapters.visibility.api`, each request authenticated as from
the front proxy and authorized by a SubjectAccessReview (:mod:`~clueue.adapters.visibility.auth`),
answered from the plan :class:`~clueue.adapters.visibility.source.PlanSource` gives; ``/healthz``,
``/readyz`` and ``/livez`` answer ``ok`` to anyone. Errors are ``Status`` objects: 401 not from
the front proxy, 403 not allowed, 404 no such path or queue, 400 a bad query, 405 not a GET,
503 no plan yet, 500 a failure here (logged).

Its upkeep runs in one daemon thread, every five minutes: the front proxy's configuration is read
again (the API server may rotate its CA), and the certificate checked for renewal, its CA written
again into the APIServices that lack it (registered after the controller started, or re-created).
"""

from __future__ import annotations

import json
import logging
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable

from clueue.engine import AdapterError

from ..http import Handler
from ..tls import ReloadingTls, TlsHTTPServer, TlsServer
from . import api as wire
from .auth import Authorizer, RequestHeaderConfig, User, authenticate, read_request_header_config
from .certs import visibility_certificates
from .source import PlanSource

__all__ = ["VisibilityServer", "start_visibility"]

log = logging.getLogger(__name__)

UPKEEP_S = 300.0
_HEALTH = ("/healthz", "/readyz", "/livez")


def _forbidden_message(user: User, route: wire.Route, path: str) -> str:
    """The API server's wording of a refusal."""
    if not route.is_resource:
        return f'forbidden: User "{user.name}" cannot get path "{path}"'
    scope = f'in the namespace "{route.namespace}"' if route.namespace else "at the cluster scope"
    return (f'{route.resource}.{wire.GROUP} "{route.name}" is forbidden: User "{user.name}" cannot get resource '
            f'"{route.resource}/pendingworkloads" in API group "{wire.GROUP}" {scope}')


class _Handler(Handler):
    server: TlsHTTPServer  # its owner is the VisibilityServer

    def _send_json(self, code: int, body: dict[str, Any]) -> None:
        self.send_body(code, json.dumps(body).encode(), "application/json")

    def _error(self, error: wire.RequestError) -> None:
        self._send_json(error.code, error.to_status())

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path, _, query = self.path.partition("?")
        if path in _HEALTH:
            self.send_body(200, b"ok")
            return
        try:
            self._send_json(200, self.server.owner.answer(path, query, self._user(), self._peer()))
        except wire.RequestError as e:
            self._error(e)
        except Exception as e:  # noqa: BLE001 - answered, logged, never a dead connection
            log.exception("visibility: answering GET %s failed", path)
            self._error(wire.RequestError(500, "InternalError", f"an error on the server: {type(e).__name__}: {e}"))

    def _peer(self) -> dict[str, Any] | None:
        getpeercert = getattr(self.connection, "getpeercert", None)
        return getpeercert() if getpeercert is not None else None

    def _user(self) -> User | None:
        return authenticate(self.server.owner.front_proxy, self._peer(), self.headers)

    def _refuse_method(self) -> None:
        self.close_connection = True  # its body, if any, is left unread: the connection cannot be reused
        self._error(wire.RequestError(405, "MethodNotAllowed", f"the server does not allow this method on the "
                                      f"requested resource: {self.command} (only GET is served)"))

    do_POST = do_PUT = do_PATCH = do_DELETE = _refuse_method  # noqa: N815 - http.server's names


class VisibilityServer(TlsServer):
    """The visibility API over HTTPS, in a background thread (:meth:`start`, :meth:`stop`).

    Parameters:
        source: the plan the answers come from.
        authorizer: the SubjectAccessReviews.
        front_proxy: reads the front proxy's configuration (at start, then every five minutes).
        cert_file, key_file: the serving certificate and key; reloaded when they change.
        host, port: where to listen; port 0 takes a free one (see :attr:`port`).
        rotate: renews the certificate files when due (and writes the caBundle), called every five minutes.
    """

    handler = _Handler
    serving = f"visibility API ({wire.GROUP}) serving on https://{{host}}:{{port}}"

    def __init__(self, source: PlanSource, authorizer: Authorizer,
                 front_proxy: Callable[[], RequestHeaderConfig], cert_file: Path, key_file: Path,
                 host: str = "0.0.0.0", port: int = 8082, *, rotate: Callable[[], Any] | None = None) -> None:
        self.source, self.authorizer, self._rotate = source, authorizer, rotate
        self._stop = threading.Event()
        self._read_front_proxy = front_proxy
        self.front_proxy = front_proxy()
        super().__init__(ReloadingTls(cert_file, key_file, what="visibility API",
                                      client_ca=lambda: self.front_proxy.client_ca), host, port)

    def start(self) -> VisibilityServer:
        """Listen and serve in a daemon thread, and start the upkeep; returns self.

        Raises:
            OSError: the address cannot be bound.
        """
        super().start()
        threading.Thread(target=self._upkeep, name="visibility-upkeep", daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop listening, end the open connections and the upkeep (idempotent)."""
        self._stop.set()
        super().stop()

    def _upkeep(self) -> None:
        while not self._stop.wait(UPKEEP_S):
            self.refresh_front_proxy()
            if self._rotate is not None:
                try:
                    self._rotate()
                except Exception as e:  # noqa: BLE001 - retried at the next check; the old certificate serves meanwhile
                    log.warning("renewing the visibility API's certificate failed: %s", e)

    def refresh_front_proxy(self) -> None:
        """Read the front proxy's configuration again (kept as it was when that fails)."""
        try:
            self.front_proxy = self._read_front_proxy()
        except AdapterError as e:
            log.warning("visibility API: %s; the front proxy's configuration read before is kept", e)

    def answer(self, path: str, query: str, user: User | None, peer: dict[str, Any] | None) -> dict[str, Any]:
        """The JSON body of a successful ``GET path?query`` by ``user`` (None: not authenticated).

        Raises:
            RequestError: the request is answered with an error Status.
        """
        if user is None:
            why = "no client certificate of the front proxy" if not peer else "not from the front proxy"
            raise wire.RequestError(401, "Unauthorized", f"Unauthorized: {why}; the visibility API is reached "
                                    "through the Kubernetes API server")
        try:
            route, missing = wire.route(path), None
        except wire.RequestError as e:  # authorized first, as a path: the API server says 403 before 404
            route, missing = wire.Route("path"), e
        allowed, reason = self.authorizer.allowed(user, Authorizer.attributes(route, path))
        if not allowed:
            raise wire.RequestError(403, "Forbidden", _forbidden_message(user, route, path)
                                    + (f": {reason}" if reason else ""))
        if missing is not None:
            raise missing
        if route.kind == "groups":
            return wire.group_list()
        if route.kind == "group":
            return wire.api_group()
        if route.kind == "resources":
            return wire.resource_list(route.version)
        limit, offset = wire.page_bounds(query)
        pending = self.source.current()
        if route.kind == "clusterqueue":
            page = pending.cluster_queue(route.name, limit=limit, offset=offset)
        else:
            page = pending.local_queue(route.namespace, route.name, limit=limit, offset=offset)
        if page is None:
            raise wire.RequestError(404, "NotFound", f'{route.kind}.{wire.GROUP} "{route.name}" not found',
                                    {"name": route.name, "group": wire.GROUP, "kind": route.kind})
        return wire.summary(route.version, [w.to_dict() for w in page])


def start_visibility(api: Any, controller: Any, bind: tuple[str, int], *, namespace: str,
                     service: str) -> VisibilityServer:
    """Start the visibility API of ``controller`` (a :class:`~clueue.adapters.controller.loop.Controller`,
    whose cycles it observes and whose cache it reads): its certificate (and the APIServices'
    caBundle), the front proxy's configuration, the server and its upkeep.

    Raises:
        AdapterError: the certificate, the front proxy's configuration or the address cannot be had.
    """
    host, port = bind
    source = PlanSource(controller.cache, controller.policy, controller.config,
                        deciding=lambda: controller.lease is not None)
    certs = visibility_certificates(api, namespace, service, Path(tempfile.mkdtemp(prefix="clueue-visibility-")),
                                    extra_sans=(host,) if host not in ("", "0.0.0.0", "::") else ())
    cert_file, key_file = certs.ensure()
    try:
        server = VisibilityServer(source, Authorizer(api), lambda: read_request_header_config(api), cert_file,
                                  key_file, host, port, rotate=certs.rotate_if_due).start()
    except OSError as e:
        raise AdapterError(f"cannot serve the visibility API on {host}:{port}: {e.strerror or e}") from None
    controller.observers.append(source)
    return server
