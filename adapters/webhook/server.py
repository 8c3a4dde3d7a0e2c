"""The Pod webhook's HTTPS server: AdmissionReview v1 in, AdmissionReview v1 out.

``POST /mutate-pods`` answers with the JSONPatch of :func:`~clueue.adapters.webhook.mutate.mutate`,
``POST /validate-pods`` with the refusals of :func:`~clueue.adapters.webhook.mutate.validate`,
``GET /healthz`` with ``ok``. A request that is not an AdmissionReview gets HTTP 400. A failure
inside a decision (a bug, or the namespace lookup failing) refuses the Pod with the error as its
message, never crashes the server, and never allows the Pod through unmutated: with
``failurePolicy: Fail`` no Pod subject to queueing is created ungated (docs/webhook.md).

The certificate files are reloaded when they change (rotation), on the next connection (adapters/tls.py).
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from http import HTTPStatus
from pathlib import Path
from typing import Any

from kubernetes import client

from clueue.adapters.kube.retry import call
from clueue.engine.config import Config

from ..http import Handler
from ..tls import ReloadingTls, TlsHTTPServer, TlsServer
from .configuration import MUTATE_PATH, VALIDATE_PATH
from .mutate import mutate, validate

__all__ = ["WebhookServer", "namespace_label_reader", "MAX_BODY_BYTES"]

log = logging.getLogger(__name__)

#: An AdmissionReview of a Pod is at most a few MiB (etcd's object limit is 1.5 MiB).
MAX_BODY_BYTES = 8 * 2**20
#: How long a namespace's labels read from the API are reused.
NAMESPACE_CACHE_S = 5.0


def namespace_label_reader(api: client.ApiClient, ttl: float = NAMESPACE_CACHE_S) -> Callable[[str], Mapping[str, str]]:
    """A lookup of a namespace's labels that reads the Namespace and keeps it ``ttl`` seconds.

    Raises (from the lookup): ApiException when the Namespace cannot be read after retries.
    """
    core = client.CoreV1Api(api)
    cache: dict[str, tuple[float, Mapping[str, str]]] = {}
    lock = threading.Lock()

    def labels(name: str) -> Mapping[str, str]:
        now = time.monotonic()
        with lock:
            hit = cache.get(name)
        if hit is not None and now - hit[0] < ttl:
            return hit[1]
        ns = call(lambda: core.read_namespace(name))
        found = dict(ns.metadata.labels or {})
        with lock:
            cache[name] = (now, found)
        return found

    return labels


class _Handler(Handler):
    server: TlsHTTPServer  # its owner is the WebhookServer

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.split("?")[0] in ("/healthz", "/readyz"):
            self.send_body(200, b"ok",)
        else:
            self.send_body(404, b"not found",)

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        path = self.path.split("?")[0]
        if path not in (MUTATE_PATH, VALIDATE_PATH):
            self.send_body(404, b"not found",)
            return
        try:
            length = int(self.headers.get("Content-Length") or "")
            if not 0 < length <= MAX_BODY_BYTES:
                raise ValueError(f"Content-Length {length} out of range")
            review = json.loads(self.rfile.read(length))
            request = review["request"]
            if not isinstance(request, dict) or not isinstance(request.get("uid"), str):
                raise ValueError("request.uid is missing")
        except (ValueError, KeyError, TypeError) as e:
            self.send_body(400, f"not an AdmissionReview v1: {e}".encode(),)
            return
        answer = self.server.owner.review(path, request)
        out = {"apiVersion": review.get("apiVersion") or "admission.k8s.io/v1", "kind": "AdmissionReview",
               "response": {"uid": request["uid"], **answer}}
        self.send_body(200, json.dumps(out).encode(), "application/json")


def _refused(message: str, code: int = HTTPStatus.FORBIDDEN) -> dict[str, Any]:
    return {"allowed": False, "status": {"code": int(code), "message": message,
                                         "reason": "Forbidden" if code == HTTPStatus.FORBIDDEN else "InternalError"}}


class WebhookServer(TlsServer):
    """The Pod webhook served over HTTPS, in a background thread (:meth:`start`, :meth:`stop`).

    Parameters:
        config: which Pods are queued.
        cert_file, key_file: the serving certificate and key (PEM); reloaded when they change.
        host, port: where to listen; port 0 takes a free port (see :attr:`port`).
        namespace_labels: the labels of a namespace by name (the controller passes one backed by
            its watch cache); default: read from the API with ``api``, cached briefly.
        on_gated: called once for each Pod gated (counts ``pods_gated_total``).
        api: the ApiClient of the default ``namespace_labels``.
    """

    handler = _Handler
    serving = "webhook serving on https://{host}:{port}"

    def __init__(self, config: Config, cert_file: Path, key_file: Path, host: str = "0.0.0.0", port: int = 9443,
                 namespace_labels: Callable[[str], Mapping[str, str]] | None = None,
                 on_gated: Callable[[], None] | None = None, *, api: client.ApiClient | None = None) -> None:
        if namespace_labels is None:
            if api is None:
                raise ValueError("WebhookServer needs namespace_labels or api to look up the labels of namespaces")
            namespace_labels = namespace_label_reader(api)
        self.config, self.namespace_labels, self.on_gated = config, namespace_labels, on_gated
        super().__init__(ReloadingTls(cert_file, key_file, what="webhook"), host, port)

    def review(self, path: str, request: Mapping[str, Any]) -> dict[str, Any]:
        """The AdmissionResponse (without ``uid``) to ``request`` received on ``path``."""
        pod = request.get("object") if isinstance(request.get("object"), Mapping) else {}
        meta = pod.get("metadata") if isinstance(pod.get("metadata"), Mapping) else {}
        name = f"{request.get('namespace') or ''}/{meta.get('name') or meta.get('generateName') or ''}"
        if path == MUTATE_PATH:
            try:
                patch = mutate(request, self.config, self.namespace_labels)
            except Exception as e:  # noqa: BLE001 - whatever failed, the Pod must not pass ungated
                log.exception("webhook: gating Pod %s failed", name)
                return _refused(f"clueue could not decide whether to gate Pod {name}: {type(e).__name__}: {e}; "
                                "the Pod was not created (it would have run without an admission): retry",
                                HTTPStatus.INTERNAL_SERVER_ERROR)
            if not patch:
                return {"allowed": True}
            if self.on_gated is not None:
                try:
                    self.on_gated()
                except Exception:  # noqa: BLE001 - a metric must not refuse a Pod
                    log.exception("webhook: on_gated failed")
            return {"allowed": True, "patchType": "JSONPatch",
                    "patch": base64.b64encode(json.dumps(patch).encode()).decode()}
        try:
            problems = validate(request)
        except Exception as e:  # noqa: BLE001 - answered, not raised
            log.exception("webhook: validating Pod %s failed", name)
            return _refused(f"clueue could not validate Pod {name}: {type(e).__name__}: {e}",
                            HTTPStatus.INTERNAL_SERVER_ERROR)
        if problems:
            return _refused(f"Pod {name}: " + "; ".join(problems))
        return {"allowed": True}
