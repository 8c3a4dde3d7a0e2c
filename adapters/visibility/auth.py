"""Who asks, and may they: authentication and authorization as an aggregated API server owes them.

The API server's aggregation layer authenticates and authorizes a request for
``visibility.kueue.x-k8s.io`` itself, then proxies it here over TLS with the front proxy's client
certificate, naming the user in request headers (``X-Remote-User``, ``X-Remote-Group``,
``X-Remote-Extra-*``, ``X-Remote-Uid``). Those headers are believed only from a client whose
certificate chains to the front proxy's CA and whose common name is an allowed one, both as the
API server publishes them in the ConfigMap ``kube-system/extension-apiserver-authentication``
(readable with the Role ``extension-apiserver-authentication-reader``); any other request is
unauthenticated (401). Direct clients with their own certificates or tokens are not served:
they reach this API through the API server.

Every authenticated request is then authorized again with a SubjectAccessReview (the
ClusterRole ``system:auth-delegator`` may create them), as the API server's own authorizers
would decide it: ``get`` on ``clusterqueues/pendingworkloads`` or
``localqueues/pendingworkloads`` of the group, the discovery paths as non-resource URLs. Answers
are kept 10 seconds, allowed and denied alike, as Kubernetes' delegated authorizer keeps them.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping
from urllib.parse import unquote

from kubernetes import client

from clueue.engine import AdapterError

from ..kube.errors import describe_with_grant
from ..kube.retry import call
from .api import GROUP, Route

__all__ = ["RequestHeaderConfig", "User", "authenticate", "read_request_header_config", "Authorizer",
           "AUTH_CONFIGMAP", "AUTH_NAMESPACE"]

log = logging.getLogger(__name__)

AUTH_CONFIGMAP = "extension-apiserver-authentication"
AUTH_NAMESPACE = "kube-system"
AUTHENTICATED = "system:authenticated"
DECISION_TTL_S = 10.0
_MAX_DECISIONS = 10_000  # kept answers; beyond this the oldest are forgotten


@dataclass(frozen=True)
class RequestHeaderConfig:
    """The front proxy the API server uses, as it publishes it (``requestheader-*`` keys)."""

    client_ca: bytes  # PEM
    allowed_names: tuple[str, ...] = ()  # empty: any certificate the CA signed
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)
    uid_headers: tuple[str, ...] = ()

    @classmethod
    def from_data(cls, data: Mapping[str, str]) -> RequestHeaderConfig:
        """From the ConfigMap's ``data``.

        Raises:
            ValueError: it has no ``requestheader-client-ca-file``, or a list is not a JSON list.
        """
        ca = (data.get("requestheader-client-ca-file") or "").strip()
        if not ca:
            raise ValueError("it has no requestheader-client-ca-file: the API server runs without "
                             "--requestheader-client-ca-file, so it proxies to no aggregated API")

        def names(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
            text = data.get(key)
            if not text:
                return default
            value = json.loads(text)
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{key} is not a JSON list of strings: {text!r}")
            return tuple(value)

        return cls(client_ca=ca.encode() + b"\n", allowed_names=names("requestheader-allowed-names", ()),
                   username_headers=names("requestheader-username-headers", ()),
                   group_headers=names("requestheader-group-headers", ()),
                   extra_prefixes=names("requestheader-extra-headers-prefix", ()),
                   uid_headers=names("requestheader-uid-headers", ()))


def read_request_header_config(api: client.ApiClient) -> RequestHeaderConfig:
    """Read the front proxy's configuration from ``kube-system/extension-apiserver-authentication``.

    Raises:
        AdapterError: it cannot be read (missing, forbidden) or has no front-proxy CA.
    """
    where = f"ConfigMap {AUTH_NAMESPACE}/{AUTH_CONFIGMAP}"
    try:
        found = call(lambda: client.CoreV1Api(api).read_namespaced_config_map(AUTH_CONFIGMAP, AUTH_NAMESPACE))
    except Exception as e:  # noqa: BLE001 - refused or unreachable: said with the server's address
        raise describe_with_grant(e, f"reading {where}", api, "the visibility API trusts the front proxy it names, "
                                  "and the controller's ServiceAccount needs the Role extension-apiserver-"
                                  "authentication-reader in kube-system for it (deploy/visibility.yaml binds it)"
                                  ) from None
    try:
        return RequestHeaderConfig.from_data(found.data or {})
    except ValueError as e:
        raise AdapterError(f"{where}: {e}; the visibility API cannot tell who asks") from None


@dataclass(frozen=True)
class User:
    """The user the front proxy names."""

    name: str
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    uid: str = ""


def _first(headers: Any, names: Iterable[str]) -> str:
    for name in names:
        for value in headers.get_all(name) or ():
            if value.strip():
                return str(value.strip())
    return ""


def authenticate(config: RequestHeaderConfig, peer_cert: Mapping[str, Any] | None, headers: Any) -> User | None:
    """The user a request names, or None when it is not from the front proxy: no client
    certificate verified against its CA (``peer_cert``, as :meth:`ssl.SSLSocket.getpeercert`
    gives it), a common name not allowed, or no user header. ``headers``: the request's
    (``get_all`` and ``items``, as :class:`http.client.HTTPMessage`).

    Like the API server, every authenticated user is in ``system:authenticated``."""
    if not peer_cert:
        return None
    names = [value for rdn in peer_cert.get("subject", ()) for key, value in rdn if key == "commonName"]
    if config.allowed_names and not any(n in config.allowed_names for n in names):
        return None
    name = _first(headers, config.username_headers)
    if not name:
        return None
    groups = [v.strip() for h in config.group_headers for v in headers.get_all(h) or () if v.strip()]
    if AUTHENTICATED not in groups:
        groups.append(AUTHENTICATED)
    extra: dict[str, list[str]] = {}
    prefixes = [p.lower() for p in config.extra_prefixes]
    for header, value in headers.items():
        prefix = next((p for p in prefixes if header.lower().startswith(p)), None)
        if prefix is not None and header[len(prefix):]:
            extra.setdefault(unquote(header[len(prefix):].lower()), []).append(value.strip())
    return User(name, tuple(groups), {k: tuple(v) for k, v in extra.items()}, _first(headers, config.uid_headers))


class Authorizer:
    """Decides with SubjectAccessReviews whether a user may make a request, keeping each answer
    for ``ttl`` seconds.

    Raises (from :meth:`allowed`): ApiException or a connection error when the review cannot be made.
    """

    def __init__(self, api: client.ApiClient, *, ttl: float = DECISION_TTL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._reviews = client.AuthorizationV1Api(api)
        self.ttl, self._clock = ttl, clock
        self._lock = threading.Lock()
        self._decided: dict[str, tuple[float, bool, str]] = {}

    @staticmethod
    def attributes(route: Route, path: str) -> dict[str, Any]:
        """The SubjectAccessReview's resource or non-resource attributes of a request."""
        if route.is_resource:
            return {"resourceAttributes": {"group": GROUP, "version": route.version, "resource": route.resource,
                                           "subresource": "pendingworkloads", "name": route.name,
                                           "namespace": route.namespace, "verb": "get"}}
        return {"nonResourceAttributes": {"path": path, "verb": "get"}}

    def allowed(self, user: User, attributes: Mapping[str, Any]) -> tuple[bool, str]:
        """(allowed, the authorizer's reason) for ``user`` and the request's ``attributes``."""
        spec: dict[str, Any] = {"user": user.name, "groups": list(user.groups), **attributes}
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra.items()}
        if user.uid:
            spec["uid"] = user.uid
        key = json.dumps(spec, sort_keys=True)
        now = self._clock()
        with self._lock:
            hit = self._decided.get(key)
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1], hit[2]
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        review = call(lambda: self._reviews.create_subject_access_review(body))
        status = review.status
        decision = (bool(status and status.allowed), str((status and status.reason) or ""))
        with self._lock:
            if len(self._decided) >= _MAX_DECISIONS:
                self._decided = {k: v for k, v in self._decided.items() if now - v[0] < self.ttl}
                if len(self._decided) >= _MAX_DECISIONS:
                    self._decided.clear()
            self._decided[key] = (now, *decision)
        return decision
