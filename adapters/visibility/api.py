"""The wire format of ``visibility.kueue.x-k8s.io``, as Kueue serves it (v1beta1 and v1beta2 alike).

Paths (``{v}`` is ``v1beta1`` or ``v1beta2``)::

    /apis                                                          APIGroupList (discovery)
    /apis/visibility.kueue.x-k8s.io                                APIGroup
    /apis/visibility.kueue.x-k8s.io/{v}                            APIResourceList
    /apis/visibility.kueue.x-k8s.io/{v}/clusterqueues/{name}/pendingworkloads
    /apis/visibility.kueue.x-k8s.io/{v}/namespaces/{ns}/localqueues/{name}/pendingworkloads

The last two answer a ``PendingWorkloadsSummary`` of ``PendingWorkload`` items; their query
parameters are ``offset`` (the first item, from 0; default 0) and ``limit`` (at most this many;
default 1000, at most 100000), as Kueue bounds them. Errors are ``meta/v1 Status`` objects.
Nothing here does I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence
from urllib.parse import parse_qs

__all__ = ["GROUP", "VERSIONS", "PREFERRED", "DEFAULT_LIMIT", "MAX_LIMIT", "Route", "RequestError", "route",
           "page_bounds", "group_list", "api_group", "resource_list", "summary", "status"]

GROUP = "visibility.kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")  # preferred first, as Kueue prioritizes them
PREFERRED = VERSIONS[0]
DEFAULT_LIMIT = 1000
MAX_LIMIT = 100_000
SUMMARY_KIND = "PendingWorkloadsSummary"

_NAME = r"[^/]+"
_PATHS = (
    (re.compile(r"/apis/?"), "groups"),
    (re.compile(rf"/apis/{re.escape(GROUP)}/?"), "group"),
    (re.compile(rf"/apis/{re.escape(GROUP)}/(?P<version>{_NAME})/?"), "resources"),
    (re.compile(rf"/apis/{re.escape(GROUP)}/(?P<version>{_NAME})/clusterqueues/(?P<name>{_NAME})/pendingworkloads/?"),
     "clusterqueue"),
    (re.compile(rf"/apis/{re.escape(GROUP)}/(?P<version>{_NAME})/namespaces/(?P<namespace>{_NAME})/localqueues/"
                rf"(?P<name>{_NAME})/pendingworkloads/?"), "localqueue"),
)


class RequestError(Exception):
    """A request this API answers with an error: ``code`` and ``reason`` as a Status carries them."""

    def __init__(self, code: int, reason: str, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, dict(details or {})

    def to_status(self) -> dict[str, Any]:
        return status(self.code, self.reason, self.message, self.details)


@dataclass(frozen=True)
class Route:
    """What a path asks for: ``kind`` is ``groups``, ``group``, ``resources`` (discovery),
    ``clusterqueue`` or ``localqueue`` (pending workloads); ``version``, ``namespace`` and
    ``name`` as the path gives them."""

    kind: str
    version: str = ""
    namespace: str = ""
    name: str = ""

    @property
    def is_resource(self) -> bool:
        """A request for a resource (authorized as one), not a discovery document."""
        return self.kind in ("clusterqueue", "localqueue")

    @property
    def resource(self) -> str:
        return "clusterqueues" if self.kind == "clusterqueue" else "localqueues"


def route(path: str) -> Route:
    """The :class:`Route` of a request path (without its query).

    >>> route("/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cq/pendingworkloads")
    Route(kind='clusterqueue', version='v1beta2', namespace='', name='cq')

    Raises:
        RequestError: 404, the path is none of this API's, or names a version it does not serve.
    """
    for pattern, kind in _PATHS:
        match = pattern.fullmatch(path)
        if match:
            found = Route(kind, **match.groupdict())
            if found.version and found.version not in VERSIONS:
                break
            return found
    raise RequestError(404, "NotFound", f"the server could not find the requested resource ({path})")


def page_bounds(query: str) -> tuple[int, int]:
    """``(limit, offset)`` from a query string, defaulted and bounded as Kueue does: no or a
    zero ``limit`` is 1000, a negative one 0, one over 100000 is 100000; a negative ``offset`` is 0.

    >>> page_bounds("limit=2&offset=1")
    (2, 1)

    Raises:
        RequestError: 400, a value is not an integer.
    """
    values = parse_qs(query, keep_blank_values=True)

    def number(name: str, default: int) -> int:
        given = values.get(name)
        if not given or given[-1] == "":
            return default
        try:
            return int(given[-1])
        except ValueError:
            raise RequestError(400, "BadRequest", f"{name}: invalid value {given[-1]!r}: expected an integer") from None

    limit = number("limit", 0) or DEFAULT_LIMIT
    return min(max(limit, 0), MAX_LIMIT), max(number("offset", 0), 0)


def group_list() -> dict[str, Any]:
    """``GET /apis``: the one group this server serves."""
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [api_group(kind=False)]}


def api_group(*, kind: bool = True) -> dict[str, Any]:
    """``GET /apis/visibility.kueue.x-k8s.io``: the group, its versions, the preferred one."""
    versions = [{"groupVersion": f"{GROUP}/{v}", "version": v} for v in VERSIONS]
    group: dict[str, Any] = {"name": GROUP, "versions": versions, "preferredVersion": versions[0]}
    return {"kind": "APIGroup", "apiVersion": "v1", **group} if kind else group


def resource_list(version: str) -> dict[str, Any]:
    """``GET /apis/visibility.kueue.x-k8s.io/{version}``: the queues (which serve nothing but their
    ``pendingworkloads`` subresource, as in Kueue) and that subresource, which answers ``get``."""
    def resource(name: str, namespaced: bool, singular: str, verbs: Sequence[str]) -> dict[str, Any]:
        return {"name": name, "singularName": singular, "namespaced": namespaced, "kind": SUMMARY_KIND,
                "verbs": list(verbs)}
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{GROUP}/{version}", "resources": [
        resource("clusterqueues", False, "clusterqueue", []),
        resource("clusterqueues/pendingworkloads", False, "", ["get"]),
        resource("localqueues", True, "localqueue", []),
        resource("localqueues/pendingworkloads", True, "", ["get"]),
    ]}


def summary(version: str, items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A ``PendingWorkloadsSummary`` of ``version`` holding ``items`` (``PendingWorkload`` objects)."""
    return {"kind": SUMMARY_KIND, "apiVersion": f"{GROUP}/{version}", "metadata": {}, "items": list(items)}


def status(code: int, reason: str, message: str, details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A failed ``meta/v1 Status``, as an API server answers an error."""
    out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": message, "reason": reason, "code": code}
    if details:
        out["details"] = dict(details)
    return out
